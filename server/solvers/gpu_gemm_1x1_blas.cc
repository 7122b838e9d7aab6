// gpu_gemm_1x1_blas: a 1x1 convolution with no padding as strided-batched
// GEMMs on the vendor BLAS (cuBLAS, rocBLAS). With S the output size, per
// group g (row-major matrices):
//   NCHW  F  y[n,g]  (K/G x S)   = w[g] (K/G x C/G) * x[n,g] (C/G x S)
//         B  dx[n,g] (C/G x S)   = w[g]^T * dy[n,g]
//         W  dw[g]   (K/G x C/G) = sum over n of dy[n,g] * x[n,g]^T, either
//            as per-image partial sums: one GEMM batched over a chunk's
//            images into an fp32 slot per image (later chunks add to the
//            slots), then conv_f32_to_type sums the slots into dw; or, when a
//            slot would outweigh the image's operands (large K x C/G over a
//            small S), as dy[g] (K/G x N*S) * x[g]^T, one GEMM over a chunk's
//            images, dy and x packed channel-major (conv_pack) into the
//            workspace so that (image, position) is contiguous
//   NHWC  the batch is one (N*S) x C matrix, a group's channels a column block:
//         F  y[:,g]  (N*S x K/G) = x[:,g] (N*S x C/G) * w[g]^T
//         B  dx[:,g] (N*S x C/G) = dy[:,g] * w[g]
//         W  dw[g]   (K/G x C/G) = dy[:,g]^T * x[:,g]
// NCHW F and B of 16-bit types or at a stride have a second config, {1}:
// per-image GEMMs over narrow images are slow on tensor cores, so x (F) or
// dy (B) is packed channel-major (conv_pack), one GEMM per group runs over
// all of a chunk's positions, and conv_unpack writes y or dx from its
// channel-major result. It is the default over small images
// (S < kPackBelow); elsewhere a find times it beside the per-image config.
// Each config's workspace is its own.
// With stride 1, F, B and NHWC W run on the tensors in place. With a larger
// stride, F and W first gather the sampled x into a dense chunk in the
// workspace, and B computes the dense dx of the sampled positions there and
// then writes all of dx (conv_unpack: 0 where nothing was sampled).
// NHWC F and B whose sampled rows of x are equally spaced (depth stride 1,
// H = SH * OH) have a third config, {2}: the GEMM batched over the output
// rows (n, od, oh), each an OW x C/G matrix of x read or written in place
// with leading dimension SW * C; B first sets the unsampled positions of dx
// to 0 (conv_zero_unsampled), so that dx is written once and nothing is
// staged. It is B's default there, and a find times it beside {}.
// The workspace is bounded by taking the images a chunk at a time; dw summed
// over more than one chunk accumulates in place for fp32, in an fp32
// workspace converted at the end for fp16 and bf16 (rounding every partial
// sum to 16 bits would lose precision as the batch grows).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/index_math.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// Past this many bytes of packed operands per chunk the GEMMs are large
// enough to run efficiently and more memory buys nothing.
constexpr int64_t kMaxChunkBytes = int64_t{256} << 20;

bool Strided(const ConvProblem& p) {
  return p.stride[0] != 1 || p.stride[1] != 1 || p.stride[2] != 1;
}

// Output sizes below which NCHW F and B pack by default (see above).
constexpr int64_t kPackBelow = 128;

// NCHW F or B where the packed config applies: a 16-bit type or a stride,
// and one image's x and dy within the chunk bound.
bool PackApplies(const ConvProblem& p) {
  return p.layout == Layout::kNCHW &&
         p.direction != Direction::kBackwardWeights &&
         (p.type != DataType::kFp32 || Strided(p)) &&
         (p.c + p.k) * p.out_spatial() * ElementBytes(p.type) <= kMaxChunkBytes;
}
// ... and where it is the default.
bool PacksByDefault(const ConvProblem& p) {
  return PackApplies(p) && p.out_spatial() < kPackBelow;
}
bool IsPacked(const PerfConfig& c) { return !c.empty() && c[0] == 1; }

// NHWC F or B at a stride whose sampled x rows are one batch stride apart
// (see above), with dx's positions indexed in 32 bits by
// conv_zero_unsampled.
bool RowsInPlaceApply(const ConvProblem& p) {
  return p.layout == Layout::kNHWC && Strided(p) &&
         p.direction != Direction::kBackwardWeights && p.stride[0] == 1 &&
         p.in[1] == p.stride[1] * p.out(1) &&
         p.n * p.in_spatial() <= kMaxIndex32;
}
bool IsRowsInPlace(const PerfConfig& c) { return !c.empty() && c[0] == 2; }

// NCHW dw over more than one image as per-image partial sums: when an fp32
// slot of dw takes at most twice the bytes of the image's x and dy, so that
// the slots cost no more traffic than packing the operands would.
bool SumsNchwDwPerImage(const ConvProblem& p) {
  if (p.direction != Direction::kBackwardWeights || p.layout != Layout::kNCHW ||
      p.n < 2) {
    return false;
  }
  const int64_t slot = p.w_elements() * static_cast<int64_t>(sizeof(float));
  return slot <= 2 * (p.c + p.k) * p.out_spatial() * ElementBytes(p.type) &&
         slot <= kMaxChunkBytes;
}

// How a plan stages its operands in the workspace, one chunk of images at a
// time. Offsets are in bytes; a region is used only where its flag is set.
struct Staging {
  int64_t chunk_images = 1;  // per chunk (the last may have fewer)
  int64_t chunk_count = 1;
  bool x_dense = false;   // x or dx of the sampled positions, a chunk of it
  bool y_packed = false;  // dy channel-major (NCHW W)
  bool dw_fp32 = false;
  bool dw_slots =
      false;  // NCHW W as per-image partial sums: chunk_images fp32 slots
  bool packed = false;  // NCHW F, B: x and dy channel-major, y or dx from them
  int64_t x_offset = 0, y_offset = 0, dw_offset = 0;
  int64_t bytes = 0;
};

// Bytes of one image's dense x region and, for NCHW W, its packed dy.
int64_t DenseXBytes(const ConvProblem& p) {
  return p.c * p.out_spatial() * ElementBytes(p.type);
}
bool PacksNchwDw(const ConvProblem& p) {
  return p.direction == Direction::kBackwardWeights &&
         p.layout == Layout::kNCHW && !SumsNchwDwPerImage(p);
}

// The images of one chunk: as many as the byte bound and the conv_pack and
// conv_unpack 32-bit offsets allow, at least 1.
int64_t MaxChunkImages(const ConvProblem& p) {
  int64_t per_image = DenseXBytes(p);
  if (PacksNchwDw(p)) per_image += p.k * p.out_spatial() * ElementBytes(p.type);
  const int64_t by_index =
      kMaxIndex32 / std::max(p.c * p.in_spatial(), p.k * p.out_spatial());
  return std::max<int64_t>(
      1, std::min({p.n, kMaxChunkBytes / per_image, by_index}));
}

// Per-image partial sums: a chunk is as many images as there are slots.
Staging SlotStagingOf(const ConvProblem& p) {
  Staging s;
  s.dw_slots = true;
  s.x_dense = Strided(p);
  const int64_t slot = p.w_elements() * static_cast<int64_t>(sizeof(float));
  int64_t max_images =
      std::min(p.n, std::max<int64_t>(1, kMaxChunkBytes / slot));
  if (s.x_dense) max_images = std::min(max_images, MaxChunkImages(p));
  s.chunk_count = (p.n + max_images - 1) / max_images;
  s.chunk_images = (p.n + s.chunk_count - 1) / s.chunk_count;
  const int64_t x_bytes = s.x_dense ? s.chunk_images * DenseXBytes(p) : 0;
  s.dw_offset = AlignWorkspace(x_bytes);
  s.bytes = s.dw_offset + s.chunk_images * slot;
  return s;
}

// NCHW F and B packed: a chunk's x and dy channel-major (the one written
// by the GEMM is unpacked).
Staging PackedStagingOf(const ConvProblem& p) {
  Staging s;
  s.packed = s.x_dense = s.y_packed = true;
  const int64_t es = ElementBytes(p.type), os = p.out_spatial();
  const int64_t by_index =
      kMaxIndex32 / std::max(p.c * p.in_spatial(), p.k * os);
  const int64_t max_images = std::max<int64_t>(
      1, std::min({p.n, kMaxChunkBytes / ((p.c + p.k) * os * es), by_index}));
  s.chunk_count = (p.n + max_images - 1) / max_images;
  s.chunk_images = (p.n + s.chunk_count - 1) / s.chunk_count;
  s.y_offset = AlignWorkspace(s.chunk_images * p.c * os * es);
  s.bytes = s.y_offset + s.chunk_images * p.k * os * es;
  return s;
}

// How a config stages: the packed one, else per direction and layout.
Staging StagingOf(const ConvProblem& p, bool packed) {
  if (packed) return PackedStagingOf(p);
  if (SumsNchwDwPerImage(p)) return SlotStagingOf(p);
  Staging s;
  const bool nchw_dw = PacksNchwDw(p);
  if (!Strided(p) && !(nchw_dw && p.n > 1)) {
    // In place on the tensors, the whole batch at once.
    s.chunk_images = p.n;
    return s;
  }
  const int64_t max_images = MaxChunkImages(p);
  s.chunk_count = (p.n + max_images - 1) / max_images;
  s.chunk_images = (p.n + s.chunk_count - 1) / s.chunk_count;
  // A chunk of one image is already in the packed order.
  s.y_packed = nchw_dw && s.chunk_images > 1;
  s.x_dense = Strided(p) || s.y_packed;
  s.dw_fp32 = p.direction == Direction::kBackwardWeights &&
              p.type != DataType::kFp32 && s.chunk_count > 1;
  const int64_t es = ElementBytes(p.type);
  int64_t end = 0;
  if (s.x_dense) end = s.chunk_images * p.c * p.out_spatial() * es;
  if (s.y_packed) {
    s.y_offset = AlignWorkspace(end);
    end = s.y_offset + s.chunk_images * p.k * p.out_spatial() * es;
  }
  if (s.dw_fp32) {
    s.dw_offset = AlignWorkspace(end);
    end = s.dw_offset + p.w_elements() * static_cast<int64_t>(sizeof(float));
  }
  s.bytes = end;
  return s;
}

class GpuGemm1x1Blas final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuGemm1x1BlasId; }
  absl::string_view name() const override { return "gpu_gemm_1x1_blas"; }
  v1::AlgorithmFamily family() const override { return v1::GEMM; }
  bool dynamic() const override { return true; }
  bool SupportsDevice(const DeviceInfo& device) const override {
    return !device.blas.empty();
  }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.filter_spatial() != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("filter: gpu_gemm_1x1_blas needs a 1x1 filter, got ",
                       FilterString(p)));
    }
    // Dilation moves no tap of a 1x1 filter: any is accepted.
    for (int i = 0; i < 3; ++i) {
      if (p.pad[i] != 0) {
        return absl::FailedPreconditionError(
            "pad: gpu_gemm_1x1_blas needs pad 0");
      }
    }
    if (Strided(p)) {
      // At least one image's sampled x goes through the workspace.
      if (DenseXBytes(p) > kMaxChunkBytes) {
        return absl::FailedPreconditionError(
            absl::StrCat("stride: gpu_gemm_1x1_blas gathers at least one "
                         "image's sampled x of ",
                         DenseXBytes(p), " bytes, over its ", kMaxChunkBytes,
                         "-byte workspace bound"));
      }
      if (p.c * p.in_spatial() > kMaxIndex32) {
        return absl::FailedPreconditionError(absl::StrCat(
            "stride: gpu_gemm_1x1_blas indexes an image in 32 bits: ",
            p.c * p.in_spatial(), " input elements exceed 2^31 - 1"));
      }
    }
    const Staging s = StagingOf(p, PacksByDefault(p));
    const int64_t os = p.out_spatial();
    if (RowsInPlaceApply(p)) {
      RETURN_IF_ERROR(CheckBlasSizes(
          name(),
          {{"the output rows N*D*H (batched)", p.n * p.out(0) * p.out(1)},
           {"the leading dimension of x, SW*C", p.stride[2] * p.c}}));
    }
    // NHWC GEMMs, the NCHW dw GEMM and packed GEMMs run over a chunk's
    // images at once.
    const bool over_images =
        p.layout == Layout::kNHWC || PacksNchwDw(p) || s.packed;
    const int64_t rows = over_images ? s.chunk_images * os : os;
    return CheckBlasSizes(
        name(), {{"the GEMM rows (output N*D*H*W of a chunk, or D*H*W)", rows},
                 {"C", p.c},
                 {"K", p.k},
                 {"N", p.n}});
  }

  // The default config's: {2} stages nothing, {1} and {} their own chunks.
  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return ConfigWorkspaceBytes(p, DefaultConfig(p));
  }
  bool workspace_depends_on_config() const override { return true; }
  int64_t ConfigWorkspaceBytes(const ConvProblem& p,
                               const PerfConfig& config) const override {
    return IsRowsInPlace(config) ? 0 : StagingOf(p, IsPacked(config)).bytes;
  }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    if (PacksByDefault(p)) return PerfConfig{1};
    if (RowsInPlaceApply(p) && p.direction == Direction::kBackwardData)
      return PerfConfig{2};
    return PerfConfig{};
  }
  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    if (PackApplies(p)) {
      return PacksByDefault(p)
                 ? std::vector<PerfConfig>{PerfConfig{1}, PerfConfig{}}
                 : std::vector<PerfConfig>{PerfConfig{}, PerfConfig{1}};
    }
    if (RowsInPlaceApply(p)) {
      return p.direction == Direction::kBackwardData
                 ? std::vector<PerfConfig>{PerfConfig{2}, PerfConfig{}}
                 : std::vector<PerfConfig>{PerfConfig{}, PerfConfig{2}};
    }
    return {PerfConfig{}};
  }
  // Where the batched rows or the packed GEMM apply, a find times them
  // beside the per-image GEMMs: which is faster depends on how the BLAS
  // runs short or narrow batches and on what the staging costs.
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    if (RowsInPlaceApply(p) || PackApplies(p)) return ConfigSpace(p);
    return {DefaultConfig(p)};
  }

  // Relative to the fp32 peak the estimate scales by: a BLAS GEMM on the
  // tensors reaches most of it; fp16 and bf16 run on tensor or matrix cores,
  // faster than the fp32 peak (the estimate caps this at 1).
  double Efficiency(const ConvProblem& p) const override {
    return p.type == DataType::kFp32 ? 0.7 : 1.0;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    RETURN_IF_ERROR(ValidateConfig(p, config));
    v1::ExecutionPlan plan = NewPlan(p, config);
    if (IsRowsInPlace(config)) {
      AddRowsInPlaceSteps(p, &plan);
      return plan;
    }
    const Staging s = StagingOf(p, IsPacked(config));
    for (int64_t i = 0; i < s.chunk_count; ++i) {
      const int64_t n0 = i * s.chunk_images;
      const int64_t nb = std::min(s.chunk_images, p.n - n0);
      AddChunkSteps(p, s, n0, nb, &plan);
    }
    if (s.dw_fp32) AddDwFromFp32Step(p, s.dw_offset, &plan);
    if (s.dw_slots) AddDwFromFp32Step(p, s.dw_offset, &plan, s.chunk_images);
    return plan;
  }

 private:
  // The steps of the images [n0, n0 + nb).
  static void AddChunkSteps(const ConvProblem& p, const Staging& s, int64_t n0,
                            int64_t nb, v1::ExecutionPlan* plan) {
    if (s.packed) {
      AddPackedSteps(p, s, n0, nb, plan);
      return;
    }
    const bool nchw = p.layout == Layout::kNCHW;
    const Direction d = p.direction;
    if (s.x_dense && d != Direction::kBackwardData) {
      // Only NCHW dw runs over (image, position) pairs; F keeps the images
      // apart.
      AddPackStep(p, v1::BUFFER_X, StridedX(p), n0, nb,
                  /*channel_major=*/PacksNchwDw(p), s.x_offset, plan);
    }
    if (s.y_packed) {
      AddPackStep(p, v1::BUFFER_Y, DenseY(p), n0, nb, /*channel_major=*/true,
                  s.y_offset, plan);
    }
    if (nchw) {
      AddNchwGemms(p, s, n0, nb, plan);
    } else {
      AddNhwcGemms(p, s, n0, nb, plan);
    }
    if (s.x_dense && d == Direction::kBackwardData) {
      AddUnpackStep(p, v1::BUFFER_X, StridedX(p), n0, nb, false, s.x_offset,
                    plan);
    }
  }

  // NHWC, config {2}: per group one GEMM batched over the output rows
  // (n, od, oh); B zeroes the unsampled positions of dx first.
  static void AddRowsInPlaceSteps(const ConvProblem& p,
                                  v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(),
                  kg = p.k_per_group();
    const int64_t ow = p.out(2), rows = p.n * p.out(0) * p.out(1);
    // Output row b of x starts b * SH * W positions on, its columns SW apart.
    const GemmOperand x{v1::BUFFER_X, 0, p.stride[1] * p.in[2] * p.c, cg, es};
    const GemmOperand y{v1::BUFFER_Y, 0, ow * p.k, kg, es};
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    if (p.direction == Direction::kForward) {
      g.m = ow, g.n = kg, g.k = cg, g.trans_b = true;
      g.lda = p.stride[2] * p.c, g.ldb = cg, g.ldc = p.k;
      AddGroupedGemms(g, x, w, y, rows, p.groups, plan);
      return;
    }
    AddZeroUnsampledStep(p, StridedX(p), plan);
    g.m = ow, g.n = cg, g.k = kg;
    g.lda = p.k, g.ldb = cg, g.ldc = p.stride[2] * p.c;
    AddGroupedGemms(g, y, w, x, rows, p.groups, plan);
  }

  // NCHW F: pack x, y^P[g] = w[g] x^P[g], unpack y; B: pack dy,
  // dx^P[g] = w[g]^T dy^P[g], unpack dx. ^P: channel-major over the chunk.
  static void AddPackedSteps(const ConvProblem& p, const Staging& s, int64_t n0,
                             int64_t nb, v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(),
                  kg = p.k_per_group();
    const int64_t cols = nb * p.out_spatial();
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    const GemmOperand x{v1::BUFFER_WORKSPACE, s.x_offset / es, 0, cg * cols,
                        es};
    const GemmOperand y{v1::BUFFER_WORKSPACE, s.y_offset / es, 0, kg * cols,
                        es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    g.n = cols, g.ldb = cols, g.ldc = cols;
    if (p.direction == Direction::kForward) {
      AddPackStep(p, v1::BUFFER_X, StridedX(p), n0, nb, /*channel_major=*/true,
                  s.x_offset, plan);
      g.m = kg, g.k = cg, g.lda = cg;
      AddGemmsPerImage(g, w, x, y, 1, p.groups, false, plan);
      AddUnpackStep(p, v1::BUFFER_Y, DenseY(p), n0, nb, /*channel_major=*/true,
                    s.y_offset, plan);
    } else {
      AddPackStep(p, v1::BUFFER_Y, DenseY(p), n0, nb, /*channel_major=*/true,
                  s.y_offset, plan);
      g.m = cg, g.k = kg, g.lda = cg, g.trans_a = true;
      AddGemmsPerImage(g, w, y, x, 1, p.groups, false, plan);
      AddUnpackStep(p, v1::BUFFER_X, StridedX(p), n0, nb,
                    /*channel_major=*/true, s.x_offset, plan);
    }
  }

  // dw, in w or in the fp32 workspace; the first chunk's GEMM overwrites it,
  // later ones add to it.
  static GemmOperand Dw(const ConvProblem& p, const Staging& s, int64_t n0,
                        gpu::BlasGemm* g) {
    const int64_t kg = p.k_per_group(), cg = p.c_per_group();
    g->beta = n0 > 0 ? 1 : 0;
    if (!s.dw_fp32) return {v1::BUFFER_W, 0, 0, kg * cg, ElementBytes(p.type)};
    g->c_type = DataType::kFp32;
    return {v1::BUFFER_WORKSPACE,
            s.dw_offset / static_cast<int64_t>(sizeof(float)), 0, kg * cg,
            sizeof(float)};
  }

  static void AddNhwcGemms(const ConvProblem& p, const Staging& s, int64_t n0,
                           int64_t nb, v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(),
                  kg = p.k_per_group();
    const int64_t os = p.out_spatial(), rows = nb * os;
    // x, dx: the chunk's rows of the tensor, or of the dense chunk.
    const GemmOperand x =
        s.x_dense
            ? GemmOperand{v1::BUFFER_WORKSPACE, s.x_offset / es, 0, cg, es}
            : GemmOperand{v1::BUFFER_X, n0 * os * p.c, 0, cg, es};
    const GemmOperand y{v1::BUFFER_Y, n0 * os * p.k, 0, kg, es};
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    switch (p.direction) {
      case Direction::kForward:
        g.m = rows, g.n = kg, g.k = cg, g.trans_b = true;
        g.lda = p.c, g.ldb = cg, g.ldc = p.k;
        AddGemmsPerImage(g, x, w, y, 1, p.groups, false, plan);
        break;
      case Direction::kBackwardData:
        g.m = rows, g.n = cg, g.k = kg;
        g.lda = p.k, g.ldb = cg, g.ldc = p.c;
        AddGemmsPerImage(g, y, w, x, 1, p.groups, false, plan);
        break;
      case Direction::kBackwardWeights: {
        const GemmOperand dw = Dw(p, s, n0, &g);
        g.m = kg, g.n = cg, g.k = rows, g.trans_a = true;
        g.lda = p.k, g.ldb = p.c, g.ldc = cg;
        AddGemmsPerImage(g, y, x, dw, 1, p.groups, false, plan);
        break;
      }
    }
  }

  static void AddNchwGemms(const ConvProblem& p, const Staging& s, int64_t n0,
                           int64_t nb, v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(),
                  kg = p.k_per_group();
    const int64_t os = p.out_spatial(), is = p.in_spatial();
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    if (s.dw_slots) {
      // Image i of the chunk adds dy[i] x[i]^T to slot i (the first chunk
      // sets the slots).
      const GemmOperand y{v1::BUFFER_Y, n0 * p.k * os, p.k * os, kg * os, es};
      const GemmOperand x =
          s.x_dense
              ? GemmOperand{v1::BUFFER_WORKSPACE, s.x_offset / es, p.c * os,
                            cg * os, es}
              : GemmOperand{v1::BUFFER_X, n0 * p.c * is, p.c * is, cg * is, es};
      const GemmOperand slots{v1::BUFFER_WORKSPACE,
                              s.dw_offset / static_cast<int64_t>(sizeof(float)),
                              p.w_elements(), kg * cg, sizeof(float)};
      g.c_type = DataType::kFp32;
      g.beta = n0 > 0 ? 1 : 0;
      g.m = kg, g.n = cg, g.k = os, g.trans_b = true;
      g.lda = os, g.ldb = os, g.ldc = cg;  // x in place only at stride 1
      AddGroupedGemms(g, y, x, slots, nb, p.groups, plan);
      return;
    }
    if (p.direction == Direction::kBackwardWeights) {
      // One GEMM over the chunk: k runs over its (image, position) pairs.
      const int64_t k = nb * os;
      const GemmOperand y =
          s.y_packed ? GemmOperand{v1::BUFFER_WORKSPACE, s.y_offset / es, 0,
                                   kg * k, es}
                     : GemmOperand{v1::BUFFER_Y, n0 * p.k * os, 0, kg * os, es};
      const GemmOperand x =
          s.x_dense ? GemmOperand{v1::BUFFER_WORKSPACE, s.x_offset / es, 0,
                                  cg * k, es}
                    : GemmOperand{v1::BUFFER_X, n0 * p.c * is, 0, cg * is, es};
      const GemmOperand dw = Dw(p, s, n0, &g);
      g.m = kg, g.n = cg, g.k = k, g.trans_b = true;
      g.lda = k, g.ldb = k, g.ldc = cg;
      AddGemmsPerImage(g, y, x, dw, 1, p.groups, false, plan);
      return;
    }
    // x, dx: the tensor, or the chunk's dense images.
    const GemmOperand x =
        s.x_dense
            ? GemmOperand{v1::BUFFER_WORKSPACE, s.x_offset / es, p.c * os,
                          cg * os, es}
            : GemmOperand{v1::BUFFER_X, n0 * p.c * is, p.c * is, cg * is, es};
    const GemmOperand y{v1::BUFFER_Y, n0 * p.k * os, p.k * os, kg * os, es};
    if (p.direction == Direction::kForward) {
      g.m = kg, g.n = os, g.k = cg;
      g.lda = cg, g.ldb = os, g.ldc = os;
      AddGroupedGemms(g, w, x, y, nb, p.groups, plan);
    } else {
      g.m = cg, g.n = os, g.k = kg, g.trans_a = true;
      g.lda = cg, g.ldb = os, g.ldc = os;
      AddGroupedGemms(g, w, y, x, nb, p.groups, plan);
    }
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuGemm1x1BlasSolver() {
  return std::make_unique<GpuGemm1x1Blas>();
}

}  // namespace convtune
