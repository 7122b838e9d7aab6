// gpu_implicit_gemm: tiled implicit GEMM in shared memory with register
// micro-tiles (fp32 FMA, fp32 accumulation for every type), sizes as kernel
// arguments. Backward weights may split its long reduction into fp32
// partials in the workspace.
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

class GpuImplicitGemm final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuImplicitGemmId; }
  absl::string_view name() const override { return "gpu_implicit_gemm"; }
  v1::AlgorithmFamily family() const override { return v1::IMPLICIT_GEMM; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return IgemmApplicable(p, name());
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return IgemmWorkspaceBytes(p);
  }
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    return IgemmDefaultConfig(p, IgemmCore::kFma);
  }
  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    return IgemmConfigSpace(p, IgemmCore::kFma);
  }
  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    AddIgemmSteps(p, config, IgemmCore::kFma, /*specialise=*/false, &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuImplicitGemmSolver() {
  return std::make_unique<GpuImplicitGemm>();
}

}  // namespace convtune
