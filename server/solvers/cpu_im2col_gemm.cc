// cpu_im2col_gemm: im2col (col2im for backward data) + OpenBLAS SGEMM, every
// problem. fp16/bf16 run through fp32 copies in the workspace.
#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

class CpuIm2colGemm final : public CpuSolver {
 public:
  uint32_t id() const override { return kCpuIm2colGemmId; }
  absl::string_view name() const override { return "cpu_im2col_gemm"; }
  v1::AlgorithmFamily family() const override { return v1::GEMM; }
  // One GEMM pass per image and group, one after another.
  int64_t Dispatches(const ConvProblem& p) const override {
    return p.n * p.groups;
  }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return Fp32KernelWorkspace(p, cpu::Im2colWorkspaceBytes(AsFp32(p)));
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    AddFp32KernelSteps(p, cpu::kIm2colGemmKernel, {},
                       cpu::Im2colWorkspaceBytes(AsFp32(p)), &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewCpuIm2colGemmSolver() {
  return std::make_unique<CpuIm2colGemm>();
}

}  // namespace convtune
