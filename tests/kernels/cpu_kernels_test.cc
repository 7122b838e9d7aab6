// The built-in CPU conv kernels called directly through CpuDevice::Launch:
// results against the float64 reference, and rejection of malformed steps.
#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu_device.h"
#include "kernels/reference.h"

namespace convtune {
namespace {

v1::BufferRef Ref(v1::BufferRole role) {
  v1::BufferRef r;
  r.set_role(role);
  return r;
}

ConvProblem Conv3x3(Direction dir, Layout layout) {
  ConvProblem p;
  p.n = 2, p.c = 6, p.k = 5;
  p.in = {1, 9, 7};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  p.direction = dir;
  p.layout = layout;
  return p;
}

// Runs `step` on fresh random inputs and NaN output; compares with the
// reference.
void CheckKernel(const ConvProblem& p, absl::string_view kernel,
                 std::initializer_list<int64_t> params,
                 int64_t workspace_bytes) {
  SCOPED_TRACE(absl::StrCat(kernel, " ", DescribeProblem(p)));
  std::mt19937_64 rng(std::random_device{}());
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  FillRandom(y.data(), p.type, p.y_elements(), rng);
  auto* out = &ByTensor(p.output(), x, w, y);
  FillNaN(out->data(), p.type, out->size() / ElementBytes(p.type));
  const std::vector<ReferenceValue> want =
      ReferenceOutput(p, {x.data(), w.data(), y.data()});
  std::vector<float> ws(workspace_bytes / 4 + 1);
  FillNaN(ws.data(), DataType::kFp32, ws.size());
  const v1::KernelStep step = cpu::MakeConvStep(
      kernel, p, params, Ref(v1::BUFFER_X), Ref(v1::BUFFER_W),
      Ref(v1::BUFFER_Y),
      workspace_bytes > 0 ? Ref(v1::BUFFER_WORKSPACE) : v1::BufferRef());
  std::vector<void*> buffers = {x.data(), w.data(), y.data()};
  if (workspace_bytes > 0) buffers.push_back(ws.data());
  CpuDevice device;
  ASSERT_EQ(device.Launch(step, buffers), absl::OkStatus());
  EXPECT_EQ(CompareOutput(p, want, out->data()), absl::OkStatus());
}

TEST(CpuConvKernels, AreRegistered) {
  const std::vector<absl::string_view> names = cpu::CpuKernelNames();
  for (absl::string_view k : {cpu::kDirectNaiveKernel, cpu::kDirectTiledKernel,
                              cpu::kIm2colGemmKernel, cpu::kGemm1x1Kernel,
                              cpu::kWinogradF2x3Kernel}) {
    EXPECT_NE(std::find(names.begin(), names.end(), k), names.end()) << k;
    EXPECT_NE(cpu::FindCpuKernel(k), nullptr) << k;
  }
}

TEST(CpuConvKernels, MatchReferenceInEveryDirectionAndLayout) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                          Direction::kBackwardWeights}) {
      ConvProblem p = Conv3x3(dir, layout);
      CheckKernel(p, cpu::kDirectNaiveKernel, {}, 0);
      CheckKernel(p, cpu::kDirectTiledKernel, {4, 16}, 0);
      CheckKernel(p, cpu::kIm2colGemmKernel, {}, cpu::Im2colWorkspaceBytes(p));
      if (dir != Direction::kBackwardWeights) {
        CheckKernel(p, cpu::kWinogradF2x3Kernel, {},
                    cpu::WinogradWorkspaceBytes(p));
      }
      p.filter = {1, 1, 1};
      p.pad = {0, 0, 0};
      CheckKernel(p, cpu::kGemm1x1Kernel, {}, 0);
    }
  }
}

TEST(CpuConvKernels, DirectKernelsReadSixteenBitTypes) {
  for (DataType t : {DataType::kFp16, DataType::kBf16}) {
    ConvProblem p = Conv3x3(Direction::kForward, Layout::kNHWC);
    p.type = t;
    CheckKernel(p, cpu::kDirectNaiveKernel, {}, 0);
    CheckKernel(p, cpu::kDirectTiledKernel, {8, 4}, 0);
  }
}

absl::Status LaunchOnDummies(const v1::KernelStep& step, int buffers) {
  std::vector<float> mem(1 << 16);
  std::vector<void*> ptrs(buffers, mem.data());
  CpuDevice device;
  return device.Launch(step, ptrs);
}

TEST(CpuConvKernels, RejectMalformedSteps) {
  const ConvProblem p = Conv3x3(Direction::kForward, Layout::kNCHW);
  const auto x = Ref(v1::BUFFER_X), w = Ref(v1::BUFFER_W),
             y = Ref(v1::BUFFER_Y), ws = Ref(v1::BUFFER_WORKSPACE);
  auto code = [&](const v1::KernelStep& s, int n) {
    return LaunchOnDummies(s, n).code();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;

  v1::KernelStep too_few_scalars =
      cpu::MakeConvStep(cpu::kDirectNaiveKernel, p, {}, x, w, y);
  too_few_scalars.mutable_scalars()->RemoveLast();
  EXPECT_EQ(code(too_few_scalars, 3), kInvalid);
  EXPECT_EQ(code(cpu::MakeConvStep(cpu::kDirectNaiveKernel, p, {}, x, w, y), 2),
            kInvalid);
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kDirectNaiveKernel, p, {7}, x, w, y), 3),
      kInvalid);
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kDirectTiledKernel, p, {8}, x, w, y), 3),
      kInvalid);
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kDirectTiledKernel, p, {5, 8}, x, w, y), 3),
      kInvalid);
  EXPECT_EQ(code(cpu::MakeConvStep(cpu::kIm2colGemmKernel, p, {}, x, w, y), 3),
            kInvalid);

  ConvProblem half = p;
  half.type = DataType::kFp16;
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kIm2colGemmKernel, half, {}, x, w, y, ws), 4),
      kInvalid);
  EXPECT_EQ(code(cpu::MakeConvStep(cpu::kGemm1x1Kernel, p, {}, x, w, y), 3),
            kInvalid);
  ConvProblem five = p;
  five.filter = {1, 5, 5};
  five.pad = {0, 2, 2};
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kWinogradF2x3Kernel, five, {}, x, w, y, ws),
           4),
      kInvalid);
  ConvProblem bw = p;
  bw.direction = Direction::kBackwardWeights;
  EXPECT_EQ(
      code(cpu::MakeConvStep(cpu::kWinogradF2x3Kernel, bw, {}, x, w, y, ws), 4),
      kInvalid);
}

// C = op(A) op(B) + beta C for every transpose pair, sizes that split
// unevenly over threads, and beta 1 accumulating onto C.
TEST(ParallelSgemm, MatchesLoopsForEveryTranspose) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto [m, n, k] : {std::array<int64_t, 3>{7, 301, 13},
                         {300, 5, 17},
                         {64, 64, 64},
                         {200, 1700, 300}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.f, 1.f}) {
          std::vector<float> a(m * k), b(k * n), c(m * n);
          for (auto* v : {&a, &b, &c})
            for (float& e : *v) e = dist(rng);
          std::vector<double> want(m * n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = beta * c[i * n + j];
              for (int64_t l = 0; l < k; ++l)
                s += double(ta ? a[l * m + i] : a[i * k + l]) *
                     (tb ? b[j * k + l] : b[l * n + j]);
              want[i * n + j] = s;
            }
          cpu::ParallelSgemm(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(),
                             tb ? k : n, beta, c.data(), n);
          for (int64_t i = 0; i < m * n; ++i) {
            ASSERT_NEAR(c[i], want[i], 1e-4 * (k + 1))
                << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb
                << " beta " << beta;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace convtune
