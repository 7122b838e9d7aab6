// gpu_depthwise: grouped convolutions with few channels per group (depthwise,
// channel multipliers, ShuffleNet-style groups), where implicit GEMM's tiles
// would be nearly empty. Kernels in conv_depthwise.cu stage tiles through
// shared memory. A config is the tile {TH, TW, KB}: TH x TW positions of
// KB channels (KB is 1 in NCHW, where threads run along w; in NHWC they run
// along channels). One channel per group in NCHW 2-D also has the row
// kernels, config {0, V, 1}: V outputs (W: positions) per thread; F and B
// also {0, V, 2}, which load every filter row's window before the sums. One
// channel per group in NHWC 2-D has the vector kernels, config
// {0, V, B, CB}: a thread owns B bytes of consecutive channels (one vector
// load) and V positions along w, a block at most CB such vectors across.
// Backward weights splits the (n, od, oh) rows into chunks whose fp32
// partials a second kernel adds up, the chunk count fixed by the problem so
// that the workspace does not depend on the config.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// Channels per group (in and out) beyond which implicit GEMM does better.
constexpr int64_t kMaxChannelsPerGroup = 8;
// Dynamic shared memory a block may take without opting in (48 KiB).
constexpr int64_t kMaxSharedBytes = 48 * 1024;
constexpr int64_t kMaxThreads = 256;
constexpr int64_t kMaxGridX = 2147483647;
// CT_WSLOTS of conv_depthwise.cu, and the 32-lane groups a W block has at most.
constexpr int64_t kWSlots = 4;
constexpr int64_t kMaxWGroups = 16;
// Blocks a launch should reach: about a wave of 256-thread blocks on a large
// GPU.
constexpr int64_t kTargetBlocks = 1024;
// Backward weights: chunks at most, and the output positions each keeps at
// least.
constexpr int64_t kMaxChunks = 256;
constexpr int64_t kMinChunkPositions = 1024;

// {TH, TW, KB}, preferred first.
constexpr std::array<int64_t, 3> kNchwTiles[] = {
    {16, 32, 1}, {8, 32, 1}, {16, 16, 1}, {32, 16, 1}, {8, 16, 1},
    {32, 8, 1},  {16, 8, 1}, {8, 8, 1},   {4, 32, 1}};
constexpr std::array<int64_t, 3> kNhwcTiles[] = {
    {4, 8, 32}, {2, 8, 32}, {4, 4, 32}, {8, 8, 16},
    {4, 8, 16}, {8, 8, 8},  {4, 8, 8},  {2, 4, 32}};

// The row kernels hold a sum per tap in registers for backward weights.
constexpr int64_t kMaxRowsFilter = 7;
constexpr int64_t kRowsThreads = 256;
constexpr int64_t kRowsMaxLanes = 32;
// Source columns a row kernel's thread keeps for one filter row, at most.
constexpr int64_t kRowsMaxWindow = 40;
// Row configs {0, V, 1}, the default first.
constexpr int64_t kRowsPerLane[] = {4, 8, 2};
// Source values (every filter row's window) an F or B row config {0, V, 2}
// keeps in registers before its sums, at most.
constexpr int64_t kRowsMaxPrefetch = 96;

// One channel per group, NCHW, 2-D, a filter of at most 7x7: the row kernels.
bool RowsApply(const ConvProblem& p) {
  return p.layout == Layout::kNCHW && !p.is_3d() && p.c_per_group() == 1 &&
         p.k_per_group() == 1 && p.filter[1] <= kMaxRowsFilter &&
         p.filter[2] <= kMaxRowsFilter;
}
bool IsRows(const PerfConfig& c) { return c.size() == 3 && c[0] == 0; }

// floor(a / b) for b > 0.
int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((b - 1 - a) / b);
}

// Source elements one load of a row kernel's window takes: the widest
// vector of at most 16 bytes that the source rows (x, or dy for B) and the
// threads' base columns are whole multiples of; 1 where none is.
int64_t RowsVectorElems(const ConvProblem& p, int64_t v) {
  const bool bwd = p.direction == Direction::kBackwardData;
  const int64_t width = bwd ? p.out(2) : p.in[2];
  // A thread's base column advances by this much from one to the next.
  const int64_t step = bwd ? v / p.stride[2] : v * p.stride[2];
  for (int64_t e = 16 / ElementBytes(p.type); e > 1; e /= 2) {
    if (width % e == 0 && step % e == 0) return e;
  }
  return 1;
}

// The window of CT_RWIN in conv_depthwise.cu: the source columns a thread
// of V outputs reads along one filter row, in whole vectors of `elems`.
int64_t RowsWindow(const ConvProblem& p, int64_t v, int64_t elems) {
  const int64_t s = p.stride[2], d = p.dilation[2], pad = p.pad[2];
  const int64_t reach = (p.filter[2] - 1) * d;
  const bool bwd = p.direction == Direction::kBackwardData;
  const int64_t lo = bwd ? FloorDiv(pad - reach, s) : -pad;
  const int64_t hi = bwd ? FloorDiv(v - 1 + pad, s) : (v - 1) * s - pad + reach;
  return (FloorDiv(hi, elems) + 1 - FloorDiv(lo, elems)) * elems;
}

// Whether a thread's V outputs (W: its V positions of dy) are one aligned
// access: the rows are whole runs of V, at most 16 bytes.
bool RowsRunIsVector(const ConvProblem& p, int64_t v) {
  const int64_t width =
      p.direction == Direction::kBackwardData ? p.in[2] : p.out(2);
  const int64_t bytes = v * ElementBytes(p.type);
  return width % v == 0 && bytes >= 4 && bytes <= 16;
}

// Row config {0, V, 1}: B's gather needs V to be a multiple of the stride,
// and the window must stay in registers.
bool RowsFit(const ConvProblem& p, int64_t v) {
  if (p.direction == Direction::kBackwardData && v % p.stride[2] != 0)
    return false;
  return RowsWindow(p, v, RowsVectorElems(p, v)) <= kRowsMaxWindow;
}

// Row config {0, V, 2} (F and B): every filter row's window at once, so that
// their loads are in flight together.
bool RowsPrefetchFit(const ConvProblem& p, int64_t v) {
  return p.direction != Direction::kBackwardWeights && RowsFit(p, v) &&
         p.filter[1] * RowsWindow(p, v, RowsVectorElems(p, v)) <=
             kRowsMaxPrefetch;
}

// One channel per group, NHWC, 2-D, a filter of at most 7x7: the vector
// kernels.
bool VecApply(const ConvProblem& p) {
  return p.layout == Layout::kNHWC && !p.is_3d() && p.c_per_group() == 1 &&
         p.k_per_group() == 1 && p.filter[1] <= kMaxRowsFilter &&
         p.filter[2] <= kMaxRowsFilter;
}
bool IsVec(const PerfConfig& c) { return c.size() == 4; }

// {M, V, B, CB} preferred first: V positions, B bytes of channels a thread,
// at most CB vectors a block across; M the blocks a multiprocessor should
// hold at once, which caps a thread's registers (0: the compiler's choice)
// and, for W, sets how many blocks its chunks make (M per multiprocessor).
constexpr std::array<int64_t, 4> kVecConfigs[] = {
    {0, 4, 16, 8},  {0, 2, 16, 8},  {0, 8, 16, 8},  {0, 4, 16, 16},
    {0, 4, 8, 16},  {0, 2, 8, 16},  {0, 4, 4, 32},  {0, 2, 4, 32},
    {0, 4, 2, 32},  {0, 2, 16, 16}, {0, 1, 16, 8},  {0, 1, 16, 16},
    {3, 4, 16, 8},  {3, 4, 16, 16}, {3, 2, 16, 8},  {3, 2, 16, 16},
    {4, 2, 16, 16}, {4, 4, 16, 16}, {4, 1, 16, 16}, {2, 2, 16, 16},
    {2, 4, 8, 16},  {3, 4, 8, 16},  {2, 2, 8, 16},  {4, 2, 8, 16}};
// fp32 values a vector kernel's thread keeps in registers, at most: F and B
// the window of one filter row and the sums, W also a sum per tap. A W
// config that caps its registers at M blocks a multiprocessor keeps its
// sums per tap, its V positions of dy and one column of x within
// kVecWrwMaxValues / M.
constexpr int64_t kVecMaxValues = 176;
constexpr int64_t kVecWrwMaxSums = 100;
constexpr int64_t kVecWrwMaxValues = 200;
// A vector W's blocks (chunks of rows times channel blocks): about one a
// multiprocessor (132 on an H200; a block's threads keep up to 200 values
// in registers, so one block fills a multiprocessor's registers), M of
// them for a config capped at M blocks a multiprocessor, as long
// as each lane still gets kVecWrwMinItems of V outputs a chunk. Each block
// ends adding its lanes up, so more blocks than that cost more than they
// hide: on the H200's Shufflenet layers 500 blocks were 1.1-1.3x slower
// than 70-200, and 36 blocks 1.5x slower than 126.
constexpr int64_t kVecWrwTargetBlocks = 132;
constexpr int64_t kVecWrwMinItems = 2;

// Channels a thread of a vector config owns.
int64_t VecChannels(const ConvProblem& p, const PerfConfig& c) {
  return c[2] / ElementBytes(p.type);
}

// Source columns one filter row of a thread's V outputs reads.
int64_t VecWindow(const ConvProblem& p, int64_t v) {
  return (v - 1) * p.stride[2] + (p.filter[2] - 1) * p.dilation[2] + 1;
}

bool VecFits(const ConvProblem& p, const PerfConfig& c) {
  const int64_t dv = VecChannels(p, c);
  if (dv < 1 || c[2] % ElementBytes(p.type) != 0 || p.c % dv != 0) {
    return false;
  }
  const int64_t values = (VecWindow(p, c[1]) + c[1]) * dv;
  if (p.direction != Direction::kBackwardWeights)
    return values <= kVecMaxValues;
  const int64_t sums = p.filter[1] * p.filter[2] * dv;
  if (c[0] > 0) return (sums + (c[1] + 1) * dv) * c[0] <= kVecWrwMaxValues;
  return sums <= kVecWrwMaxSums && sums + values <= kVecWrwMaxValues;
}

// A vector config's channel vectors per block (the channel's vectors split
// evenly over the fewest blocks of at most CB) and its blocks across.
struct VecSplit {
  int64_t per_block, blocks;
};
VecSplit VecChannelSplit(const ConvProblem& p, const PerfConfig& c) {
  const int64_t vectors = p.c / VecChannels(p, c);
  const int64_t blocks = CeilDiv(vectors, c[3]);
  return {CeilDiv(vectors, blocks), blocks};
}

// Threads of a vector config's block: whole lanes of the block's vectors.
int64_t VecThreads(const ConvProblem& p, const PerfConfig& c) {
  const int64_t per_block = VecChannelSplit(p, c).per_block;
  return kMaxThreads / per_block * per_block;
}

// A vector W's chunks of the (n, oh) rows: enough blocks to fill the
// device, as long as every lane has work.
int64_t VecWrwChunks(const ConvProblem& p, const PerfConfig& c) {
  const VecSplit split = VecChannelSplit(p, c);
  const int64_t lanes = kMaxThreads / split.per_block;
  const int64_t rows = p.n * p.out(0) * p.out(1);
  const int64_t items = rows * CeilDiv(p.out(2), c[1]);
  return std::clamp<int64_t>(
      std::min({CeilDiv(kVecWrwTargetBlocks * std::max<int64_t>(1, c[0]),
                        split.blocks),
                items / (lanes * kVecWrwMinItems), rows}),
      1, kMaxChunks);
}

// Taps a vector W block adds up at once: as many as its threads and
// shared memory take.
int64_t VecWrwTapsAtOnce(const ConvProblem& p, const PerfConfig& c) {
  const int64_t taps = p.filter[1] * p.filter[2];
  const int64_t channels = VecChannelSplit(p, c).per_block * VecChannels(p, c);
  const int64_t tap_bytes = VecThreads(p, c) * VecChannels(p, c) *
                            static_cast<int64_t>(sizeof(float));
  return std::clamp<int64_t>(
      std::min(kMaxThreads / channels, kMaxSharedBytes / tap_bytes), 1, taps);
}

// log2 of the lanes a row kernel gives a row `width` long at `per_lane`
// outputs per lane: the power of two that covers it, at most 32.
int64_t RowsLaneShift(int64_t width, int64_t per_lane) {
  int64_t shift = 0;
  while ((int64_t{1} << shift) < kRowsMaxLanes && (per_lane << shift) < width)
    ++shift;
  return shift;
}

// Channels of the destination (y for F and W, dx for B) and per group.
int64_t DstChannels(const ConvProblem& p) {
  return p.direction == Direction::kBackwardData ? p.c : p.k;
}
int64_t DstPerGroup(const ConvProblem& p) {
  return p.direction == Direction::kBackwardData ? p.c_per_group()
                                                 : p.k_per_group();
}

// The destination's spatial size for F and B (dx for B), the output's for W.
std::array<int64_t, 3> DstSpatial(const ConvProblem& p) {
  if (p.direction == Direction::kBackwardData) return p.in;
  return {p.out(0), p.out(1), p.out(2)};
}

// Groups that KB consecutive destination channels span, at most.
int64_t GroupsSpanned(const ConvProblem& p, int64_t kb) {
  const int64_t per = DstPerGroup(p);
  return (kb + per - 2) / per + 1;
}

// Rows (or columns) of the source patch a tile of t positions reads in
// dimension i (1 = h, 2 = w); B's bound covers every alignment of the tile.
int64_t PatchSpan(const ConvProblem& p, int64_t t, int i) {
  const int64_t reach = (p.filter[i] - 1) * p.dilation[i];
  if (p.direction == Direction::kBackwardData)
    return (t - 1 + reach) / p.stride[i] + 2;
  return (t - 1) * p.stride[i] + reach + 1;
}

// Backward weights' chunks of the (n, od, oh) rows, from the problem alone.
int64_t WrwChunks(const ConvProblem& p) {
  if (p.direction != Direction::kBackwardWeights) return 1;
  const int64_t cblocks = p.layout == Layout::kNHWC ? CeilDiv(p.k, 32) : p.k;
  const int64_t rows = p.n * p.out(0) * p.out(1);
  const int64_t by_work =
      std::max<int64_t>(1, rows * p.out(2) / kMinChunkPositions);
  return std::clamp<int64_t>(
      std::min({CeilDiv(kTargetBlocks, cblocks), by_work, rows, kMaxChunks}), 1,
      kMaxChunks);
}

// A config's chunks of backward weights (1 for F and B).
int64_t ConfigChunks(const ConvProblem& p, const PerfConfig& c) {
  if (p.direction != Direction::kBackwardWeights) return 1;
  return IsVec(c) ? VecWrwChunks(p, c) : WrwChunks(p);
}

// 32-lane groups of a W block: taps split evenly over at most kMaxWGroups
// groups of at most kWSlots taps each per pass.
int64_t WrwGroups(const ConvProblem& p) {
  const int64_t taps = p.filter[1] * p.filter[2];
  const int64_t slots = std::min(kWSlots, CeilDiv(taps, kMaxWGroups));
  return std::min(kMaxWGroups, CeilDiv(taps, slots));
}

struct Launch {
  int64_t blocks = 0;
  int64_t blocks_y = 1;  // the vector kernels' channel blocks
  int64_t threads = 0;
  int64_t shared_bytes = 0;
};

constexpr int64_t kMaxGridY = 65535;

Launch DepthwiseLaunch(const ConvProblem& p, const PerfConfig& c) {
  const int64_t th = c[0], tw = c[1], kb = c[2];
  const int64_t taps = p.filter[1] * p.filter[2];
  Launch l;
  if (IsVec(c)) {
    const VecSplit split = VecChannelSplit(p, c);
    const int64_t lanes = kMaxThreads / split.per_block;
    l.threads = VecThreads(p, c);
    l.blocks_y = split.blocks;
    const int64_t floats =
        p.direction == Direction::kBackwardWeights
            ? l.threads * VecChannels(p, c) * VecWrwTapsAtOnce(p, c)
            : taps * split.per_block * VecChannels(p, c);
    l.shared_bytes = floats * static_cast<int64_t>(sizeof(float));
    if (p.direction == Direction::kBackwardWeights) {
      l.blocks = VecWrwChunks(p, c);
    } else {
      const std::array<int64_t, 3> sp = DstSpatial(p);
      l.blocks = CeilDiv(p.n * sp[1] * CeilDiv(sp[2], c[1]), lanes);
    }
    return l;
  }
  if (IsRows(c)) {
    l.threads = kRowsThreads;
    if (p.direction == Direction::kBackwardWeights) {
      l.blocks = p.k * WrwChunks(p);
    } else {
      const std::array<int64_t, 3> sp = DstSpatial(p);
      const int64_t block_rows = kRowsThreads >> RowsLaneShift(sp[2], c[1]);
      l.blocks = CeilDiv(p.n * DstChannels(p) * sp[1], block_rows);
    }
    return l;
  }
  if (p.direction == Direction::kBackwardWeights) {
    l.blocks = CeilDiv(p.k, kb) * WrwChunks(p);
    l.threads = 32 * WrwGroups(p);
    l.shared_bytes =
        (th * tw * kb +
         GroupsSpanned(p, kb) * PatchSpan(p, th, 1) * PatchSpan(p, tw, 2)) *
        static_cast<int64_t>(sizeof(float));
  } else {
    const std::array<int64_t, 3> sp = DstSpatial(p);
    l.blocks = p.n * sp[0] * CeilDiv(sp[1], th) * CeilDiv(sp[2], tw) *
               CeilDiv(DstChannels(p), kb);
    l.threads = std::min(kMaxThreads, th * tw * kb);
    l.shared_bytes = (taps * kb + GroupsSpanned(p, kb) * PatchSpan(p, th, 1) *
                                      PatchSpan(p, tw, 2)) *
                     static_cast<int64_t>(sizeof(float));
  }
  return l;
}

bool Fits(const ConvProblem& p, const PerfConfig& c) {
  if (IsVec(c) && !VecFits(p, c)) return false;
  const Launch l = DepthwiseLaunch(p, c);
  return l.shared_bytes <= kMaxSharedBytes && l.blocks >= 1 &&
         l.blocks <= kMaxGridX && l.blocks_y <= kMaxGridY;
}

// The vector configs worth timing for p, the default first, those of
// `space` alone. Measured config by config on ShuffleNet v2's depthwise
// layers in fp16 (H100, bench_gpu_vs_cudnn --configs 104): strided F is
// fastest at 2 positions a thread with 3 blocks a multiprocessor (up to
// 1.3x faster than without the cap, whose compiler's choice of registers
// leaves 2), strided B at 4 with 3 or 4 blocks (up to 1.6x), and every
// direction gains up to 1.2x from 16-vector blocks where the channels come
// in few vectors. Strided fp32 keeps its earlier default, the uncapped
// config of 8 vectors, first. F also times the configs that were the
// fastest on one of ShuffleNet's fp16 NHWC F layers on the H100 and are not
// among those three: at unit stride 16-vector blocks capped at 3 (c88
// 28x28, 1.16x ahead of the three) and 8 positions a thread (c176 14x14,
// 1.05x); at stride 2 blocks capped at 2 (c88 56x56, 1.06x) and 8-byte
// vectors (c352 14x14, 1.04x).
std::vector<PerfConfig> VecCandidates(const ConvProblem& p,
                                      const std::vector<PerfConfig>& space) {
  const bool strided = p.stride[2] > 1;
  std::vector<std::array<int64_t, 4>> order;
  if (p.direction == Direction::kBackwardWeights) {
    const int64_t v = strided ? 2 : 4;
    order = {{0, v, 16, 8}, {0, v, 16, 16}};
    // Capped at 2 to 4 blocks a multiprocessor (with as many more chunks).
    if (strided) {
      order.push_back({2, 2, 16, 16}), order.push_back({4, 2, 8, 16});
    } else {
      order.push_back({2, 4, 8, 16}), order.push_back({3, 4, 8, 16});
    }
  } else if (!strided) {
    order = {{0, 4, 16, 8}, {0, 4, 16, 16}, {3, 4, 16, 8}};
  } else if (p.direction == Direction::kForward) {
    order = {{3, 2, 16, 16}, {3, 2, 16, 8}, {0, 2, 16, 8}};
  } else {
    order = {{3, 4, 16, 16}, {4, 4, 16, 16}, {3, 4, 16, 8}};
  }
  if (strided && p.direction != Direction::kBackwardWeights &&
      p.type == DataType::kFp32) {
    order.pop_back();
    order.insert(order.begin(),
                 {0, p.direction == Direction::kForward ? 2 : 4, 16, 8});
  }
  if (p.direction == Direction::kForward && !strided) {
    order.push_back({3, 4, 16, 16}), order.push_back({0, 8, 16, 8});
  } else if (p.direction == Direction::kForward) {
    order.push_back({2, 2, 16, 16}), order.push_back({3, 4, 8, 16});
  }
  std::vector<PerfConfig> out;
  for (const auto& o : order) {
    const PerfConfig c(o.begin(), o.end());
    if (std::find(space.begin(), space.end(), c) != space.end())
      out.push_back(c);
  }
  return out;
}

class GpuDepthwise final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuDepthwiseId; }
  absl::string_view name() const override { return "gpu_depthwise"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.groups < 2 || p.c_per_group() > kMaxChannelsPerGroup ||
        p.k_per_group() > kMaxChannelsPerGroup) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gpu_depthwise needs groups > 1 with C/G <= ", kMaxChannelsPerGroup,
          " and K/G <= ", kMaxChannelsPerGroup, " (got groups ", p.groups,
          ", C/G ", p.c_per_group(), ", K/G ", p.k_per_group(), ")"));
    }
    RETURN_IF_ERROR(CheckIndex32(p, name()));
    const int64_t most_chunks = MostChunks(p);
    if (most_chunks * p.w_elements() > kMaxIndex32) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gpu_depthwise indexes its workspace in 32 bits: ", most_chunks,
          " chunks of ", p.w_elements(), " dw elements exceed 2^31 - 1"));
    }
    if (ConfigSpace(p).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: no gpu_depthwise tile fits ", kMaxSharedBytes / 1024,
          " KiB of shared memory with filter ", p.filter[1], "x", p.filter[2],
          ", stride ", p.stride[1], "x", p.stride[2], " and dilation ",
          p.dilation[1], "x", p.dilation[2]));
    }
    return absl::OkStatus();
  }

  // The most any config takes.
  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    const int64_t chunks = MostChunks(p);
    return chunks > 1
               ? chunks * p.w_elements() * static_cast<int64_t>(sizeof(float))
               : 0;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    // The vector kernels where they apply, else the row kernels where they
    // apply, come first; then the tiles.
    std::vector<PerfConfig> space;
    if (VecApply(p)) {
      for (const auto& v : kVecConfigs) {
        PerfConfig c(v.begin(), v.end());
        if (Fits(p, c)) space.push_back(std::move(c));
      }
    }
    if (RowsApply(p)) {
      for (const int64_t v : kRowsPerLane) {
        if (RowsFit(p, v)) space.push_back({0, v, 1});
      }
      for (const int64_t v : kRowsPerLane) {
        if (RowsPrefetchFit(p, v)) space.push_back({0, v, 2});
      }
    }
    const bool nhwc = p.layout == Layout::kNHWC;
    for (const auto& t : nhwc ? absl::MakeConstSpan(kNhwcTiles)
                              : absl::MakeConstSpan(kNchwTiles)) {
      PerfConfig c(t.begin(), t.end());
      if (Fits(p, c)) space.push_back(std::move(c));
    }
    return space;
  }

  // The tile with the least estimated cost per useful output: padding of the
  // tile in h, w and channels, idle multiprocessors when the grid is small,
  // and the patch's halo, which mostly hits in L2 and so counts half.
  // The vector kernels where they apply: the first of VecCandidates in the
  // space; the row kernels where they apply.
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    const std::vector<PerfConfig> space = ConfigSpace(p);
    if (!space.empty() && (IsVec(space.front()) || IsRows(space.front())))
      return FindConfigsIn(p, space).front();
    const std::array<int64_t, 3> sp = DstSpatial(p);
    const int64_t channels = DstChannels(p);
    const bool wrw = p.direction == Direction::kBackwardWeights;
    PerfConfig best;
    double best_cost = 0;
    for (const PerfConfig& c : space) {
      const auto pad = [](int64_t size, int64_t t) {
        return static_cast<double>(CeilDiv(size, t) * t) /
               static_cast<double>(size);
      };
      const double waste = (wrw ? 1.0 : pad(sp[1], c[0])) * pad(sp[2], c[1]) *
                           pad(channels, c[2]);
      const Launch l = DepthwiseLaunch(p, c);
      const double idle = std::max(1.0, static_cast<double>(kTargetBlocks) /
                                            static_cast<double>(l.blocks));
      const double halo =
          static_cast<double>(PatchSpan(p, c[0], 1) * PatchSpan(p, c[1], 2)) /
          static_cast<double>(c[0] * c[1]);
      const double cost = waste * idle * (1.0 + 0.5 * halo);
      if (best.empty() || cost < best_cost) best = c, best_cost = cost;
    }
    return best.empty() ? PerfConfig{16, 16, 1} : best;
  }

  // A find times every vector candidate, or every row config: the best of
  // them moves from layer to layer by up to 1.5x, and each takes tens of
  // microseconds.
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    const std::vector<PerfConfig> space = ConfigSpace(p);
    if (space.empty() || !(IsVec(space.front()) || IsRows(space.front())))
      return {DefaultConfig(p)};
    return FindConfigsIn(p, space);
  }

  absl::Status ValidateConfig(const ConvProblem& p,
                              const PerfConfig& config) const override {
    for (const PerfConfig& c : ConfigSpace(p)) {
      if (c == config) return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_depthwise: config [", PerfConfigString(config),
                     "] is not a tile for this problem"));
  }

  // Shared-memory stencils: the multiply-adds per output (taps times the
  // group's channels) set how close to the memory bound they run; loads
  // from shared memory cap the fraction of the FMA peak.
  double Efficiency(const ConvProblem& p) const override {
    const int64_t red = p.direction == Direction::kBackwardData
                            ? p.k_per_group()
                            : p.c_per_group();
    const double macs = static_cast<double>(red * p.filter_spatial());
    const double e = std::clamp(0.005 * macs, 0.01, 0.1);
    return p.direction == Direction::kBackwardWeights ? 0.8 * e : e;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    if (IsRows(config) || IsVec(config)) return MakeFilterPlan(p, config);
    const Launch l = DepthwiseLaunch(p, config);
    v1::ExecutionPlan plan = NewPlan(p, config);
    const int64_t chunks = WrwChunks(p);
    std::vector<std::string> options = ProblemOptions(p);
    options.push_back(absl::StrCat("-DCT_TH=", config[0]));
    options.push_back(absl::StrCat("-DCT_TW=", config[1]));
    options.push_back(absl::StrCat("-DCT_KB=", config[2]));
    const bool wrw = p.direction == Direction::kBackwardWeights;
    if (!wrw) options.push_back(absl::StrCat("-DCT_THREADS=", l.threads));
    if (chunks > 1) options.push_back("-DCT_WS_OUT=1");
    const int source = AddSource(&plan, "conv_depthwise.cu", options);
    v1::KernelStep* step =
        AddGpuStep(&plan, wrw ? "conv_depthwise_wrw" : "conv_depthwise", source,
                   {l.blocks, 1, 1}, static_cast<uint32_t>(l.threads));
    step->set_shared_bytes(static_cast<uint32_t>(l.shared_bytes));
    AddBuffer(step, v1::BUFFER_X);
    AddBuffer(step, v1::BUFFER_W);
    AddBuffer(step, v1::BUFFER_Y);
    if (chunks > 1) AddBuffer(step, v1::BUFFER_WORKSPACE);
    AppendProblemScalars(p, step);
    if (wrw) step->add_scalars(chunks);
    if (chunks > 1) AddReduceStep(p, source, chunks, &plan);
    return plan;
  }

 private:
  // Where `space` starts with a vector or row config: the configs a find
  // times, the default first (the vector candidates, or every row config).
  static std::vector<PerfConfig> FindConfigsIn(
      const ConvProblem& p, const std::vector<PerfConfig>& space) {
    std::vector<PerfConfig> configs;
    if (IsVec(space.front())) configs = VecCandidates(p, space);
    if (IsRows(space.front())) {
      for (const PerfConfig& c : space) {
        if (IsRows(c)) configs.push_back(c);
      }
    }
    if (configs.empty()) configs.push_back(space.front());
    return configs;
  }

  // The most chunks of backward weights any config of `p` takes.
  int64_t MostChunks(const ConvProblem& p) const {
    int64_t chunks = 1;
    for (const PerfConfig& c : ConfigSpace(p)) {
      chunks = std::max(chunks, ConfigChunks(p, c));
    }
    return chunks;
  }

  static void AddReduceStep(const ConvProblem& p, int source, int64_t chunks,
                            v1::ExecutionPlan* plan) {
    AddSumSlicesStep(plan, "conv_depthwise_reduce", source, 0, p.w_elements(),
                     chunks);
  }

  // The kernels that compile the filter in: conv_depthwise_rows (NCHW) or
  // conv_depthwise_nhwc (the vector kernels), with _wrw for W.
  v1::ExecutionPlan MakeFilterPlan(const ConvProblem& p,
                                   const PerfConfig& config) const {
    const bool vec = IsVec(config);
    const Launch l = DepthwiseLaunch(p, config);
    v1::ExecutionPlan plan = NewPlan(p, config);
    const bool wrw = p.direction == Direction::kBackwardWeights;
    const int64_t chunks = ConfigChunks(p, config);
    std::vector<std::string> options = ProblemOptions(p);
    options.push_back(absl::StrCat("-DCT_RFH=", p.filter[1]));
    options.push_back(absl::StrCat("-DCT_RFW=", p.filter[2]));
    options.push_back(absl::StrCat("-DCT_RV=", config[1]));
    options.push_back(absl::StrCat("-DCT_RSW=", p.stride[2]));
    options.push_back(absl::StrCat("-DCT_RDW=", p.dilation[2]));
    if (!vec) {
      options.push_back(absl::StrCat("-DCT_RSH=", p.stride[1]));
      options.push_back(absl::StrCat("-DCT_RPW=", p.pad[2]));
      options.push_back(
          absl::StrCat("-DCT_RVL=", RowsVectorElems(p, config[1])));
      if (RowsRunIsVector(p, config[1])) options.push_back("-DCT_RVS=1");
      if (config[2] == 2) options.push_back("-DCT_RPRE=1");
    } else {
      options.push_back(absl::StrCat("-DCT_DV=", VecChannels(p, config)));
      if (config[0] > 0) {
        options.push_back(absl::StrCat("-DCT_MINB=", config[0]));
      }
      if (wrw) {
        options.push_back(
            absl::StrCat("-DCT_WT=", VecWrwTapsAtOnce(p, config)));
      }
    }
    if (wrw && chunks > 1) options.push_back("-DCT_WS_OUT=1");
    const int source = AddSource(&plan, "conv_depthwise.cu", options);
    v1::KernelStep* step = AddGpuStep(
        &plan,
        absl::StrCat("conv_depthwise_", vec ? "nhwc" : "rows",
                     wrw ? "_wrw" : ""),
        source, {l.blocks, l.blocks_y, 1}, static_cast<uint32_t>(l.threads));
    step->set_shared_bytes(static_cast<uint32_t>(l.shared_bytes));
    AddBuffer(step, v1::BUFFER_X);
    AddBuffer(step, v1::BUFFER_W);
    AddBuffer(step, v1::BUFFER_Y);
    if (wrw && chunks > 1) AddBuffer(step, v1::BUFFER_WORKSPACE);
    AppendProblemScalars(p, step);
    if (wrw) step->add_scalars(chunks);
    step->add_scalars(
        vec ? VecChannelSplit(p, config).per_block
            : RowsLaneShift(wrw ? p.out(2) : DstSpatial(p)[2], config[1]));
    if (wrw && chunks > 1) AddReduceStep(p, source, chunks, &plan);
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuDepthwiseSolver() {
  return std::make_unique<GpuDepthwise>();
}

}  // namespace convtune
