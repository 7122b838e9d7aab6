// "cpu.winograd_f2x3": Winograd F(2x2, 3x3). Each 4x4 input tile d becomes
// V = B^T d B, each filter g becomes U = G g G^T, and for every one of the 16
// transformed positions the channel contraction M = U V is one SGEMM over all
// tiles of an image; the 2x2 outputs are A^T M A. Backward data is the same
// forward pass over dy with the filter turned 180 degrees, C and K swapped
// and pad 2 - p.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/parallel.h"

namespace convtune::cpu {
namespace {

// One forward-shaped pass: src (ci channels, h x w) -> dst (co channels).
struct Pass {
  int64_t ci, co;
  int64_t h, w, oh, ow, ph, pw;
  int64_t tiles_h, tiles_w, tiles;
};

Pass MakePass(const ConvProblem& p) {
  Pass s;
  const bool fwd = p.direction == Direction::kForward;
  s.ci = fwd ? p.c_per_group() : p.k_per_group();
  s.co = fwd ? p.k_per_group() : p.c_per_group();
  s.h = fwd ? p.in[1] : p.out(1);
  s.w = fwd ? p.in[2] : p.out(2);
  s.oh = fwd ? p.out(1) : p.in[1];
  s.ow = fwd ? p.out(2) : p.in[2];
  s.ph = fwd ? p.pad[1] : 2 - p.pad[1];
  s.pw = fwd ? p.pad[2] : 2 - p.pad[2];
  s.tiles_h = (s.oh + 1) / 2;
  s.tiles_w = (s.ow + 1) / 2;
  s.tiles = s.tiles_h * s.tiles_w;
  return s;
}

// U[e][o][i] = G g G^T for every (o, i) of group grp.
void TransformFilters(const ConvGeom& g, const Pass& s, const float* w, int64_t grp, float* u) {
  const bool fwd = g.p.direction == Direction::kForward;
  ParallelFor(s.co, 4, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = 0; i < s.ci; ++i) {
        float f[3][3];
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) {
            f[r][c] = fwd ? w[(grp * g.kg + o) * g.ws[0] + i * g.ws[1] + r * g.ws[3] + c * g.ws[4]]
                          : w[(grp * g.kg + i) * g.ws[0] + o * g.ws[1] + (2 - r) * g.ws[3] +
                              (2 - c) * g.ws[4]];
          }
        float t[4][3];
        for (int c = 0; c < 3; ++c) {
          t[0][c] = f[0][c];
          t[1][c] = 0.5f * (f[0][c] + f[1][c] + f[2][c]);
          t[2][c] = 0.5f * (f[0][c] - f[1][c] + f[2][c]);
          t[3][c] = f[2][c];
        }
        for (int r = 0; r < 4; ++r) {
          const float v[4] = {t[r][0], 0.5f * (t[r][0] + t[r][1] + t[r][2]),
                              0.5f * (t[r][0] - t[r][1] + t[r][2]), t[r][2]};
          for (int c = 0; c < 4; ++c) u[((r * 4 + c) * s.co + o) * s.ci + i] = v[c];
        }
      }
  });
}

// V[e][i][t] = B^T d B for every channel i and tile t of one image.
// src points at the image's first channel; (sc, sh, sw) are its strides.
void TransformInput(const Pass& s, const float* src, int64_t sc, int64_t sh, int64_t sw,
                    float* v) {
  ParallelFor(s.ci, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t th = 0; th < s.tiles_h; ++th)
        for (int64_t tw = 0; tw < s.tiles_w; ++tw) {
          float d[4][4];
          for (int a = 0; a < 4; ++a) {
            const int64_t ih = th * 2 - s.ph + a;
            for (int b = 0; b < 4; ++b) {
              const int64_t iw = tw * 2 - s.pw + b;
              d[a][b] = (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w)
                            ? src[i * sc + ih * sh + iw * sw]
                            : 0.f;
            }
          }
          float t[4][4];
          for (int b = 0; b < 4; ++b) {
            t[0][b] = d[0][b] - d[2][b];
            t[1][b] = d[1][b] + d[2][b];
            t[2][b] = d[2][b] - d[1][b];
            t[3][b] = d[1][b] - d[3][b];
          }
          float* out = v + i * s.tiles + th * s.tiles_w + tw;
          const int64_t step = s.ci * s.tiles;
          for (int a = 0; a < 4; ++a) {
            out[(a * 4 + 0) * step] = t[a][0] - t[a][2];
            out[(a * 4 + 1) * step] = t[a][1] + t[a][2];
            out[(a * 4 + 2) * step] = t[a][2] - t[a][1];
            out[(a * 4 + 3) * step] = t[a][1] - t[a][3];
          }
        }
  });
}

// dst[o] = A^T M A per tile, clipped at the image edge.
void TransformOutput(const Pass& s, const float* m, float* dst, int64_t sc, int64_t sh,
                     int64_t sw) {
  ParallelFor(s.co, 1, [&](int64_t o0, int64_t o1) {
    const int64_t step = s.co * s.tiles;
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t th = 0; th < s.tiles_h; ++th)
        for (int64_t tw = 0; tw < s.tiles_w; ++tw) {
          const float* in = m + o * s.tiles + th * s.tiles_w + tw;
          float e[4][4];
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) e[a][b] = in[(a * 4 + b) * step];
          float t[2][4];
          for (int b = 0; b < 4; ++b) {
            t[0][b] = e[0][b] + e[1][b] + e[2][b];
            t[1][b] = e[1][b] - e[2][b] - e[3][b];
          }
          for (int a = 0; a < 2; ++a) {
            const int64_t yh = th * 2 + a;
            if (yh >= s.oh) break;
            const float r[2] = {t[a][0] + t[a][1] + t[a][2], t[a][1] - t[a][2] - t[a][3]};
            for (int b = 0; b < 2; ++b) {
              const int64_t yw = tw * 2 + b;
              if (yw < s.ow) dst[o * sc + yh * sh + yw * sw] = r[b];
            }
          }
        }
  });
}

absl::Status CheckShape(const ConvGeom& g) {
  const ConvProblem& p = g.p;
  if (p.spatial_dims != 2 || p.filter[1] != 3 || p.filter[2] != 3 || p.stride[1] != 1 ||
      p.stride[2] != 1 || p.dilation[1] != 1 || p.dilation[2] != 1 ||
      p.direction == Direction::kBackwardWeights) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWinogradF2x3Kernel, ": needs 2-D, a 3x3 filter, stride 1, dilation 1, F or B"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t WinogradWorkspaceBytes(const ConvProblem& p) {
  const Pass s = MakePass(p);
  return 16 * (s.co * s.ci + s.ci * s.tiles + s.co * s.tiles) *
         static_cast<int64_t>(sizeof(float));
}

absl::Status WinogradF2x3Kernel(const v1::KernelStep& step, const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g, DecodeConvStep(kWinogradF2x3Kernel, step, buffers, 4, 0));
  RETURN_IF_ERROR(RequireFp32(kWinogradF2x3Kernel, g));
  RETURN_IF_ERROR(CheckShape(g));
  const Pass s = MakePass(g.p);
  const bool fwd = g.p.direction == Direction::kForward;
  float* x = static_cast<float*>(buffers[0]);
  const float* w = static_cast<const float*>(buffers[1]);
  float* y = static_cast<float*>(buffers[2]);
  float* u = static_cast<float*>(buffers[3]);
  float* v = u + 16 * s.co * s.ci;
  float* m = v + 16 * s.ci * s.tiles;
  const Strides& ss = fwd ? g.xs : g.ys;  // source strides
  const Strides& ds = fwd ? g.ys : g.xs;
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    TransformFilters(g, s, w, grp, u);
    for (int64_t n = 0; n < g.n; ++n) {
      const int64_t src_ch = grp * s.ci, dst_ch = grp * s.co;
      const float* src = (fwd ? x : y) + n * ss[0] + src_ch * ss[1];
      float* dst = (fwd ? y : x) + n * ds[0] + dst_ch * ds[1];
      TransformInput(s, src, ss[1], ss[3], ss[4], v);
      ParallelFor(16, 1, [&](int64_t e0, int64_t e1) {
        for (int64_t e = e0; e < e1; ++e) {
          ParallelSgemm(false, false, s.co, s.tiles, s.ci, u + e * s.co * s.ci, s.ci,
                        v + e * s.ci * s.tiles, s.tiles, 0.f, m + e * s.co * s.tiles, s.tiles);
        }
      });
      TransformOutput(s, m, dst, ds[1], ds[3], ds[4]);
    }
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu
