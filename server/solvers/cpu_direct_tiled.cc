// cpu_direct_tiled: direct convolution blocked over channels x output width.
// Config (channel block, width block); the channel block runs over output
// channels for F and W and over input channels for B.
#include <algorithm>

#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

// The largest compiled block not above v, so little of a block is wasted.
int64_t FitBlock(int64_t v) {
  int64_t best = cpu::kTiledBlocks[0];
  for (int64_t b : cpu::kTiledBlocks) {
    if (b <= v) best = b;
  }
  return best;
}

// The channels of a group that the channel block runs over.
int64_t BlockedChannels(const ConvProblem& p) {
  return p.direction == Direction::kBackwardData ? p.c_per_group()
                                                 : p.k_per_group();
}

class CpuDirectTiled final : public CpuSolver {
 public:
  uint32_t id() const override { return kCpuDirectTiledId; }
  absl::string_view name() const override { return "cpu_direct_tiled"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override { return 0; }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    return {FitBlock(BlockedChannels(p)), FitBlock(p.out(2))};
  }

  // A channel block narrower than the smallest compiled one is padding (a
  // depthwise layer has one channel per group).
  double Efficiency(const ConvProblem& p) const override {
    const double channels = static_cast<double>(BlockedChannels(p));
    const double smallest = static_cast<double>(cpu::kTiledBlocks[0]);
    return Solver::Efficiency(p) * std::min(1.0, channels / smallest);
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    for (int64_t kb : cpu::kTiledBlocks) {
      for (int64_t wb : cpu::kTiledBlocks) space.push_back({kb, wb});
    }
    return space;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    if (config.size() != 2)
      return absl::InvalidArgumentError("perf_config: needs 2 values");
    v1::ExecutionPlan plan = NewPlan(p, config);
    *plan.add_steps() = cpu::MakeConvStep(
        cpu::kDirectTiledKernel, p, {config[0], config[1]},
        RoleRef(v1::BUFFER_X), RoleRef(v1::BUFFER_W), RoleRef(v1::BUFFER_Y));
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewCpuDirectTiledSolver() {
  return std::make_unique<CpuDirectTiled>();
}

}  // namespace convtune
