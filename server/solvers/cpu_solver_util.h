// Pieces shared by the CPU solvers: the plan builder that serves fp16/bf16
// problems with fp32 kernels by converting through the workspace.
// Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_SOLVERS_CPU_SOLVER_UTIL_H_
#define CONVTUNE_SERVER_SOLVERS_CPU_SOLVER_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"
#include "server/solver.h"

namespace convtune {

class CpuSolver : public Solver {
 public:
  v1::Backend backend() const final { return v1::CPU; }
};

// The same problem with fp32 storage: what an fp32-only kernel is handed.
ConvProblem AsFp32(const ConvProblem& p);

// Workspace of an fp32-only kernel that needs `kernel_bytes` for AsFp32(p):
// that, plus fp32 copies of x, w and y when p is fp16 or bf16.
int64_t Fp32KernelWorkspace(const ConvProblem& p, int64_t kernel_bytes);

// Appends to `plan` the steps that run the fp32 conv `kernel` on p: for a
// 16-bit p, its inputs are converted into the workspace first and its output
// converted back after. The kernel gets the workspace's first `kernel_bytes`
// when that is positive.
void AddFp32KernelSteps(const ConvProblem& p, absl::string_view kernel,
                        std::initializer_list<int64_t> params,
                        int64_t kernel_bytes, v1::ExecutionPlan* plan);

// A reference to a buffer role at a byte offset.
v1::BufferRef RoleRef(v1::BufferRole role, int64_t offset = 0);

// "3x3" or "3x3x3": the filter as messages name it.
std::string FilterString(const ConvProblem& p);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_CPU_SOLVER_UTIL_H_
