// "cpu.im2col_gemm": lowers one image and group at a time to a column matrix
// and hands the product to SGEMM. Channels-first uses col = [C/G*FS x OHW];
// channels-last the transposed form col = [OHW x FS*C/G], so both GEMMs read
// the tensors in place. Backward data runs the GEMM into col, then col2im.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_sgemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/parallel.h"
#include "kernels/index_math.h"

namespace convtune::cpu {
namespace {

// The outputs [lo, hi) along an axis whose input index o*s + off is in [0,
// len).
void ValidRange(int64_t off, int64_t s, int64_t len, int64_t out, int64_t* lo,
                int64_t* hi) {
  *lo = std::clamp<int64_t>(CeilDiv(-off, s), 0, out);
  *hi = std::clamp<int64_t>(CeilDiv(len - off, s), *lo, out);
}

struct Tap {
  int64_t fd, fh, fw;
};
Tap TapOf(const ConvGeom& g, int64_t t) {
  return {t / (g.f[1] * g.f[2]), (t / g.f[2]) % g.f[1], t % g.f[2]};
}

// Channels-first rows: row r = c*FS + tap holds x[c][i(o, tap)] over all o.
// With `scatter`, adds the row back into x instead (col2im).
template <bool kScatter>
void RowsNchw(const ConvGeom& g, float* x, float* col, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t c = r / g.filter_spatial;
    const Tap t = TapOf(g, r % g.filter_spatial);
    float* row = col + r * g.out_spatial;
    const int64_t off = t.fw * g.dil[2] - g.pad[2], s = g.stride[2];
    int64_t lo, hi;
    ValidRange(off, s, g.in[2], g.out[2], &lo, &hi);
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t id = od * g.stride[0] - g.pad[0] + t.fd * g.dil[0];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t ih = oh * g.stride[1] - g.pad[1] + t.fh * g.dil[1];
        float* seg = row + (od * g.out[1] + oh) * g.out[2];
        const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
        if constexpr (kScatter) {
          if (!inside) continue;
          float* src = x + c * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + off;
          for (int64_t ow = lo; ow < hi; ++ow) src[ow * s] += seg[ow];
        } else {
          if (!inside) {
            std::fill(seg, seg + g.out[2], 0.f);
            continue;
          }
          const float* src =
              x + c * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + off;
          std::fill(seg, seg + lo, 0.f);
          if (s == 1) {
            std::memcpy(seg + lo, src + lo, (hi - lo) * sizeof(float));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) seg[ow] = src[ow * s];
          }
          std::fill(seg + hi, seg + g.out[2], 0.f);
        }
      }
    }
  }
}

// Channels-last rows: row o holds, per tap, the C/G channels at i(o, tap).
// With `scatter`, adds channels [c0, c1) of every row back into x.
template <bool kScatter>
void RowsNhwc(const ConvGeom& g, float* x, float* col, int64_t o0, int64_t o1,
              int64_t c0, int64_t c1) {
  const int64_t width = g.filter_spatial * g.cg;
  for (int64_t o = o0; o < o1; ++o) {
    const int64_t ow = o % g.out[2], oh = (o / g.out[2]) % g.out[1],
                  od = o / g.out[2] / g.out[1];
    float* row = col + o * width;
    for (int64_t tap = 0; tap < g.filter_spatial; ++tap) {
      const Tap t = TapOf(g, tap);
      const int64_t id = od * g.stride[0] - g.pad[0] + t.fd * g.dil[0];
      const int64_t ih = oh * g.stride[1] - g.pad[1] + t.fh * g.dil[1];
      const int64_t iw = ow * g.stride[2] - g.pad[2] + t.fw * g.dil[2];
      const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] &&
                          iw >= 0 && iw < g.in[2];
      float* seg = row + tap * g.cg;
      float* px = x + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4];
      if constexpr (kScatter) {
        if (!inside) continue;
        for (int64_t c = c0; c < c1; ++c) px[c] += seg[c];
      } else if (inside) {
        std::memcpy(seg, px, g.cg * sizeof(float));
      } else {
        std::fill(seg, seg + g.cg, 0.f);
      }
    }
  }
}

// Channels-first row (c, tap) of col, outputs [o0, o0 + count) only.
void Im2colRowPart(const ConvGeom& g, const float* x, int64_t r, int64_t o0,
                   int64_t count, float* dst) {
  const int64_t c = r / g.filter_spatial;
  const Tap t = TapOf(g, r % g.filter_spatial);
  const int64_t off = t.fw * g.dil[2] - g.pad[2], s = g.stride[2];
  int64_t lo, hi;
  ValidRange(off, s, g.in[2], g.out[2], &lo, &hi);
  const int64_t end = o0 + count;
  for (int64_t o = o0; o < end;) {
    const int64_t ow0 = o % g.out[2], line = o / g.out[2];
    const int64_t oh = line % g.out[1], od = line / g.out[1];
    const int64_t seg_end = std::min(end, o - ow0 + g.out[2]);
    const int64_t id = od * g.stride[0] - g.pad[0] + t.fd * g.dil[0];
    const int64_t ih = oh * g.stride[1] - g.pad[1] + t.fh * g.dil[1];
    float* out = dst + (o - o0) - ow0;  // indexed by ow
    const int64_t ow1 = ow0 + (seg_end - o);
    if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
      std::fill(out + ow0, out + ow1, 0.f);
    } else {
      const float* src = x + c * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + off;
      const int64_t a = std::clamp(lo, ow0, ow1), b = std::clamp(hi, a, ow1);
      std::fill(out + ow0, out + a, 0.f);
      if (s == 1) {
        std::memcpy(out + a, src + a, (b - a) * sizeof(float));
      } else {
        for (int64_t ow = a; ow < b; ++ow) out[ow] = src[ow * s];
      }
      std::fill(out + b, out + ow1, 0.f);
    }
    o = seg_end;
  }
}

// Packs col[k0 .. k0+kc) x [n0 .. n0+nc) for the AVX-512 SGEMM straight from
// x, so the column matrix is never written out whole.
void PackIm2colNchw(const ConvGeom& g, const float* x, int64_t k0, int64_t kc,
                    int64_t n0, int64_t nc, float* out) {
  thread_local std::vector<float> row;
  row.resize(nc);
  for (int64_t kk = 0; kk < kc; ++kk) {
    Im2colRowPart(g, x, k0 + kk, n0, nc, row.data());
    for (int64_t p = 0; p < nc; p += kSgemmNr) {
      const int64_t cols = std::min(kSgemmNr, nc - p);
      float* dst = out + p * kc + kk * kSgemmNr;
      std::memcpy(dst, row.data() + p, cols * sizeof(float));
      std::fill(dst + cols, dst + kSgemmNr, 0.f);
    }
  }
}

// x points at image n, channel grp*C/G.
void Im2col(const ConvGeom& g, const float* x, float* col) {
  float* xm = const_cast<float*>(x);  // read only: kScatter is false
  if (g.p.layout == Layout::kNCHW) {
    ParallelFor(g.cg * g.filter_spatial, 1, [&](int64_t b, int64_t e) {
      RowsNchw<false>(g, xm, col, b, e);
    });
  } else {
    ParallelFor(g.out_spatial, 8, [&](int64_t b, int64_t e) {
      RowsNhwc<false>(g, xm, col, b, e, 0, g.cg);
    });
  }
}

// Zeroes channels [grp*C/G, +C/G) of image n of dx, then adds col back in.
void Col2im(const ConvGeom& g, float* x, const float* col) {
  float* cm = const_cast<float*>(col);  // read only: kScatter is true
  ParallelFor(g.cg, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t i = 0; i < g.in_spatial; ++i) {
        const int64_t iw = i % g.in[2], ih = (i / g.in[2]) % g.in[1],
                      id = i / g.in[2] / g.in[1];
        x[c * g.xs[1] + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]] = 0.f;
      }
    if (g.p.layout == Layout::kNCHW) {
      RowsNchw<true>(g, x, cm, c0 * g.filter_spatial, c1 * g.filter_spatial);
    } else {
      RowsNhwc<true>(g, x, cm, 0, g.out_spatial, c0, c1);
    }
  });
}

void RunGroup(const ConvGeom& g, int64_t n, int64_t grp, float* x, float* w,
              float* y, float* col) {
  const bool nchw = g.p.layout == Layout::kNCHW;
  float* xg = x + n * g.xs[0] + grp * g.cg * g.xs[1];
  float* wg = w + grp * g.kg * g.ws[0];
  float* yg = y + n * g.ys[0] + grp * g.kg * g.ys[1];
  const int64_t os = g.out_spatial, width = g.cg * g.filter_spatial;
  const float beta = n > 0 ? 1.f : 0.f;
  switch (g.p.direction) {
    case Direction::kForward:
      // Packing col straight from x pays off when the threads split its
      // columns; when they split the filters instead, each would pack all of
      // col, so it is written out once, in parallel, and read in place.
      if (nchw && HasAvx512Sgemm() && os >= g.kg) {
        ParallelSgemmPackedB(
            g.kg, os, width, wg, width,
            [&](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* out) {
              PackIm2colNchw(g, xg, k0, kc, n0, nc, out);
            },
            yg, os);
        break;
      }
      Im2col(g, xg, col);
      if (nchw) {
        ParallelSgemm(false, false, g.kg, os, width, wg, width, col, os, 0.f,
                      yg, os);
      } else {
        ParallelSgemm(false, true, os, g.kg, width, col, width, wg, width, 0.f,
                      yg, g.k);
      }
      break;
    case Direction::kBackwardData:
      if (nchw) {
        ParallelSgemm(true, false, width, os, g.kg, wg, width, yg, os, 0.f, col,
                      os);
      } else {
        ParallelSgemm(false, false, os, width, g.kg, yg, g.k, wg, width, 0.f,
                      col, width);
      }
      Col2im(g, xg, col);
      break;
    case Direction::kBackwardWeights:
      Im2col(g, xg, col);
      if (nchw) {
        ParallelSgemm(false, true, g.kg, width, os, yg, os, col, os, beta, wg,
                      width);
      } else {
        ParallelSgemm(true, false, g.kg, width, os, yg, g.k, col, width, beta,
                      wg, width);
      }
      break;
  }
}

}  // namespace

int64_t Im2colWorkspaceBytes(const ConvProblem& p) {
  return p.c_per_group() * p.filter_spatial() * p.out_spatial() *
         static_cast<int64_t>(sizeof(float));
}

absl::Status Im2colGemmKernel(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g,
                   DecodeConvStep(kIm2colGemmKernel, step, buffers, 4, 0));
  RETURN_IF_ERROR(RequireFp32(kIm2colGemmKernel, g));
  float* x = static_cast<float*>(buffers[0]);
  float* w = static_cast<float*>(buffers[1]);
  float* y = static_cast<float*>(buffers[2]);
  float* col = static_cast<float*>(buffers[3]);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      RunGroup(g, n, grp, x, w, y, col);
  return absl::OkStatus();
}

}  // namespace convtune::cpu
