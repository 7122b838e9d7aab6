// "cpu.gemm_1x1": a 1x1 convolution with stride 1 and no padding is a plain
// matrix product on the tensors as they lie, so no lowering and no workspace.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_util.h"

namespace convtune::cpu {
namespace {

bool Is1x1(const ConvGeom& g) {
  for (int i = 0; i < 3; ++i) {
    if (g.f[i] != 1 || g.pad[i] != 0 || g.stride[i] != 1) return false;
  }
  return true;
}

// Channels-first: one GEMM per image and group, spatial positions as columns.
void RunNchw(const ConvGeom& g, float* x, float* w, float* y) {
  const int64_t s = g.in_spatial;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      float* xg = x + n * g.xs[0] + grp * g.cg * g.xs[1];
      float* wg = w + grp * g.kg * g.ws[0];
      float* yg = y + n * g.ys[0] + grp * g.kg * g.ys[1];
      switch (g.p.direction) {
        case Direction::kForward:
          ParallelSgemm(false, false, g.kg, s, g.cg, wg, g.cg, xg, s, 0.f, yg,
                        s);
          break;
        case Direction::kBackwardData:
          ParallelSgemm(true, false, g.cg, s, g.kg, wg, g.cg, yg, s, 0.f, xg,
                        s);
          break;
        case Direction::kBackwardWeights:
          ParallelSgemm(false, true, g.kg, g.cg, s, yg, s, xg, s,
                        n > 0 ? 1.f : 0.f, wg, g.cg);
          break;
      }
    }
}

// Channels-last: the whole batch is one [N*HW x C] matrix, one GEMM per group.
void RunNhwc(const ConvGeom& g, float* x, float* w, float* y) {
  const int64_t rows = g.n * g.in_spatial;
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    float* xg = x + grp * g.cg;
    float* wg = w + grp * g.kg * g.ws[0];
    float* yg = y + grp * g.kg;
    switch (g.p.direction) {
      case Direction::kForward:
        ParallelSgemm(false, true, rows, g.kg, g.cg, xg, g.c, wg, g.cg, 0.f, yg,
                      g.k);
        break;
      case Direction::kBackwardData:
        ParallelSgemm(false, false, rows, g.cg, g.kg, yg, g.k, wg, g.cg, 0.f,
                      xg, g.c);
        break;
      case Direction::kBackwardWeights:
        ParallelSgemm(true, false, g.kg, g.cg, rows, yg, g.k, xg, g.c, 0.f, wg,
                      g.cg);
        break;
    }
  }
}

}  // namespace

absl::Status Gemm1x1Kernel(const v1::KernelStep& step,
                           const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g,
                   DecodeConvStep(kGemm1x1Kernel, step, buffers, 3, 0));
  RETURN_IF_ERROR(RequireFp32(kGemm1x1Kernel, g));
  if (!Is1x1(g)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kGemm1x1Kernel, ": needs a 1x1 filter, pad 0 and stride 1"));
  }
  float* x = static_cast<float*>(buffers[0]);
  float* w = static_cast<float*>(buffers[1]);
  float* y = static_cast<float*>(buffers[2]);
  if (g.p.layout == Layout::kNCHW) {
    RunNchw(g, x, w, y);
  } else {
    RunNhwc(g, x, w, y);
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu
