// gpu_tensor_core_pipelined: 2-D forward and backward data as a tensor-core
// implicit GEMM over channel-last operands (conv_tc.cu), fp16 and bf16 on
// NVIDIA sm_80 and newer. Operand tiles reach shared memory through a ring of
// cp.async stages and the warps read them with ldmatrix, so loads overlap the
// products; gpu_tensor_core_igemm gathers element by element instead.
// Plan: the filter packed once into the workspace as [G][KO][R][S][CP]
// (turned 180 degrees with k and c swapped for backward data), then per chunk
// of images the source (x, or dy) packed channel-last with the channels of a
// group padded to a multiple of 32, and conv_tc writing y or dx in place.
// NHWC tensors whose channels per group are already a multiple of 32 are
// read where they are; so is the forward filter then.
// A config is {BM, BN, BK, WM, WN, stages}; BK 64 where the padded channels
// allow it.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

constexpr int kMinSm = 80;
// Channels per group are padded to a multiple of conv_tc's shorter step.
constexpr int64_t kChannelBlock = 32;
constexpr int64_t kWorkspaceBudget = int64_t{512} << 20;
constexpr int64_t kMaxIndex32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kPackBlock = 256;
// The blocks a default config aims for: two waves on a large GPU.
constexpr int64_t kTargetBlocks = 264;

// {BM, BN, BK, WM, WN, stages}, largest tile first.
constexpr std::array<int64_t, 6> kConfigs[] = {
    {256, 128, 64, 4, 2, 3}, {256, 128, 32, 4, 2, 3}, {128, 256, 64, 2, 4, 3},
    {128, 256, 32, 2, 4, 3}, {128, 128, 64, 2, 2, 3}, {128, 128, 32, 2, 2, 4},
    {128, 64, 32, 2, 2, 4},  {64, 128, 32, 2, 2, 4},  {64, 64, 32, 2, 2, 4}};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The pass as conv_tc sees it, and the workspace: the packed filter at 0
// (when packed), a chunk's packed source at src_at (when packed).
struct Geometry {
  int64_t groups, ci, co, cp;  // per group: source, destination, padded source channels
  int64_t src_h, src_w, dst_h, dst_w;
  int64_t fh, fw, ph, pw, sh, sw, dh, dw;
  bool pack_src, pack_filter;
  int64_t src_at;
  int64_t chunk;  // images per chunk; 0 when one image does not fit
  int64_t bytes;
};

Geometry MakeGeometry(const ConvProblem& p) {
  const bool bwd = p.direction == Direction::kBackwardData;
  Geometry g;
  g.groups = p.groups;
  g.ci = bwd ? p.k_per_group() : p.c_per_group();
  g.co = bwd ? p.c_per_group() : p.k_per_group();
  g.cp = CeilDiv(g.ci, kChannelBlock) * kChannelBlock;
  g.src_h = bwd ? p.out(1) : p.in[1];
  g.src_w = bwd ? p.out(2) : p.in[2];
  g.dst_h = bwd ? p.in[1] : p.out(1);
  g.dst_w = bwd ? p.in[2] : p.out(2);
  g.fh = p.filter[1], g.fw = p.filter[2];
  g.dh = p.dilation[1], g.dw = p.dilation[2];
  // Backward data (stride 1) is the forward pass of dy with the filter turned.
  g.ph = bwd ? (g.fh - 1) * g.dh - p.pad[1] : p.pad[1];
  g.pw = bwd ? (g.fw - 1) * g.dw - p.pad[2] : p.pad[2];
  g.sh = bwd ? 1 : p.stride[1];
  g.sw = bwd ? 1 : p.stride[2];
  const bool nhwc = p.layout == Layout::kNHWC;
  g.pack_src = !(nhwc && g.cp == g.ci);
  g.pack_filter = bwd || g.pack_src;
  const int64_t es = ElementBytes(p.type);
  const int64_t filter_bytes = g.pack_filter ? g.groups * g.co * g.fh * g.fw * g.cp * es : 0;
  g.src_at = AlignWorkspace(filter_bytes);
  const int64_t image = g.src_h * g.src_w * g.groups * g.cp;  // elements
  g.chunk = p.n;
  if (g.pack_src) {
    // NCHW packing launches a chunk's images on a 16-bit grid axis.
    g.chunk = std::min(
        {p.n, (kWorkspaceBudget - g.src_at) / (image * es), kMaxIndex32 / image, kMaxGridY});
  }
  g.chunk = std::max<int64_t>(g.chunk, 0);
  g.bytes = g.pack_src ? g.src_at + g.chunk * image * es : filter_bytes;
  return g;
}

int64_t Threads(const PerfConfig& c) { return c[3] * c[4] * 32; }

int64_t SharedBytes(const ConvProblem& p, const PerfConfig& c) {
  const int64_t ring = c[5] * (c[0] + c[1]) * c[2] * 2;
  const int64_t tile = p.layout == Layout::kNHWC ? c[0] * (c[1] + 8) * 2 : c[1] * (c[0] + 8) * 2;
  return std::max(ring, tile);
}

int64_t Blocks(const Geometry& g, int64_t n, const PerfConfig& c) {
  return CeilDiv(n * g.dst_h * g.dst_w, c[0]) * CeilDiv(g.co, c[1]) * g.groups;
}

class GpuTensorCorePipelined final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuTensorCorePipelinedId; }
  absl::string_view name() const override { return "gpu_tensor_core_pipelined"; }
  AlgorithmFamily family() const override { return AlgorithmFamily::kImplicitGemm; }
  bool dynamic() const override { return true; }

  bool SupportsDevice(const DeviceInfo& device) const override {
    if (device.backend != "cuda" || !absl::StartsWith(device.arch, "sm_")) return false;
    return std::atoi(device.arch.c_str() + 3) >= kMinSm;
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.type == DataType::kFp32) {
      return absl::FailedPreconditionError(
          absl::StrCat("type: ", name(), " needs fp16 or bf16 data (got FP32)"));
    }
    if (p.is_3d()) {
      return absl::FailedPreconditionError(absl::StrCat("spatial_dims: ", name(), " is 2-D only"));
    }
    if (p.direction == Direction::kBackwardWeights) {
      return absl::FailedPreconditionError(
          absl::StrCat("direction: ", name(), " runs forward and backward data only"));
    }
    if (p.direction == Direction::kBackwardData && (p.stride[1] != 1 || p.stride[2] != 1)) {
      return absl::FailedPreconditionError(absl::StrCat("stride: ", name(),
                                                        " needs stride 1 for backward data, got ",
                                                        p.stride[1], "x", p.stride[2]));
    }
    const Geometry g = MakeGeometry(p);
    if (g.chunk < 1) {
      return absl::FailedPreconditionError(absl::StrCat("workspace: ", name(), " needs more than ",
                                                        kWorkspaceBudget >> 20,
                                                        " MiB of workspace for a single image"));
    }
    const int64_t dst = p.direction == Direction::kForward ? p.y_elements() : p.x_elements();
    const int64_t src =
        g.pack_src ? 0 : (p.direction == Direction::kForward ? p.x_elements() : p.y_elements());
    const int64_t filter = g.groups * g.co * g.fh * g.fw * g.cp;
    if (std::max({dst, src, filter}) > kMaxIndex32 || g.groups > kMaxGridY ||
        Blocks(g, g.chunk, {64, 64}) > kMaxIndex32) {
      return absl::FailedPreconditionError(absl::StrCat(
          name(),
          " indexes a chunk in 32 bits and launches groups on a 16-bit "
          "grid axis: ",
          std::max({dst, src, filter}), " elements and ", g.groups, " groups are too many"));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override { return MakeGeometry(p).bytes; }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    const int64_t cp = MakeGeometry(p).cp;
    std::vector<PerfConfig> space;
    for (const auto& c : kConfigs) {
      if (cp % c[2] == 0) space.push_back(PerfConfig(c.begin(), c.end()));
    }
    return space;
  }

  // The largest tile that still gives kTargetBlocks, among those not mostly
  // padding; else the one with the most blocks.
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    const Geometry g = MakeGeometry(p);
    const int64_t rows = g.chunk * g.dst_h * g.dst_w;
    const std::array<int64_t, 6>* best = &kConfigs[std::size(kConfigs) - 1];
    int64_t best_blocks = 0;
    for (const auto& c : kConfigs) {
      if (g.cp % c[2] != 0 || (c[0] > 64 && c[0] >= 2 * rows) || (c[1] > 64 && c[1] >= 2 * g.co)) {
        continue;
      }
      const PerfConfig config(c.begin(), c.end());
      const int64_t blocks = Blocks(g, g.chunk, config);
      if (blocks >= kTargetBlocks) return config;
      if (blocks > best_blocks) best = &c, best_blocks = blocks;
    }
    return PerfConfig(best->begin(), best->end());
  }

  // The products of the padded channels; relative to the fp32 peak, tensor
  // cores run them several times faster.
  double EstimatedFlops(const ConvProblem& p) const override {
    const Geometry g = MakeGeometry(p);
    return Solver::EstimatedFlops(p) * static_cast<double>(g.cp) / static_cast<double>(g.ci);
  }
  double Efficiency(const ConvProblem& p) const override { return 3.0; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(const ConvProblem& p,
                                             const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    v1::ExecutionPlan plan = NewPlan(p, config);
    const Geometry g = MakeGeometry(p);
    const bool fwd = p.direction == Direction::kForward;
    std::vector<std::string> options = ProblemOptions(p);
    const char* names[] = {"BM", "BN", "BK", "WM", "WN", "CT_STAGES"};
    for (int i = 0; i < 6; ++i) options.push_back(absl::StrCat("-D", names[i], "=", config[i]));
    const int source = AddSource(&plan, "conv_tc.cu", options);
    const int64_t es = ElementBytes(p.type);
    if (g.pack_filter) {
      const int64_t count = g.groups * g.co * g.fh * g.fw * g.cp;
      v1::KernelStep* step = AddGpuStep(&plan, "tc_pack_filter", source,
                                        {CeilDiv(count, kPackBlock), 1, 1}, kPackBlock);
      AddBuffer(step, v1::BUFFER_W);
      AddBuffer(step, v1::BUFFER_WORKSPACE);
      for (int64_t v : {g.groups, p.k_per_group(), p.c_per_group(), g.fh, g.fw, int64_t{!fwd}}) {
        step->add_scalars(v);
      }
    }
    const v1::BufferRole src = fwd ? v1::BUFFER_X : v1::BUFFER_Y;
    const v1::BufferRole dst = fwd ? v1::BUFFER_Y : v1::BUFFER_X;
    const int64_t src_hw = g.src_h * g.src_w, dst_hw = g.dst_h * g.dst_w;
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      if (g.pack_src) {
        const int64_t row = g.groups * g.cp;
        const std::array<int64_t, 3> grid =
            p.layout == Layout::kNHWC
                ? std::array<int64_t, 3>{CeilDiv(nb * src_hw * row, kPackBlock), 1, 1}
                : std::array<int64_t, 3>{CeilDiv(src_hw, 64), CeilDiv(row, 64), nb};
        v1::KernelStep* pack = AddGpuStep(&plan, "tc_pack_act", source, grid, kPackBlock);
        AddBuffer(pack, src);
        AddBuffer(pack, v1::BUFFER_WORKSPACE, g.src_at);
        for (int64_t v : {n0, nb, g.groups, g.ci, g.cp, src_hw}) pack->add_scalars(v);
      }
      v1::KernelStep* step =
          AddGpuStep(&plan, "conv_tc", source, {Blocks(g, nb, config), g.groups, 1},
                     static_cast<uint32_t>(Threads(config)));
      step->set_shared_bytes(static_cast<uint32_t>(SharedBytes(p, config)));
      if (g.pack_src) {
        AddBuffer(step, v1::BUFFER_WORKSPACE, g.src_at);
      } else {
        AddBuffer(step, src, n0 * src_hw * g.groups * g.ci * es);
      }
      if (g.pack_filter) {
        AddBuffer(step, v1::BUFFER_WORKSPACE);
      } else {
        AddBuffer(step, v1::BUFFER_W);
      }
      AddBuffer(step, dst, n0 * dst_hw * g.groups * g.co * es);
      for (int64_t v : {nb, g.src_h, g.src_w, g.groups, g.cp, g.co, g.dst_h, g.dst_w, g.fh, g.fw,
                        g.ph, g.pw, g.sh, g.sw, g.dh, g.dw}) {
        step->add_scalars(v);
      }
    }
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuTensorCorePipelinedSolver() {
  return std::make_unique<GpuTensorCorePipelined>();
}

}  // namespace convtune
