// "cpu.winograd_f2x3": Winograd F(2x2, 3x3). Each 4x4 input tile d becomes
// V = B^T d B, each filter g becomes U = G g G^T, and for every one of the 16
// transformed positions the channel contraction M = U V is a GEMM over the
// channels for a block of tiles; the 2x2 outputs are A^T M A. Backward data is
// the same forward pass over dy with the filter turned 180 degrees, C and K
// swapped and pad 2 - p.
#include <immintrin.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_sgemm.h"
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
void TransformFilters(const ConvGeom& g, const Pass& s, const float* w,
                      int64_t grp, float* u) {
  const bool fwd = g.p.direction == Direction::kForward;
  ParallelFor(s.co, 4, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i = 0; i < s.ci; ++i) {
        float f[3][3];
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c) {
            f[r][c] = fwd ? w[(grp * g.kg + o) * g.ws[0] + i * g.ws[1] +
                              r * g.ws[3] + c * g.ws[4]]
                          : w[(grp * g.kg + i) * g.ws[0] + o * g.ws[1] +
                              (2 - r) * g.ws[3] + (2 - c) * g.ws[4]];
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
          for (int c = 0; c < 4; ++c)
            u[((r * 4 + c) * s.co + o) * s.ci + i] = v[c];
        }
      }
  });
}

// Tiles are processed in blocks of kSgemmNr, so that a block's transformed
// input is exactly one packed B panel per position e and its working set
// stays in cache from input transform to output transform.
constexpr int64_t kBlock = kSgemmNr;

struct Layout16 {
  int64_t co_pad;    // co rounded up to the A panel height
  int64_t blocks;    // tile blocks per image
  int64_t u_plain;   // floats of U as [16][co][ci]
  int64_t u_packed;  // floats of U as 16 panel sets (0 without AVX-512)
  int64_t v_block, m_block;
};

Layout16 MakeLayout(const Pass& s, bool packed) {
  Layout16 l;
  l.co_pad = (s.co + kSgemmMr - 1) / kSgemmMr * kSgemmMr;
  l.blocks = (s.tiles + kBlock - 1) / kBlock;
  l.u_plain = 16 * s.co * s.ci;
  l.u_packed = packed ? 16 * l.co_pad * s.ci : 0;
  l.v_block = 16 * s.ci * kBlock;
  l.m_block = 16 * l.co_pad * kBlock;
  return l;
}

// v[e][i][tt] = B^T d B for channels [i0, i1) and the tiles of block b.
// src points at the image's first channel; (sc, sh, sw) are its strides.
void InputBlock(const Pass& s, const float* src, int64_t sc, int64_t sh,
                int64_t sw, int64_t b, int64_t i0, int64_t i1, float* v) {
  const int64_t step = s.ci * kBlock;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t tt = 0; tt < kBlock; ++tt) {
      const int64_t t = b * kBlock + tt;
      float* out = v + i * kBlock + tt;
      if (t >= s.tiles) {
        for (int e = 0; e < 16; ++e) out[e * step] = 0.f;
        continue;
      }
      const int64_t th = t / s.tiles_w, tw = t % s.tiles_w;
      float d[4][4];
      for (int a = 0; a < 4; ++a) {
        const int64_t ih = th * 2 - s.ph + a;
        for (int c = 0; c < 4; ++c) {
          const int64_t iw = tw * 2 - s.pw + c;
          d[a][c] = (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w)
                        ? src[i * sc + ih * sh + iw * sw]
                        : 0.f;
        }
      }
      float r[4][4];
      for (int c = 0; c < 4; ++c) {
        r[0][c] = d[0][c] - d[2][c];
        r[1][c] = d[1][c] + d[2][c];
        r[2][c] = d[2][c] - d[1][c];
        r[3][c] = d[1][c] - d[3][c];
      }
      for (int a = 0; a < 4; ++a) {
        out[(a * 4 + 0) * step] = r[a][0] - r[a][2];
        out[(a * 4 + 1) * step] = r[a][1] + r[a][2];
        out[(a * 4 + 2) * step] = r[a][2] - r[a][1];
        out[(a * 4 + 3) * step] = r[a][1] - r[a][3];
      }
    }
}

// dst[o] = A^T M A for outputs [o0, o1) and the tiles of block b, clipped at
// the image edge.
void OutputBlock(const Pass& s, const Layout16& l, const float* m, int64_t b,
                 int64_t o0, int64_t o1, float* dst, int64_t sc, int64_t sh,
                 int64_t sw) {
  const int64_t step = l.co_pad * kBlock;
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t tt = 0; tt < kBlock; ++tt) {
      const int64_t t = b * kBlock + tt;
      if (t >= s.tiles) break;
      const int64_t th = t / s.tiles_w, tw = t % s.tiles_w;
      const float* in = m + o * kBlock + tt;
      float e[4][4];
      for (int a = 0; a < 4; ++a)
        for (int c = 0; c < 4; ++c) e[a][c] = in[(a * 4 + c) * step];
      float r[2][4];
      for (int c = 0; c < 4; ++c) {
        r[0][c] = e[0][c] + e[1][c] + e[2][c];
        r[1][c] = e[1][c] - e[2][c] - e[3][c];
      }
      for (int a = 0; a < 2; ++a) {
        const int64_t yh = th * 2 + a;
        if (yh >= s.oh) break;
        const float y[2] = {r[a][0] + r[a][1] + r[a][2],
                            r[a][1] - r[a][2] - r[a][3]};
        for (int c = 0; c < 2; ++c) {
          const int64_t yw = tw * 2 + c;
          if (yw < s.ow) dst[o * sc + yh * sh + yw * sw] = y[c];
        }
      }
    }
}

#define CONVTUNE_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))

// Per lane of a 16-tile group: element offsets of each of `rows` x `cols`
// tile positions (origin at 2*th - ph, 2*tw - pw, or at 2*th, 2*tw for
// outputs) and masks of the ones inside an h x w plane.
struct LaneMap {
  __m512i idx[4][4];
  __mmask16 mask[4][4];
};

CONVTUNE_AVX512 void MapLanes(const Pass& s, int64_t t0, int rows, int cols,
                              int64_t oh0, int64_t ow0, int64_t h, int64_t w,
                              int64_t sh, int64_t sw, LaneMap* map) {
  alignas(64) int32_t base[16] = {};
  for (int a = 0; a < rows; ++a)
    for (int c = 0; c < cols; ++c) map->mask[a][c] = 0;
  for (int lane = 0; lane < 16; ++lane) {
    const int64_t t = t0 + lane;
    if (t >= s.tiles) break;
    const int64_t th = t / s.tiles_w, tw = t % s.tiles_w;
    const int64_t r0 = th * 2 - oh0, c0 = tw * 2 - ow0;
    base[lane] = static_cast<int32_t>(r0 * sh + c0 * sw);
    for (int a = 0; a < rows; ++a)
      for (int c = 0; c < cols; ++c) {
        if (r0 + a >= 0 && r0 + a < h && c0 + c >= 0 && c0 + c < w) {
          map->mask[a][c] |= static_cast<__mmask16>(1u << lane);
        }
      }
  }
  const __m512i vbase = _mm512_load_si512(base);
  for (int a = 0; a < rows; ++a)
    for (int c = 0; c < cols; ++c) {
      map->idx[a][c] = _mm512_add_epi32(
          vbase, _mm512_set1_epi32(static_cast<int32_t>(a * sh + c * sw)));
    }
}

// InputBlock for 16 tiles per vector; gathers stand in for the bounds checks.
CONVTUNE_AVX512 void InputBlockAvx512(const Pass& s, const float* src,
                                      int64_t sc, int64_t sh, int64_t sw,
                                      int64_t b, int64_t i0, int64_t i1,
                                      float* v) {
  const int64_t step = s.ci * kBlock;
  for (int64_t g16 = 0; g16 < kBlock; g16 += 16) {
    LaneMap map;
    MapLanes(s, b * kBlock + g16, 4, 4, s.ph, s.pw, s.h, s.w, sh, sw, &map);
    for (int64_t i = i0; i < i1; ++i) {
      const float* ch = src + i * sc;
      __m512 d[4][4];
      for (int a = 0; a < 4; ++a)
        for (int c = 0; c < 4; ++c)
          d[a][c] = _mm512_mask_i32gather_ps(
              _mm512_setzero_ps(), map.mask[a][c], map.idx[a][c], ch, 4);
      __m512 r[4][4];
      for (int c = 0; c < 4; ++c) {
        r[0][c] = _mm512_sub_ps(d[0][c], d[2][c]);
        r[1][c] = _mm512_add_ps(d[1][c], d[2][c]);
        r[2][c] = _mm512_sub_ps(d[2][c], d[1][c]);
        r[3][c] = _mm512_sub_ps(d[1][c], d[3][c]);
      }
      float* out = v + i * kBlock + g16;
      for (int a = 0; a < 4; ++a) {
        _mm512_storeu_ps(out + (a * 4 + 0) * step,
                         _mm512_sub_ps(r[a][0], r[a][2]));
        _mm512_storeu_ps(out + (a * 4 + 1) * step,
                         _mm512_add_ps(r[a][1], r[a][2]));
        _mm512_storeu_ps(out + (a * 4 + 2) * step,
                         _mm512_sub_ps(r[a][2], r[a][1]));
        _mm512_storeu_ps(out + (a * 4 + 3) * step,
                         _mm512_sub_ps(r[a][1], r[a][3]));
      }
    }
  }
}

// OutputBlock for 16 tiles per vector, scattering the 2x2 results.
CONVTUNE_AVX512 void OutputBlockAvx512(const Pass& s, const Layout16& l,
                                       const float* m, int64_t b, int64_t o0,
                                       int64_t o1, float* dst, int64_t sc,
                                       int64_t sh, int64_t sw) {
  const int64_t step = l.co_pad * kBlock;
  for (int64_t g16 = 0; g16 < kBlock; g16 += 16) {
    LaneMap map;
    MapLanes(s, b * kBlock + g16, 2, 2, 0, 0, s.oh, s.ow, sh, sw, &map);
    for (int64_t o = o0; o < o1; ++o) {
      const float* in = m + o * kBlock + g16;
      __m512 e[4][4];
      for (int a = 0; a < 4; ++a)
        for (int c = 0; c < 4; ++c)
          e[a][c] = _mm512_loadu_ps(in + (a * 4 + c) * step);
      __m512 r[2][4];
      for (int c = 0; c < 4; ++c) {
        r[0][c] = _mm512_add_ps(_mm512_add_ps(e[0][c], e[1][c]), e[2][c]);
        r[1][c] = _mm512_sub_ps(_mm512_sub_ps(e[1][c], e[2][c]), e[3][c]);
      }
      float* plane = dst + o * sc;
      for (int a = 0; a < 2; ++a) {
        const __m512 y0 =
            _mm512_add_ps(_mm512_add_ps(r[a][0], r[a][1]), r[a][2]);
        const __m512 y1 =
            _mm512_sub_ps(_mm512_sub_ps(r[a][1], r[a][2]), r[a][3]);
        _mm512_mask_i32scatter_ps(plane, map.mask[a][0], map.idx[a][0], y0, 4);
        _mm512_mask_i32scatter_ps(plane, map.mask[a][1], map.idx[a][1], y1, 4);
      }
    }
  }
}

// The vector paths index a channel plane with 32-bit offsets.
bool FitsInt32(const Pass& s, const Strides& ss, const Strides& ds) {
  const int64_t limit = int64_t{1} << 30;
  return s.h * ss[3] + s.w * ss[4] < limit &&
         s.oh * ds[3] + s.ow * ds[4] < limit;
}

// m[e] (co x kBlock) = U[e] v[e] for positions [e0, e1) and A panels
// [p0, p1) of U, over the tiles of block b that exist.
void GemmBlock(const Pass& s, const Layout16& l, const float* u, const float* v,
               int64_t b, int64_t e0, int64_t e1, int64_t p0, int64_t p1,
               float* m) {
  const int64_t cols = std::min(kBlock, s.tiles - b * kBlock);
  for (int64_t e = e0; e < e1; ++e) {
    const float* ve = v + e * s.ci * kBlock;
    float* me = m + e * l.co_pad * kBlock;
    if (l.u_packed > 0) {
      const float* ue = u + e * l.co_pad * s.ci;
      const int64_t r0 = p0 * kSgemmMr, r1 = std::min(s.co, p1 * kSgemmMr);
      PanelGemm(r1 - r0, s.ci, ue + r0 * s.ci, ve, me + r0 * kBlock, kBlock,
                cols);
    } else {
      const int64_t r0 = p0 * kSgemmMr, r1 = std::min(s.co, p1 * kSgemmMr);
      ParallelSgemm(false, false, r1 - r0, kBlock, s.ci,
                    u + (e * s.co + r0) * s.ci, s.ci, ve, kBlock, 0.f,
                    me + r0 * kBlock, kBlock);
    }
  }
}

absl::Status CheckShape(const ConvGeom& g) {
  const ConvProblem& p = g.p;
  if (p.spatial_dims != 2 || p.filter[1] != 3 || p.filter[2] != 3 ||
      p.stride[1] != 1 || p.stride[2] != 1 || p.dilation[1] != 1 ||
      p.dilation[2] != 1 || p.direction == Direction::kBackwardWeights) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWinogradF2x3Kernel,
        ": needs 2-D, a 3x3 filter, stride 1, dilation 1, F or B"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t WinogradWorkspaceBytes(const ConvProblem& p) {
  const Pass s = MakePass(p);
  const Layout16 l = MakeLayout(s, HasAvx512Sgemm());
  return (l.u_plain + l.u_packed + l.blocks * (l.v_block + l.m_block)) *
         static_cast<int64_t>(sizeof(float));
}

namespace {

// One image: every tile block through input transform, GEMMs and output
// transform. Many blocks: one block per thread at a time. Few blocks: each
// phase of a block split over the threads.
void RunImage(const Pass& s, const Layout16& l, const float* u,
              const float* src, const Strides& ss, float* dst,
              const Strides& ds, float* vm) {
  const int64_t panels = l.co_pad / kSgemmMr;
  const bool vec = l.u_packed > 0 && FitsInt32(s, ss, ds);
  auto input = [&](int64_t b, int64_t i0, int64_t i1, float* v) {
    if (vec) {
      InputBlockAvx512(s, src, ss[1], ss[3], ss[4], b, i0, i1, v);
    } else {
      InputBlock(s, src, ss[1], ss[3], ss[4], b, i0, i1, v);
    }
  };
  auto output = [&](int64_t b, int64_t o0, int64_t o1, const float* m) {
    if (vec) {
      OutputBlockAvx512(s, l, m, b, o0, o1, dst, ds[1], ds[3], ds[4]);
    } else {
      OutputBlock(s, l, m, b, o0, o1, dst, ds[1], ds[3], ds[4]);
    }
  };
  auto v_of = [&](int64_t b) { return vm + b * (l.v_block + l.m_block); };
  auto m_of = [&](int64_t b) { return v_of(b) + l.v_block; };
  if (l.blocks >= 2 * NumThreads()) {
    ParallelFor(l.blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        input(b, 0, s.ci, v_of(b));
        GemmBlock(s, l, u, v_of(b), b, 0, 16, 0, panels, m_of(b));
        output(b, 0, s.co, m_of(b));
      }
    });
    return;
  }
  for (int64_t b = 0; b < l.blocks; ++b) {
    ParallelFor(s.ci, 8,
                [&](int64_t i0, int64_t i1) { input(b, i0, i1, v_of(b)); });
    ParallelFor(16 * panels, 1, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        GemmBlock(s, l, u, v_of(b), b, w / panels, w / panels + 1, w % panels,
                  w % panels + 1, m_of(b));
      }
    });
    ParallelFor(s.co, 8,
                [&](int64_t o0, int64_t o1) { output(b, o0, o1, m_of(b)); });
  }
}

}  // namespace

absl::Status WinogradF2x3Kernel(const v1::KernelStep& step,
                                const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g,
                   DecodeConvStep(kWinogradF2x3Kernel, step, buffers, 4, 0));
  RETURN_IF_ERROR(RequireFp32(kWinogradF2x3Kernel, g));
  RETURN_IF_ERROR(CheckShape(g));
  const Pass s = MakePass(g.p);
  const Layout16 l = MakeLayout(s, HasAvx512Sgemm());
  const bool fwd = g.p.direction == Direction::kForward;
  float* x = static_cast<float*>(buffers[0]);
  const float* w = static_cast<const float*>(buffers[1]);
  float* y = static_cast<float*>(buffers[2]);
  float* u = static_cast<float*>(buffers[3]);
  float* u_packed = u + l.u_plain;
  float* vm = u_packed + l.u_packed;
  const Strides& ss = fwd ? g.xs : g.ys;  // source strides
  const Strides& ds = fwd ? g.ys : g.xs;
  for (int64_t grp = 0; grp < g.groups; ++grp) {
    TransformFilters(g, s, w, grp, u);
    if (l.u_packed > 0) {
      ParallelFor(16, 1, [&](int64_t e0, int64_t e1) {
        for (int64_t e = e0; e < e1; ++e) {
          PackAPanels(false, u + e * s.co * s.ci, s.ci, s.co, s.ci,
                      u_packed + e * l.co_pad * s.ci);
        }
      });
    }
    for (int64_t n = 0; n < g.n; ++n) {
      const float* src = (fwd ? x : y) + n * ss[0] + grp * s.ci * ss[1];
      float* dst = (fwd ? y : x) + n * ds[0] + grp * s.co * ds[1];
      RunImage(s, l, l.u_packed > 0 ? u_packed : u, src, ss, dst, ds, vm);
    }
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu
