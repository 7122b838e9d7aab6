// gpu_tensor_core_pipelined: 2-D convolution in every direction as a
// tensor-core implicit GEMM over channel-last operands (conv_tc.cu), fp16 and
// bf16 on NVIDIA sm_80 and newer. Operand tiles reach shared memory through a
// ring of cp.async stages and the warps read them with ldmatrix, so loads
// overlap the products; gpu_tensor_core_igemm gathers element by element
// instead.
// F and B: the filter packed once into the workspace as [G][KO][R][S][CP]
// (turned 180 degrees with k and c swapped for backward data; with a stride,
// once for each of its phases, described at Phase), then
// per chunk of images the source (x, or dy) packed channel-last with the
// channels of a group padded to a multiple of 32, and conv_tc writing y or
// dx in place. NHWC tensors whose channels per group are already a multiple
// of 32 are read where they are; so is the forward filter then.
// W: per chunk, x and dy packed the same way (where needed) and conv_tc_wrw
// adding each split's share of the positions into its fp32 partial sums at
// the start of the workspace; then tc_wrw_reduce writes dw.
// A config is {BM, BN, BK, WM, WN, stages}; BK 64 where the padded channels
// allow it (F and B; W steps over 32 positions).
// gpu_tensor_core_wgmma is the same solver for NVIDIA sm_90: its products
// run as Hopper's warpgroup MMA, compiled for sm_90a, each warpgroup
// multiplying 64 rows of the block tile by all BN columns straight from the
// swizzled shared-memory tiles (W's read transposed); a config is {BM, BN,
// BK, BM / 16, 1, stages}, and W's BK (positions) is 32 or 64. Each also
// has a twin {BM, BN, BK, BM / 16, 1, stages, 1} whose tiles the tensor
// memory accelerator copies (CT_TMA) where the maps apply: for F and B the
// source through an im2col tensor map and the filter through a tiled one,
// for W x through an im2col map and dy through a tiled one; the plan step
// carries the maps and the device encodes them over the step's buffers at
// launch. One thread issues a step's copies, where the copy ring has every
// thread issue 16-byte copies and test their bounds. F and B also have
// configs {BM, BN, BK, BM / 16, 1, stages, 2}: through the maps, in clusters
// of two blocks that copy their shared source tile once between them.
#include <algorithm>
#include <array>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

constexpr int kMinSm = 80;
// Channels per group are padded to a multiple of conv_tc's shorter step.
constexpr int64_t kChannelBlock = 32;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kPackBlock = 256;
// Output columns a tc_pack_rows thread builds (kTcPackRun in conv_tc.cu).
constexpr int64_t kPackRun = 4;
constexpr int64_t kFloatBytes = sizeof(float);
// The blocks a default config aims for: two waves on a large GPU.
constexpr int64_t kTargetBlocks = 264;
// A large GPU's multiprocessors (132 on the H100 SXM and the H200) and what
// each holds, for W's splits: a heuristic for every device, which on a
// smaller one leaves a last wave filled differently, never a wrong result.
constexpr int64_t kWaveSms = 132;
constexpr int64_t kSmSharedBytes = 228 << 10;
constexpr int64_t kSmRegisters = 64 << 10;
// The warpgroup kernel's first config runs two blocks a multiprocessor:
// three quarters of those two waves keep it (on the H200, ResNet-50's 7x7
// 512-channel 3x3 layers, 196 blocks of it: F 0.098 ms, against 0.116 for
// the 128 x 64 tile that makes 392).
constexpr int64_t kWgmmaTargetBlocks = 192;

// {BM, BN, BK, WM, WN, stages}, largest tile first.
constexpr std::array<int64_t, 6> kConfigs[] = {
    {256, 128, 64, 4, 2, 3}, {256, 128, 32, 4, 2, 3}, {128, 256, 64, 2, 4, 3},
    {128, 256, 32, 2, 4, 3}, {128, 128, 64, 2, 2, 3}, {128, 128, 32, 2, 2, 4},
    {128, 64, 32, 2, 2, 4},  {64, 128, 32, 2, 2, 4},  {64, 64, 32, 2, 2, 4}};

// The warpgroup-MMA variant: {BM, BN, BK, BM / 16 warps, 1, stages}, at
// most 227 KiB of shared memory with the 1 KiB the tiles' alignment takes.
// The first is the default wherever it makes enough blocks: at 3 stages
// (97 KiB) two blocks share a multiprocessor, one's copies and barrier
// overlapping the other's products; on the H200 it took 10-21% less time
// than the same tile at 4 stages (one block a multiprocessor) on 7 of
// ResNet-50's 8 F and B 3x3 layers, 4% more on the eighth. Those with 3 stages
// and 64-column or 64-row tiles (73 KiB) fit three. The last has BK 32, the
// fallback for every channel count.
constexpr std::array<int64_t, 6> kWgmmaConfigs[] = {
    {128, 128, 64, 8, 1, 3}, {128, 256, 64, 8, 1, 4}, {128, 256, 32, 8, 1, 6},
    {128, 128, 64, 8, 1, 4}, {128, 128, 32, 8, 1, 6}, {64, 256, 64, 4, 1, 4},
    {128, 64, 64, 8, 1, 4},  {128, 64, 64, 8, 1, 3},  {128, 64, 32, 8, 1, 6},
    {64, 128, 64, 4, 1, 4},  {64, 128, 64, 4, 1, 3},  {64, 128, 32, 4, 1, 6},
    {64, 64, 64, 4, 1, 4},   {64, 64, 32, 4, 1, 6}};

// W: {BM (output channels), BN (filter columns), 32 positions, WM, WN, stages}.
// The 128 x 64 tile first: on ResNet-50's 3x3 layers (128 to 512 output
// channels) it took 15-26% less time than 128 x 128 on the H200, and where
// 128 output channels are mostly padding 64 x 128 comes next.
constexpr std::array<int64_t, 6> kWrwConfigs[] = {{128, 64, 32, 2, 2, 4},
                                                  {64, 128, 32, 2, 2, 4},
                                                  {128, 128, 32, 2, 2, 4},
                                                  {64, 64, 32, 2, 2, 4}};
// W on the warpgroup MMA: {BM (output channels), BN (filter columns), BK
// positions, BM / 16, 1, stages}. The first of those not mostly padding is
// the default: on the H200, ResNet-50's W 3x3 layers of 128 and 512 output
// channels took 4-9% less time in the first than in the next best, and the
// 56x56 one of 64 channels in the 64 x 64 tile (0.151 ms, against 0.158
// for 64 x 128 and 0.179 for the first).
constexpr std::array<int64_t, 6> kWgmmaWrwConfigs[] = {
    {128, 128, 32, 8, 1, 6}, {128, 128, 64, 8, 1, 3}, {128, 64, 64, 8, 1, 4},
    {64, 64, 64, 4, 1, 4},   {64, 128, 32, 4, 1, 6},  {128, 128, 64, 8, 1, 4},
    {64, 128, 64, 4, 1, 4}};
// What a W find times beside the default where 64-row tiles pad fewer
// output channels than its tile: Inception v3's 192.
constexpr std::array<int64_t, 6> kWrwNarrowRowConfigs[] = {
    {64, 128, 32, 4, 1, 6}, {64, 128, 64, 4, 1, 4}};
// W's 192-row tiles on the copy ring (three warpgroups, 384 threads), which
// a find times where they pad fewer output channels than the default's
// tile: 192 or 576 filters, which 128-row tiles pad by a third or a ninth,
// while 64-row ones reuse each staged x value a third as often.
constexpr std::array<int64_t, 6> kWrwWideRowConfigs[] = {
    {192, 128, 32, 12, 1, 6}, {192, 128, 64, 12, 1, 4}};
// F and B through the tensor memory accelerator: each of kWgmmaConfigs
// with a seventh entry 1, and these, {BM, BN, BK, BM / 16, 1, stages} too;
// 256-row tiles are four warpgroups, which the copy ring's per-thread
// copies leave no registers for.
constexpr std::array<int64_t, 6> kTmaOnlyConfigs[] = {{256, 128, 64, 16, 1, 3},
                                                      {256, 128, 64, 16, 1, 4},
                                                      {256, 64, 64, 16, 1, 4},
                                                      {128, 64, 64, 8, 1, 6}};
// Through the maps too, narrow column tiles for layers whose output
// channels (F) or input channels (B) are 32, or a multiple of 96 that 128
// would pad: Inception's 32 to 384. A find times the first of them that
// pads fewer columns than every config it times already (FindConfigs).
constexpr std::array<int64_t, 6> kNarrowConfigs[] = {{128, 96, 64, 8, 1, 3},
                                                     {128, 96, 32, 8, 1, 6},
                                                     {128, 32, 64, 8, 1, 4},
                                                     {128, 32, 32, 8, 1, 6},
                                                     {64, 32, 64, 4, 1, 4}};
// F and B through the maps with the MMA's roles turned (WM 1, WN = BN / 16:
// -DCT_SWAP): each warpgroup multiplies 64 filter rows by the whole source
// tile, BM positions, so that layers of 64 or 128 output channels (F) or
// input channels (B) still run the MMA 192 or 256 wide. A find times them
// on such layers, those whose tiles are no wider than the layer's columns
// (FindConfigs).
constexpr std::array<int64_t, 6> kSwapConfigs[] = {{256, 64, 64, 1, 4, 3},
                                                   {192, 64, 64, 1, 4, 3},
                                                   {256, 128, 64, 1, 8, 3},
                                                   {192, 64, 32, 1, 4, 4}};
// A seventh entry 2 runs F and B in clusters of two blocks that share their
// source tile (-DCT_CLUSTER=2): the two column tiles of a row tile, each
// copying half the tile's rows into both, where the output channels make an
// even number of column tiles. These tiles have such twins. They are for
// an exhaustive find only: on the H100 each pair took 1.4-2.4 times its
// single-block twin's time on ResNet-50's 3x3 F layers (the pair meets at a
// cluster barrier every reduction step).
constexpr std::array<int64_t, 6> kClusterConfigs[] = {
    {128, 128, 64, 8, 1, 3}, {128, 128, 64, 8, 1, 4}, {128, 64, 64, 8, 1, 3},
    {128, 64, 64, 8, 1, 4},  {128, 256, 64, 8, 1, 4}, {256, 128, 64, 16, 1, 3}};
// F and B over stride-1 passes, NHWC, on the warpgroup MMA: {BM, BN, BK,
// BM / 16, 1, stages, 0, TW}, the block's rows a TW wide, BM / TW high tile
// of output positions (TW 8, or 64 for a warpgroup a tile row) whose source
// halo is staged once a channel block and read by the MMA for every tap
// (-DCT_HALO): the im2col tiles of the other configs read each source pixel
// once a tap through L2, 9 times for 3x3, which holds 32- to 128-channel
// layers at large images below the MMA's rate (VGG-16's 64-channel 224x224
// layers at 367-391 TFLOP/s on the H100, Inception's 32-channel 147x147
// ones at 176); a 16 x 8 tile's 3x3 halo is 1.4 times its positions. Each
// also runs through the tensor maps (the seventh entry 1: the halo a box of
// a tiled map) where its halo fits a box (HaloTmaApplies).
constexpr std::array<int64_t, 8> kHaloConfigs[] = {
    {128, 128, 64, 8, 1, 4, 0, 8},  {128, 64, 64, 8, 1, 4, 0, 8},
    {128, 32, 64, 8, 1, 5, 0, 8},   {128, 256, 64, 8, 1, 3, 0, 8},
    {256, 128, 64, 16, 1, 4, 0, 8}, {256, 64, 64, 16, 1, 4, 0, 8},
    {128, 64, 32, 8, 1, 6, 0, 8},   {64, 32, 32, 4, 1, 6, 0, 8},
    {128, 128, 32, 8, 1, 6, 0, 8},  {128, 128, 64, 8, 1, 4, 0, 64}};
bool IsTma(const PerfConfig& c) { return c.size() >= 7 && c[6] >= 1; }
bool IsHalo(const PerfConfig& c) { return c.size() == 8 && c[7] > 0; }
int64_t ClusterOf(const PerfConfig& c) { return IsTma(c) ? c[6] : 1; }
// What a find times beside the default: on the H200 the 128 x 64 tile at 3
// stages was the fastest on ResNet-50's 7x7 and 56x56 F and B 3x3 layers
// (0.056 and 0.097 ms F), the 128 x 128 one on the 14x14 layers (0.056 F);
// on the H100 the 128 x 256 one at 4 stages on VGG-16's 3x3 layers of 256
// and 512 channels (F and B at 56x56 and 14x14: 0.655, 0.660, 0.159 and
// 0.171 ms, against 0.840, 0.823, 0.180 and 0.191 for the 128 x 128 one).
constexpr std::array<int64_t, 7> kTmaFindConfigs[] = {
    {128, 64, 64, 8, 1, 3, 1},
    {128, 128, 64, 8, 1, 3, 1},
    {128, 256, 64, 8, 1, 4, 1}};
// What a W find times beside a tensor-map default: on the H200 the 128 x
// 128 tile of 64 positions at 3 stages was the fastest on ResNet-50's W
// 3x3 layers of 128 to 512 channels (0.069-0.094 ms, against 0.075-0.104 for
// the 32-position default), 8% behind the default on the 64-channel one.
constexpr std::array<int64_t, 7> kTmaWrwFindConfig = {128, 128, 64, 8, 1, 3, 1};
// W through the maps alone (the copy ring's per-thread copies leave it no
// registers): the 128 x 256 tile, which moves 85 sums a byte staged against
// 64 for 128 x 128. A find times it where neither its rows nor its columns
// pad much more than the 128 x 128 tile's: VGG's and SSD's layers of 256
// and 512 channels.
constexpr std::array<int64_t, 6> kWrwWideTmaConfig = {128, 256, 64, 8, 1, 3};
// A 4-D im2col map (2-D images) takes 8-bit bounding-box corners and 8-bit
// tap offsets (the copy's offsets from a column's pixels; 16-bit only for
// 3-D maps), and its traversal strides at most 8.
constexpr int64_t kTmaCornerMin = -128, kTmaCornerMax = 127;
constexpr int64_t kTmaMaxStride = 8;
constexpr int64_t kTmaMaxTapOffset = 255;
// A tiled map's box takes at most 256 elements a dimension.
constexpr int64_t kTmaMaxBox = 256;

// W splits the positions over at most this many fp32 partial sums, each
// split keeping at least kMinPositionsPerSplit positions.
constexpr int64_t kMaxSplits = 256;
constexpr int64_t kMinPositionsPerSplit = 1024;
// F and B: the most filter rows, and columns, a pass reads.
constexpr int64_t kMaxFilterSide = 32;

// The GEMM columns that tiles `bn` wide cover for `columns` of them.
int64_t PaddedColumns(int64_t columns, int64_t bn) {
  return CeilDiv(columns, bn) * bn;
}
// W's maps move x in boxes of this many channels, a tap's columns padded to
// them (conv_tc_wrw's cq).
constexpr int64_t kWrwTmaChannels = 64;

// `c` through the tensor maps: a seventh entry 1.
PerfConfig Mapped(const std::array<int64_t, 6>& c) {
  PerfConfig config(c.begin(), c.end());
  config.push_back(1);
  return config;
}

int64_t Pad32(int64_t channels) {
  return CeilDiv(channels, kChannelBlock) * kChannelBlock;
}

// The filter width folded into the channels (tc_pack_rows): `on`, and then
// the problem's own width, filter width, stride, padding and dilation, which
// the pass itself sees as OW, 1, 1, 0 and 1.
struct WidthFold {
  bool on = false;
  int64_t w = 0, fs = 0, sw = 0, pw = 0, dw = 0;
};

// Folding pays where padding each tap's channels to 32 at least doubles the
// reduction: F and W, one group, few channels (the first layer's 3).
WidthFold FoldWidth(const ConvProblem& p) {
  WidthFold fold;
  const int64_t folded = Pad32(p.c_per_group() * p.filter[2]);
  fold.on = p.direction != Direction::kBackwardData && p.groups == 1 &&
            p.filter[2] > 1 &&
            2 * folded <= p.filter[2] * Pad32(p.c_per_group());
  if (fold.on) {
    fold.w = p.in[2], fold.fs = p.filter[2], fold.sw = p.stride[2];
    fold.pw = p.pad[2], fold.dw = p.dilation[2];
  }
  return fold;
}

// Backward data with stride (SH, SW) > 1 as SH * SW stride-1 passes over dy,
// one for each phase (qh, qw): the rows i of dx with (i + PH) mod SH = qh
// take only the filter rows qh + SH * j, j < fh; such a pass is the forward
// pass of dy with those taps turned, padded by ph, and its output row u
// lands on dx row SH * u + off_h (columns likewise). Its filter is packed at
// filter_at (elements) of the workspace.
struct Phase {
  int64_t qh, qw, fh, fw, ph, pw, dst_h, dst_w, off_h, off_w, filter_at;
};

// Backward data with a stride over 1: the passes of Phase.
bool StridedBackwardData(const ConvProblem& p) {
  return p.direction == Direction::kBackwardData &&
         (p.stride[1] > 1 || p.stride[2] > 1);
}

// One dimension of a phase: taps, padding, outputs and first output of
// phase q, for a filter of `taps` taps, padding `pad` and stride `stride`
// over a dx `size` long.
struct PhaseSide {
  int64_t taps, pad, count, off;
};
PhaseSide PhaseSideOf(int64_t q, int64_t taps, int64_t pad, int64_t stride,
                      int64_t size) {
  PhaseSide s;
  s.taps = CeilDiv(taps - q, stride);
  // The first dy row u the phase reads from: ceil((pad - q) / stride).
  const int64_t a = pad - q;
  const int64_t first = a >= 0 ? CeilDiv(a, stride) : -((-a) / stride);
  s.pad = s.taps - 1 - first;
  s.off = stride * first + q - pad;
  s.count = s.off < size ? CeilDiv(size - s.off, stride) : 0;
  return s;
}

// The pass as conv_tc sees it, and the workspace: the packed filter at 0
// (when packed), a chunk's packed source at src_at (when packed).
struct Geometry {
  int64_t groups, ci, co,
      cp;  // per group: source, destination, padded source channels
  int64_t src_h, src_w, dst_h, dst_w;
  int64_t fh, fw, ph, pw, sh, sw, dh, dw;
  WidthFold fold;
  std::vector<Phase> phases;  // StridedBackwardData's
  bool pack_src, pack_filter;
  int64_t src_at;
  int64_t chunk;  // images per chunk; 0 when one image does not fit
  int64_t bytes;
};

// `fold_width`: fold where FoldWidth says it pays.
Geometry MakeGeometry(const ConvProblem& p, bool fold_width) {
  const bool bwd = p.direction == Direction::kBackwardData;
  Geometry g;
  g.groups = p.groups;
  g.ci = bwd ? p.k_per_group() : p.c_per_group();
  g.co = bwd ? p.c_per_group() : p.k_per_group();
  g.cp = Pad32(g.ci);
  g.src_h = bwd ? p.out(1) : p.in[1];
  g.src_w = bwd ? p.out(2) : p.in[2];
  g.dst_h = bwd ? p.in[1] : p.out(1);
  g.dst_w = bwd ? p.in[2] : p.out(2);
  g.fh = p.filter[1], g.fw = p.filter[2];
  g.dh = p.dilation[1], g.dw = p.dilation[2];
  // Backward data (stride 1) is the forward pass of dy with the filter
  // turned; with a stride, one such pass for each phase (below).
  g.ph = bwd ? (g.fh - 1) * g.dh - p.pad[1] : p.pad[1];
  g.pw = bwd ? (g.fw - 1) * g.dw - p.pad[2] : p.pad[2];
  g.sh = bwd ? 1 : p.stride[1];
  g.sw = bwd ? 1 : p.stride[2];
  const bool nhwc = p.layout == Layout::kNHWC;
  g.pack_src = !(nhwc && g.cp == g.ci);
  g.pack_filter = bwd || g.pack_src;
  if (fold_width) g.fold = FoldWidth(p);
  if (g.fold.on) {
    g.cp = Pad32(g.ci * g.fw);
    g.src_w = g.dst_w;
    g.fw = 1, g.sw = 1, g.pw = 0, g.dw = 1;
    g.pack_src = g.pack_filter = true;
  }
  if (StridedBackwardData(p)) {
    int64_t at = 0;
    for (int64_t qh = 0; qh < p.stride[1]; ++qh) {
      for (int64_t qw = 0; qw < p.stride[2]; ++qw) {
        const PhaseSide h =
            PhaseSideOf(qh, g.fh, p.pad[1], p.stride[1], g.dst_h);
        const PhaseSide w =
            PhaseSideOf(qw, g.fw, p.pad[2], p.stride[2], g.dst_w);
        g.phases.push_back({qh, qw, h.taps, w.taps, h.pad, w.pad, h.count,
                            w.count, h.off, w.off, at});
        at += g.groups * g.co * h.taps * w.taps * g.cp;
      }
    }
  }
  const int64_t es = ElementBytes(p.type);
  const int64_t filter_bytes =
      g.pack_filter ? g.groups * g.co * g.fh * g.fw * g.cp * es : 0;
  g.src_at = AlignWorkspace(filter_bytes);
  const int64_t image = g.src_h * g.src_w * g.groups * g.cp;  // elements
  g.chunk = p.n;
  if (g.pack_src) {
    // NCHW packing launches a chunk's images on a 16-bit grid axis.
    g.chunk = std::min({p.n, (kWorkspaceBudget - g.src_at) / (image * es),
                        kMaxIndex32 / image, kMaxGridY});
  }
  g.chunk = std::max<int64_t>(g.chunk, 0);
  g.bytes = g.pack_src ? g.src_at + g.chunk * image * es : filter_bytes;
  return g;
}

// The stride-1 passes of `g`: its phases, or the whole pass.
std::vector<Phase> PassesOf(const Geometry& g) {
  if (!g.phases.empty()) return g.phases;
  return {{0, 0, g.fh, g.fw, g.ph, g.pw, g.dst_h, g.dst_w, 0, 0, 0}};
}

// The pass conv_tc runs for phase `f` of `g`.
Geometry PassOf(const Geometry& g, const Phase& f) {
  Geometry pass = g;
  pass.fh = f.fh, pass.fw = f.fw, pass.ph = f.ph, pass.pw = f.pw;
  pass.dst_h = f.dst_h, pass.dst_w = f.dst_w;
  return pass;
}

// Backward data turns its filter in tiles (tc_pack_filter_t) where the
// tiles' grid fits; phases need it.
bool TurnsInTiles(const Geometry& g) {
  return g.groups * g.fh * g.fw <= kMaxGridY;
}

int64_t Threads(const PerfConfig& c) { return c[3] * c[4] * 32; }

// `wgmma`: the NCHW output tile in fp32 (CT_TILE_FP32), and 1 KiB more for
// aligning the tiles to 1024 bytes; with the tensor memory accelerator, 8 bytes
// a stage for its barriers (CT_BARRIERS_AT for F and B; W's follow the
// ring).
// A halo config's ring holds filter tiles alone, and two halo buffers
// (CT_HALO_BYTES) follow it.
int64_t HaloReach(const ConvProblem& p, int dim) {
  return (p.filter[dim] - 1) * p.dilation[dim];
}
// The halo of a tile of config `c`: its columns and rows of pixels.
struct HaloBox {
  int64_t width, height;
};
HaloBox HaloBoxOf(const ConvProblem& p, const PerfConfig& c) {
  return {c[7] + HaloReach(p, 2), c[0] / c[7] + HaloReach(p, 1)};
}
int64_t HaloBytes(const ConvProblem& p, const PerfConfig& c) {
  const HaloBox box = HaloBoxOf(p, c);
  return CeilDiv(box.width * box.height * c[2] * 2, 1024) * 1024;
}
int64_t SharedBytes(const ConvProblem& p, const PerfConfig& c, bool wgmma) {
  const int64_t ring = IsHalo(c) ? c[5] * c[1] * c[2] * 2 + 2 * HaloBytes(p, c)
                                 : c[5] * (c[0] + c[1]) * c[2] * 2;
  if (p.direction == Direction::kBackwardWeights)
    return ring + (wgmma ? 1024 : 0) + (IsTma(c) ? 8 * c[5] : 0);
  const int64_t es = wgmma && p.layout != Layout::kNHWC ? 4 : 2;
  const int64_t tile = p.layout == Layout::kNHWC ? c[0] * (c[1] + 8) * es
                                                 : c[1] * (c[0] + 8) * es;
  return std::max(ring, tile) + (wgmma ? 1024 : 0) + (IsTma(c) ? 8 * c[5] : 0);
}

// The im2col map's bounding box over the source: for each spatial
// dimension (W first) the offsets of the first tap's pixels from the
// source's first pixel (-padding) and last (where the last output's first
// tap lies, less the size).
struct TmaBox {
  int64_t lower[2], upper[2];
};
// What the im2col map needs of a pass: the source it reads, the positions
// it steps over (dst), and the filter's taps.
struct TmaSpatial {
  int64_t src_w, src_h, dst_w, dst_h, pw, ph, sw, sh, fw, fh, dw, dh;
};
TmaSpatial SpatialOf(const Geometry& g) {
  return {g.src_w, g.src_h, g.dst_w, g.dst_h, g.pw, g.ph,
          g.sw,    g.sh,    g.fw,    g.fh,    g.dw, g.dh};
}
TmaBox TmaBoxOf(const TmaSpatial& g) {
  TmaBox b;
  b.lower[0] = -g.pw, b.lower[1] = -g.ph;
  b.upper[0] = (g.dst_w - 1) * g.sw + 1 - g.src_w - g.pw;
  b.upper[1] = (g.dst_h - 1) * g.sh + 1 - g.src_h - g.ph;
  return b;
}

// OK where the tensor maps can describe the pass; else why not.
absl::Status TmaApplies(const TmaSpatial& g) {
  const TmaBox b = TmaBoxOf(g);
  for (int i = 0; i < 2; ++i) {
    for (int64_t v : {b.lower[i], b.upper[i]}) {
      if (v < kTmaCornerMin || v > kTmaCornerMax) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pad: the im2col map's corners take ", kTmaCornerMin, " to ",
            kTmaCornerMax, ", the padding and size need ", v));
      }
    }
  }
  if (g.sh > kTmaMaxStride || g.sw > kTmaMaxStride) {
    return absl::FailedPreconditionError(
        absl::StrCat("stride: the im2col map strides at most ", kTmaMaxStride));
  }
  if ((g.fh - 1) * g.dh > kTmaMaxTapOffset ||
      (g.fw - 1) * g.dw > kTmaMaxTapOffset) {
    return absl::FailedPreconditionError(
        absl::StrCat("dilation: the im2col map's tap offsets take 0 to ",
                     kTmaMaxTapOffset, ", the filter and dilation need ",
                     std::max((g.fh - 1) * g.dh, (g.fw - 1) * g.dw)));
  }
  return absl::OkStatus();
}

// OK where the tensor maps can describe each stride-1 pass of `g` that
// has outputs (AddSteps launches no other).
absl::Status PassesTmaApply(const Geometry& g) {
  for (const Phase& f : PassesOf(g)) {
    if (f.dst_h == 0 || f.dst_w == 0) continue;
    RETURN_IF_ERROR(TmaApplies(SpatialOf(PassOf(g, f))));
  }
  return absl::OkStatus();
}

// The most dynamic shared memory a block takes on compute capability 9.0.
constexpr int64_t kMaxBlockSharedBytes = 227 << 10;

// Whether halo config `c` runs the pass of `g` (for `p`): F, or stride-1
// B, over channels-last tensors without a folded width, the channels a
// whole number of steps, at least CT_STAGES - 1 taps (a halo buffer is
// refilled CT_STAGES - 2 steps ahead, once the step two before is done:
// tc_halo_desc), the halo in shared memory.
bool HaloApplies(const ConvProblem& p, const Geometry& g, const PerfConfig& c) {
  return p.layout == Layout::kNHWC && g.phases.empty() && !g.fold.on &&
         g.sh == 1 && g.sw == 1 && g.cp % c[2] == 0 &&
         g.fh * g.fw >= std::max<int64_t>(2, c[5] - 1) &&
         SharedBytes(p, c, true) <= kMaxBlockSharedBytes;
}
// Whether halo config `c`, through the tensor maps, runs the pass of `g`:
// as HaloApplies (its barriers counted), each map's box at most kTmaMaxBox
// elements a dimension.
bool HaloTmaApplies(const ConvProblem& p, const Geometry& g,
                    const PerfConfig& c) {
  const HaloBox box = HaloBoxOf(p, c);
  return box.width <= kTmaMaxBox && box.height <= kTmaMaxBox &&
         c[1] <= kTmaMaxBox && HaloApplies(p, g, c);
}

// The blocks of `c` that run at once on a multiprocessor of a large GPU
// (228 KiB of shared memory with 1 KiB reserved a block, 64 Ki registers,
// taken as 128 a thread).
int64_t BlocksPerSm(const ConvProblem& p, const PerfConfig& c, bool wgmma) {
  return std::max<int64_t>(
      1, std::min(kSmSharedBytes / (SharedBytes(p, c, wgmma) + 1024),
                  kSmRegisters / (Threads(c) * 128)));
}

// W's splits of the positions for `tiles` blocks a split, at most `most`:
// of the counts that make at most two waves of `wave` blocks (or one split),
// the one whose blocks fill their last wave best, the fewest splits among
// those within 2% of it. A partly filled last wave leaves multiprocessors
// idle for a block's whole time; each split adds a slice of partial sums to
// write and add up, which the two-wave bound keeps from growing where one
// split nearly fills the GPU already.
int64_t WrwSplits(int64_t tiles, int64_t wave, int64_t most) {
  most = std::clamp<int64_t>(CeilDiv(2 * wave, tiles), 1, most);
  auto fill = [&](int64_t s) {
    const int64_t blocks = tiles * s;
    return static_cast<double>(blocks) /
           static_cast<double>(CeilDiv(blocks, wave) * wave);
  };
  double best = 0;
  for (int64_t s = 1; s <= most; ++s) best = std::max(best, fill(s));
  int64_t s = 1;
  while (fill(s) < best - 0.02) ++s;
  return s;
}

// W as conv_tc_wrw sees it, and the workspace: the partial sums at 0, a
// chunk's packed x at x_at and packed dy at dy_at (when packed).
struct WrwGeometry {
  int64_t groups, cg, kg, cp, kp;  // per group; cp, kp as read
  int64_t h, w, oh, ow, fh, fw;
  int64_t ph, pw, sh, sw, dh, dw;
  WidthFold fold;  // x packed by tc_pack_rows, as for F
  bool pack_x, pack_dy;
  // A tap's columns in the GEMM: cp, or through the tensor maps cp padded
  // to whole 64-channel boxes (their channels past cp are never stored).
  int64_t cq;
  int64_t cols;  // of a group's GEMM: taps * cq
  int64_t splits;
  int64_t x_at, dy_at;
  int64_t chunk;  // images per chunk; 0 when one image does not fit
  int64_t bytes;
};

TmaSpatial SpatialOf(const WrwGeometry& g) {
  return {g.w, g.h, g.ow, g.oh, g.pw, g.ph, g.sw, g.sh, g.fw, g.fh, g.dw, g.dh};
}

// OK where W's tiles can come through tensor maps (x as im2col columns of
// 64 channels, one tap a column, and dy in boxes of 64 channels); else why
// not.
absl::Status WrwTmaApplies(const WrwGeometry& g) {
  if (g.fold.on) {
    return absl::FailedPreconditionError(
        "fold: the folded first layer's x is not an image the im2col map "
        "reads");
  }
  return TmaApplies(SpatialOf(g));
}
// Whether the maps' 64-channel boxes pad W's columns: then a default keeps
// to the copy ring, and a find times the maps beside it.
bool WrwTmaPads(const WrwGeometry& g) { return g.cp % kWrwTmaChannels != 0; }

// The partial sums depend on the config (its tiles and how many of its
// blocks a multiprocessor runs: WrwSplits); `wgmma` picks the kernel.
WrwGeometry MakeWrwGeometry(const ConvProblem& p, const PerfConfig& config,
                            bool wgmma) {
  WrwGeometry g;
  g.groups = p.groups, g.cg = p.c_per_group(), g.kg = p.k_per_group();
  // W's channels are GEMM rows and columns, not its reduction: a tap's
  // columns need only whole 16-byte chunks, so channels-last tensors with
  // channels in eights are read in place, unpadded.
  const bool nhwc = p.layout == Layout::kNHWC;
  g.cp = nhwc && g.cg % 8 == 0 ? g.cg : Pad32(g.cg);
  g.kp = nhwc && g.kg % 8 == 0 ? g.kg : Pad32(g.kg);
  g.h = p.in[1], g.w = p.in[2], g.oh = p.out(1), g.ow = p.out(2);
  g.fh = p.filter[1], g.fw = p.filter[2];
  g.ph = p.pad[1], g.pw = p.pad[2], g.sh = p.stride[1], g.sw = p.stride[2];
  g.dh = p.dilation[1], g.dw = p.dilation[2];
  g.pack_x = !(nhwc && g.cp == g.cg);
  g.pack_dy = !(nhwc && g.kp == g.kg);
  g.fold = FoldWidth(p);
  if (g.fold.on) {
    g.cp = Pad32(g.cg * g.fw);
    g.w = g.ow;
    g.fw = 1, g.sw = 1, g.pw = 0, g.dw = 1;
    g.pack_x = true;
  }
  g.cq = IsTma(config) ? PaddedColumns(g.cp, kWrwTmaChannels) : g.cp;
  g.cols = g.fh * g.fw * g.cq;
  // At least kMinPositionsPerSplit positions a split, and the partial sums
  // within a quarter of the workspace budget.
  const int64_t slice = g.groups * g.kg * g.cols * kFloatBytes;
  g.splits = WrwSplits(
      CeilDiv(g.kg, config[0]) * CeilDiv(g.cols, config[1]) * g.groups,
      kWaveSms * BlocksPerSm(p, config, wgmma),
      std::clamp<int64_t>(
          std::min(p.n * g.oh * g.ow / kMinPositionsPerSplit,
                   kWorkspaceBudget / 4 / std::max<int64_t>(slice, 1)),
          1, kMaxSplits));
  const int64_t es = ElementBytes(p.type);
  g.x_at = AlignWorkspace(g.splits * slice);
  const int64_t x_image =
      g.pack_x ? g.h * g.w * g.groups * g.cp : 0;  // elements
  const int64_t dy_image = g.pack_dy ? g.oh * g.ow * g.groups * g.kp : 0;
  g.chunk = p.n;
  if (x_image + dy_image > 0) {
    // Leaves room for aligning the dy region.
    const int64_t room = kWorkspaceBudget - g.x_at - kWorkspaceAlign;
    g.chunk = std::min({p.n, room / ((x_image + dy_image) * es), kMaxGridY});
    for (int64_t image : {x_image, dy_image}) {
      if (image > 0) g.chunk = std::min(g.chunk, kMaxIndex32 / image);
    }
    g.chunk = std::max<int64_t>(g.chunk, 0);
  }
  g.dy_at = AlignWorkspace(g.x_at + g.chunk * x_image * es);
  g.bytes = g.dy_at + g.chunk * dy_image * es;
  return g;
}

// conv_tc's blocks for `n` images: row tiles by column tiles along x, a
// group's along y.
int64_t GroupBlocks(const Geometry& g, int64_t n, const PerfConfig& c) {
  if (IsHalo(c)) {
    return n * CeilDiv(g.dst_h, c[0] / c[7]) * CeilDiv(g.dst_w, c[7]) *
           CeilDiv(g.co, c[1]);
  }
  return CeilDiv(n * g.dst_h * g.dst_w, c[0]) * CeilDiv(g.co, c[1]);
}
int64_t Blocks(const Geometry& g, int64_t n, const PerfConfig& c) {
  return GroupBlocks(g, n, c) * g.groups;
}

// Appends tc_pack_act: images [n0, n0 + nb) of `src` (channels per group
// `c`, `hw` positions) into the workspace at `at`, channel-last with the
// channels of each group padded to `cp`.
void AddPackStep(const ConvProblem& p, int source, v1::BufferRole src,
                 int64_t at, int64_t n0, int64_t nb, int64_t c, int64_t cp,
                 int64_t hw, v1::ExecutionPlan* plan) {
  const int64_t row = p.groups * cp;
  // NHWC: a thread an element, or a run of 8 where the channels come in
  // whole runs (tc_pack_act; cp, a multiple of 32, keeps runs in a group).
  const int64_t per_thread = c % 8 == 0 ? 8 : 1;
  const std::array<int64_t, 3> grid =
      p.layout == Layout::kNHWC
          ? std::array<int64_t, 3>{CeilDiv(nb * hw * row,
                                           kPackBlock * per_thread),
                                   1, 1}
          : std::array<int64_t, 3>{CeilDiv(hw, 64), CeilDiv(row, 64), nb};
  v1::KernelStep* pack =
      AddGpuStep(plan, "tc_pack_act", source, grid, kPackBlock);
  AddBuffer(pack, src);
  AddBuffer(pack, v1::BUFFER_WORKSPACE, at);
  for (int64_t v : {n0, nb, p.groups, c, cp, hw}) pack->add_scalars(v);
}

// Appends tc_pack_rows: images [n0, n0 + nb) of x (`c` channels, `h` rows)
// into the workspace at `at`, the filter width folded into `cp` channels
// over `ow` output columns.
void AddPackRowsStep(const WidthFold& fold, int source, int64_t at, int64_t n0,
                     int64_t nb, int64_t c, int64_t h, int64_t ow, int64_t cp,
                     v1::ExecutionPlan* plan) {
  // Eight elements a thread at each of kPackRun output columns.
  v1::KernelStep* pack = AddGpuStep(
      plan, "tc_pack_rows", source,
      {CeilDiv(nb * h * CeilDiv(ow, kPackRun) * cp / 8, kPackBlock), 1, 1},
      kPackBlock);
  AddBuffer(pack, v1::BUFFER_X);
  AddBuffer(pack, v1::BUFFER_WORKSPACE, at);
  for (int64_t v :
       {n0, nb, c, h, fold.w, ow, fold.fs, fold.sw, fold.pw, fold.dw, cp}) {
    pack->add_scalars(v);
  }
}

// The first config in the list's order (largest tile first, but for the
// warpgroup and W lists' first) that gives `target` blocks, among those not
// mostly padding; else the one with the most blocks. `blocks` counts a
// config's.
using ConfigList = absl::Span<const std::array<int64_t, 6>>;

template <typename BlockCount>
PerfConfig LargestFilling(ConfigList configs, int64_t cp, int64_t rows,
                          int64_t cols, BlockCount blocks,
                          int64_t target = kTargetBlocks) {
  const std::array<int64_t, 6>* best = &configs.back();
  int64_t best_blocks = 0;
  for (const auto& c : configs) {
    if (cp % c[2] != 0 || (c[0] > 64 && c[0] >= 2 * rows) ||
        (c[1] > 64 && c[1] >= 2 * cols)) {
      continue;
    }
    const PerfConfig config(c.begin(), c.end());
    const int64_t b = blocks(config);
    if (b >= target) return config;
    if (b > best_blocks) best = &c, best_blocks = b;
  }
  return PerfConfig(best->begin(), best->end());
}

class GpuTensorCorePipelined final : public GpuSolver {
 public:
  // `wgmma`: the sm_90a variant, gpu_tensor_core_wgmma.
  explicit GpuTensorCorePipelined(bool wgmma) : wgmma_(wgmma) {}

  uint32_t id() const override {
    return wgmma_ ? kGpuTensorCoreWgmmaId : kGpuTensorCorePipelinedId;
  }
  absl::string_view name() const override {
    return wgmma_ ? "gpu_tensor_core_wgmma" : "gpu_tensor_core_pipelined";
  }
  v1::AlgorithmFamily family() const override { return v1::IMPLICIT_GEMM; }
  bool dynamic() const override { return true; }

  // The warpgroup MMA is sm_90a code: it runs on compute capability 9.0 only.
  bool SupportsDevice(const DeviceInfo& device) const override {
    if (!wgmma_) return CudaSmAtLeast(device, kMinSm);
    return device.backend == v1::CUDA &&
           (device.arch == "sm_90" || device.arch == "sm_90a");
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.type == DataType::kFp32) {
      return absl::FailedPreconditionError(absl::StrCat(
          "type: ", name(), " needs fp16 or bf16 data (got FP32)"));
    }
    if (p.is_3d()) {
      return absl::FailedPreconditionError(
          absl::StrCat("spatial_dims: ", name(), " is 2-D only"));
    }
    if (StridedBackwardData(p)) {
      // A pass for each phase of the stride: each must have a tap, and
      // dilated taps would spread over the phases.
      if (p.filter[1] < p.stride[1] || p.filter[2] < p.stride[2]) {
        return absl::FailedPreconditionError(
            absl::StrCat("stride: ", name(),
                         " needs a filter at least as large as the "
                         "stride for backward data, got ",
                         p.filter[1], "x", p.filter[2], " with stride ",
                         p.stride[1], "x", p.stride[2]));
      }
      if (p.dilation[1] != 1 || p.dilation[2] != 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("dilation: ", name(),
                         " needs dilation 1 for strided backward "
                         "data, got ",
                         p.dilation[1], "x", p.dilation[2]));
      }
      if (p.groups * p.filter[1] * p.filter[2] > kMaxGridY) {
        return absl::FailedPreconditionError(
            absl::StrCat("groups: ", name(),
                         " turns a strided backward filter on a "
                         "16-bit grid axis: ",
                         p.groups, " groups of ", p.filter[1], "x", p.filter[2],
                         " taps are too many"));
      }
    }
    int64_t chunk,
        largest;  // images per chunk; the most elements a kernel indexes
    if (p.direction == Direction::kBackwardWeights) {
      // Every config's partial sums must leave room for an image.
      const WrwGeometry g = WrwShape(p);
      chunk = g.chunk;
      int64_t cols = g.cols;
      for (const PerfConfig& c : ConfigSpace(p)) {
        const WrwGeometry config_g = MakeWrwGeometry(p, c, wgmma_);
        chunk = std::min(chunk, config_g.chunk);
        cols = std::max(cols, config_g.cols);
      }
      largest = std::max({g.pack_x ? 0 : p.x_elements(),
                          g.pack_dy ? 0 : p.y_elements(), g.kg * cols});
    } else {
      const Geometry g = MakeGeometry(p, wgmma_);
      // conv_tc keeps a bit for each filter row and column a copy reads
      // (a folded pass reads one column).
      if (g.fh > kMaxFilterSide || g.fw > kMaxFilterSide) {
        return absl::FailedPreconditionError(absl::StrCat(
            "filter: ", name(), " takes at most ", kMaxFilterSide,
            " filter rows and columns, got ", p.filter[1], "x", p.filter[2]));
      }
      chunk = g.chunk;
      const bool fwd = p.direction == Direction::kForward;
      largest = std::max(
          {fwd ? p.y_elements() : p.x_elements(),
           g.pack_src ? 0 : (fwd ? p.x_elements() : p.y_elements()),
           g.groups * g.co * g.fh * g.fw * g.cp,
           CeilDiv(chunk * g.dst_h * g.dst_w, 64) * CeilDiv(g.co, 64)});
    }
    if (chunk < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workspace: ", name(), " needs more than ", kWorkspaceBudget >> 20,
          " MiB of workspace for a single image"));
    }
    if (largest > kMaxIndex32 || p.groups > kMaxGridY) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(),
          " indexes a chunk in 32 bits and launches groups on a 16-bit grid "
          "axis: ",
          largest, " elements and ", p.groups, " groups are too many"));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return ConfigWorkspaceBytes(p, DefaultConfig(p));
  }
  // W's partial sums: a slice for each split, which the config's tiles
  // choose.
  bool workspace_depends_on_config() const override { return true; }
  int64_t ConfigWorkspaceBytes(const ConvProblem& p,
                               const PerfConfig& config) const override {
    return p.direction == Direction::kBackwardWeights
               ? MakeWrwGeometry(p, config, wgmma_).bytes
               : MakeGeometry(p, wgmma_).bytes;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    if (p.direction == Direction::kBackwardWeights) {
      for (const auto& c : WrwConfigs())
        space.push_back(PerfConfig(c.begin(), c.end()));
      // W's tiles through the tensor memory accelerator: each warpgroup
      // config again with a seventh entry 1.
      if (wgmma_ && WrwTmaApplies(WrwShape(p)).ok()) {
        for (const auto& c : WrwConfigs()) {
          space.push_back(PerfConfig(c.begin(), c.end()));
          space.back().push_back(1);
        }
        space.push_back(Mapped(kWrwWideTmaConfig));
      }
      if (wgmma_) {
        for (const auto& c : kWrwWideRowConfigs)
          space.push_back(PerfConfig(c.begin(), c.end()));
      }
      return space;
    }
    const Geometry g = MakeGeometry(p, wgmma_);
    // `cluster`: 0 for the copy ring, else the seventh entry (1 through
    // the tensor maps, 2 in pairs, which need an even count of column tiles).
    auto add = [&](ConfigList configs, int64_t cluster) {
      for (const auto& c : configs) {
        if (g.cp % c[2] != 0) continue;
        if (cluster == 2 && CeilDiv(g.co, c[1]) % 2 != 0) continue;
        space.push_back(PerfConfig(c.begin(), c.end()));
        if (cluster > 0) space.back().push_back(cluster);
      }
    };
    if (wgmma_) {
      add(kWgmmaConfigs, 0);
      if (PassesTmaApply(g).ok()) {
        add(kWgmmaConfigs, 1);
        add(kTmaOnlyConfigs, 1);
        add(kNarrowConfigs, 1);
        add(kSwapConfigs, 1);
        add(kClusterConfigs, 2);
      }
      // Each halo tile on the copy ring, and through the tensor maps
      // (the seventh entry 1) where its halo fits a map's box.
      for (const auto& c : kHaloConfigs) {
        PerfConfig config(c.begin(), c.end());
        if (!HaloApplies(p, g, config)) continue;
        space.push_back(config);
        config[6] = 1;
        if (HaloTmaApplies(p, g, config)) space.push_back(config);
      }
    } else {
      add(kConfigs, 0);
    }
    return space;
  }

  // The default, and where it goes through the tensor memory accelerator
  // the tiles that were fastest on one or another of ResNet-50's and
  // VGG-16's 3x3 layers (kTmaFindConfigs, kTmaWrwFindConfig).
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    std::vector<PerfConfig> configs = {DefaultConfig(p)};
    const std::vector<PerfConfig> space = ConfigSpace(p);
    // Adds `config` where it is in the space and not offered yet.
    const auto offer = [&](PerfConfig config) {
      if (std::find(configs.begin(), configs.end(), config) != configs.end() ||
          std::find(space.begin(), space.end(), config) == space.end()) {
        return false;
      }
      configs.push_back(std::move(config));
      return true;
    };
    if (p.direction == Direction::kBackwardWeights) {
      const PerfConfig wide(kTmaWrwFindConfig.begin(), kTmaWrwFindConfig.end());
      if (std::find(space.begin(), space.end(), wide) != space.end()) {
        // Where the maps pad the columns, the default's tile through them
        // too.
        if (!IsTma(configs[0])) {
          PerfConfig mapped = configs[0];
          mapped.push_back(1);
          offer(std::move(mapped));
        }
        offer(wide);
        // The 128 x 256 tile where it pads at most an eighth more columns
        // than 128 x 128, and its 128-row tiles pad no more output
        // channels than 64-row ones would.
        const WrwGeometry by_maps = MakeWrwGeometry(p, wide, wgmma_);
        if (8 * PaddedColumns(by_maps.cols, 256) <=
                9 * PaddedColumns(by_maps.cols, 128) &&
            PaddedColumns(by_maps.kg, 128) == PaddedColumns(by_maps.kg, 64)) {
          offer(Mapped(kWrwWideTmaConfig));
        }
      }
      // Where 64-row tiles pad fewer output channels than the default's
      // (192, 320), the 64 x 128 ones on the copy ring.
      const int64_t kg = WrwShape(p).kg;
      if (PaddedColumns(kg, 64) < PaddedColumns(kg, configs[0][0])) {
        for (const auto& c : kWrwNarrowRowConfigs) {
          offer(PerfConfig(c.begin(), c.end()));
        }
      }
      if (PaddedColumns(kg, 192) < PaddedColumns(kg, configs[0][0])) {
        for (const auto& c : kWrwWideRowConfigs) {
          offer(PerfConfig(c.begin(), c.end()));
        }
      }
      return configs;
    }
    // The halo tiles that apply and pad the fewest columns among them; the
    // 32-column ones only where the 64-column ones pad more; through the
    // tensor maps where they can be (on the H100 the maps ran the 64- and
    // 32-column halo tiles 14-36% faster than the copy ring, and the
    // fastest tile of each layer timed: VGG-16's c64 224x224 B, c128
    // 112x112 F and Inception's c32 147x147 and 149x149 B).
    const int64_t columns = MakeGeometry(p, wgmma_).co;
    int64_t halo_least = std::numeric_limits<int64_t>::max();
    bool halo_mapped = false;
    for (const PerfConfig& c : space) {
      if (!IsHalo(c)) continue;
      halo_least = std::min(halo_least, PaddedColumns(columns, c[1]));
      halo_mapped = halo_mapped || IsTma(c);
    }
    for (const PerfConfig& c : space) {
      if (IsHalo(c) && IsTma(c) == halo_mapped &&
          PaddedColumns(columns, c[1]) == halo_least &&
          (c[1] != 32 || PaddedColumns(columns, 64) > halo_least)) {
        offer(c);
      }
    }
    if (!IsTma(configs[0])) return configs;
    int64_t least = PaddedColumns(columns, configs[0][1]);
    // The fewest padded columns of the configs offered so far.
    const auto offer_tile = [&](PerfConfig config) {
      const int64_t padded = PaddedColumns(columns, config[1]);
      if (offer(std::move(config))) least = std::min(least, padded);
    };
    for (const auto& c : kTmaFindConfigs) {
      offer_tile(PerfConfig(c.begin(), c.end()));
    }
    for (const auto& c : kNarrowConfigs) {
      if (PaddedColumns(columns, c[1]) < least) offer_tile(Mapped(c));
    }
    const int64_t swapped = PaddedColumns(columns, 64);
    for (const auto& c : kSwapConfigs) {
      if (swapped <= 128 && c[1] <= swapped) offer_tile(Mapped(c));
    }
    return configs;
  }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    if (p.direction == Direction::kBackwardWeights) {
      const WrwGeometry g = WrwShape(p);
      auto blocks = [&](const PerfConfig& c) {
        return CeilDiv(g.kg, c[0]) * CeilDiv(g.cols, c[1]) * g.groups *
               MakeWrwGeometry(p, c, wgmma_).splits;
      };
      // W's BK counts positions, which any channel count allows (cp 0).
      // The warpgroup kernel's splits fill whole waves, so any count of
      // blocks does (target 1).
      PerfConfig c = LargestFilling(WrwConfigs(), 0, g.kg, g.cols, blocks,
                                    wgmma_ ? 1 : kTargetBlocks);
      // Through the tensor maps where they apply: on the H200 each of
      // ResNet-50's W 3x3 layers took 31-50% less time in its fastest
      // tensor-map config than in its fastest copy-ring one.
      if (wgmma_ && WrwTmaApplies(g).ok() && !WrwTmaPads(g)) c.push_back(1);
      return c;
    }
    const Geometry g = MakeGeometry(p, wgmma_);
    auto blocks = [&](const PerfConfig& c) { return Blocks(g, g.chunk, c); };
    const int64_t rows = g.chunk * g.dst_h * g.dst_w;
    if (!wgmma_) return LargestFilling(kConfigs, g.cp, rows, g.co, blocks);
    PerfConfig c = LargestFilling(kWgmmaConfigs, g.cp, rows, g.co, blocks,
                                  kWgmmaTargetBlocks);
    // The same tile through the tensor memory accelerator where it applies:
    // on the H200 it took 15-30% less time than the copy ring on each of
    // ResNet-50's F and B 3x3 layers.
    if (!PassesTmaApply(g).ok()) return c;
    c.push_back(1);
    // A narrow tile where the columns are 32, or 65 to 96: on the H100 the
    // 128-row one took 17-37% less time than the wider pick on Inception
    // v3's B 3x3 layers into 32, 80 and 96 channels.
    const int64_t bn = g.co <= 32 ? 32 : g.co > 64 && g.co <= 96 ? 96 : 0;
    for (const auto& n : kNarrowConfigs) {
      if (n[0] == 128 && n[1] == bn && g.cp % n[2] == 0) return Mapped(n);
    }
    return c;
  }

  // The products of the padded channels; relative to the fp32 peak, tensor
  // cores run them several times faster.
  // A folded pass reduces over CP per filter row, not per tap.
  double EstimatedFlops(const ConvProblem& p) const override {
    bool folded;
    int64_t padded;
    if (p.direction == Direction::kBackwardWeights) {
      const WrwGeometry g = WrwShape(p);
      folded = g.fold.on, padded = g.cp;
    } else {
      const Geometry g = MakeGeometry(p, wgmma_);
      folded = g.fold.on, padded = g.cp;
    }
    const int64_t reduced = folded ? p.c_per_group() * p.filter[2]
                            : p.direction == Direction::kBackwardData
                                ? p.k_per_group()
                                : p.c_per_group();
    return Solver::EstimatedFlops(p) * static_cast<double>(padded) /
           static_cast<double>(reduced);
  }
  double Efficiency(const ConvProblem& p) const override {
    return wgmma_ ? 5.0 : 3.0;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    v1::ExecutionPlan plan = NewPlan(p, config);
    std::vector<std::string> options = ProblemOptions(p);
    const char* names[] = {"BM", "BN", "BK", "WM", "WN", "CT_STAGES"};
    for (int i = 0; i < 6; ++i)
      options.push_back(absl::StrCat("-D", names[i], "=", config[i]));
    if (wgmma_) options.push_back("-DCT_WGMMA=1");
    if (IsTma(config)) options.push_back("-DCT_TMA=1");
    if (ClusterOf(config) > 1)
      options.push_back(absl::StrCat("-DCT_CLUSTER=", ClusterOf(config)));
    if (StridedBackwardData(p)) options.push_back("-DCT_PHASE=1");
    if (IsHalo(config)) {
      options.push_back("-DCT_HALO=1");
      options.push_back(absl::StrCat("-DCT_HALO_TW=", config[7]));
      options.push_back(absl::StrCat("-DCT_HALO_EH=", HaloReach(p, 1)));
      options.push_back(absl::StrCat("-DCT_HALO_EW=", HaloReach(p, 2)));
    }
    const int source = AddSource(&plan, "conv_tc.cu", options);
    if (wgmma_) plan.mutable_sources(source)->set_arch_suffix("a");
    if (p.direction == Direction::kBackwardWeights) {
      RETURN_IF_ERROR(AddWrwSteps(p, config, source, &plan));
    } else {
      AddSteps(p, config, source, &plan);
    }
    return plan;
  }

 private:
  ConfigList WrwConfigs() const {
    return wgmma_ ? ConfigList(kWgmmaWrwConfigs) : ConfigList(kWrwConfigs);
  }
  // W's geometry in what no config changes (all but the splits, the
  // workspace and the images a chunk).
  WrwGeometry WrwShape(const ConvProblem& p) const {
    const auto& first = WrwConfigs().front();
    return MakeWrwGeometry(p, PerfConfig(first.begin(), first.end()), wgmma_);
  }

  void AddSteps(const ConvProblem& p, const PerfConfig& config, int source,
                v1::ExecutionPlan* plan) const {
    const Geometry g = MakeGeometry(p, wgmma_);
    const bool fwd = p.direction == Direction::kForward;
    const int64_t es = ElementBytes(p.type);
    const std::vector<Phase> passes = PassesOf(g);
    if (g.fold.on) {
      const int64_t count = g.co * g.fh * g.cp;
      v1::KernelStep* step =
          AddGpuStep(plan, "tc_pack_filter_rows", source,
                     {CeilDiv(count, kPackBlock), 1, 1}, kPackBlock);
      AddBuffer(step, v1::BUFFER_W);
      AddBuffer(step, v1::BUFFER_WORKSPACE);
      for (int64_t v : {g.co, g.ci, g.fh, g.fold.fs, g.cp})
        step->add_scalars(v);
    } else if (g.pack_filter && (fwd || !TurnsInTiles(g))) {
      const int64_t count = g.groups * g.co * g.fh * g.fw * g.cp;
      v1::KernelStep* step =
          AddGpuStep(plan, "tc_pack_filter", source,
                     {CeilDiv(count, kPackBlock), 1, 1}, kPackBlock);
      AddBuffer(step, v1::BUFFER_W);
      AddBuffer(step, v1::BUFFER_WORKSPACE);
      for (int64_t v : {g.groups, p.k_per_group(), p.c_per_group(), g.fh, g.fw,
                        int64_t{!fwd}, g.cp}) {
        step->add_scalars(v);
      }
    } else if (g.pack_filter) {
      // The backward filter in tiles, each pass's taps at its offset.
      for (const Phase& f : passes) {
        v1::KernelStep* step = AddGpuStep(
            plan, "tc_pack_filter_t", source,
            {g.cp / 32, CeilDiv(g.co, 32), g.groups * f.fh * f.fw}, kPackBlock);
        AddBuffer(step, v1::BUFFER_W);
        AddBuffer(step, v1::BUFFER_WORKSPACE, f.filter_at * es);
        for (int64_t v : {g.groups, p.k_per_group(), p.c_per_group(), g.fh,
                          g.fw, int64_t{1}, g.cp, f.fh, f.fw, f.qh, f.qw,
                          p.stride[1], p.stride[2]}) {
          step->add_scalars(v);
        }
      }
    }
    const v1::BufferRole src = fwd ? v1::BUFFER_X : v1::BUFFER_Y;
    const v1::BufferRole dst = fwd ? v1::BUFFER_Y : v1::BUFFER_X;
    const int64_t src_hw = g.src_h * g.src_w, dst_hw = g.dst_h * g.dst_w;
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      if (g.fold.on) {
        AddPackRowsStep(g.fold, source, g.src_at, n0, nb, g.ci, g.src_h,
                        g.src_w, g.cp, plan);
      } else if (g.pack_src) {
        AddPackStep(p, source, src, g.src_at, n0, nb, g.ci, g.cp, src_hw, plan);
      }
      for (const Phase& f : passes) {
        const Geometry pass = PassOf(g, f);
        if (pass.dst_h == 0 || pass.dst_w == 0) continue;
        v1::KernelStep* step =
            AddGpuStep(plan, "conv_tc", source,
                       {GroupBlocks(pass, nb, config), g.groups, 1},
                       static_cast<uint32_t>(Threads(config)));
        step->set_shared_bytes(
            static_cast<uint32_t>(SharedBytes(p, config, wgmma_)));
        if (g.pack_src) {
          AddBuffer(step, v1::BUFFER_WORKSPACE, g.src_at);
        } else {
          AddBuffer(step, src, n0 * src_hw * g.groups * g.ci * es);
        }
        if (g.pack_filter) {
          AddBuffer(step, v1::BUFFER_WORKSPACE, f.filter_at * es);
        } else {
          AddBuffer(step, v1::BUFFER_W);
        }
        AddBuffer(step, dst, n0 * dst_hw * g.groups * g.co * es);
        for (int64_t v : {nb, pass.src_h, pass.src_w, g.groups, g.cp, g.co,
                          pass.dst_h, pass.dst_w, pass.fh, pass.fw, pass.ph,
                          pass.pw, pass.sh, pass.sw, pass.dh, pass.dw}) {
          step->add_scalars(v);
        }
        if (!g.phases.empty()) {
          for (int64_t v :
               {g.dst_h, g.dst_w, p.stride[1], p.stride[2], f.off_h, f.off_w})
            step->add_scalars(v);
        }
        if (IsTma(config)) AddTensorMaps(p, pass, nb, config, es, step);
      }
    }
  }

  // An im2col map over buffer `buffer`, a source [nb][H][W][row] of `es`-byte
  // elements: columns of `pixels` pixels of `channels` channels, stepping by
  // the stride over the positions, in the swizzle of `channels` * `es`-byte
  // rows; what lies outside the source arrives as zeros.
  static void AddIm2colMap(int buffer, int64_t es, int64_t row, int64_t nb,
                           const TmaSpatial& g, int64_t channels,
                           int64_t pixels, v1::KernelStep* step) {
    v1::TensorMap* src = step->add_tensor_maps();
    src->set_mode(v1::TensorMap::IM2COL);
    src->set_buffer(buffer);
    src->set_element_bytes(static_cast<uint32_t>(es));
    for (int64_t d : {row, g.src_w, g.src_h, nb}) src->add_dims(d);
    for (int64_t s :
         {row * es, g.src_w * row * es, g.src_h * g.src_w * row * es})
      src->add_strides(s);
    for (int64_t s : {int64_t{1}, g.sw, g.sh, int64_t{1}})
      src->add_element_strides(static_cast<uint32_t>(s));
    const TmaBox box = TmaBoxOf(g);
    for (int i = 0; i < 2; ++i) {
      src->add_lower_corner(static_cast<int32_t>(box.lower[i]));
      src->add_upper_corner(static_cast<int32_t>(box.upper[i]));
    }
    src->set_channels_per_pixel(static_cast<uint32_t>(channels));
    src->set_pixels_per_column(static_cast<uint32_t>(pixels));
    src->set_swizzle_bytes(static_cast<uint32_t>(channels * es));
  }

  // A tiled map over buffer `buffer`, a dense tensor of `es`-byte elements
  // with `dims` (innermost first): boxes of `box`, in the swizzle of the
  // box's `box[0]` * `es`-byte rows; what lies outside arrives as zeros.
  static void AddTiledMap(int buffer, int64_t es, std::array<int64_t, 4> dims,
                          std::array<int64_t, 4> box, v1::KernelStep* step) {
    v1::TensorMap* map = step->add_tensor_maps();
    map->set_mode(v1::TensorMap::TILED);
    map->set_buffer(buffer);
    map->set_element_bytes(static_cast<uint32_t>(es));
    int64_t stride = es;
    for (int i = 0; i < 4; ++i) {
      map->add_dims(dims[i]);
      if (i > 0) map->add_strides(stride);
      stride *= dims[i];
      map->add_box(static_cast<uint32_t>(box[i]));
      map->add_element_strides(1);
    }
    map->set_swizzle_bytes(static_cast<uint32_t>(box[0] * es));
  }

  // conv_tc's tm_src, over buffer 0: im2col columns of BM pixels (BM / 2
  // in a cluster of two, each block copying half) of BK
  // channels from src [nb][H][W][G * CP], stepping by the stride; and
  // tm_filt, over buffer 1: boxes of BN filter rows of BK channels from
  // filt [G][KO][R * S][CP]. Both in the tile's swizzle (BK * 2 bytes a
  // row); what lies outside either tensor arrives as zeros.
  // A halo config's tm_src is a tiled map instead: boxes of the halo's
  // rows of pixels of BK channels.
  static void AddTensorMaps(const ConvProblem& p, const Geometry& g, int64_t nb,
                            const PerfConfig& config, int64_t es,
                            v1::KernelStep* step) {
    const int64_t row = g.groups * g.cp, bk = config[2];
    if (IsHalo(config)) {
      const HaloBox box = HaloBoxOf(p, config);
      AddTiledMap(0, es, {row, g.src_w, g.src_h, nb},
                  {bk, box.width, box.height, 1}, step);
    } else {
      AddIm2colMap(0, es, row, nb, SpatialOf(g), bk,
                   config[0] / ClusterOf(config), step);
    }
    AddTiledMap(1, es, {g.cp, g.fh * g.fw, g.co, g.groups},
                {bk, 1, config[1], 1}, step);
  }

  // conv_tc_wrw's tm_x, over buffer 0: im2col columns of BK positions'
  // pixels of 64 channels from x [nb][H][W][G * CP]; and tm_dy, over buffer
  // 1: boxes of 64 channels by BK positions from dy [nb * OH * OW][G * KP].
  // Both in the 128-byte swizzle of W's 64-column atoms.
  static void AddWrwTensorMaps(const WrwGeometry& g, int64_t nb,
                               const PerfConfig& config, int64_t es,
                               v1::KernelStep* step) {
    AddIm2colMap(0, es, g.groups * g.cp, nb, SpatialOf(g), 64, config[2], step);
    AddTiledMap(1, es, {g.groups * g.kp, nb * g.oh * g.ow, 1, 1},
                {64, config[2], 1, 1}, step);
  }

  absl::Status AddWrwSteps(const ConvProblem& p, const PerfConfig& config,
                           int source, v1::ExecutionPlan* plan) const {
    const WrwGeometry g = MakeWrwGeometry(p, config, wgmma_);
    if (g.chunk < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workspace: ", name(), " config ", PerfConfigString(config),
          " leaves no room for an image in ", kWorkspaceBudget >> 20, " MiB"));
    }
    const int64_t es = ElementBytes(p.type);
    const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      if (g.fold.on) {
        AddPackRowsStep(g.fold, source, g.x_at, n0, nb, g.cg, g.h, g.w, g.cp,
                        plan);
      } else if (g.pack_x) {
        AddPackStep(p, source, v1::BUFFER_X, g.x_at, n0, nb, g.cg, g.cp, hw,
                    plan);
      }
      if (g.pack_dy) {
        AddPackStep(p, source, v1::BUFFER_Y, g.dy_at, n0, nb, g.kg, g.kp, ohw,
                    plan);
      }
      v1::KernelStep* step =
          AddGpuStep(plan, "conv_tc_wrw", source,
                     {CeilDiv(g.kg, config[0]) * CeilDiv(g.cols, config[1]),
                      g.groups, g.splits},
                     static_cast<uint32_t>(Threads(config)));
      step->set_shared_bytes(
          static_cast<uint32_t>(SharedBytes(p, config, wgmma_)));
      if (g.pack_x) {
        AddBuffer(step, v1::BUFFER_WORKSPACE, g.x_at);
      } else {
        AddBuffer(step, v1::BUFFER_X, n0 * hw * g.groups * g.cg * es);
      }
      if (g.pack_dy) {
        AddBuffer(step, v1::BUFFER_WORKSPACE, g.dy_at);
      } else {
        AddBuffer(step, v1::BUFFER_Y, n0 * ohw * g.groups * g.kg * es);
      }
      AddBuffer(step, v1::BUFFER_WORKSPACE);
      for (int64_t v :
           {nb, g.h, g.w, g.groups, g.cp, g.kg, g.kp, g.oh, g.ow, g.fh, g.fw,
            g.ph, g.pw, g.sh, g.sw, g.dh, g.dw, g.splits, int64_t{n0 > 0}}) {
        step->add_scalars(v);
      }
      if (IsTma(config)) AddWrwTensorMaps(g, nb, config, es, step);
    }
    // tc_wrw_reduce takes 32 quads of channels a block of 256 threads.
    const int64_t blocks =
        g.fold.on ? CeilDiv(p.w_elements(), kPackBlock)
                  : CeilDiv(g.groups * g.kg * g.fh * g.fw * CeilDiv(g.cg, 4),
                            int64_t{32});
    v1::KernelStep* reduce =
        AddGpuStep(plan, g.fold.on ? "tc_wrw_reduce_rows" : "tc_wrw_reduce",
                   source, {blocks, 1, 1}, kPackBlock);
    AddBuffer(reduce, v1::BUFFER_WORKSPACE);
    AddBuffer(reduce, v1::BUFFER_W);
    if (g.fold.on) {
      for (int64_t v : {g.kg, g.cg, g.cp, g.fh, g.fold.fs, g.splits})
        reduce->add_scalars(v);
    } else {
      for (int64_t v : {g.groups, g.kg, g.cg, g.cq, g.fh, g.fw, g.splits})
        reduce->add_scalars(v);
    }
    return absl::OkStatus();
  }

  const bool wgmma_;
};

}  // namespace

std::unique_ptr<Solver> NewGpuTensorCorePipelinedSolver() {
  return std::make_unique<GpuTensorCorePipelined>(false);
}

std::unique_ptr<Solver> NewGpuTensorCoreWgmmaSolver() {
  return std::make_unique<GpuTensorCorePipelined>(true);
}

}  // namespace convtune
