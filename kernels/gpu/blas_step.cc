#include "kernels/gpu/blas_step.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convtune::gpu {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

bool IsType(int64_t t) { return t >= 1 && t <= 3; }

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("step ", kBlasGemmKernel, ": ", what));
}

}  // namespace

bool IsLibraryStep(const v1::KernelStep& step) {
  return absl::StartsWith(step.kernel(), "blas.") ||
         absl::StartsWith(step.kernel(), "cudnn.");
}

void SetBlasGemm(const BlasGemm& g, v1::KernelStep* step) {
  step->set_kernel(kBlasGemmKernel);
  for (int64_t v : {int64_t{g.trans_a}, int64_t{g.trans_b}, g.m, g.n, g.k,
                    g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b, g.stride_c,
                    g.batch, static_cast<int64_t>(g.ab_type),
                    static_cast<int64_t>(g.c_type), int64_t{g.beta}}) {
    step->add_scalars(v);
  }
}

absl::StatusOr<BlasGemm> DecodeBlasGemm(const v1::KernelStep& step) {
  if (step.kernel() != kBlasGemmKernel) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step.kernel(), " is not ", kBlasGemmKernel));
  }
  if (step.buffers_size() != 3 || step.scalars_size() != kBlasGemmScalars) {
    return Bad(absl::StrCat("needs 3 buffers and ", kBlasGemmScalars,
                            " scalars, has ", step.buffers_size(), " and ",
                            step.scalars_size()));
  }
  const auto& s = step.scalars();
  for (int i : {0, 1, 14}) {
    if (s[i] != 0 && s[i] != 1)
      return Bad(absl::StrCat("scalar ", i, " must be 0 or 1"));
  }
  for (int i = 2; i <= 11; ++i) {
    const bool stride = i >= 8 && i <= 10;
    if (s[i] < (stride ? 0 : 1) || (!stride && s[i] > kMax32)) {
      return Bad(absl::StrCat(
          "scalar ", i, " is ", s[i],
          stride ? " (a negative stride)" : " (not in [1, 2^31 - 1])"));
    }
  }
  if (!IsType(s[12]) || !(s[13] == s[12] || s[13] == 1)) {
    return Bad(absl::StrCat("types ", s[12], " -> ", s[13],
                            ": C must have A's type or be fp32 (1)"));
  }
  BlasGemm g;
  g.trans_a = s[0] == 1, g.trans_b = s[1] == 1;
  g.m = s[2], g.n = s[3], g.k = s[4];
  g.lda = s[5], g.ldb = s[6], g.ldc = s[7];
  g.stride_a = s[8], g.stride_b = s[9], g.stride_c = s[10];
  g.batch = s[11];
  g.ab_type = static_cast<DataType>(s[12]);
  g.c_type = static_cast<DataType>(s[13]);
  g.beta = static_cast<int>(s[14]);
  // A stored row holds k elements (m when transposed), and so on.
  if (g.lda < (g.trans_a ? g.m : g.k) || g.ldb < (g.trans_b ? g.k : g.n) ||
      g.ldc < g.n) {
    return Bad(
        absl::StrCat("a leading dimension is shorter than a stored row (lda ",
                     g.lda, ", ldb ", g.ldb, ", ldc ", g.ldc, " for m ", g.m,
                     ", n ", g.n, ", k ", g.k, ")"));
  }
  return g;
}

ColumnMajorGemm ToColumnMajor(const BlasGemm& g) {
  ColumnMajorGemm c;
  c.trans_first = g.trans_b;
  c.trans_second = g.trans_a;
  c.m = static_cast<int32_t>(g.n);
  c.n = static_cast<int32_t>(g.m);
  c.k = static_cast<int32_t>(g.k);
  c.ld_first = static_cast<int32_t>(g.ldb);
  c.ld_second = static_cast<int32_t>(g.lda);
  c.ldc = static_cast<int32_t>(g.ldc);
  c.stride_first = g.stride_b;
  c.stride_second = g.stride_a;
  c.stride_c = g.stride_c;
  c.batch = static_cast<int32_t>(g.batch);
  return c;
}

}  // namespace convtune::gpu
