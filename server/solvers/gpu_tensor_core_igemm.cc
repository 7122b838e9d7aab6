// gpu_tensor_core_igemm: implicit GEMM on tensor cores (mma.sync m16n8k16 via
// inline PTX, fp32 accumulation) for fp16 and bf16 on NVIDIA sm_80 and newer.
// HIP matrix cores are not targeted yet.

#include "absl/strings/str_cat.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// The first architecture with m16n8k16 f16/bf16 MMA.
constexpr int kMinSm = 80;

class GpuTensorCoreIgemm final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuTensorCoreIgemmId; }
  absl::string_view name() const override { return "gpu_tensor_core_igemm"; }
  v1::AlgorithmFamily family() const override { return v1::IMPLICIT_GEMM; }
  bool dynamic() const override { return true; }

  bool SupportsDevice(const DeviceInfo& device) const override {
    return CudaSmAtLeast(device, kMinSm);
  }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.type == DataType::kFp32) {
      return absl::FailedPreconditionError(
          "gpu_tensor_core_igemm needs fp16 or bf16 data (got FP32)");
    }
    return IgemmApplicable(p, name());
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return IgemmWorkspaceBytes(p);
  }
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    return IgemmDefaultConfig(p, IgemmCore::kMma);
  }
  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    return IgemmConfigSpace(p, IgemmCore::kMma);
  }
  // Relative to the fp32 peak the estimate scales by: tensor cores run 16-bit
  // products several times faster, gathers and bounds checks take the rest.
  double Efficiency(const ConvProblem& p) const override { return 1.5; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    AddIgemmSteps(p, config, IgemmCore::kMma, /*specialise=*/false, &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuTensorCoreIgemmSolver() {
  return std::make_unique<GpuTensorCoreIgemm>();
}

}  // namespace convtune
