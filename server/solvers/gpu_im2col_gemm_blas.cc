// gpu_im2col_gemm_blas: every problem lowered to a column matrix
// (conv_im2col.cu) and multiplied by strided-batched GEMMs on the vendor BLAS
// (cuBLAS, rocBLAS), a chunk of images at a time so that the column matrix in
// the workspace stays under kMaxColumnBytes. With width = C/G * FD*FH*FW and
// OS the output size, per image and group (row-major matrices):
//   NCHW  col[i,g] is width x OS
//         F  y[n,g]  (K/G x OS)    = w[g] (K/G x width) * col[i,g]
//         B  col[i,g]              = w[g]^T * dy[n,g], then col2im into dx
//         W  col[g] is width x (nb*OS), the chunk's images inner, and dy is
//            packed alike (conv_pack) into dyp[g] (K/G x nb*OS):
//            dw[g] (K/G x width) = sum over chunks of dyp[g] * col[g]^T
//   NHWC  col[g] is (nb*OS) x width for the chunk's nb images
//         F  y[chunk,g] (nb*OS x K/G) = col[g] * w[g]^T
//         B  col[g]                   = dy[chunk,g] * w[g], then col2im
//         W  dw[g]                    = sum over chunks of dy[chunk,g]^T *
//         col[g]
// NCHW F and B batch over the chunk's images or over the groups, whichever
// takes fewer steps; W, and every NHWC direction, is one step per chunk
// batched over the groups. dw is summed in place for fp32; for fp16 and bf16
// over more than one chunk it is summed in fp32 in the workspace and
// converted at the end.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/index_math.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// The column matrix is recomputed per chunk; past this size (with NCHW dw's
// packed dy) a chunk is big enough to keep the GEMMs efficient and more
// memory buys nothing.
constexpr int64_t kMaxColumnBytes = int64_t{256} << 20;

// How the batch is cut into chunks of images.
struct Chunking {
  int64_t images = 1;  // per chunk (the last may have fewer)
  int64_t count = 1;
};

int64_t ColumnElementsPerImage(const ConvProblem& p) {
  return p.c * p.filter_spatial() * p.out_spatial();
}

// NCHW dw packs a chunk's dy next to its column matrix.
bool NchwDw(const ConvProblem& p) {
  return p.direction == Direction::kBackwardWeights &&
         p.layout == Layout::kNCHW;
}

// The lowering kernels index a chunk's column matrix, packed dy, x and dx in
// 32 bits.
int64_t MaxChunkImages(const ConvProblem& p) {
  const int64_t col = ColumnElementsPerImage(p);
  const int64_t dy = NchwDw(p) ? p.k * p.out_spatial() : 0;
  const int64_t by_bytes =
      kMaxColumnBytes / ((col + dy) * ElementBytes(p.type));
  const int64_t by_index =
      kMaxIndex32 / std::max({col, dy, p.c * p.in_spatial()});
  return std::min({p.n, by_bytes, by_index});
}

// Chunks of equal size but the last, as few as the bound allows (one image
// each where a single image is over it, which IsApplicable rules out).
Chunking ChunksOf(const ConvProblem& p) {
  const int64_t max_images = std::max<int64_t>(1, MaxChunkImages(p));
  Chunking c;
  c.count = (p.n + max_images - 1) / max_images;
  c.images = (p.n + c.count - 1) / c.count;
  return c;
}

// dw is summed over more than one chunk's GEMM in an fp32 workspace.
bool SumsDwInWorkspace(const ConvProblem& p) {
  if (p.direction != Direction::kBackwardWeights || p.type == DataType::kFp32)
    return false;
  return ChunksOf(p).count > 1;
}

// NCHW dw packs dy unless a chunk is one image, whose dy is already in the
// packed order.
bool PacksDy(const ConvProblem& p) {
  return NchwDw(p) && ChunksOf(p).images > 1;
}

int64_t ColumnBytes(const ConvProblem& p) {
  return ChunksOf(p).images * ColumnElementsPerImage(p) * ElementBytes(p.type);
}

// Workspace regions in bytes: the column matrix at 0, then the packed dy
// (PacksDy) and the fp32 dw (SumsDwInWorkspace) where used.
struct Regions {
  int64_t dy_offset = 0, dw_offset = 0, bytes = 0;
};

Regions RegionsOf(const ConvProblem& p) {
  Regions r;
  r.bytes = ColumnBytes(p);
  if (PacksDy(p)) {
    r.dy_offset = AlignWorkspace(r.bytes);
    r.bytes = r.dy_offset +
              ChunksOf(p).images * p.k * p.out_spatial() * ElementBytes(p.type);
  }
  if (SumsDwInWorkspace(p)) {
    r.dw_offset = AlignWorkspace(r.bytes);
    r.bytes =
        r.dw_offset + p.w_elements() * static_cast<int64_t>(sizeof(float));
  }
  return r;
}

class GpuIm2colGemmBlas final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuIm2colGemmBlasId; }
  absl::string_view name() const override { return "gpu_im2col_gemm_blas"; }
  v1::AlgorithmFamily family() const override { return v1::GEMM; }
  bool dynamic() const override { return true; }
  bool SupportsDevice(const DeviceInfo& device) const override {
    return !device.blas.empty();
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    const int64_t col = ColumnElementsPerImage(p) * ElementBytes(p.type);
    if (col > kMaxColumnBytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gpu_im2col_gemm_blas lowers at least one image at a time: its "
          "column matrix of ",
          col, " bytes exceeds the ", kMaxColumnBytes, "-byte bound"));
    }
    if (p.c * p.in_spatial() > kMaxIndex32) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gpu_im2col_gemm_blas indexes an image in 32 bits: ",
          p.c * p.in_spatial(), " input elements exceed 2^31 - 1"));
    }
    return CheckBlasSizes(name(),
                          {{"K", p.k}, {"output D*H*W", p.out_spatial()}});
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return RegionsOf(p).bytes;
  }

  // The column matrix is written once and read once per image.
  double EstimatedBytes(const ConvProblem& p) const override {
    return static_cast<double>(p.x_bytes() + p.w_bytes() + p.y_bytes()) +
           2.0 * static_cast<double>(p.n * ColumnElementsPerImage(p) *
                                     ElementBytes(p.type));
  }
  // Relative to the fp32 peak the estimate scales by: the BLAS reaches most
  // of it on the lowered GEMM (fp16 and bf16 beyond it, on tensor or matrix
  // cores; the estimate caps this at 1).
  double Efficiency(const ConvProblem& p) const override {
    return p.type == DataType::kFp32 ? 0.6 : 1.0;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    const Chunking chunks = ChunksOf(p);
    const Regions r = RegionsOf(p);
    const bool in_workspace = SumsDwInWorkspace(p), packs_dy = PacksDy(p);
    for (int64_t i = 0; i < chunks.count; ++i) {
      const int64_t n0 = i * chunks.images;
      const int64_t nb = std::min(chunks.images, p.n - n0);
      if (p.direction != Direction::kBackwardData) {
        AddIm2colStep(p, n0, nb, &plan, /*images_inner=*/NchwDw(p));
      }
      if (packs_dy) {
        AddPackStep(p, v1::BUFFER_Y, DenseY(p), n0, nb, /*channel_major=*/true,
                    r.dy_offset, &plan);
      }
      if (NchwDw(p)) {
        AddNchwDwGemm(p, n0, nb, r, in_workspace, packs_dy, &plan);
      } else {
        AddChunkGemms(p, n0, nb, r.dw_offset, in_workspace, &plan);
      }
      if (p.direction == Direction::kBackwardData)
        AddCol2imStep(p, n0, nb, &plan);
    }
    if (in_workspace) AddDwFromFp32Step(p, r.dw_offset, &plan);
    return plan;
  }

 private:
  // The GEMMs of images [n0, n0 + nb) against the column matrix at workspace
  // offset 0. dw goes to the workspace at `dw_offset` bytes when
  // `in_workspace`, else to w.
  static void AddChunkGemms(const ConvProblem& p, int64_t n0, int64_t nb,
                            int64_t dw_offset, bool in_workspace,
                            v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), kg = p.k_per_group(),
                  os = p.out_spatial();
    const int64_t width = p.c_per_group() * p.filter_spatial();
    const bool nhwc = p.layout == Layout::kNHWC;
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    // The first chunk's GEMMs overwrite dw; later ones add to it.
    g.beta = p.direction == Direction::kBackwardWeights && n0 > 0 ? 1 : 0;
    GemmOperand w{v1::BUFFER_W, 0, 0, kg * width, es};
    GemmOperand dw = w;
    if (in_workspace) {
      g.c_type = DataType::kFp32;
      dw = {v1::BUFFER_WORKSPACE,
            dw_offset / static_cast<int64_t>(sizeof(float)), 0, kg * width,
            sizeof(float)};
    }
    if (nhwc) {
      const GemmOperand col{v1::BUFFER_WORKSPACE, 0, 0, nb * os * width, es};
      const GemmOperand y{v1::BUFFER_Y, n0 * os * p.k, 0, kg, es};
      const int64_t rows = nb * os;
      switch (p.direction) {
        case Direction::kForward:
          g.m = rows, g.n = kg, g.k = width, g.trans_b = true;
          g.lda = width, g.ldb = width, g.ldc = p.k;
          AddGemmsPerImage(g, col, w, y, 1, p.groups, false, plan);
          break;
        case Direction::kBackwardData:
          g.m = rows, g.n = width, g.k = kg;
          g.lda = p.k, g.ldb = width, g.ldc = width;
          AddGemmsPerImage(g, y, w, col, 1, p.groups, false, plan);
          break;
        case Direction::kBackwardWeights:
          g.m = kg, g.n = width, g.k = rows, g.trans_a = true;
          g.lda = p.k, g.ldb = width, g.ldc = width;
          AddGemmsPerImage(g, y, col, dw, 1, p.groups, false, plan);
          break;
      }
      return;
    }
    const GemmOperand col{v1::BUFFER_WORKSPACE, 0, p.groups * width * os,
                          width * os, es};
    const GemmOperand y{v1::BUFFER_Y, n0 * p.k * os, p.k * os, kg * os, es};
    switch (p.direction) {
      case Direction::kForward:
        g.m = kg, g.n = os, g.k = width;
        g.lda = width, g.ldb = os, g.ldc = os;
        AddGroupedGemms(g, w, col, y, nb, p.groups, plan);
        break;
      case Direction::kBackwardData:
        g.m = width, g.n = os, g.k = kg, g.trans_a = true;
        g.lda = width, g.ldb = os, g.ldc = os;
        AddGroupedGemms(g, w, y, col, nb, p.groups, plan);
        break;
      case Direction::kBackwardWeights:
        break;  // AddNchwDwGemm
    }
  }

  // NCHW dw of the images [n0, n0 + nb): one GEMM batched over the groups,
  // k running over the chunk's (image, position) pairs of the column matrix
  // (images inner) and of dy (packed at r.dy_offset when `packs_dy`, else
  // the chunk's one image in place).
  static void AddNchwDwGemm(const ConvProblem& p, int64_t n0, int64_t nb,
                            const Regions& r, bool in_workspace, bool packs_dy,
                            v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), kg = p.k_per_group(),
                  os = p.out_spatial();
    const int64_t width = p.c_per_group() * p.filter_spatial(), k = nb * os;
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    // The first chunk's GEMM overwrites dw; later ones add to it.
    g.beta = n0 > 0 ? 1 : 0;
    GemmOperand dw{v1::BUFFER_W, 0, 0, kg * width, es};
    if (in_workspace) {
      g.c_type = DataType::kFp32;
      dw = {v1::BUFFER_WORKSPACE,
            r.dw_offset / static_cast<int64_t>(sizeof(float)), 0, kg * width,
            sizeof(float)};
    }
    const GemmOperand y =
        packs_dy
            ? GemmOperand{v1::BUFFER_WORKSPACE, r.dy_offset / es, 0, kg * k, es}
            : GemmOperand{v1::BUFFER_Y, n0 * p.k * os, 0, kg * os, es};
    const GemmOperand col{v1::BUFFER_WORKSPACE, 0, 0, width * k, es};
    g.m = kg, g.n = width, g.k = k, g.trans_b = true;
    g.lda = k, g.ldb = k, g.ldc = width;
    AddGemmsPerImage(g, y, col, dw, 1, p.groups, false, plan);
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuIm2colGemmBlasSolver() {
  return std::make_unique<GpuIm2colGemmBlas>();
}

}  // namespace convtune
