#include "kernels/cpu/kernel_util.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_sgemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/plan_args.h"

namespace convtune::cpu {
namespace {

// Columns (or rows) per unit of work handed to a thread: a multiple of the
// BLAS micro-tile widths, so no thread gets a ragged sliver.
constexpr int64_t kSgemmSplit = 48;

void SingleThreadedBlas() {
  // Threads come from ParallelFor; BLAS threads of their own would spin on
  // the same two cores.
  static const bool done = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

}  // namespace

ConvGeom MakeGeom(const ConvProblem& p) {
  ConvGeom g;
  g.p = p;
  g.n = p.n;
  g.c = p.c;
  g.k = p.k;
  g.groups = p.groups;
  g.cg = p.c_per_group();
  g.kg = p.k_per_group();
  for (int i = 0; i < 3; ++i) {
    g.in[i] = p.in[i];
    g.out[i] = p.out(i);
    g.f[i] = p.filter[i];
    g.pad[i] = p.pad[i];
    g.stride[i] = p.stride[i];
    g.dil[i] = p.dilation[i];
  }
  g.in_spatial = p.in_spatial();
  g.out_spatial = p.out_spatial();
  g.filter_spatial = p.filter_spatial();
  g.xs = XStrides(p);
  g.ws = WStrides(p);
  g.ys = YStrides(p);
  return g;
}

absl::StatusOr<ConvGeom> DecodeConvStep(absl::string_view kernel,
                                        const v1::KernelStep& step,
                                        const std::vector<void*>& buffers,
                                        size_t min_buffers, int params) {
  absl::Span<const int64_t> scalars(step.scalars().data(),
                                    step.scalars().size());
  ASSIGN_OR_RETURN(ConvProblem p, DecodeProblemScalars(scalars));
  SingleThreadedBlas();
  if (buffers.size() < min_buffers) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": needs ", min_buffers, " buffers, got ", buffers.size()));
  }
  for (size_t i = 0; i < min_buffers; ++i) {
    if (buffers[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel, ": buffer ", i, " is null"));
    }
  }
  if (static_cast<int>(KernelParams(step).size()) != params) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": needs ", params,
                                                   " kernel parameters, got ",
                                                   KernelParams(step).size()));
  }
  return MakeGeom(p);
}

absl::Status RequireFp32(absl::string_view kernel, const ConvGeom& g) {
  if (g.p.type == DataType::kFp32) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(kernel, ": runs fp32 only, got ", DataTypeName(g.p.type)));
}

void ParallelSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc) {
  SingleThreadedBlas();
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (m == 0 || n == 0) return;
  const bool split_n = n >= m;
  const bool avx512 = HasAvx512Sgemm();
  const int64_t len = split_n ? n : m;
  const int64_t units = (len + kSgemmSplit - 1) / kSgemmSplit;
  // Below this many flops per thread the split costs more than it saves.
  const int64_t grain = std::max<int64_t>(
      1, (int64_t{1} << 18) /
             std::max<int64_t>(1, k * (split_n ? m : n) * kSgemmSplit));
  ParallelFor(units, grain, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * kSgemmSplit;
    const int64_t hi = std::min(len, end * kSgemmSplit);
    if (split_n) {
      const float* bp = trans_b ? b + lo * ldb : b + lo;
      if (avx512) {
        Avx512Sgemm(trans_a, trans_b, m, hi - lo, k, a, lda, bp, ldb, beta,
                    c + lo, ldc);
      } else {
        cblas_sgemm(CblasRowMajor, ta, tb, m, hi - lo, k, 1.f, a, lda, bp, ldb,
                    beta, c + lo, ldc);
      }
    } else {
      const float* ap = trans_a ? a + lo : a + lo * lda;
      if (avx512) {
        Avx512Sgemm(trans_a, trans_b, hi - lo, n, k, ap, lda, b, ldb, beta,
                    c + lo * ldc, ldc);
      } else {
        cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, n, k, 1.f, ap, lda, b, ldb,
                    beta, c + lo * ldc, ldc);
      }
    }
  });
}

void ParallelSgemmPackedB(
    int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
    absl::FunctionRef<void(int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                           float* out)>
        pack_b,
    float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const bool split_n = n >= m;
  const int64_t len = split_n ? n : m;
  const int64_t units = (len + kSgemmSplit - 1) / kSgemmSplit;
  const int64_t grain = std::max<int64_t>(
      1, (int64_t{1} << 18) /
             std::max<int64_t>(1, k * (split_n ? m : n) * kSgemmSplit));
  ParallelFor(units, grain, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * kSgemmSplit;
    const int64_t hi = std::min(len, end * kSgemmSplit);
    if (split_n) {
      Avx512SgemmPackedB(
          false, m, hi - lo, k, a, lda,
          [&](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* out) {
            pack_b(k0, kc, lo + n0, nc, out);
          },
          0.f, c + lo, ldc);
    } else {
      Avx512SgemmPackedB(false, hi - lo, n, k, a + lo * lda, lda, pack_b, 0.f,
                         c + lo * ldc, ldc);
    }
  });
}

v1::KernelStep MakeConvStep(absl::string_view kernel, const ConvProblem& p,
                            std::initializer_list<int64_t> params,
                            const v1::BufferRef& x, const v1::BufferRef& w,
                            const v1::BufferRef& y,
                            const v1::BufferRef& workspace) {
  v1::KernelStep step;
  step.set_kernel(std::string(kernel));
  *step.add_buffers() = x;
  *step.add_buffers() = w;
  *step.add_buffers() = y;
  if (workspace.role() != v1::BUFFER_ROLE_UNSPECIFIED)
    *step.add_buffers() = workspace;
  AppendProblemScalars(p, &step);
  for (int64_t v : params) step.add_scalars(v);
  return step;
}

}  // namespace convtune::cpu
