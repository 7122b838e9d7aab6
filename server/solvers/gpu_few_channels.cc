// gpu_few_channels: forward and backward-weights convolution of 2-D layers
// with at most 8 input channels a group (conv_few_channels.cu), direct on
// the CUDA cores: each block stages an input patch once in shared memory, so
// the input is read about once rather than once a tap, and nothing pads the
// short reduction. For a network's first layer, where an implicit GEMM folds
// or pads three channels into a tensor-core step.
//
// F: a config is {TW, KB, KT, PX}. A block of 256 threads covers KB output
// channels of a TH x TW output tile, each thread PX positions of a column
// for KT channels; TH = PX * (256 * KT / KB) / TW.
// W: a config is {TW, KB, KT, TH}. A block owns every tap of KB output
// channels and sums them over a split of the TH x TW output tiles, each
// thread KT channels of one filter row's taps; the splits' fp32 sums go to
// the workspace, which a second kernel adds into dw.
// The filter, stride, dilation and channels a group are compiled in.
//
// gpu_few_channels_mma: the same F and W for 16-bit types on the tensor
// cores (mma.sync, compute capability 8.0 on), a config {TW, KB, TH}: four
// warps a block. F: each warp takes every fourth step of 16 positions of
// the TH x TW tile for all KB channels, the taps its reduction in steps of
// 16. W: each warp sums the block's whole KB x taps tile over every fourth
// step of 16 positions of the TH x TW tile.
#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
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
// {KT, PX}: channels and positions a thread, the default first: on the
// H100, Inception v3's first layer took 0.273 ms with 8 x 4 (64 registers,
// half the warps a multiprocessor holds) and 0.389 with 16 x 4 (117, a
// quarter).
constexpr std::array<std::pair<int64_t, int64_t>, 4> kThreadShapes = {
    {{8, 4}, {16, 2}, {16, 4}, {32, 2}}};
// W: {TH, TW} tiles of positions, and channels a thread.
constexpr std::array<std::pair<int64_t, int64_t>, 4> kWrwTiles = {
    {{4, 32}, {8, 16}, {2, 32}, {4, 16}}};
constexpr int64_t kWrwChannelsPerThread[] = {8, 4};
// W's splits of the output tiles: at most this many, each with about
// kWrwPositionsPerSplit positions at least.
constexpr int64_t kWrwMaxSplits = 512;
constexpr int64_t kWrwPositionsPerSplit = 2048;

// The MMA variant's warps (CT_MW), and the most fp32 sums a lane holds:
// (KB / 16) x ceil(taps / 8) tiles of 4.
constexpr int64_t kMmaThreads = 128;
constexpr int64_t kMmaMaxTiles = 16;
// F: the most k-steps of 16 taps (a lane keeps 4 patch offsets for each),
// enough for a 7x7 filter of 3 channels.
constexpr int64_t kMmaMaxTapSteps = 10;
constexpr std::array<std::pair<int64_t, int64_t>, 5> kMmaTiles = {
    {{4, 32}, {8, 32}, {2, 32}, {8, 16}, {4, 16}}};

bool IsWrw(const ConvProblem& p) {
  return p.direction == Direction::kBackwardWeights;
}

int64_t WrwSplits(const ConvProblem& p) {
  return std::clamp<int64_t>(
      CeilDiv(p.n * p.out(1) * p.out(2), kWrwPositionsPerSplit), 1,
      kWrwMaxSplits);
}

struct Tile {
  int64_t th = 0, tw = 0, kb = 0, kt = 0, px = 0;
};

// The tile of a config ({TW, KB, TH} for the MMA variant, `mma`), th 0
// where it is not a whole tile.
Tile TileOf(const ConvProblem& p, const PerfConfig& c, bool mma) {
  if (mma) return {c[2], c[0], c[1], 0, 1};
  if (IsWrw(p)) return {c[3], c[0], c[1], c[2], 1};
  Tile t{0, c[0], c[1], c[2], c[3]};
  if (t.kb % t.kt != 0 || t.kt % 8 != 0) return t;
  const int64_t pt = kThreads * t.kt / t.kb;
  if (pt < t.tw || pt % t.tw != 0) return t;
  t.th = t.px * pt / t.tw;
  return t;
}

// W: threads that own distinct dw elements (KT channels of one filter
// row's taps), and the block's threads, those times the position subsets
// that share each (CT_OWNERS, CT_WTHREADS of conv_few_channels.cu).
int64_t WrwOwners(const ConvProblem& p, const Tile& t) {
  return t.kb / t.kt * p.c_per_group() * p.filter[1];
}
int64_t WrwThreads(const ConvProblem& p, const Tile& t) {
  const int64_t owners = WrwOwners(p, t);
  return owners * (kThreads / owners);
}

int64_t Taps(const ConvProblem& p) {
  return p.c_per_group() * p.filter[1] * p.filter[2];
}

// The MMA variant's W tiles of sums a lane holds: KB / 16 by ceil(taps / 8).
int64_t MmaTiles(const ConvProblem& p, int64_t kb) {
  return kb / 16 * CeilDiv(Taps(p), 8);
}

// Shared memory of a tile's patch and filters (F) or patch and dy (W, or
// its threads' sums where more), in bytes; 16-bit patch and dy for the MMA
// variant (`mma`).
int64_t SmemBytes(const ConvProblem& p, const Tile& t, bool mma) {
  const int64_t rows =
      (t.th - 1) * p.stride[1] + (p.filter[1] - 1) * p.dilation[1] + 1;
  const int64_t cols =
      (t.tw - 1) * p.stride[2] + (p.filter[2] - 1) * p.dilation[2] + 1;
  const int64_t pitch = CeilDiv(cols, p.stride[2]) * p.stride[2];
  const int64_t patch = p.c_per_group() * rows * pitch;
  const int64_t taps = Taps(p);
  if (mma && !IsWrw(p)) {
    // The patch, the filters [KB][taps padded to 16, + 8], and each warp's
    // 16 positions by KB + 8 channels of output (CT_FSMEM).
    return 2 * (CeilDiv(patch, 8) * 8 + t.kb * (CeilDiv(taps, 16) * 16 + 8) +
                kMmaThreads / 32 * 16 * (t.kb + 8));
  }
  if (mma) {
    const int64_t halves =
        std::max(CeilDiv(patch, 8) * 8 + t.th * t.tw * (t.kb + 8),
                 2 * (kMmaThreads / 32) * MmaTiles(p, t.kb) * 32 * 4);
    return 2 * halves;
  }
  const int64_t floats =
      IsWrw(p) ? std::max(CeilDiv(patch, 4) * 4 + t.th * t.tw * t.kb,
                          WrwThreads(p, t) * t.kt * p.filter[2])
               : patch + taps * t.kb;
  return static_cast<int64_t>(sizeof(float)) * floats;
}

std::array<int64_t, 3> Grid(const ConvProblem& p, const Tile& t) {
  const int64_t x =
      IsWrw(p) ? WrwSplits(p)
               : p.n * CeilDiv(p.out(1), t.th) * CeilDiv(p.out(2), t.tw);
  return {x, p.groups * CeilDiv(p.k_per_group(), t.kb), 1};
}

bool Fits(const ConvProblem& p, const PerfConfig& c, bool mma) {
  if (c.size() != (mma ? 3u : 4u)) return false;
  const Tile t = TileOf(p, c, mma);
  if (t.th == 0) return false;
  if (mma && !IsWrw(p)) {
    if (t.tw % 16 != 0 || t.kb % 8 != 0 ||
        CeilDiv(Taps(p), 16) > kMmaMaxTapSteps) {
      return false;
    }
  } else if (mma) {
    if (t.tw % 16 != 0 || t.kb % 16 != 0 || MmaTiles(p, t.kb) > kMmaMaxTiles) {
      return false;
    }
  } else if (IsWrw(p)) {
    if (t.kb % t.kt != 0 || t.kt % 4 != 0 ||
        t.kt * p.filter[2] > kMaxAccumulators || WrwOwners(p, t) > kThreads) {
      return false;
    }
  } else if (t.px * t.kt > kMaxAccumulators) {
    return false;
  }
  const std::array<int64_t, 3> g = Grid(p, t);
  return SmemBytes(p, t, mma) <= kSmemBytes && g[0] <= kMaxGridX &&
         g[1] <= kMaxGridY;
}

// Each block takes the group's output channels rounded up to KT (at most
// 64), so that a patch is staged once for as many channels as it serves.
int64_t ChannelBlock(const ConvProblem& p, int64_t kt) {
  return std::max(kt, std::min<int64_t>(64, CeilDiv(p.k_per_group(), kt) * kt));
}

class GpuFewChannels final : public GpuSolver {
 public:
  explicit GpuFewChannels(bool mma) : mma_(mma) {}
  uint32_t id() const override {
    return mma_ ? kGpuFewChannelsMmaId : kGpuFewChannelsId;
  }
  absl::string_view name() const override {
    return mma_ ? "gpu_few_channels_mma" : "gpu_few_channels";
  }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }
  // mma.sync m16n8k16: CUDA, compute capability 8.0 on.
  bool SupportsDevice(const DeviceInfo& device) const override {
    return !mma_ || CudaSmAtLeast(device, 80);
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.direction == Direction::kBackwardData) {
      return absl::FailedPreconditionError(absl::StrCat(
          "direction: ", name(), " runs forward and backward weights only"));
    }
    if (mma_ && p.type == DataType::kFp32) {
      return absl::FailedPreconditionError(
          "type: gpu_few_channels_mma takes fp16 or bf16");
    }
    if (p.spatial_dims != 2) {
      return absl::FailedPreconditionError(
          absl::StrCat("spatial_dims: ", name(), " runs 2-D layers only"));
    }
    if (p.c_per_group() > kMaxChannels) {
      return absl::FailedPreconditionError(
          absl::StrCat("c: ", name(), " takes at most ", kMaxChannels,
                       " input channels a group (C/G), not ", p.c_per_group()));
    }
    RETURN_IF_ERROR(CheckIndex32(p, name()));
    if (ConfigSpace(p).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: no ", name(), " tile fits ", kSmemBytes / 1024,
          " KiB of shared memory with filter ", p.filter[1], "x", p.filter[2],
          ", stride ", p.stride[1], "x", p.stride[2], " and dilation ",
          p.dilation[1], "x", p.dilation[2],
          !mma_ ? ""
          : IsWrw(p)
              ? absl::StrCat(" and at most ", kMmaMaxTiles,
                             " MMA tiles of sums a lane (taps ", Taps(p), ")")
              : absl::StrCat(" and at most ", 16 * kMmaMaxTapSteps, " taps (",
                             Taps(p), ")")));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return IsWrw(p) ? WrwSplits(p) * p.w_elements() *
                          static_cast<int64_t>(sizeof(float))
                    : 0;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    const auto add = [&](PerfConfig c) {
      if (Fits(p, c, mma_)) space.push_back(std::move(c));
    };
    if (mma_ && !IsWrw(p)) {
      // Every output channel of the group a block, 64 at most.
      const int64_t kb = std::min<int64_t>(64, CeilDiv(p.k_per_group(), 8) * 8);
      for (const auto& [th, tw] : kMmaTiles) add({tw, kb, th});
      return space;
    }
    if (mma_) {
      // The widest channel block (a multiple of 16) whose sums fit a lane.
      int64_t kb = std::min<int64_t>(64, CeilDiv(p.k_per_group(), 16) * 16);
      while (kb > 16 && MmaTiles(p, kb) > kMmaMaxTiles) kb -= 16;
      for (const auto& [th, tw] : kMmaTiles) add({tw, kb, th});
      return space;
    }
    if (IsWrw(p)) {
      for (const auto& [th, tw] : kWrwTiles) {
        for (int64_t kt : kWrwChannelsPerThread) {
          add({tw, ChannelBlock(p, kt), kt, th});
        }
      }
      return space;
    }
    for (int64_t tw : {32, 16}) {
      for (const auto& [kt, px] : kThreadShapes) {
        add({tw, ChannelBlock(p, kt), kt, px});
      }
    }
    return space;
  }

  // F: the 32-column tiles. W: the first two tiles.
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    const std::vector<PerfConfig> space = ConfigSpace(p);
    if (mma_) {
      return {space.begin(), space.begin() + std::min<size_t>(2, space.size())};
    }
    std::vector<PerfConfig> out;
    for (const PerfConfig& c : space) {
      const bool first_tiles =
          IsWrw(p)
              ? (c[3] == kWrwTiles[0].first && c[0] == kWrwTiles[0].second) ||
                    (c[3] == kWrwTiles[1].first && c[0] == kWrwTiles[1].second)
              : c[0] == 32;
      if (first_tiles) out.push_back(c);
    }
    if (out.empty()) out.push_back(space.front());
    return out;
  }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    return FindConfigs(p).front();
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    const Tile t = TileOf(p, config, mma_);
    v1::ExecutionPlan plan = NewPlan(p, config);
    std::vector<std::string> options = ProblemOptions(p);
    const std::array<std::pair<const char*, int64_t>, 10> defines = {{
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
    }};
    for (const auto& [name, value] : defines) {
      options.push_back(absl::StrCat("-D", name, "=", value));
    }
    if (mma_) {
      options.push_back("-DCT_FC_MMA=1");
    } else {
      options.push_back(absl::StrCat("-DCT_KT=", t.kt));
      options.push_back(absl::StrCat("-DCT_PX=", t.px));
    }
    const int source = AddSource(&plan, "conv_few_channels.cu", options);
    if (!IsWrw(p)) {
      v1::KernelStep* step = AddGpuStep(
          &plan, mma_ ? "conv_few_channels_mma" : "conv_few_channels", source,
          Grid(p, t), static_cast<uint32_t>(mma_ ? kMmaThreads : kThreads));
      AddConvArgs(p, step);
      return plan;
    }
    v1::KernelStep* step = AddGpuStep(
        &plan, mma_ ? "conv_few_channels_mma_wrw" : "conv_few_channels_wrw",
        source, Grid(p, t),
        static_cast<uint32_t>(mma_ ? kMmaThreads : WrwThreads(p, t)));
    AddBuffer(step, v1::BUFFER_X);
    AddBuffer(step, v1::BUFFER_W);
    AddBuffer(step, v1::BUFFER_Y);
    AddBuffer(step, v1::BUFFER_WORKSPACE);
    AppendProblemScalars(p, step);
    step->add_scalars(WrwSplits(p));
    AddSumSlicesStep(&plan, "conv_few_channels_sum", source, 0, p.w_elements(),
                     WrwSplits(p));
    return plan;
  }

 private:
  bool mma_;
};

}  // namespace

std::unique_ptr<Solver> NewGpuFewChannelsSolver() {
  return std::make_unique<GpuFewChannels>(false);
}

std::unique_ptr<Solver> NewGpuFewChannelsMmaSolver() {
  return std::make_unique<GpuFewChannels>(true);
}

}  // namespace convtune
