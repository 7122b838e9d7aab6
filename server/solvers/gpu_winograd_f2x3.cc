// gpu_winograd_f2x3: Winograd F(2x2, 3x3) for 2-D 3x3 stride-1 problems in
// every direction (backward weights as F(3x3, 2x2)), from conv_winograd.cu:
// tile transforms into an fp32 workspace, 16 batched fp32 GEMMs per group and
// output transforms. Images go through in chunks so that the workspace stays
// within kWorkspaceBudget. A config is the GEMM tile {BM, BN, BK, TM, TN}.
#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

constexpr int64_t kWorkspaceBudget = int64_t{512} << 20;
constexpr int64_t kFloatBytes = sizeof(float);
constexpr int64_t kPositions = 16;  // of a transformed 4x4 tile
constexpr int64_t kTransformBlock = 256;
constexpr int64_t kMaxGridYZ = 65535;
// The GEMM blocks a default config aims for: about two waves on a large GPU.
constexpr int64_t kTargetBlocks = 264;
// Backward weights splits its long reduction over tiles into partial sums
// when the kg x cg GEMMs alone give too few blocks; each split keeps at least
// kMinTilesPerSplit tiles.
constexpr int64_t kMaxSplits = 16;
constexpr int64_t kMinTilesPerSplit = 128;

// GEMM tiles {BM, BN, BK, TM, TN}, largest first.
constexpr std::array<int64_t, 5> kTiles[] = {{128, 128, 8, 8, 8}, {128, 64, 8, 8, 4},
                                             {64, 128, 8, 4, 8},  {64, 64, 8, 4, 4},
                                             {32, 128, 8, 4, 4},  {32, 32, 16, 4, 4}};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One problem as the kernels see it. F and B run a forward-shaped pass from
// a source (x, or dy for B) with ci channels per group to a destination with
// co; W reads x (ci = cg) and dy (co = kg). Workspace regions in floats:
// `fixed` (U, or W's partial sums), then `src_tiles` and `dst_tiles` (V and
// M, or W's x and dy tiles) for one chunk of images.
struct Geometry {
  int64_t groups, ci, co;
  int64_t src_h, src_w, dst_h, dst_w;  // W: x and dy
  int64_t ph, pw;                      // a source tile starts at (2 th - ph, 2 tw - pw)
  int64_t tiles_h, tiles_w;            // per image, over the destination (W: dy)
  int64_t splits;
  int64_t chunk;  // images per chunk; 0 when one image does not fit the budget
  int64_t fixed, src_tiles, dst_tiles;
};

int64_t WrwSplits(const ConvProblem& p, int64_t tiles) {
  const int64_t blocks =
      CeilDiv(p.k_per_group(), 64) * CeilDiv(p.c_per_group(), 64) * kPositions * p.groups;
  int64_t s = std::clamp<int64_t>(CeilDiv(kTargetBlocks, blocks), 1, kMaxSplits);
  s = std::min(s, std::max<int64_t>(1, tiles / kMinTilesPerSplit));
  return std::min(s, std::max<int64_t>(1, kMaxGridYZ / (kPositions * p.groups)));
}

Geometry MakeGeometry(const ConvProblem& p) {
  const bool bwd = p.direction == Direction::kBackwardData;
  Geometry g;
  g.groups = p.groups;
  g.ci = bwd ? p.k_per_group() : p.c_per_group();
  g.co = bwd ? p.c_per_group() : p.k_per_group();
  g.src_h = bwd ? p.out(1) : p.in[1];
  g.src_w = bwd ? p.out(2) : p.in[2];
  g.dst_h = bwd ? p.in[1] : p.out(1);
  g.dst_w = bwd ? p.in[2] : p.out(2);
  // Backward data turns the filter 180 degrees, which moves the pad to 2 - p
  // (negative past 2: the tiles start inside dy).
  g.ph = bwd ? 2 - p.pad[1] : p.pad[1];
  g.pw = bwd ? 2 - p.pad[2] : p.pad[2];
  g.tiles_h = CeilDiv(g.dst_h, 2);
  g.tiles_w = CeilDiv(g.dst_w, 2);
  const int64_t tiles = g.tiles_h * g.tiles_w;
  g.splits = p.direction == Direction::kBackwardWeights ? WrwSplits(p, p.n * tiles) : 1;
  g.fixed = g.splits * kPositions * g.groups * g.ci * g.co;
  const int64_t per_image = kPositions * g.groups * (g.ci + g.co) * tiles;
  const int64_t room = kWorkspaceBudget / kFloatBytes - g.fixed;
  g.chunk = room < per_image ? 0 : std::min(p.n, room / per_image);
  g.src_tiles = kPositions * g.groups * g.ci * tiles * g.chunk;
  g.dst_tiles = kPositions * g.groups * g.co * tiles * g.chunk;
  return g;
}

// The GEMM of a full chunk: rows x cols per matrix, and matrices (with splits).
struct GemmShape {
  int64_t rows, cols, matrices;
};

GemmShape MainGemm(const ConvProblem& p, const Geometry& g) {
  if (p.direction == Direction::kBackwardWeights) {
    return {g.co, g.ci, kPositions * g.groups * g.splits};
  }
  return {g.co, g.chunk * g.tiles_h * g.tiles_w, kPositions * g.groups};
}

void AddTransform(v1::ExecutionPlan* plan, int source, absl::string_view kernel, int64_t items,
                  v1::BufferRole in, int64_t in_at, v1::BufferRole out, int64_t out_at,
                  std::initializer_list<int64_t> scalars) {
  v1::KernelStep* step =
      AddGpuStep(plan, kernel, source, {CeilDiv(items, kTransformBlock), 1, 1}, kTransformBlock);
  AddBuffer(step, in, in_at);
  AddBuffer(step, out, out_at);
  for (int64_t s : scalars) step->add_scalars(s);
}

// C (+)= A B over the workspace regions at a_at, b_at, c_at (bytes).
void AddGemm(v1::ExecutionPlan* plan, int source, const PerfConfig& c, int64_t a_at, int64_t b_at,
             int64_t c_at, GemmShape s, int64_t red, int64_t splits, bool accumulate) {
  const int64_t threads = (c[0] / c[3]) * (c[1] / c[4]);
  v1::KernelStep* step = AddGpuStep(plan, "wino_gemm", source,
                                    {CeilDiv(s.cols, c[1]), CeilDiv(s.rows, c[0]), s.matrices},
                                    static_cast<uint32_t>(threads));
  AddBuffer(step, v1::BUFFER_WORKSPACE, a_at);
  AddBuffer(step, v1::BUFFER_WORKSPACE, b_at);
  AddBuffer(step, v1::BUFFER_WORKSPACE, c_at);
  for (int64_t v : {s.rows, s.cols, red, s.matrices / splits, splits, int64_t{accumulate}}) {
    step->add_scalars(v);
  }
}

class GpuWinogradF2x3 final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuWinogradF2x3Id; }
  absl::string_view name() const override { return "gpu_winograd_f2x3"; }
  AlgorithmFamily family() const override { return AlgorithmFamily::kWinograd; }
  bool dynamic() const override { return true; }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.is_3d()) {
      return absl::FailedPreconditionError("spatial_dims: gpu_winograd_f2x3 is 2-D only");
    }
    if (p.filter[1] != 3 || p.filter[2] != 3) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter: gpu_winograd_f2x3 needs a 3x3 filter, got ", p.filter[1], "x", p.filter[2]));
    }
    if (p.stride[1] != 1 || p.stride[2] != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stride: gpu_winograd_f2x3 needs stride 1, got ", p.stride[1], "x", p.stride[2]));
    }
    if (p.dilation[1] != 1 || p.dilation[2] != 1) {
      return absl::FailedPreconditionError(absl::StrCat("dilation: gpu_winograd_f2x3 needs ",
                                                        "dilation 1, got ", p.dilation[1], "x",
                                                        p.dilation[2]));
    }
    if (absl::Status s = CheckIndex32(p, name()); !s.ok()) return s;
    // The GEMMs' matrices and row blocks (of the smallest tile) are 16-bit
    // grid axes.
    if (kPositions * p.groups > kMaxGridYZ ||
        CeilDiv(std::max(p.c_per_group(), p.k_per_group()), 32) > kMaxGridYZ) {
      return absl::FailedPreconditionError(
          absl::StrCat("groups: gpu_winograd_f2x3 puts 16 GEMMs per group and their row blocks on "
                       "16-bit grid axes; ",
                       p.groups, " groups of ", p.c_per_group(), " to ", p.k_per_group(),
                       " channels are too many"));
    }
    if (MakeGeometry(p).chunk < 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("workspace: gpu_winograd_f2x3 needs more than ", kWorkspaceBudget >> 20,
                       " MiB of workspace for a single image"));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    const Geometry g = MakeGeometry(p);
    return (g.fixed + g.src_tiles + g.dst_tiles) * kFloatBytes;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    std::vector<PerfConfig> space;
    for (const auto& t : kTiles) space.push_back(PerfConfig(t.begin(), t.end()));
    return space;
  }

  // The largest tile that still gives kTargetBlocks, among those not mostly
  // padding; else the one with the most blocks.
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    const GemmShape s = MainGemm(p, MakeGeometry(p));
    const std::array<int64_t, 5>* best = &kTiles[std::size(kTiles) - 1];
    int64_t best_blocks = 0;
    for (const auto& t : kTiles) {
      if ((t[0] > 32 && t[0] >= 2 * s.rows) || (t[1] > 32 && t[1] >= 2 * s.cols)) continue;
      const int64_t blocks = CeilDiv(s.rows, t[0]) * CeilDiv(s.cols, t[1]) * s.matrices;
      if (blocks >= kTargetBlocks) return PerfConfig(t.begin(), t.end());
      if (blocks > best_blocks) best = &t, best_blocks = blocks;
    }
    return PerfConfig(best->begin(), best->end());
  }

  // The 16 GEMMs: 16 products per 2x2 output tile and channel pair instead
  // of 36.
  double EstimatedFlops(const ConvProblem& p) const override {
    const Geometry g = MakeGeometry(p);
    return 2.0 * kPositions * static_cast<double>(g.groups * g.ci * g.co) *
           static_cast<double>(p.n * g.tiles_h * g.tiles_w);
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(const ConvProblem& p,
                                             const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    v1::ExecutionPlan plan = NewPlan(p, config);
    std::vector<std::string> options = ProblemOptions(p);
    const char* names[] = {"CT_BM", "CT_BN", "CT_BK", "CT_TM", "CT_TN"};
    for (int i = 0; i < 5; ++i) options.push_back(absl::StrCat("-D", names[i], "=", config[i]));
    const int source = AddSource(&plan, "conv_winograd.cu", options);
    const Geometry g = MakeGeometry(p);
    if (p.direction == Direction::kBackwardWeights) {
      AddWrwSteps(p, g, config, source, &plan);
    } else {
      AddSteps(p, g, config, source, &plan);
    }
    return plan;
  }

 private:
  // F and B: U once, then input transform, GEMM and output transform per chunk.
  static void AddSteps(const ConvProblem& p, const Geometry& g, const PerfConfig& config,
                       int source, v1::ExecutionPlan* plan) {
    const bool fwd = p.direction == Direction::kForward;
    const v1::BufferRole src = fwd ? v1::BUFFER_X : v1::BUFFER_Y;
    const v1::BufferRole dst = fwd ? v1::BUFFER_Y : v1::BUFFER_X;
    const int64_t v_at = g.fixed * kFloatBytes;
    const int64_t m_at = (g.fixed + g.src_tiles) * kFloatBytes;
    AddTransform(plan, source, "wino_filter", g.groups * g.ci * g.co, v1::BUFFER_W, 0,
                 v1::BUFFER_WORKSPACE, 0, {g.groups, g.ci, g.co});
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      const int64_t tiles = nb * g.tiles_h * g.tiles_w;
      AddTransform(plan, source, "wino_input", g.groups * g.ci * tiles, src, 0,
                   v1::BUFFER_WORKSPACE, v_at,
                   {n0, nb, g.groups, g.ci, g.src_h, g.src_w, g.ph, g.pw, g.tiles_h, g.tiles_w});
      AddGemm(plan, source, config, 0, v_at, m_at, {g.co, tiles, kPositions * g.groups}, g.ci, 1,
              false);
      AddTransform(plan, source, "wino_output", g.groups * g.co * tiles, v1::BUFFER_WORKSPACE, m_at,
                   dst, 0, {n0, nb, g.groups, g.co, g.dst_h, g.dst_w, g.tiles_h, g.tiles_w});
    }
  }

  // W: per chunk the x and dy transforms and the GEMM adding to the partial
  // sums; then dw from the partials.
  static void AddWrwSteps(const ConvProblem& p, const Geometry& g, const PerfConfig& config,
                          int source, v1::ExecutionPlan* plan) {
    const int64_t x_at = g.fixed * kFloatBytes;
    const int64_t dy_at = (g.fixed + g.src_tiles) * kFloatBytes;
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      const int64_t tiles = nb * g.tiles_h * g.tiles_w;
      AddTransform(plan, source, "wino_input", g.groups * g.ci * tiles, v1::BUFFER_X, 0,
                   v1::BUFFER_WORKSPACE, x_at,
                   {n0, nb, g.groups, g.ci, g.src_h, g.src_w, g.ph, g.pw, g.tiles_h, g.tiles_w});
      AddTransform(plan, source, "wino_dy", g.groups * g.co * tiles, v1::BUFFER_Y, 0,
                   v1::BUFFER_WORKSPACE, dy_at,
                   {n0, nb, g.groups, g.co, g.dst_h, g.dst_w, g.tiles_h, g.tiles_w});
      AddGemm(plan, source, config, dy_at, x_at, 0, {g.co, g.ci, kPositions * g.groups * g.splits},
              tiles, g.splits, n0 > 0);
    }
    AddTransform(plan, source, "wino_wrw_output", g.groups * g.co * g.ci, v1::BUFFER_WORKSPACE, 0,
                 v1::BUFFER_W, 0, {g.groups, g.co, g.ci, g.splits});
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuWinogradF2x3Solver() { return std::make_unique<GpuWinogradF2x3>(); }

}  // namespace convtune
