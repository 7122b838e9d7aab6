// gpu_few_channels: forward convolution of 2-D layers with at most 8 input
// channels a group (conv_few_channels.cu), direct on the CUDA cores: each
// block stages its input patch and filters once in shared memory, so the
// input is read about once rather than once a tap, and nothing pads the
// short reduction. For a network's first layer, where an implicit GEMM folds
// or pads three channels into a tensor-core step.
//
// A config is {TW, KB, KT, PX}: a block of 256 threads covers KB output
// channels of a TH x TW output tile, each thread PX positions of a column
// for KT channels; TH = PX * (256 * KT / KB) / TW. The filter, stride,
// dilation and channels a group are compiled in.
#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// CT_FC_THREADS of conv_few_channels.cu, and the static shared memory a
// block may take.
constexpr int64_t kThreads = 256;
constexpr int64_t kSmemBytes = 48 * 1024;
constexpr int64_t kMaxChannels = 8;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridY = 65535;
// Accumulators a thread holds at most (PX * KT).
constexpr int64_t kMaxAccumulators = 64;
// {KT, PX}: channels and positions a thread, the default first.
constexpr std::array<std::pair<int64_t, int64_t>, 4> kThreadShapes = {
    {{16, 4}, {8, 4}, {16, 2}, {32, 2}}};

struct Tile {
  int64_t th = 0, tw = 0, kb = 0, kt = 0, px = 0;
};

// The tile of a config, th 0 where it is not a whole tile.
Tile TileOf(const PerfConfig& c) {
  Tile t{0, c[0], c[1], c[2], c[3]};
  if (t.kb % t.kt != 0 || t.kt % 8 != 0) return t;
  const int64_t pt = kThreads * t.kt / t.kb;
  if (pt < t.tw || pt % t.tw != 0) return t;
  t.th = t.px * pt / t.tw;
  return t;
}

// Shared memory of a tile's patch and filters, in bytes.
int64_t SmemBytes(const ConvProblem& p, const Tile& t) {
  const int64_t rows =
      (t.th - 1) * p.stride[1] + (p.filter[1] - 1) * p.dilation[1] + 1;
  const int64_t cols =
      (t.tw - 1) * p.stride[2] + (p.filter[2] - 1) * p.dilation[2] + 1;
  const int64_t pitch = CeilDiv(cols, p.stride[2]) * p.stride[2];
  const int64_t taps = p.c_per_group() * p.filter[1] * p.filter[2];
  return static_cast<int64_t>(sizeof(float)) *
         (p.c_per_group() * rows * pitch + taps * t.kb);
}

std::array<int64_t, 3> Grid(const ConvProblem& p, const Tile& t) {
  return {p.n * CeilDiv(p.out(1), t.th) * CeilDiv(p.out(2), t.tw),
          p.groups * CeilDiv(p.k_per_group(), t.kb), 1};
}

bool Fits(const ConvProblem& p, const PerfConfig& c) {
  if (c.size() != 4) return false;
  const Tile t = TileOf(c);
  if (t.th == 0 || t.px * t.kt > kMaxAccumulators) return false;
  const std::array<int64_t, 3> g = Grid(p, t);
  return SmemBytes(p, t) <= kSmemBytes && g[0] <= kMaxGridX &&
         g[1] <= kMaxGridY;
}

class GpuFewChannels final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuFewChannelsId; }
  absl::string_view name() const override { return "gpu_few_channels"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.direction != Direction::kForward) {
      return absl::FailedPreconditionError(
          "direction: gpu_few_channels runs forward only");
    }
    if (p.spatial_dims != 2) {
      return absl::FailedPreconditionError(
          "spatial_dims: gpu_few_channels runs 2-D layers only");
    }
    if (p.c_per_group() > kMaxChannels) {
      return absl::FailedPreconditionError(
          absl::StrCat("c: gpu_few_channels takes at most ", kMaxChannels,
                       " input channels a group (C/G), not ", p.c_per_group()));
    }
    RETURN_IF_ERROR(CheckIndex32(p, name()));
    if (ConfigSpace(p).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: no gpu_few_channels tile fits ", kSmemBytes / 1024,
          " KiB of shared memory with filter ", p.filter[1], "x", p.filter[2],
          ", stride ", p.stride[1], "x", p.stride[2], " and dilation ",
          p.dilation[1], "x", p.dilation[2]));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override { return 0; }

  // Each block takes the group's channels rounded up to KT (at most 64),
  // so that a patch is staged once for as many channels as it serves.
  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    for (int64_t tw : {32, 16}) {
      for (const auto& [kt, px] : kThreadShapes) {
        const int64_t kb = std::max(
            kt, std::min<int64_t>(64, CeilDiv(p.k_per_group(), kt) * kt));
        PerfConfig c = {tw, kb, kt, px};
        if (Fits(p, c)) space.push_back(std::move(c));
      }
    }
    return space;
  }

  // The 32-column tiles.
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    std::vector<PerfConfig> out;
    for (const PerfConfig& c : ConfigSpace(p)) {
      if (c[0] == 32) out.push_back(c);
    }
    if (out.empty()) out.push_back(ConfigSpace(p).front());
    return out;
  }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    return FindConfigs(p).front();
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    const Tile t = TileOf(config);
    v1::ExecutionPlan plan = NewPlan(p, config);
    std::vector<std::string> options = ProblemOptions(p);
    const std::array<std::pair<const char*, int64_t>, 12> defines = {{
        {"CT_C", p.c_per_group()},
        {"CT_FH", p.filter[1]},
        {"CT_FW", p.filter[2]},
        {"CT_SH", p.stride[1]},
        {"CT_SW", p.stride[2]},
        {"CT_DH", p.dilation[1]},
        {"CT_DW", p.dilation[2]},
        {"CT_TH", t.th},
        {"CT_TW", t.tw},
        {"CT_KB", t.kb},
        {"CT_KT", t.kt},
        {"CT_PX", t.px},
    }};
    for (const auto& [name, value] : defines) {
      options.push_back(absl::StrCat("-D", name, "=", value));
    }
    const int source = AddSource(&plan, "conv_few_channels.cu", options);
    v1::KernelStep* step =
        AddGpuStep(&plan, "conv_few_channels", source, Grid(p, t),
                   static_cast<uint32_t>(kThreads));
    AddConvArgs(p, step);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuFewChannelsSolver() {
  return std::make_unique<GpuFewChannels>();
}

}  // namespace convtune
