// A packed single-precision GEMM for CPUs with AVX-512. OpenBLAS 0.3.21 runs
// its AVX2 kernels on CPUs it does not recognise (Zen 5 among them), which
// halves the throughput the convolutions see; this one runs wherever
// avx512f is present and ParallelSgemm falls back to OpenBLAS elsewhere.
// Blocking follows the usual scheme: B panels of kc x NR stay in L1, an
// mc x kc block of A in L2; the 8 x 48 micro-tile keeps 24 accumulators.
#include "kernels/cpu/kernel_sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace convtune::cpu {
namespace {

constexpr int64_t kMr = kSgemmMr;
constexpr int64_t kNr = kSgemmNr;
constexpr int64_t kKc = 128;
constexpr int64_t kMc = 96;
constexpr int64_t kNc = 16 * kNr;

#define CONVTUNE_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))

// C (+)= A B for one kMr x kNr tile over kc steps of k. A element (i, k) is
// a[k * a_stride + i] (packed panels, or A stored transposed) or, with
// kRows, a[i * a_stride + k] (A stored by rows); B row k is b + k * b_step.
// Reading A and B in place where their layout allows spares the packing
// passes, which for the weight-heavy layers cost as much as the products.
// kVecs < 3 computes only the first 16 * kVecs columns of the tile, for the
// last columns of a C whose width is not a multiple of kNr.
template <bool kRows, int kVecs>
CONVTUNE_AVX512 void MicroKernelT(int64_t kc, const float* a, int64_t a_stride,
                                  const float* b, int64_t b_step, float* c,
                                  int64_t ldc, bool accumulate) {
  __m512 acc[kMr][kVecs];
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kVecs; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[kVecs];
    for (int j = 0; j < kVecs; ++j) bv[j] = _mm512_loadu_ps(b + 16 * j);
    for (int i = 0; i < kMr; ++i) {
      const __m512 av =
          _mm512_set1_ps(kRows ? a[i * a_stride + k] : a[k * a_stride + i]);
      for (int j = 0; j < kVecs; ++j)
        acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
    b += b_step;
  }
  for (int i = 0; i < kMr; ++i) {
    float* row = c + i * ldc;
    for (int j = 0; j < kVecs; ++j) {
      __m512 v = acc[i][j];
      if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(row + 16 * j));
      _mm512_storeu_ps(row + 16 * j, v);
    }
  }
}

template <bool kRows>
void MicroKernel(int64_t kc, const float* a, int64_t a_stride, const float* b,
                 int64_t b_step, float* c, int64_t ldc, bool accumulate,
                 int64_t cols = kNr) {
  if (cols > 32) {
    MicroKernelT<kRows, 3>(kc, a, a_stride, b, b_step, c, ldc, accumulate);
  } else if (cols > 16) {
    MicroKernelT<kRows, 2>(kc, a, a_stride, b, b_step, c, ldc, accumulate);
  } else {
    MicroKernelT<kRows, 1>(kc, a, a_stride, b, b_step, c, ldc, accumulate);
  }
}

// Packs op(A)[m0 .. m0+mc, k0 .. k0+kc] as kMr-row panels, zero-padded.
void PackA(bool trans, const float* a, int64_t lda, int64_t m0, int64_t mc,
           int64_t k0, int64_t kc, float* out) {
  for (int64_t p = 0; p < mc; p += kMr) {
    const int64_t rows = std::min(kMr, mc - p);
    for (int64_t k = 0; k < kc; ++k) {
      float* dst = out + p * kc + k * kMr;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t m = m0 + p + i, kk = k0 + k;
        dst[i] = trans ? a[kk * lda + m] : a[m * lda + kk];
      }
      for (int64_t i = rows; i < kMr; ++i) dst[i] = 0.f;
    }
  }
}

// Packs op(B)[k0 .. k0+kc, n0 .. n0+nc] as kNr-column panels, zero-padded.
void PackB(bool trans, const float* b, int64_t ldb, int64_t k0, int64_t kc,
           int64_t n0, int64_t nc, float* out) {
  for (int64_t p = 0; p < nc; p += kNr) {
    const int64_t cols = std::min(kNr, nc - p);
    float* panel = out + p * kc;
    if (!trans) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = b + (k0 + k) * ldb + n0 + p;
        float* dst = panel + k * kNr;
        std::memcpy(dst, src, cols * sizeof(float));
        std::fill(dst + cols, dst + kNr, 0.f);
      }
    } else {
      for (int64_t k = 0; k < kc; ++k)
        std::fill(panel + k * kNr, panel + (k + 1) * kNr, 0.f);
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = b + (n0 + p + j) * ldb + k0;
        for (int64_t k = 0; k < kc; ++k) panel[k * kNr + j] = src[k];
      }
    }
  }
}

}  // namespace

bool HasAvx512Sgemm() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

namespace {

// The blocked product. B panels come from `pack_b`, except that whole panels
// are read in place from `b_direct` (row-major, ldb) when it is given.
void GemmCore(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, PackBFn pack_b, const float* b_direct, int64_t ldb,
              float beta, float* c, int64_t ldc) {
  if (beta != 0.f && beta != 1.f) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
  }
  if (k == 0) {
    if (beta == 0.f)
      for (int64_t i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  thread_local std::vector<float> apack, bpack;
  bpack.resize(kKc * kNc);
  apack.resize(kKc * kMr);
  float tile[kMr * kNr];
  // Equal K blocks: a short last block would run the micro-kernel at a
  // fraction of its speed while costing a full C read and write.
  const int64_t k_blocks = (k + kKc - 1) / kKc;
  const int64_t kc_step = (k + k_blocks - 1) / k_blocks;
  for (int64_t n0 = 0; n0 < n; n0 += kNc) {
    const int64_t nc = std::min(kNc, n - n0);
    const int64_t full_nc = b_direct != nullptr ? nc / kNr * kNr : 0;
    for (int64_t k0 = 0; k0 < k; k0 += kc_step) {
      const int64_t kc = std::min(kc_step, k - k0);
      const bool accumulate = k0 > 0 || beta != 0.f;
      if (full_nc < nc)
        pack_b(k0, kc, n0 + full_nc, nc - full_nc, bpack.data());
      for (int64_t m0 = 0; m0 < m; m0 += kMc) {
        const int64_t mc = std::min(kMc, m - m0);
        for (int64_t j = 0; j < nc; j += kNr) {
          const int64_t nr = std::min(kNr, nc - j);
          const bool direct_b = j < full_nc;
          const float* bp = direct_b ? b_direct + k0 * ldb + n0 + j
                                     : bpack.data() + (j - full_nc) * kc;
          const int64_t b_step = direct_b ? ldb : kNr;
          for (int64_t i = 0; i < mc; i += kMr) {
            const int64_t mr = std::min(kMr, mc - i), row = m0 + i;
            float* cp = c + row * ldc + n0 + j;
            const bool full = mr == kMr && nr == kNr;
            float* out = full ? cp : tile;
            const int64_t ld_out = full ? ldc : kNr;
            const bool acc_out = full && accumulate;
            if (mr == kMr && !trans_a) {
              MicroKernel<true>(kc, a + row * lda + k0, lda, bp, b_step, out,
                                ld_out, acc_out, nr);
            } else if (mr == kMr) {
              MicroKernel<false>(kc, a + k0 * lda + row, lda, bp, b_step, out,
                                 ld_out, acc_out, nr);
            } else {
              PackA(trans_a, a, lda, row, mr, k0, kc, apack.data());
              MicroKernel<false>(kc, apack.data(), kMr, bp, b_step, out, ld_out,
                                 acc_out, nr);
            }
            if (full) continue;
            for (int64_t r = 0; r < mr; ++r)
              for (int64_t q = 0; q < nr; ++q)
                cp[r * ldc + q] =
                    (accumulate ? cp[r * ldc + q] : 0.f) + tile[r * kNr + q];
          }
        }
      }
    }
  }
}

}  // namespace

void Avx512SgemmPackedB(bool trans_a, int64_t m, int64_t n, int64_t k,
                        const float* a, int64_t lda, PackBFn pack_b, float beta,
                        float* c, int64_t ldc) {
  GemmCore(trans_a, m, n, k, a, lda, pack_b, nullptr, 0, beta, c, ldc);
}

void Avx512Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc) {
  GemmCore(
      trans_a, m, n, k, a, lda,
      [&](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* out) {
        PackB(trans_b, b, ldb, k0, kc, n0, nc, out);
      },
      trans_b ? nullptr : b, ldb, beta, c, ldc);
}

void PackAPanels(bool trans, const float* a, int64_t lda, int64_t m, int64_t k,
                 float* out) {
  PackA(trans, a, lda, 0, m, 0, k, out);
}

void PanelGemm(int64_t m, int64_t k, const float* a_panels,
               const float* b_panel, float* c, int64_t ldc, int64_t cols) {
  float tile[kMr * kNr];
  for (int64_t i = 0; i < m; i += kMr) {
    const int64_t mr = std::min(kMr, m - i);
    const float* ap = a_panels + i * k;
    float* cp = mr == kMr ? c + i * ldc : tile;
    const int64_t ld = mr == kMr ? ldc : kNr;
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      MicroKernel<false>(std::min(kKc, k - k0), ap + k0 * kMr, kMr,
                         b_panel + k0 * kNr, kNr, cp, ld, k0 > 0, cols);
    }
    if (mr != kMr) {
      const int64_t width = std::min(kNr, (cols + 15) / 16 * 16);
      for (int64_t r = 0; r < mr; ++r)
        std::copy(tile + r * kNr, tile + r * kNr + width, c + (i + r) * ldc);
    }
  }
}

}  // namespace convtune::cpu
