#include "server/solvers/gpu_blas_plan.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"
#include "server/solvers/gpu_solver_util.h"

namespace convtune {
namespace {

constexpr int64_t kBlock = 256;
// Blocks stride over larger ranges rather than growing the grid without end.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// Threads an NCHW im2col aims for: a few waves of a large GPU.
constexpr int64_t kIm2colThreads = int64_t{1} << 19;

int64_t Blocks(int64_t threads) {
  return std::clamp<int64_t>((threads + kBlock - 1) / kBlock, 1, kMaxBlocks);
}

// One "blas.gemm" step; a, b, c start at the given element offsets.
void AddGemmStep(const gpu::BlasGemm& g, const GemmOperand& a, int64_t a_offset,
                 const GemmOperand& b, int64_t b_offset, const GemmOperand& c,
                 int64_t c_offset, v1::ExecutionPlan* plan) {
  v1::KernelStep* step = plan->add_steps();
  gpu::SetBlasGemm(g, step);
  AddBuffer(step, a.role, a_offset * a.element_bytes);
  AddBuffer(step, b.role, b_offset * b.element_bytes);
  AddBuffer(step, c.role, c_offset * c.element_bytes);
}

v1::KernelStep* AddLoweringStep(const ConvProblem& p, absl::string_view kernel,
                                int64_t threads, v1::ExecutionPlan* plan) {
  return AddGpuStep(plan, kernel, AddLoweringSource(p, plan),
                    {Blocks(threads), 1, 1}, kBlock);
}

// log2 of the lanes conv_pack and conv_unpack give a row `width` long: the
// power of two that covers it, at most 32.
int64_t LaneShift(int64_t width) {
  int64_t shift = 0;
  while (shift < 5 && (int64_t{1} << shift) < width) ++shift;
  return shift;
}

// conv_pack's and conv_unpack's work items: NHWC an image row of positions
// (lanes over `channels`), NCHW a band of the rows of a channel plane, the
// bands short enough to give about kPackItems items.
constexpr int64_t kPackItems = int64_t{1} << 16;
struct RowsWork {
  int64_t items, band, width;
};
RowsWork PackWork(const ConvProblem& p, int64_t nb, int64_t channels,
                  const std::array<int64_t, 3>& walked) {
  if (p.layout == Layout::kNHWC)
    return {nb * walked[0] * walked[1], 1, channels};
  const int64_t planes = nb * channels, rows = walked[0] * walked[1];
  const int64_t bands =
      std::clamp<int64_t>((kPackItems + planes - 1) / planes, 1, rows);
  const int64_t band = (rows + bands - 1) / bands;
  return {planes * ((rows + band - 1) / band), band, walked[2]};
}

// A conv_pack or conv_unpack step over `work`; the caller appends the
// scalars, then AddRowsTail.
v1::KernelStep* AddRowsStep(const ConvProblem& p, absl::string_view kernel,
                            const RowsWork& work, v1::ExecutionPlan* plan) {
  const int64_t block_rows = kBlock >> LaneShift(work.width);
  return AddGpuStep(
      plan, kernel, AddLoweringSource(p, plan),
      {std::clamp<int64_t>((work.items + block_rows - 1) / block_rows, 1,
                           kMaxBlocks),
       1, 1},
      kBlock);
}
void AddRowsTail(const RowsWork& work, v1::KernelStep* step) {
  step->add_scalars(work.band);
  step->add_scalars(LaneShift(work.width));
}

// The channels, sizes and strides of `t` (conv_pack's and conv_unpack's
// leading scalars).
void AddSampledScalars(const SampledTensor& t, v1::KernelStep* step) {
  step->add_scalars(t.channels);
  for (const auto* dims : {&t.in, &t.out, &t.stride}) {
    for (int64_t v : *dims) step->add_scalars(v);
  }
}

}  // namespace

void AddGemmsPerImage(const gpu::BlasGemm& g, const GemmOperand& a,
                      const GemmOperand& b, const GemmOperand& c,
                      int64_t images, int64_t groups, bool sum_images,
                      v1::ExecutionPlan* plan) {
  gpu::BlasGemm s = g;
  s.stride_a = a.group_stride, s.stride_b = b.group_stride,
  s.stride_c = c.group_stride;
  s.batch = groups;
  for (int64_t i = 0; i < images; ++i) {
    if (sum_images && i > 0) s.beta = 1;
    AddGemmStep(s, a, a.offset + i * a.image_stride, b,
                b.offset + i * b.image_stride, c, c.offset + i * c.image_stride,
                plan);
  }
}

void AddGroupedGemms(const gpu::BlasGemm& g, const GemmOperand& a,
                     const GemmOperand& b, const GemmOperand& c, int64_t images,
                     int64_t groups, v1::ExecutionPlan* plan) {
  if (groups > images) {
    AddGemmsPerImage(g, a, b, c, images, groups, /*sum_images=*/false, plan);
    return;
  }
  gpu::BlasGemm s = g;
  s.stride_a = a.image_stride, s.stride_b = b.image_stride,
  s.stride_c = c.image_stride;
  s.batch = images;
  for (int64_t j = 0; j < groups; ++j) {
    AddGemmStep(s, a, a.offset + j * a.group_stride, b,
                b.offset + j * b.group_stride, c, c.offset + j * c.group_stride,
                plan);
  }
}

int AddLoweringSource(const ConvProblem& p, v1::ExecutionPlan* plan) {
  // The lowering kernels do not depend on the direction: one code object
  // serves all three.
  const std::vector<std::string> options = {
      absl::StrCat("-DCT_TYPE=", static_cast<int>(p.type)),
      absl::StrCat("-DCT_NHWC=", p.layout == Layout::kNHWC ? 1 : 0)};
  return AddSource(plan, "conv_im2col.cu", options);
}

void AddIm2colStep(const ConvProblem& p, int64_t n0, int64_t nb,
                   v1::ExecutionPlan* plan, bool images_inner) {
  // NCHW: a thread per output position, image and group walks a block of
  // the group's channels; the blocks split the channels finely enough to
  // give about kIm2colThreads threads.
  int64_t channel_blocks = 1;
  int64_t threads = nb * p.c * p.filter_spatial() * p.out_spatial();
  if (p.layout != Layout::kNHWC) {
    const int64_t positions = nb * p.groups * p.out_spatial();
    channel_blocks = std::clamp<int64_t>(CeilDiv(kIm2colThreads, positions), 1,
                                         p.c_per_group());
    threads = channel_blocks * positions;
  }
  v1::KernelStep* step = AddLoweringStep(p, "conv_im2col", threads, plan);
  AddBuffer(step, v1::BUFFER_X);
  AddBuffer(step, v1::BUFFER_WORKSPACE);
  AppendProblemScalars(p, step);
  step->add_scalars(n0);
  step->add_scalars(nb);
  step->add_scalars(images_inner ? 1 : 0);
  step->add_scalars(channel_blocks);
}

void AddCol2imStep(const ConvProblem& p, int64_t n0, int64_t nb,
                   v1::ExecutionPlan* plan) {
  v1::KernelStep* step =
      AddLoweringStep(p, "conv_col2im", nb * p.c * p.in_spatial(), plan);
  AddBuffer(step, v1::BUFFER_WORKSPACE);
  AddBuffer(step, v1::BUFFER_X);
  AppendProblemScalars(p, step);
  step->add_scalars(n0);
  step->add_scalars(nb);
}

SampledTensor StridedX(const ConvProblem& p) {
  return {p.c, p.in, {p.out(0), p.out(1), p.out(2)}, p.stride};
}

SampledTensor DenseY(const ConvProblem& p) {
  const std::array<int64_t, 3> out = {p.out(0), p.out(1), p.out(2)};
  return {p.k, out, out, {1, 1, 1}};
}

void AddPackStep(const ConvProblem& p, v1::BufferRole src,
                 const SampledTensor& t, int64_t n0, int64_t nb,
                 bool channel_major, int64_t workspace_offset,
                 v1::ExecutionPlan* plan) {
  const RowsWork work = PackWork(p, nb, t.channels, t.out);
  v1::KernelStep* step = AddRowsStep(p, "conv_pack", work, plan);
  AddBuffer(step, src);
  AddBuffer(step, v1::BUFFER_WORKSPACE, workspace_offset);
  AddSampledScalars(t, step);
  step->add_scalars(n0);
  step->add_scalars(nb);
  step->add_scalars(channel_major ? 1 : 0);
  AddRowsTail(work, step);
}

void AddUnpackStep(const ConvProblem& p, v1::BufferRole dst,
                   const SampledTensor& t, int64_t n0, int64_t nb,
                   bool channel_major, int64_t workspace_offset,
                   v1::ExecutionPlan* plan) {
  const RowsWork work = PackWork(p, nb, t.channels, t.in);
  v1::KernelStep* step = AddRowsStep(p, "conv_unpack", work, plan);
  AddBuffer(step, v1::BUFFER_WORKSPACE, workspace_offset);
  AddBuffer(step, dst);
  AddSampledScalars(t, step);
  step->add_scalars(n0);
  step->add_scalars(nb);
  step->add_scalars(channel_major ? 1 : 0);
  AddRowsTail(work, step);
}

void AddZeroUnsampledStep(const ConvProblem& p, const SampledTensor& t,
                          v1::ExecutionPlan* plan) {
  const RowsWork work = PackWork(p, p.n, t.channels, t.in);
  v1::KernelStep* step = AddRowsStep(p, "conv_zero_unsampled", work, plan);
  AddBuffer(step, v1::BUFFER_X);
  AddSampledScalars(t, step);
  step->add_scalars(0);
  step->add_scalars(p.n);
  AddRowsTail(work, step);
}

void AddDwFromFp32Step(const ConvProblem& p, int64_t workspace_offset,
                       v1::ExecutionPlan* plan, int64_t slices) {
  AddSumSlicesStep(plan, "conv_f32_to_type", AddLoweringSource(p, plan),
                   workspace_offset, p.w_elements(), slices);
}

int64_t AlignWorkspace(int64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

absl::Status CheckBlasSizes(
    absl::string_view solver,
    std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (const auto& [name, v] : sizes) {
    if (v > std::numeric_limits<int32_t>::max()) {
      return absl::FailedPreconditionError(absl::StrCat(
          solver, " passes ", name, " to the BLAS as a 32-bit size: ", v,
          " exceeds 2^31 - 1"));
    }
  }
  return absl::OkStatus();
}

}  // namespace convtune
