// gpu_winograd_f2x3 and gpu_winograd_blas: Winograd for 2-D 3x3 stride-1
// problems in every direction (backward weights as F(3x3, 2x2)), from
// conv_winograd.cu: tile transforms into the workspace, a batched GEMM per
// transformed position and group, and output transforms.
// gpu_winograd_f2x3 is F(2x2, 3x3) with the GEMMs on wino_gemm (fp32 FMA; a
// config is its tile {BM, BN, BK, TM, TN}). gpu_winograd_blas runs them on
// the vendor BLAS: fp32 forward and backward data as F(4x4, 3x3), the rest
// as F(2x2, 3x3) with the transformed tiles in the tensor's 16-bit type (on
// tensor or matrix cores, fp32 sums).
// Images go through in chunks so that the workspace stays within
// kWorkspaceBudget.
#include <algorithm>
#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

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
constexpr std::array<int64_t, 5> kTiles[] = {
    {128, 128, 8, 8, 8}, {128, 64, 8, 8, 4}, {64, 128, 8, 4, 8},
    {64, 64, 8, 4, 4},   {32, 128, 8, 4, 4}, {32, 32, 16, 4, 4}};

// One problem as the kernels see it. F and B run a forward-shaped pass from
// a source (x, or dy for B) with ci channels per group to a destination with
// co; W reads x (ci = cg) and dy (co = kg). Workspace regions, at byte
// offsets: U (or W's fp32 partial sums) at 0, then for one chunk of images
// the source's tiles (V, or W's x tiles) at src_at and the destination's (M,
// or W's dy tiles) at dst_at.
struct Geometry {
  int64_t groups, ci, co;
  int64_t src_h, src_w, dst_h, dst_w;  // W: x and dy
  int64_t ph, pw;            // a source tile starts at (2 th - ph, 2 tw - pw)
  int64_t tiles_h, tiles_w;  // per image, over the destination (W: dy)
  int64_t m;                 // outputs per tile side: F(m x m, 3x3)
  int64_t positions;         // of a transformed tile: (m + 2)^2
  int64_t tile_bytes;        // of an element of U, V and W's tiles
  int64_t splits;
  int64_t chunk;  // images per chunk; 0 when one image does not fit the budget
  int64_t src_at, dst_at, bytes;
};

// F(4x4, 3x3) (36 products per 16 outputs instead of 64) where the GEMMs
// run on the BLAS in fp32: forward and backward data. Its transforms scale
// values by up to 100 or so, which fp32 absorbs; 16-bit tiles, backward
// weights and wino_gemm stay at F(2x2, 3x3).
int64_t OutputTile(const ConvProblem& p, bool blas) {
  return blas && p.type == DataType::kFp32 &&
                 p.direction != Direction::kBackwardWeights
             ? 4
             : 2;
}

int64_t WrwSplits(const ConvProblem& p, int64_t tiles) {
  const int64_t blocks = CeilDiv(p.k_per_group(), 64) *
                         CeilDiv(p.c_per_group(), 64) * kPositions * p.groups;
  int64_t s =
      std::clamp<int64_t>(CeilDiv(kTargetBlocks, blocks), 1, kMaxSplits);
  s = std::min(s, std::max<int64_t>(1, tiles / kMinTilesPerSplit));
  return std::min(s,
                  std::max<int64_t>(1, kMaxGridYZ / (kPositions * p.groups)));
}

// The tiles a chunk of nb images lays out: W rounds them up to whole runs.
int64_t LaidOutTiles(const Geometry& g, int64_t nb) {
  return g.splits * CeilDiv(nb * g.tiles_h * g.tiles_w, g.splits);
}

// Sets the chunk-dependent regions of g for chunks of nb images.
void LayOut(const ConvProblem& p, int64_t nb, Geometry* g) {
  const bool wrw = p.direction == Direction::kBackwardWeights;
  const int64_t tiles = LaidOutTiles(*g, nb);
  const int64_t fixed =
      wrw ? g->splits * g->positions * g->groups * g->ci * g->co * kFloatBytes
          : g->positions * g->groups * g->ci * g->co * g->tile_bytes;
  g->src_at = AlignWorkspace(fixed);
  g->dst_at = AlignWorkspace(g->src_at + g->positions * g->groups * g->ci *
                                             tiles * g->tile_bytes);
  g->bytes = g->dst_at + g->positions * g->groups * g->co * tiles *
                             (wrw ? g->tile_bytes : kFloatBytes);
}

Geometry MakeGeometry(const ConvProblem& p, bool blas) {
  const bool bwd = p.direction == Direction::kBackwardData;
  const bool wrw = p.direction == Direction::kBackwardWeights;
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
  g.m = OutputTile(p, blas);
  g.positions = (g.m + 2) * (g.m + 2);
  g.tiles_h = CeilDiv(g.dst_h, g.m);
  g.tiles_w = CeilDiv(g.dst_w, g.m);
  g.tile_bytes = blas ? ElementBytes(p.type) : kFloatBytes;
  g.splits = wrw ? WrwSplits(p, p.n * g.tiles_h * g.tiles_w) : 1;
  // The most images whose regions fit the budget (the regions grow with the
  // images; one that does not fit leaves chunk 0).
  LayOut(p, 1, &g);
  if (g.bytes > kWorkspaceBudget) {
    g.chunk = 0;
    return g;
  }
  const int64_t per_image = g.bytes - g.src_at;
  g.chunk = std::min(
      p.n, std::max<int64_t>(1, (kWorkspaceBudget - g.src_at) / per_image));
  for (LayOut(p, g.chunk, &g); g.chunk > 1 && g.bytes > kWorkspaceBudget;) {
    LayOut(p, --g.chunk, &g);
  }
  return g;
}

// The GEMM of a full chunk: rows x cols per matrix, and matrices (with splits).
struct GemmShape {
  int64_t rows, cols, matrices;
};

GemmShape MainGemm(const ConvProblem& p, const Geometry& g) {
  if (p.direction == Direction::kBackwardWeights) {
    return {g.co, g.ci, g.positions * g.groups * g.splits};
  }
  return {g.co, g.chunk * g.tiles_h * g.tiles_w, g.positions * g.groups};
}

void AddTransform(v1::ExecutionPlan* plan, int source, absl::string_view kernel,
                  int64_t items, v1::BufferRole in, int64_t in_at,
                  v1::BufferRole out, int64_t out_at,
                  std::initializer_list<int64_t> scalars) {
  v1::KernelStep* step =
      AddGpuStep(plan, kernel, source, {CeilDiv(items, kTransformBlock), 1, 1},
                 kTransformBlock);
  AddBuffer(step, in, in_at);
  AddBuffer(step, out, out_at);
  for (int64_t s : scalars) step->add_scalars(s);
}

// C (+)= A B over the workspace regions at a_at, b_at, c_at (bytes), on
// wino_gemm with tile `c`. `red` is the reduction per matrix.
void AddFmaGemm(v1::ExecutionPlan* plan, int source, const PerfConfig& c,
                int64_t a_at, int64_t b_at, int64_t c_at, GemmShape s,
                int64_t red, bool accumulate) {
  const int64_t threads = (c[0] / c[3]) * (c[1] / c[4]);
  v1::KernelStep* step =
      AddGpuStep(plan, "wino_gemm", source,
                 {CeilDiv(s.cols, c[1]), CeilDiv(s.rows, c[0]), s.matrices},
                 static_cast<uint32_t>(threads));
  AddBuffer(step, v1::BUFFER_WORKSPACE, a_at);
  AddBuffer(step, v1::BUFFER_WORKSPACE, b_at);
  AddBuffer(step, v1::BUFFER_WORKSPACE, c_at);
  for (int64_t v : {s.rows, s.cols, red, int64_t{accumulate}})
    step->add_scalars(v);
}

// The same product as one "blas.gemm" step. A and B are in the tile type, C
// in fp32; the orientation of each follows the layouts of conv_winograd.cu.
void AddBlasGemm(const ConvProblem& p, const Geometry& geo, int64_t a_at,
                 int64_t b_at, int64_t c_at, GemmShape s, int64_t red,
                 bool accumulate, v1::ExecutionPlan* plan) {
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t tb = geo.tile_bytes;
  gpu::BlasGemm g;
  g.ab_type = tb == kFloatBytes ? DataType::kFp32 : p.type;
  g.c_type = DataType::kFp32;
  g.beta = accumulate ? 1 : 0;
  // Each operand's matrices follow one another densely.
  GemmOperand a{v1::BUFFER_WORKSPACE, a_at / tb, 0, 0, tb};
  GemmOperand b{v1::BUFFER_WORKSPACE, b_at / tb, 0, 0, tb};
  GemmOperand c{v1::BUFFER_WORKSPACE, c_at / kFloatBytes, 0, s.rows * s.cols,
                kFloatBytes};
  if (p.direction == Direction::kBackwardWeights) {
    // partial [k][c] = DY X^T over the run's tiles: DY [k][t] and X [c][t]
    // (NCHW) or DY [t][k] and X [t][c] (NHWC).
    a.group_stride = s.rows * red, b.group_stride = s.cols * red;
    g.m = s.rows, g.n = s.cols, g.k = red, g.ldc = s.cols;
    if (nhwc) {
      g.trans_a = true, g.lda = s.rows, g.ldb = s.cols;
    } else {
      g.trans_b = true, g.lda = red, g.ldb = red;
    }
    AddGemmsPerImage(g, a, b, c, 1, s.matrices, false, plan);
    return;
  }
  // M = U^T V with U [i][o]; V [i][t], M [o][t] (NCHW) or V [t][i], M [t][o]
  // (NHWC, computed as M = V U).
  a.group_stride = red * s.rows;  // U
  b.group_stride = red * s.cols;  // V
  if (nhwc) {
    g.m = s.cols, g.n = s.rows, g.k = red;
    g.lda = red, g.ldb = s.rows, g.ldc = s.rows;
    AddGemmsPerImage(g, b, a, c, 1, s.matrices, false, plan);
  } else {
    g.trans_a = true;
    g.m = s.rows, g.n = s.cols, g.k = red;
    g.lda = s.rows, g.ldb = s.cols, g.ldc = s.cols;
    AddGemmsPerImage(g, a, b, c, 1, s.matrices, false, plan);
  }
}

class GpuWinogradF2x3 final : public GpuSolver {
 public:
  explicit GpuWinogradF2x3(bool blas) : blas_(blas) {}

  uint32_t id() const override {
    return blas_ ? kGpuWinogradBlasId : kGpuWinogradF2x3Id;
  }
  absl::string_view name() const override {
    return blas_ ? "gpu_winograd_blas" : "gpu_winograd_f2x3";
  }
  v1::AlgorithmFamily family() const override { return v1::WINOGRAD; }
  bool dynamic() const override { return true; }
  bool SupportsDevice(const DeviceInfo& device) const override {
    return !blas_ || !device.blas.empty();
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.is_3d()) {
      return absl::FailedPreconditionError(
          absl::StrCat("spatial_dims: ", name(), " is 2-D only"));
    }
    if (p.filter[1] != 3 || p.filter[2] != 3) {
      return absl::FailedPreconditionError(
          absl::StrCat("filter: ", name(), " needs a 3x3 filter, got ",
                       p.filter[1], "x", p.filter[2]));
    }
    if (p.stride[1] != 1 || p.stride[2] != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("stride: ", name(), " needs stride 1, got ", p.stride[1],
                       "x", p.stride[2]));
    }
    if (p.dilation[1] != 1 || p.dilation[2] != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("dilation: ", name(), " needs dilation 1, got ",
                       p.dilation[1], "x", p.dilation[2]));
    }
    if (absl::Status s = CheckIndex32(p, name()); !s.ok()) return s;
    // wino_gemm's matrices and row blocks (of the smallest tile) are 16-bit
    // grid axes; the BLAS takes the batch as a 32-bit count.
    if (kPositions * p.groups > kMaxGridYZ ||
        CeilDiv(std::max(p.c_per_group(), p.k_per_group()), 32) > kMaxGridYZ) {
      return absl::FailedPreconditionError(
          absl::StrCat("groups: ", name(),
                       " puts 16 GEMMs per group and their row blocks on "
                       "16-bit grid axes; ",
                       p.groups, " groups of ", p.c_per_group(), " to ",
                       p.k_per_group(), " channels are too many"));
    }
    if (MakeGeometry(p, blas_).chunk < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "workspace: ", name(), " needs more than ", kWorkspaceBudget >> 20,
          " MiB of workspace for a single image"));
    }
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return MakeGeometry(p, blas_).bytes;
  }

  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    if (blas_) return {PerfConfig{}};
    std::vector<PerfConfig> space;
    for (const auto& t : kTiles)
      space.push_back(PerfConfig(t.begin(), t.end()));
    return space;
  }

  // The largest tile that still gives kTargetBlocks, among those not mostly
  // padding; else the one with the most blocks.
  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    if (blas_) return {};
    const GemmShape s = MainGemm(p, MakeGeometry(p, blas_));
    const std::array<int64_t, 5>* best = &kTiles[std::size(kTiles) - 1];
    int64_t best_blocks = 0;
    for (const auto& t : kTiles) {
      if ((t[0] > 32 && t[0] >= 2 * s.rows) ||
          (t[1] > 32 && t[1] >= 2 * s.cols))
        continue;
      const int64_t blocks =
          CeilDiv(s.rows, t[0]) * CeilDiv(s.cols, t[1]) * s.matrices;
      if (blocks >= kTargetBlocks) return PerfConfig(t.begin(), t.end());
      if (blocks > best_blocks) best = &t, best_blocks = blocks;
    }
    return PerfConfig(best->begin(), best->end());
  }

  // The 16 GEMMs: 16 products per 2x2 output tile and channel pair instead
  // of 36.
  double EstimatedFlops(const ConvProblem& p) const override {
    const Geometry g = MakeGeometry(p, blas_);
    return 2.0 * static_cast<double>(g.positions * g.groups * g.ci * g.co) *
           static_cast<double>(p.n * g.tiles_h * g.tiles_w);
  }

  // Relative to the fp32 peak: the BLAS runs the GEMMs near it (16-bit types
  // beyond it, on tensor or matrix cores; the estimate caps this at 1); the
  // transforms move the rest.
  double Efficiency(const ConvProblem& p) const override {
    if (!blas_) return Solver::Efficiency(p);
    return p.type == DataType::kFp32 ? 0.45 : 1.0;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    v1::ExecutionPlan plan = NewPlan(p, config);
    const Geometry g = MakeGeometry(p, blas_);
    std::vector<std::string> options = ProblemOptions(p);
    if (blas_) {
      options.push_back(
          absl::StrCat("-DCT_TILE16=", p.type == DataType::kFp32 ? 0 : 1));
      if (g.m != 2) options.push_back(absl::StrCat("-DCT_WINO_M=", g.m));
    } else {
      const char* names[] = {"CT_BM", "CT_BN", "CT_BK", "CT_TM", "CT_TN"};
      for (int i = 0; i < 5; ++i)
        options.push_back(absl::StrCat("-D", names[i], "=", config[i]));
    }
    const int source = AddSource(&plan, "conv_winograd.cu", options);
    if (p.direction == Direction::kBackwardWeights) {
      AddWrwSteps(p, g, config, source, &plan);
    } else {
      AddSteps(p, g, config, source, &plan);
    }
    return plan;
  }

 private:
  void AddGemm(const ConvProblem& p, const Geometry& g,
               const PerfConfig& config, int source, int64_t a_at, int64_t b_at,
               int64_t c_at, GemmShape s, int64_t red, bool accumulate,
               v1::ExecutionPlan* plan) const {
    if (blas_) {
      AddBlasGemm(p, g, a_at, b_at, c_at, s, red, accumulate, plan);
    } else {
      AddFmaGemm(plan, source, config, a_at, b_at, c_at, s, red, accumulate);
    }
  }

  // F and B: U once, then input transform, GEMM and output transform per chunk.
  void AddSteps(const ConvProblem& p, const Geometry& g,
                const PerfConfig& config, int source,
                v1::ExecutionPlan* plan) const {
    const bool fwd = p.direction == Direction::kForward;
    const v1::BufferRole src = fwd ? v1::BUFFER_X : v1::BUFFER_Y;
    const v1::BufferRole dst = fwd ? v1::BUFFER_Y : v1::BUFFER_X;
    AddTransform(plan, source, "wino_filter", g.groups * g.ci * g.co,
                 v1::BUFFER_W, 0, v1::BUFFER_WORKSPACE, 0,
                 {g.groups, g.ci, g.co});
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      const int64_t tiles = nb * g.tiles_h * g.tiles_w;
      AddTransform(plan, source, "wino_input", g.groups * g.ci * tiles, src, 0,
                   v1::BUFFER_WORKSPACE, g.src_at,
                   {n0, nb, g.groups, g.ci, g.src_h, g.src_w, g.ph, g.pw,
                    g.tiles_h, g.tiles_w, 1});
      AddGemm(p, g, config, source, 0, g.src_at, g.dst_at,
              {g.co, tiles, g.positions * g.groups}, g.ci, false, plan);
      AddTransform(
          plan, source, "wino_output", g.groups * g.co * tiles,
          v1::BUFFER_WORKSPACE, g.dst_at, dst, 0,
          {n0, nb, g.groups, g.co, g.dst_h, g.dst_w, g.tiles_h, g.tiles_w});
    }
  }

  // W: per chunk the x and dy transforms (in runs of tiles, one per split)
  // and the GEMM adding to the partial sums; then dw from the partials.
  void AddWrwSteps(const ConvProblem& p, const Geometry& g,
                   const PerfConfig& config, int source,
                   v1::ExecutionPlan* plan) const {
    for (int64_t n0 = 0; n0 < p.n; n0 += g.chunk) {
      const int64_t nb = std::min(g.chunk, p.n - n0);
      const int64_t tiles = LaidOutTiles(g, nb);
      AddTransform(plan, source, "wino_input", g.groups * g.ci * tiles,
                   v1::BUFFER_X, 0, v1::BUFFER_WORKSPACE, g.src_at,
                   {n0, nb, g.groups, g.ci, g.src_h, g.src_w, g.ph, g.pw,
                    g.tiles_h, g.tiles_w, g.splits});
      AddTransform(plan, source, "wino_dy", g.groups * g.co * tiles,
                   v1::BUFFER_Y, 0, v1::BUFFER_WORKSPACE, g.dst_at,
                   {n0, nb, g.groups, g.co, g.dst_h, g.dst_w, g.tiles_h,
                    g.tiles_w, g.splits});
      AddGemm(p, g, config, source, g.dst_at, g.src_at, 0,
              {g.co, g.ci, g.positions * g.groups * g.splits}, tiles / g.splits,
              n0 > 0, plan);
    }
    AddTransform(plan, source, "wino_wrw_output", g.groups * g.co * g.ci,
                 v1::BUFFER_WORKSPACE, 0, v1::BUFFER_W, 0,
                 {g.groups, g.co, g.ci, g.splits});
  }

  const bool blas_;
};

}  // namespace

std::unique_ptr<Solver> NewGpuWinogradF2x3Solver() {
  return std::make_unique<GpuWinogradF2x3>(/*blas=*/false);
}
std::unique_ptr<Solver> NewGpuWinogradBlasSolver() {
  return std::make_unique<GpuWinogradF2x3>(/*blas=*/true);
}

}  // namespace convtune
