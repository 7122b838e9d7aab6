// A packed AVX-512 SGEMM that ParallelSgemm prefers over OpenBLAS where the
// CPU has AVX-512 (see kernel_sgemm.cc for why), with entry points that let
// a caller pack B itself (implicit im2col) or hand in pre-packed A panels
// (Winograd). Thread-safe: packing buffers are per thread.
#ifndef CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_
#define CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace convtune::cpu {

// The micro-tile: rows of A per panel, columns of B per panel.
inline constexpr int64_t kSgemmMr = 8;
inline constexpr int64_t kSgemmNr = 48;

// True when this CPU runs the functions below.
bool HasAvx512Sgemm();

// Row-major C = op(A) op(B) + beta C on the calling thread; C is m x n.
// REQUIRES: HasAvx512Sgemm().
void Avx512Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc);

// Writes B[k0 .. k0+kc) x [n0 .. n0+nc) as ceil(nc / kSgemmNr) panels, each
// kc rows of kSgemmNr floats (k-major), zero beyond nc.
using PackBFn = absl::FunctionRef<void(int64_t k0, int64_t kc, int64_t n0,
                                       int64_t nc, float* out)>;

// As Avx512Sgemm, with B given only through its packer.
void Avx512SgemmPackedB(bool trans_a, int64_t m, int64_t n, int64_t k,
                        const float* a, int64_t lda, PackBFn pack_b, float beta,
                        float* c, int64_t ldc);

// Packs op(A) (m x k) into ceil(m / kSgemmMr) panels of k x kSgemmMr,
// zero-padded: PanelGemm's A.
void PackAPanels(bool trans, const float* a, int64_t lda, int64_t m, int64_t k,
                 float* out);

// C (m x kSgemmNr) = A B, A from PackAPanels, B one k x kSgemmNr panel.
// Columns from `cols` on (rounded up to 16) are left unwritten.
void PanelGemm(int64_t m, int64_t k, const float* a_panels,
               const float* b_panel, float* c, int64_t ldc,
               int64_t cols = kSgemmNr);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_
