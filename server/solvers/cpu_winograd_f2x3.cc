// cpu_winograd_f2x3: Winograd F(2x2, 3x3) for 2-D 3x3 stride-1 problems,
// forward and backward data.
#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

class CpuWinogradF2x3 final : public CpuSolver {
 public:
  uint32_t id() const override { return kCpuWinogradF2x3Id; }
  absl::string_view name() const override { return "cpu_winograd_f2x3"; }
  v1::AlgorithmFamily family() const override { return v1::WINOGRAD; }
  // One GEMM pass per image and group, one after another.
  int64_t Dispatches(const ConvProblem& p) const override {
    return p.n * p.groups;
  }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.is_3d()) {
      return absl::FailedPreconditionError(
          "spatial_dims: winograd F(2,3) is 2-D only");
    }
    if (p.filter[1] != 3 || p.filter[2] != 3) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: winograd F(2,3) needs a 3x3 filter, got ", FilterString(p)));
    }
    if (p.stride[1] != 1 || p.stride[2] != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("stride: winograd F(2,3) needs stride 1, got ",
                       p.stride[1], "x", p.stride[2]));
    }
    if (p.dilation[1] != 1 || p.dilation[2] != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("dilation: winograd F(2,3) needs dilation 1, got ",
                       p.dilation[1], "x", p.dilation[2]));
    }
    if (p.direction == Direction::kBackwardWeights) {
      return absl::FailedPreconditionError(
          "direction: winograd F(2,3) runs forward and backward data, not "
          "backward weights");
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return Fp32KernelWorkspace(p, cpu::WinogradWorkspaceBytes(AsFp32(p)));
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    AddFp32KernelSteps(p, cpu::kWinogradF2x3Kernel, {},
                       cpu::WinogradWorkspaceBytes(AsFp32(p)), &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewCpuWinogradF2x3Solver() {
  return std::make_unique<CpuWinogradF2x3>();
}

}  // namespace convtune
