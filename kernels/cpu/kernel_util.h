// Internals shared by the CPU convolution kernels: typed element access, the
// geometry a kernel decodes from its step, and the threaded SGEMM every GEMM
// kernel goes through. Stateless; thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_KERNEL_UTIL_H_
#define CONVTUNE_KERNELS_CPU_KERNEL_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/numeric.h"
#include "kernels/problem.h"

namespace convtune::cpu {

// Element access by storage type; arithmetic is always fp32.
template <DataType T>
struct Elem;
template <>
struct Elem<DataType::kFp32> {
  using Storage = float;
  static float Get(const float* p, int64_t i) { return p[i]; }
  static void Put(float* p, int64_t i, float v) { p[i] = v; }
};
template <>
struct Elem<DataType::kFp16> {
  using Storage = uint16_t;
  static float Get(const uint16_t* p, int64_t i) { return HalfToFloat(p[i]); }
  static void Put(uint16_t* p, int64_t i, float v) { p[i] = FloatToHalf(v); }
};
template <>
struct Elem<DataType::kBf16> {
  using Storage = uint16_t;
  static float Get(const uint16_t* p, int64_t i) { return Bf16ToFloat(p[i]); }
  static void Put(uint16_t* p, int64_t i, float v) { p[i] = FloatToBf16(v); }
};

// A problem unpacked for kernels; spatial arrays are (D, H, W).
struct ConvGeom {
  ConvProblem p;
  int64_t n, c, k, groups, cg, kg;
  int64_t in[3], out[3], f[3], pad[3], stride[3], dil[3];
  int64_t in_spatial, out_spatial, filter_spatial;
  Strides xs, ws, ys;
};

ConvGeom MakeGeom(const ConvProblem& p);

// Decodes the problem of a conv step and checks it has at least
// `min_buffers` non-null buffers and exactly `params` kernel parameters.
// InvalidArgument naming `kernel` otherwise.
absl::StatusOr<ConvGeom> DecodeConvStep(absl::string_view kernel,
                                        const v1::KernelStep& step,
                                        const std::vector<void*>& buffers,
                                        size_t min_buffers, int params);

// InvalidArgument unless the problem is fp32.
absl::Status RequireFp32(absl::string_view kernel, const ConvGeom& g);

// Row-major C = op(A) op(B) + beta C with C m x n, split over the worker
// threads along the longer side of C, each part a single-threaded call of
// the AVX-512 SGEMM or, without AVX-512, of OpenBLAS. Inside a ParallelFor it
// runs on the calling thread alone.
void ParallelSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc);

// ParallelSgemm with B given through its packer (see kernel_sgemm.h).
// REQUIRES: HasAvx512Sgemm().
void ParallelSgemmPackedB(
    int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
    absl::FunctionRef<void(int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           float* out)>
        pack_b,
    float* c, int64_t ldc);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_KERNEL_UTIL_H_
