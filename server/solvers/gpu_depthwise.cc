// gpu_depthwise: direct kernels for grouped convolutions with few channels
// per group (depthwise, channel multipliers, ShuffleNet-style groups), where
// implicit GEMM's tiles would be nearly empty. Backward weights sums each dw
// element over (n, od, oh, ow) with a whole block.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/reference.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// Channels per group (in and out) beyond which implicit GEMM does better.
constexpr int64_t kMaxChannelsPerGroup = 8;
constexpr int64_t kBlock = 256;
constexpr int64_t kMaxGridX = 65535;

class GpuDepthwise final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuDepthwiseId; }
  absl::string_view name() const override { return "gpu_depthwise"; }
  AlgorithmFamily family() const override { return AlgorithmFamily::kDirect; }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.groups < 2 || p.c_per_group() > kMaxChannelsPerGroup ||
        p.k_per_group() > kMaxChannelsPerGroup) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gpu_depthwise needs groups > 1 with C/G <= ", kMaxChannelsPerGroup, " and K/G <= ",
          kMaxChannelsPerGroup, " (got groups ", p.groups, ", C/G ", p.c_per_group(), ", K/G ",
          p.k_per_group(), ")"));
    }
    return CheckIndex32(p, name());
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override { return 0; }
  // Memory bound: few multiply-adds per element read.
  double Efficiency(const ConvProblem& p) const override { return 0.03; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(const ConvProblem& p,
                                             const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    const int source = AddSource(&plan, "conv_direct.cu", ProblemOptions(p));
    const int64_t outputs = OutputElements(p);
    if (p.direction == Direction::kBackwardWeights) {
      // One block per dw element, on a 2-D grid past 65535 elements.
      const int64_t x = std::min(outputs, kMaxGridX);
      const int64_t reduction = p.n * p.out_spatial();
      const int64_t block = std::min<int64_t>(kBlock, (reduction + 63) / 64 * 64);
      AddConvArgs(p, AddGpuStep(&plan, "conv_depthwise_wrw", source, {x, (outputs + x - 1) / x, 1},
                                static_cast<uint32_t>(block)));
    } else {
      const int64_t blocks = (outputs + kBlock - 1) / kBlock;
      AddConvArgs(p, AddGpuStep(&plan, "conv_depthwise", source, {blocks, 1, 1}, kBlock));
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuDepthwiseSolver() { return std::make_unique<GpuDepthwise>(); }

}  // namespace convtune
