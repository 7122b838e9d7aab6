// Pieces shared by the GPU solvers: plan building for run-time compiled
// kernels (sources, options, launch geometry), and the implicit-GEMM plan
// that three solvers share. Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_SOLVERS_GPU_SOLVER_UTIL_H_
#define CONVTUNE_SERVER_SOLVERS_GPU_SOLVER_UTIL_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"
#include "server/solver.h"

namespace convtune {

class GpuSolver : public Solver {
 public:
  v1::Backend backend() const final { return v1::GPU; }
};

// True for a CUDA device of compute capability `sm` (e.g. 80) or newer.
bool CudaSmAtLeast(const DeviceInfo& device, int sm);

// -DCT_TYPE, -DCT_DIR and -DCT_NHWC: what every conv kernel is compiled for.
std::vector<std::string> ProblemOptions(const ConvProblem& p);

// The index of (file, options) in plan.sources, added if new.
int AddSource(v1::ExecutionPlan* plan, absl::string_view file,
              const std::vector<std::string>& options);

// Appends a GPU step running `kernel` of source `source` with that geometry.
v1::KernelStep* AddGpuStep(v1::ExecutionPlan* plan, absl::string_view kernel,
                           int source, std::array<int64_t, 3> grid,
                           uint32_t block);

// Appends a step of `kernel`, a kernel whose body is ct_sum_slices: dw
// (count elements) from `slices` fp32 partial sums at `workspace_offset`,
// one block for each 32 elements up to a bound past which blocks stride,
// with a row of 32 threads for each slice up to 32 rows.
void AddSumSlicesStep(v1::ExecutionPlan* plan, absl::string_view kernel,
                      int source, int64_t workspace_offset, int64_t count,
                      int64_t slices);

// Appends the x, w, y buffers and the problem scalars: the conv kernels'
// common leading arguments.
void AddConvArgs(const ConvProblem& p, v1::KernelStep* step);

// OK, or FailedPrecondition when a tensor (times `copies`) has more elements
// than a 32-bit index reaches.
absl::Status CheckIndex32(const ConvProblem& p, absl::string_view solver,
                          int64_t copies = 1);

// The implicit-GEMM kernel (conv_igemm.cu). A config is
// {BM, BN, BK, TM, TN, splits} for the FMA core, or {BM, BN, BK, WM, WN,
// splits} for the tensor-core core; splits > 1 only for backward weights.
enum class IgemmCore { kFma, kMma };
struct IgemmShape {
  int64_t rows, cols, groups;  // the GEMM per group: M, N
};
IgemmShape IgemmGemmShape(const ConvProblem& p);

std::vector<PerfConfig> IgemmConfigSpace(const ConvProblem& p, IgemmCore core);
PerfConfig IgemmDefaultConfig(const ConvProblem& p, IgemmCore core);
int64_t IgemmWorkspaceBytes(const ConvProblem& p);
// FailedPrecondition naming the limit (32-bit indices, grid size).
absl::Status IgemmApplicable(const ConvProblem& p, absl::string_view solver);
// Adds the steps (and sources) of one config to `plan`. `specialise` compiles
// every size in as -D options.
void AddIgemmSteps(const ConvProblem& p, const PerfConfig& config,
                   IgemmCore core, bool specialise, v1::ExecutionPlan* plan);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_GPU_SOLVER_UTIL_H_
