// gpu_direct_tiled: direct convolution with tiles staged through shared
// memory (conv_direct_tiled.cu), every direction, 2-D and 3-D, any stride,
// padding, dilation and groups; sizes are kernel arguments. A config is the
// tile {TH, TW, TK}: a TH x TW spatial tile (one thread per position) and TK
// channels per block (output channels for F and W, input channels for B).
// Backward weights splits its reduction into fp32 partials in the workspace
// when its dw tiles alone give too few blocks.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// CT_SMEM_FLOATS and CT_WSLOTS of conv_direct_tiled.cu.
constexpr int64_t kSmemFloats = 8192;
constexpr int64_t kWSlots = 8;
// Channels one F or B stage holds at most: more only lengthens a stage.
constexpr int64_t kMaxStageChannels = 32;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridYZ = 65535;
// The blocks a launch should reach: about two waves on a large GPU.
constexpr int64_t kTargetBlocks = 264;
constexpr int64_t kMaxSplits = 32;
constexpr int64_t kMinUnitsPerSplit = 4;

// {TH, TW}, largest first, and TK.
constexpr std::array<int64_t, 2> kSpatialTiles[] = {
    {16, 16}, {8, 16}, {8, 8}, {4, 16}};
constexpr int64_t kChannelTiles[] = {16, 8, 4};

// Backward weights' splits of its (n, od, output tile) units, from the
// problem alone so that the workspace does not depend on the config.
int64_t WrwSplits(const ConvProblem& p) {
  if (p.direction != Direction::kBackwardWeights) return 1;
  const int64_t blocks = CeilDiv(p.k_per_group(), 8) *
                         CeilDiv(p.c_per_group(), 8) * p.groups * p.filter[0];
  const int64_t units =
      p.n * p.out(0) * CeilDiv(p.out(1), 8) * CeilDiv(p.out(2), 8);
  const int64_t s =
      std::clamp<int64_t>(CeilDiv(kTargetBlocks, blocks), 1, kMaxSplits);
  return std::min(s, std::max<int64_t>(1, units / kMinUnitsPerSplit));
}

// Rows (or columns) of the input patch a tile of `t` outputs reads.
int64_t PatchSpan(int64_t t, int64_t f, int64_t stride, int64_t dil) {
  return (t - 1) * stride + (f - 1) * dil + 1;
}

// A config's launch for p: the channels per stage (cc for F and B, tc for W)
// and the grid; stage 0 when the config cannot run p.
struct Launch {
  int64_t stage = 0;
  std::array<int64_t, 3> grid = {1, 1, 1};
};

Launch TiledLaunch(const ConvProblem& p, const PerfConfig& c) {
  const int64_t th = c[0], tw = c[1], tk = c[2];
  const int64_t taps = p.filter[1] * p.filter[2];
  const int64_t kg = p.k_per_group(), cg = p.c_per_group();
  Launch l;
  switch (p.direction) {
    case Direction::kForward: {
      const int64_t patch =
          PatchSpan(th, p.filter[1], p.stride[1], p.dilation[1]) *
          PatchSpan(tw, p.filter[2], p.stride[2], p.dilation[2]);
      l.stage =
          std::min({cg, kMaxStageChannels, kSmemFloats / (patch + tk * taps)});
      l.grid = {p.n * p.out(0) * CeilDiv(p.out(1), th) * CeilDiv(p.out(2), tw),
                p.groups * CeilDiv(kg, tk), 1};
      break;
    }
    case Direction::kBackwardData: {
      // The dy positions the tile's taps reach (conv_tiled for B).
      const int64_t rows =
          (th - 1 + (p.filter[1] - 1) * p.dilation[1] + p.stride[1] - 1) /
              p.stride[1] +
          1;
      const int64_t cols =
          (tw - 1 + (p.filter[2] - 1) * p.dilation[2] + p.stride[2] - 1) /
              p.stride[2] +
          1;
      l.stage = std::min(
          {kg, kMaxStageChannels, kSmemFloats / (rows * cols + tk * taps)});
      l.grid = {p.n * p.in[0] * CeilDiv(p.in[1], th) * CeilDiv(p.in[2], tw),
                p.groups * CeilDiv(cg, tk), 1};
      break;
    }
    case Direction::kBackwardWeights: {
      const int64_t patch =
          PatchSpan(th, p.filter[1], p.stride[1], p.dilation[1]) *
          PatchSpan(tw, p.filter[2], p.stride[2], p.dilation[2]);
      l.stage = std::min({cg, kWSlots * th * tw / (tk * taps),
                          (kSmemFloats - tk * th * tw) / patch});
      if (l.stage >= 1) {
        l.grid = {CeilDiv(kg, tk) * CeilDiv(cg, l.stage),
                  p.groups * p.filter[0], WrwSplits(p)};
      }
      break;
    }
  }
  if (l.grid[0] > kMaxGridX || l.grid[1] > kMaxGridYZ || l.grid[2] > kMaxGridYZ)
    l.stage = 0;
  return l;
}

class GpuDirectTiled final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuDirectTiledId; }
  absl::string_view name() const override { return "gpu_direct_tiled"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (absl::Status s = CheckIndex32(p, name(), WrwSplits(p)); !s.ok())
      return s;
    if (ConfigSpace(p).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: no gpu_direct_tiled tile fits ",
          kSmemFloats * sizeof(float) / 1024,
          " KiB of shared memory and the grid limits with filter ", p.filter[1],
          "x", p.filter[2], ", stride ", p.stride[1], "x", p.stride[2],
          " and dilation ", p.dilation[1], "x", p.dilation[2]));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    const int64_t splits = WrwSplits(p);
    return splits > 1
               ? splits * p.w_elements() * static_cast<int64_t>(sizeof(float))
               : 0;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    for (const auto& [th, tw] : kSpatialTiles) {
      for (int64_t tk : kChannelTiles) {
        PerfConfig c = {th, tw, tk};
        if (TiledLaunch(p, c).stage >= 1) space.push_back(std::move(c));
      }
    }
    return space;
  }

  // The config with the least estimated cost per useful output: padding of
  // the spatial and channel tiles, idle multiprocessors when the grid is
  // small, and staging that larger tiles amortise.
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    const bool bwd = p.direction == Direction::kBackwardData;
    const double h = static_cast<double>(bwd ? p.in[1] : p.out(1));
    const double w = static_cast<double>(bwd ? p.in[2] : p.out(2));
    const int64_t channels = bwd ? p.c_per_group() : p.k_per_group();
    PerfConfig best = {8, 8, 4};
    double best_cost = 0;
    for (const PerfConfig& c : ConfigSpace(p)) {
      const double waste =
          static_cast<double>(CeilDiv(static_cast<int64_t>(h), c[0]) * c[0]) *
          static_cast<double>(CeilDiv(static_cast<int64_t>(w), c[1]) * c[1]) /
          (h * w) * static_cast<double>(CeilDiv(channels, c[2]) * c[2]) /
          static_cast<double>(channels);
      const Launch l = TiledLaunch(p, c);
      const double blocks =
          static_cast<double>(l.grid[0] * l.grid[1] * l.grid[2]);
      const double cost = waste * std::max(1.0, kTargetBlocks / blocks) *
                          (1.0 + 4.0 / static_cast<double>(c[2]) +
                           16.0 / static_cast<double>(c[0] * c[1]));
      if (best_cost == 0 || cost < best_cost) best = c, best_cost = cost;
    }
    return best;
  }

  // Every term comes from shared memory; reuse is one tile deep.
  double Efficiency(const ConvProblem& p) const override { return 0.08; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    const Launch l = TiledLaunch(p, config);
    v1::ExecutionPlan plan = NewPlan(p, config);
    const int64_t splits = WrwSplits(p);
    std::vector<std::string> options = ProblemOptions(p);
    options.push_back(absl::StrCat("-DCT_TH=", config[0]));
    options.push_back(absl::StrCat("-DCT_TW=", config[1]));
    options.push_back(absl::StrCat("-DCT_TK=", config[2]));
    if (splits > 1) options.push_back("-DCT_WS_OUT=1");
    const int source = AddSource(&plan, "conv_direct_tiled.cu", options);
    v1::KernelStep* step =
        AddGpuStep(&plan, "conv_tiled", source, l.grid,
                   static_cast<uint32_t>(config[0] * config[1]));
    AddBuffer(step, v1::BUFFER_X);
    AddBuffer(step, v1::BUFFER_W);
    AddBuffer(step, v1::BUFFER_Y);
    if (splits > 1) AddBuffer(step, v1::BUFFER_WORKSPACE);
    AppendProblemScalars(p, step);
    step->add_scalars(l.stage);
    if (p.direction == Direction::kBackwardWeights) step->add_scalars(splits);
    if (splits > 1) {
      AddSumSlicesStep(&plan, "conv_tiled_reduce", source, 0, p.w_elements(),
                       splits);
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuDirectTiledSolver() {
  return std::make_unique<GpuDirectTiled>();
}

}  // namespace convtune
