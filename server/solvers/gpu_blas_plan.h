// Plan pieces the BLAS GEMM solvers share: "blas.gemm" steps over grouped
// operands (kernels/gpu/blas_step.h defines the step), the lowering kernels
// of conv_im2col.cu, dw summed in an fp32 workspace for 16-bit types, and the
// workspace layout of the solvers that stage operands there.
// Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_SOLVERS_GPU_BLAS_PLAN_H_
#define CONVTUNE_SERVER_SOLVERS_GPU_BLAS_PLAN_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/problem.h"

namespace convtune {

// One operand of a GEMM repeated over images and groups: where the matrix of
// image 0, group 0 starts, and how far on the next image's and the next
// group's are. In elements of the operand's type.
struct GemmOperand {
  v1::BufferRole role = v1::BUFFER_ROLE_UNSPECIFIED;
  int64_t offset = 0;
  int64_t image_stride = 0;
  int64_t group_stride = 0;
  int64_t element_bytes = 4;
};

// Appends, for each image in [0, images), one GEMM `g` batched over the
// groups (image i's matrices start i image strides on). `g.beta` applies to
// every step, or with `sum_images` to the first only: the images' products
// are then summed into C, whose image stride must be 0.
void AddGemmsPerImage(const gpu::BlasGemm& g, const GemmOperand& a,
                      const GemmOperand& b, const GemmOperand& c,
                      int64_t images, int64_t groups, bool sum_images,
                      v1::ExecutionPlan* plan);

// Appends the GEMMs `g` for every image in [0, images) and group in
// [0, groups) in the fewer steps of the two ways: one step per group batched
// over the images, or one per image batched over the groups.
void AddGroupedGemms(const gpu::BlasGemm& g, const GemmOperand& a,
                     const GemmOperand& b, const GemmOperand& c, int64_t images,
                     int64_t groups, v1::ExecutionPlan* plan);

// The index of conv_im2col.cu for p's type and layout in plan.sources.
int AddLoweringSource(const ConvProblem& p, v1::ExecutionPlan* plan);

// Appends conv_im2col (x -> column matrix at workspace offset 0, with the
// images inner when `images_inner`, NCHW only) or conv_col2im (column matrix
// -> dx) for the images [n0, n0 + nb).
void AddIm2colStep(const ConvProblem& p, int64_t n0, int64_t nb,
                   v1::ExecutionPlan* plan, bool images_inner = false);
void AddCol2imStep(const ConvProblem& p, int64_t n0, int64_t nb,
                   v1::ExecutionPlan* plan);

// A tensor of the problem's layout as conv_pack and conv_unpack see it:
// `channels` channels of spatial size `in`, sampled every `stride` positions
// to the size `out`.
struct SampledTensor {
  int64_t channels = 1;
  std::array<int64_t, 3> in = {1, 1, 1};
  std::array<int64_t, 3> out = {1, 1, 1};
  std::array<int64_t, 3> stride = {1, 1, 1};
};
// x sampled at p's strides (p has a 1x1 filter and pad 0), and dy.
SampledTensor StridedX(const ConvProblem& p);
SampledTensor DenseY(const ConvProblem& p);

// Appends conv_pack: the images [n0, n0 + nb) of `t` in buffer `src` to the
// dense chunk at workspace byte `workspace_offset`, channel-major or
// image-major (conv_im2col.cu defines both).
void AddPackStep(const ConvProblem& p, v1::BufferRole src,
                 const SampledTensor& t, int64_t n0, int64_t nb,
                 bool channel_major, int64_t workspace_offset,
                 v1::ExecutionPlan* plan);

// Appends conv_unpack: the images [n0, n0 + nb) of `t` in buffer `dst` (every
// element: the sampled ones from the dense chunk at workspace byte
// `workspace_offset`, image-major or channel-major, the others 0).
void AddUnpackStep(const ConvProblem& p, v1::BufferRole dst,
                   const SampledTensor& t, int64_t n0, int64_t nb,
                   bool channel_major, int64_t workspace_offset,
                   v1::ExecutionPlan* plan);

// Appends conv_zero_unsampled (NHWC): the positions of `t` in buffer X that
// no output samples set to 0, the others left as they are, for all images.
// REQUIRES: N times the spatial size of `t` fits 32 bits.
void AddZeroUnsampledStep(const ConvProblem& p, const SampledTensor& t,
                          v1::ExecutionPlan* plan);

// Appends conv_f32_to_type: w = the sum of `slices` fp32 dw tensors, one
// after the other from `workspace_offset` bytes.
void AddDwFromFp32Step(const ConvProblem& p, int64_t workspace_offset,
                       v1::ExecutionPlan* plan, int64_t slices = 1);

// cuBLAS and rocBLAS want matrices aligned at least this far for their
// fastest kernels; workspace regions start on such a boundary.
inline constexpr int64_t kWorkspaceAlign = 256;
// `bytes` rounded up to kWorkspaceAlign.
int64_t AlignWorkspace(int64_t bytes);

// The most workspace a solver that runs the images in chunks takes: chunks
// are sized to fit in it.
inline constexpr int64_t kWorkspaceBudget = int64_t{512} << 20;

// OK, or FailedPrecondition naming the first of `sizes` (name, value) that
// exceeds the 32-bit sizes the BLAS interfaces take.
absl::Status CheckBlasSizes(
    absl::string_view solver,
    std::initializer_list<std::pair<const char*, int64_t>> sizes);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_GPU_BLAS_PLAN_H_
