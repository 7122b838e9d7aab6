// cpu_gemm_1x1: a 1x1 convolution with stride 1 and no padding as one SGEMM
// on the tensors in place (no workspace for fp32).
#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

class CpuGemm1x1 final : public CpuSolver {
 public:
  uint32_t id() const override { return kCpuGemm1x1Id; }
  absl::string_view name() const override { return "cpu_gemm_1x1"; }
  v1::AlgorithmFamily family() const override { return v1::GEMM; }
  // One GEMM pass per image and group, one after another.
  int64_t Dispatches(const ConvProblem& p) const override {
    return p.n * p.groups;
  }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.filter_spatial() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: gemm_1x1 needs a 1x1 filter, got ", FilterString(p)));
    }
    for (int i = 0; i < 3; ++i) {
      if (p.pad[i] != 0) {
        return absl::FailedPreconditionError("pad: gemm_1x1 needs pad 0");
      }
      if (p.stride[i] != 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("stride: gemm_1x1 needs stride 1, got ", p.stride[i]));
      }
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return Fp32KernelWorkspace(p, 0);
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    AddFp32KernelSteps(p, cpu::kGemm1x1Kernel, {}, 0, &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewCpuGemm1x1Solver() {
  return std::make_unique<CpuGemm1x1>();
}

}  // namespace convtune
