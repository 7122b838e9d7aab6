// cpu_direct_naive: the definition of the convolution, for every problem.
#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

class CpuDirectNaive final : public CpuSolver {
 public:
  uint32_t id() const override { return kCpuDirectNaiveId; }
  absl::string_view name() const override { return "cpu_direct_naive"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override { return 0; }

  // One step in the problem's own storage type: the kernel reads all three.
  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    *plan.add_steps() =
        cpu::MakeConvStep(cpu::kDirectNaiveKernel, p, {}, RoleRef(v1::BUFFER_X),
                          RoleRef(v1::BUFFER_W), RoleRef(v1::BUFFER_Y));
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewCpuDirectNaiveSolver() {
  return std::make_unique<CpuDirectNaive>();
}

}  // namespace convtune
