// Library steps: plan steps that call the vendor BLAS (cuBLAS, rocBLAS)
// instead of a compiled kernel. They carry no source and no code object; the
// kernel builder leaves them alone and the GPU devices run them through the
// BLAS they loaded. The layout of their scalars is defined here, once, for
// the solvers that write them and the devices that read them. Value types
// and stateless functions; thread-safe.
#ifndef CONVTUNE_KERNELS_GPU_BLAS_STEP_H_
#define CONVTUNE_KERNELS_GPU_BLAS_STEP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"

namespace convtune::gpu {

// "blas.gemm": a strided-batched GEMM in row-major terms,
//   for b in [0, batch):  C_b = op(A_b) * op(B_b) + beta * C_b
// where X_b starts `stride_x` elements after X_{b-1}, element (i, j) of a
// stored matrix X is X[i * ldx + j], op(A) is m x k (A is stored k x m when
// trans_a), op(B) is k x n (stored n x k when trans_b) and C is m x n.
// Products are summed in fp32 for every type (never TF32). With beta 0, C is
// only written, so it may hold anything (NaN included) before.
//
// Buffers, in order: A, B, C (role + byte offset).
// Scalars, in order (int64):
//   0 trans_a  1 trans_b  (0 or 1)
//   2 m  3 n  4 k
//   5 lda  6 ldb  7 ldc
//   8 stride_a  9 stride_b  10 stride_c   (elements)
//   11 batch
//   12 ab_type  (DataType of A and B: 1 fp32, 2 fp16, 3 bf16)
//   13 c_type   (DataType of C: ab_type, or 1 for an fp32 C with 16-bit A, B)
//   14 beta     (0 or 1)
inline constexpr char kBlasGemmKernel[] = "blas.gemm";
inline constexpr int kBlasGemmScalars = 15;
inline constexpr int kBlasA = 0, kBlasB = 1, kBlasC = 2;  // buffer indices

struct BlasGemm {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  DataType ab_type = DataType::kFp32;
  DataType c_type = DataType::kFp32;
  int beta = 0;
};

// True for a step that a library runs ("blas.*", and "cudnn.*" of
// kernels/gpu/cudnn_graph.h), not a compiled kernel.
bool IsLibraryStep(const v1::KernelStep& step);

// Sets step->kernel to "blas.gemm" and appends the scalars of `g`. The
// caller adds the A, B and C buffers.
void SetBlasGemm(const BlasGemm& g, v1::KernelStep* step);

// The GEMM of a "blas.gemm" step. InvalidArgument when the step is not one,
// has other than 3 buffers or 15 scalars, or a value is out of range: a size
// below 1 or above 2^31 - 1 (the BLAS interfaces take 32-bit sizes), a
// leading dimension shorter than a stored row, a negative stride, an unknown
// type or a type pair other than those above, beta other than 0 or 1.
absl::StatusOr<BlasGemm> DecodeBlasGemm(const v1::KernelStep& step);

// The same product as a column-major BLAS computes it. A row-major matrix is
// its transpose in column-major order, so C^T = op(B)^T * op(A)^T: the BLAS's
// first operand is the step's B, its second the step's A, and m and n swap.
struct ColumnMajorGemm {
  bool trans_first, trans_second;
  int32_t m, n, k;
  int32_t ld_first, ld_second, ldc;
  int64_t stride_first, stride_second, stride_c;
  int32_t batch;
  int first_buffer = kBlasB;
  int second_buffer = kBlasA;
};
// REQUIRES: g came from DecodeBlasGemm (every size fits 32 bits).
ColumnMajorGemm ToColumnMajor(const BlasGemm& g);

}  // namespace convtune::gpu

#endif  // CONVTUNE_KERNELS_GPU_BLAS_STEP_H_
