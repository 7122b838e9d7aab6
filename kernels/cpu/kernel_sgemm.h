// A packed AVX-512 SGEMM that ParallelSgemm prefers over OpenBLAS where the
// CPU has AVX-512 (see kernel_sgemm.cc for why). Thread-safe: packing
// buffers are per thread.
#ifndef CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_
#define CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_

#include <cstdint>

namespace convtune::cpu {

// True when this CPU runs Avx512Sgemm.
bool HasAvx512Sgemm();

// Row-major C = op(A) op(B) + beta C on the calling thread; C is m x n.
// REQUIRES: HasAvx512Sgemm().
void Avx512Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_KERNEL_SGEMM_H_
