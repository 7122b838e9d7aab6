// "cpu.direct_tiled": direct convolution register-blocked over a channel block
// (KB) and an output-width block (WB), both compile-time so the block loops
// unroll and vectorize. Accumulates in fp32 whatever the storage type.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/plan_args.h"

namespace convtune::cpu {
namespace {

template <DataType T, int KB, int WB>
struct Tiled {
  using E = Elem<T>;
  using S = typename E::Storage;

  // Loads WB inputs of one input row for outputs ow0.., zero where out of
  // range.
  static void LoadRow(const ConvGeom& g, const S* x, int64_t row, int64_t ow0,
                      int64_t fw, float* xv) {
    for (int ww = 0; ww < WB; ++ww) {
      const int64_t ow = ow0 + ww;
      const int64_t iw = ow * g.stride[2] - g.pad[2] + fw * g.dil[2];
      xv[ww] = (ow < g.out[2] && iw >= 0 && iw < g.in[2])
                   ? E::Get(x, row + iw * g.xs[4])
                   : 0.f;
    }
  }

  static void Forward(const ConvGeom& g, const S* x, const S* w, S* y) {
    const int64_t kblocks = (g.kg + KB - 1) / KB, rows = g.out[0] * g.out[1];
    ParallelFor(
        g.n * g.groups * kblocks * rows, 1, [&](int64_t begin, int64_t end) {
          for (int64_t item = begin; item < end; ++item) {
            const int64_t row = item % rows, r = item / rows, kb = r % kblocks;
            const int64_t grp = (r / kblocks) % g.groups,
                          n = r / kblocks / g.groups;
            const int64_t od = row / g.out[1], oh = row % g.out[1];
            const int64_t k0 = grp * g.kg + kb * KB,
                          kn = std::min<int64_t>(KB, g.kg - kb * KB);
            for (int64_t ow0 = 0; ow0 < g.out[2]; ow0 += WB) {
              float acc[KB][WB] = {};
              for (int64_t c = 0; c < g.cg; ++c)
                for (int64_t fd = 0; fd < g.f[0]; ++fd) {
                  const int64_t id =
                      od * g.stride[0] - g.pad[0] + fd * g.dil[0];
                  if (id < 0 || id >= g.in[0]) continue;
                  for (int64_t fh = 0; fh < g.f[1]; ++fh) {
                    const int64_t ih =
                        oh * g.stride[1] - g.pad[1] + fh * g.dil[1];
                    if (ih < 0 || ih >= g.in[1]) continue;
                    const int64_t xrow = n * g.xs[0] +
                                         (grp * g.cg + c) * g.xs[1] +
                                         id * g.xs[2] + ih * g.xs[3];
                    for (int64_t fw = 0; fw < g.f[2]; ++fw) {
                      float xv[WB], wv[KB];
                      LoadRow(g, x, xrow, ow0, fw, xv);
                      const int64_t wo = c * g.ws[1] + fd * g.ws[2] +
                                         fh * g.ws[3] + fw * g.ws[4];
                      for (int kk = 0; kk < KB; ++kk)
                        wv[kk] =
                            kk < kn ? E::Get(w, (k0 + kk) * g.ws[0] + wo) : 0.f;
                      for (int kk = 0; kk < KB; ++kk)
                        for (int ww = 0; ww < WB; ++ww)
                          acc[kk][ww] += wv[kk] * xv[ww];
                    }
                  }
                }
              const int64_t wn = std::min<int64_t>(WB, g.out[2] - ow0);
              for (int64_t kk = 0; kk < kn; ++kk)
                for (int64_t ww = 0; ww < wn; ++ww)
                  E::Put(y,
                         n * g.ys[0] + (k0 + kk) * g.ys[1] + od * g.ys[2] +
                             oh * g.ys[3] + (ow0 + ww) * g.ys[4],
                         acc[kk][ww]);
            }
          }
        });
  }

  // Scatters dy * w into an fp32 image of KB input channels, stored
  // channel-innermost so the block loop is contiguous.
  static void BackwardData(const ConvGeom& g, S* x, const S* w, const S* y) {
    const int64_t cblocks = (g.cg + KB - 1) / KB;
    ParallelFor(g.n * g.groups * cblocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> buf(g.in_spatial * KB);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t cb = item % cblocks, grp = (item / cblocks) % g.groups;
        const int64_t n = item / cblocks / g.groups;
        const int64_t c0 = cb * KB, cn = std::min<int64_t>(KB, g.cg - c0);
        std::fill(buf.begin(), buf.end(), 0.f);
        for (int64_t kx = grp * g.kg; kx < (grp + 1) * g.kg; ++kx)
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow0 = 0; ow0 < g.out[2]; ow0 += WB) {
                const int64_t wn = std::min<int64_t>(WB, g.out[2] - ow0);
                float dyv[WB];
                for (int64_t ww = 0; ww < WB; ++ww)
                  dyv[ww] = ww < wn
                                ? E::Get(y, n * g.ys[0] + kx * g.ys[1] +
                                                od * g.ys[2] + oh * g.ys[3] +
                                                (ow0 + ww) * g.ys[4])
                                : 0.f;
                for (int64_t fd = 0; fd < g.f[0]; ++fd) {
                  const int64_t id =
                      od * g.stride[0] - g.pad[0] + fd * g.dil[0];
                  if (id < 0 || id >= g.in[0]) continue;
                  for (int64_t fh = 0; fh < g.f[1]; ++fh) {
                    const int64_t ih =
                        oh * g.stride[1] - g.pad[1] + fh * g.dil[1];
                    if (ih < 0 || ih >= g.in[1]) continue;
                    float* plane =
                        buf.data() + (id * g.in[1] + ih) * g.in[2] * KB;
                    for (int64_t fw = 0; fw < g.f[2]; ++fw) {
                      float wv[KB];
                      const int64_t wo = kx * g.ws[0] + fd * g.ws[2] +
                                         fh * g.ws[3] + fw * g.ws[4];
                      for (int kk = 0; kk < KB; ++kk)
                        wv[kk] =
                            kk < cn ? E::Get(w, wo + (c0 + kk) * g.ws[1]) : 0.f;
                      for (int64_t ww = 0; ww < wn; ++ww) {
                        const int64_t iw =
                            (ow0 + ww) * g.stride[2] - g.pad[2] + fw * g.dil[2];
                        if (iw < 0 || iw >= g.in[2]) continue;
                        float* dst = plane + iw * KB;
                        for (int kk = 0; kk < KB; ++kk)
                          dst[kk] += dyv[ww] * wv[kk];
                      }
                    }
                  }
                }
              }
        for (int64_t id = 0; id < g.in[0]; ++id)
          for (int64_t ih = 0; ih < g.in[1]; ++ih)
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const float* src =
                  buf.data() + ((id * g.in[1] + ih) * g.in[2] + iw) * KB;
              const int64_t base =
                  n * g.xs[0] + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4];
              for (int64_t kk = 0; kk < cn; ++kk)
                E::Put(x, base + (grp * g.cg + c0 + kk) * g.xs[1], src[kk]);
            }
      }
    });
  }

  // One work item: a block of KB filters against one input channel; a tile of
  // dy (KB x WB) is loaded once and reused over every filter tap.
  static void BackwardWeights(const ConvGeom& g, const S* x, S* w, const S* y) {
    const int64_t kblocks = (g.kg + KB - 1) / KB, fs = g.filter_spatial;
    ParallelFor(g.groups * kblocks * g.cg, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> acc(fs * KB);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t c = item % g.cg, kb = (item / g.cg) % kblocks;
        const int64_t grp = item / g.cg / kblocks;
        const int64_t k0 = grp * g.kg + kb * KB,
                      kn = std::min<int64_t>(KB, g.kg - kb * KB);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t n = 0; n < g.n; ++n)
          for (int64_t od = 0; od < g.out[0]; ++od)
            for (int64_t oh = 0; oh < g.out[1]; ++oh)
              for (int64_t ow0 = 0; ow0 < g.out[2]; ow0 += WB) {
                float dyt[KB][WB];
                for (int kk = 0; kk < KB; ++kk)
                  for (int ww = 0; ww < WB; ++ww)
                    dyt[kk][ww] =
                        (kk < kn && ow0 + ww < g.out[2])
                            ? E::Get(y, n * g.ys[0] + (k0 + kk) * g.ys[1] +
                                            od * g.ys[2] + oh * g.ys[3] +
                                            (ow0 + ww) * g.ys[4])
                            : 0.f;
                for (int64_t fd = 0; fd < g.f[0]; ++fd) {
                  const int64_t id =
                      od * g.stride[0] - g.pad[0] + fd * g.dil[0];
                  if (id < 0 || id >= g.in[0]) continue;
                  for (int64_t fh = 0; fh < g.f[1]; ++fh) {
                    const int64_t ih =
                        oh * g.stride[1] - g.pad[1] + fh * g.dil[1];
                    if (ih < 0 || ih >= g.in[1]) continue;
                    const int64_t xrow = n * g.xs[0] +
                                         (grp * g.cg + c) * g.xs[1] +
                                         id * g.xs[2] + ih * g.xs[3];
                    for (int64_t fw = 0; fw < g.f[2]; ++fw) {
                      float xv[WB];
                      LoadRow(g, x, xrow, ow0, fw, xv);
                      float* a =
                          acc.data() + ((fd * g.f[1] + fh) * g.f[2] + fw) * KB;
                      for (int kk = 0; kk < KB; ++kk) {
                        float s = 0.f;
                        for (int ww = 0; ww < WB; ++ww)
                          s += dyt[kk][ww] * xv[ww];
                        a[kk] += s;
                      }
                    }
                  }
                }
              }
        for (int64_t kk = 0; kk < kn; ++kk)
          for (int64_t fd = 0; fd < g.f[0]; ++fd)
            for (int64_t fh = 0; fh < g.f[1]; ++fh)
              for (int64_t fw = 0; fw < g.f[2]; ++fw)
                E::Put(w,
                       (k0 + kk) * g.ws[0] + c * g.ws[1] + fd * g.ws[2] +
                           fh * g.ws[3] + fw * g.ws[4],
                       acc[((fd * g.f[1] + fh) * g.f[2] + fw) * KB + kk]);
      }
    });
  }

  static void Run(const ConvGeom& g, const std::vector<void*>& b) {
    S* x = static_cast<S*>(b[0]);
    S* w = static_cast<S*>(b[1]);
    S* y = static_cast<S*>(b[2]);
    switch (g.p.direction) {
      case Direction::kForward:
        Forward(g, x, w, y);
        break;
      case Direction::kBackwardData:
        BackwardData(g, x, w, y);
        break;
      case Direction::kBackwardWeights:
        BackwardWeights(g, x, w, y);
        break;
    }
  }
};

using RunFn = void (*)(const ConvGeom&, const std::vector<void*>&);

template <DataType T>
RunFn Pick(int kbi, int wbi) {
  static constexpr RunFn kTable[3][3] = {
      {Tiled<T, 4, 4>::Run, Tiled<T, 4, 8>::Run, Tiled<T, 4, 16>::Run},
      {Tiled<T, 8, 4>::Run, Tiled<T, 8, 8>::Run, Tiled<T, 8, 16>::Run},
      {Tiled<T, 16, 4>::Run, Tiled<T, 16, 8>::Run, Tiled<T, 16, 16>::Run}};
  return kTable[kbi][wbi];
}

int BlockIndex(int64_t v) {
  for (int i = 0; i < 3; ++i) {
    if (kTiledBlocks[i] == v) return i;
  }
  return -1;
}

}  // namespace

absl::Status DirectTiledKernel(const v1::KernelStep& step,
                               const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g,
                   DecodeConvStep(kDirectTiledKernel, step, buffers, 3, 2));
  const auto params = KernelParams(step);
  const int kbi = BlockIndex(params[0]), wbi = BlockIndex(params[1]);
  if (kbi < 0 || wbi < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kDirectTiledKernel, ": blocks (", params[0], ", ",
                     params[1], ") must be 4, 8 or 16"));
  }
  switch (g.p.type) {
    case DataType::kFp32:
      Pick<DataType::kFp32>(kbi, wbi)(g, buffers);
      break;
    case DataType::kFp16:
      Pick<DataType::kFp16>(kbi, wbi)(g, buffers);
      break;
    case DataType::kBf16:
      Pick<DataType::kBf16>(kbi, wbi)(g, buffers);
      break;
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu
