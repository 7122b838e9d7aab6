// gpu_implicit_gemm_static: the kernel of gpu_implicit_gemm with every size
// compiled in (-D options): one code object per problem, in exchange for
// constant-folded index arithmetic. Same tiles and K splits.
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

class GpuImplicitGemmStatic final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuImplicitGemmStaticId; }
  absl::string_view name() const override { return "gpu_implicit_gemm_static"; }
  v1::AlgorithmFamily family() const override { return v1::IMPLICIT_GEMM; }
  bool dynamic() const override { return false; }
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
    AddIgemmSteps(p, config, IgemmCore::kFma, /*specialise=*/true, &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuImplicitGemmStaticSolver() {
  return std::make_unique<GpuImplicitGemmStatic>();
}

}  // namespace convtune
