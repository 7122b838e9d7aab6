// The float64 reference checked against facts that do not depend on it: small
// convolutions worked by hand, the three directions are adjoints of one
// linear map, a one-hot filter shifts the input, and the layout changes
// storage order, not values.
#include "kernels/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem Problem(Layout layout, int spatial_dims, int64_t groups) {
  ConvProblem p;
  p.spatial_dims = spatial_dims;
  p.n = 2, p.c = 4, p.k = 6, p.groups = groups;
  p.in = {spatial_dims == 3 ? 4 : 1, 7, 6};
  p.filter = {spatial_dims == 3 ? 2 : 1, 3, 2};
  p.pad = {0, 1, 1};
  p.stride = {1, 2, 1};
  p.dilation = {1, 1, 2};
  p.layout = layout;
  return p;
}

std::vector<float> Random(int64_t count, std::mt19937_64& rng) {
  std::vector<float> out(count);
  FillRandom(out.data(), DataType::kFp32, count, rng);
  return out;
}

std::vector<double> Values(const std::vector<ReferenceValue>& ref) {
  std::vector<double> out;
  for (const ReferenceValue& r : ref) out.push_back(r.value);
  return out;
}

std::vector<double> AbsSums(const std::vector<ReferenceValue>& ref) {
  std::vector<double> out;
  for (const ReferenceValue& r : ref) out.push_back(r.abs_sum);
  return out;
}

double Dot(const std::vector<float>& a, const std::vector<ReferenceValue>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i].value;
  return s;
}

// Two groups of one channel, 1x4 images, a 1x2 filter at stride 2 in w.
TEST(Reference, SmallGroupedStridedConvolutionByHand) {
  ConvProblem p;
  p.n = 1, p.c = 2, p.k = 2, p.groups = 2;
  p.in = {1, 1, 4};
  p.filter = {1, 1, 2};
  p.stride = {1, 1, 2};
  ASSERT_EQ(ValidateProblem(p), absl::OkStatus());
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> w = {1, -1, 2, 3};
  const std::vector<float> dy = {1, 2, 3, -1};

  p.direction = Direction::kForward;
  const std::vector<ReferenceValue> y =
      ReferenceOutput(p, {x.data(), w.data(), nullptr});
  EXPECT_EQ(Values(y), (std::vector<double>{-1, -1, 28, 38}));
  EXPECT_EQ(AbsSums(y), (std::vector<double>{3, 7, 28, 38}));

  p.direction = Direction::kBackwardData;
  EXPECT_EQ(Values(ReferenceOutput(p, {nullptr, w.data(), dy.data()})),
            (std::vector<double>{1, -1, 2, -2, 6, 9, -2, -3}));

  p.direction = Direction::kBackwardWeights;
  EXPECT_EQ(Values(ReferenceOutput(p, {x.data(), nullptr, dy.data()})),
            (std::vector<double>{7, 10, 8, 10}));
}

// The reference reads inputs as stored: 1 + 2^-9 is exact in fp16 but
// rounds to 1 in bf16.
TEST(Reference, ReadsInputsRoundedToTheirType) {
  ConvProblem p;
  p.n = 1, p.c = 1, p.k = 1;
  p.in = {1, 1, 1};
  p.filter = {1, 1, 1};
  for (auto [type, want] : {std::pair{DataType::kFp32, 1 + 0x1p-9},
                            std::pair{DataType::kFp16, 1 + 0x1p-9},
                            std::pair{DataType::kBf16, 1.0}}) {
    p.type = type;
    std::vector<uint32_t> x(1), w(1);
    StoreElement(x.data(), type, 0, 1 + 0x1p-9);
    StoreElement(w.data(), type, 0, 1);
    const std::vector<ReferenceValue> y =
        ReferenceOutput(p, {x.data(), w.data(), nullptr});
    EXPECT_EQ(y[0].value, want) << DataTypeName(type);
  }
}

// <F(x, w), y> = <x, B(y, w)> = <w, W(x, y)>.
TEST(Reference, DirectionsAreAdjoint) {
  std::mt19937_64 rng(std::random_device{}());
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    for (int dims : {2, 3}) {
      for (int64_t groups : {1, 2}) {
        ConvProblem p = Problem(layout, dims, groups);
        ASSERT_EQ(ValidateProblem(p), absl::OkStatus());
        const auto x = Random(p.x_elements(), rng),
                   w = Random(p.w_elements(), rng),
                   y = Random(p.y_elements(), rng);
        p.direction = Direction::kForward;
        const double fy =
            Dot(y, ReferenceOutput(p, {x.data(), w.data(), nullptr}));
        p.direction = Direction::kBackwardData;
        const double bx =
            Dot(x, ReferenceOutput(p, {nullptr, w.data(), y.data()}));
        p.direction = Direction::kBackwardWeights;
        const double ww =
            Dot(w, ReferenceOutput(p, {x.data(), nullptr, y.data()}));
        EXPECT_NEAR(fy, bx, 1e-9 * (1 + std::fabs(fy))) << DescribeProblem(p);
        EXPECT_NEAR(fy, ww, 1e-9 * (1 + std::fabs(fy))) << DescribeProblem(p);
        EXPECT_NE(fy, 0.0);
      }
    }
  }
}

// A filter that is 1 at one tap (for k == c) and 0 elsewhere copies x,
// shifted by the tap, into y.
TEST(Reference, OneHotFilterShiftsTheInput) {
  std::mt19937_64 rng(std::random_device{}());
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    ConvProblem p = Problem(layout, 2, 1);
    p.k = p.c;
    const auto x = Random(p.x_elements(), rng);
    std::vector<float> w(p.w_elements(), 0.f);
    const Strides xs = XStrides(p), ws = WStrides(p), ys = YStrides(p);
    const int64_t fh = 2, fw = 1;
    for (int64_t c = 0; c < p.c; ++c)
      w[c * ws[0] + c * ws[1] + fh * ws[3] + fw * ws[4]] = 1.f;
    const std::vector<ReferenceValue> out =
        ReferenceOutput(p, {x.data(), w.data(), nullptr});
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t oh = 0; oh < p.out(1); ++oh)
          for (int64_t ow = 0; ow < p.out(2); ++ow) {
            const int64_t ih = oh * p.stride[1] - p.pad[1] + fh * p.dilation[1];
            const int64_t iw = ow * p.stride[2] - p.pad[2] + fw * p.dilation[2];
            const bool inside =
                ih >= 0 && ih < p.in[1] && iw >= 0 && iw < p.in[2];
            const double want =
                inside ? x[n * xs[0] + c * xs[1] + ih * xs[3] + iw * xs[4]]
                       : 0.0;
            EXPECT_EQ(
                out[n * ys[0] + c * ys[1] + oh * ys[3] + ow * ys[4]].value,
                want);
          }
  }
}

TEST(Reference, LayoutChangesOrderNotValues) {
  std::mt19937_64 rng(std::random_device{}());
  ConvProblem a = Problem(Layout::kNCHW, 3, 2);
  ConvProblem b = a;
  b.layout = Layout::kNHWC;
  const auto xa = Random(a.x_elements(), rng), wa = Random(a.w_elements(), rng);
  // Re-store the same logical tensors channels-last.
  auto restride = [](const std::vector<float>& src, const Strides& from,
                     const Strides& to, std::array<int64_t, 5> dims) {
    std::vector<float> dst(src.size());
    for (int64_t i0 = 0; i0 < dims[0]; ++i0)
      for (int64_t i1 = 0; i1 < dims[1]; ++i1)
        for (int64_t i2 = 0; i2 < dims[2]; ++i2)
          for (int64_t i3 = 0; i3 < dims[3]; ++i3)
            for (int64_t i4 = 0; i4 < dims[4]; ++i4)
              dst[i0 * to[0] + i1 * to[1] + i2 * to[2] + i3 * to[3] +
                  i4 * to[4]] = src[i0 * from[0] + i1 * from[1] + i2 * from[2] +
                                    i3 * from[3] + i4 * from[4]];
    return dst;
  };
  const auto xb = restride(xa, XStrides(a), XStrides(b),
                           {a.n, a.c, a.in[0], a.in[1], a.in[2]});
  const auto wb =
      restride(wa, WStrides(a), WStrides(b),
               {a.k, a.c_per_group(), a.filter[0], a.filter[1], a.filter[2]});
  const std::vector<ReferenceValue> ya =
      ReferenceOutput(a, {xa.data(), wa.data(), nullptr});
  const std::vector<ReferenceValue> yb =
      ReferenceOutput(b, {xb.data(), wb.data(), nullptr});
  const Strides sa = YStrides(a), sb = YStrides(b);
  for (int64_t n = 0; n < a.n; ++n)
    for (int64_t k = 0; k < a.k; ++k)
      for (int64_t od = 0; od < a.out(0); ++od)
        for (int64_t oh = 0; oh < a.out(1); ++oh)
          for (int64_t ow = 0; ow < a.out(2); ++ow) {
            const int64_t ia =
                n * sa[0] + k * sa[1] + od * sa[2] + oh * sa[3] + ow * sa[4];
            const int64_t ib =
                n * sb[0] + k * sb[1] + od * sb[2] + oh * sb[3] + ow * sb[4];
            EXPECT_EQ(ya[ia].value, yb[ib].value);
          }
}

TEST(Reference, ComparisonCatchesAWrongElementAndNaN) {
  std::mt19937_64 rng(std::random_device{}());
  ConvProblem p = Problem(Layout::kNCHW, 2, 1);
  const auto x = Random(p.x_elements(), rng), w = Random(p.w_elements(), rng);
  const std::vector<ReferenceValue> ref =
      ReferenceOutput(p, {x.data(), w.data(), nullptr});
  const std::vector<double> want = Values(ref);
  std::vector<float> y(want.begin(), want.end());
  EXPECT_EQ(CompareOutput(p, ref, y.data()), absl::OkStatus());
  y[3] += 0.05f;
  EXPECT_THAT(std::string(CompareOutput(p, ref, y.data()).message()),
              HasSubstr(absl::StrCat("1 of ", ref.size(),
                                     " output elements are off; the worst, "
                                     "element 3,")));
  y.assign(want.begin(), want.end());
  FillNaN(y.data() + 5, DataType::kFp32, 1);
  EXPECT_THAT(std::string(CompareOutput(p, ref, y.data()).message()),
              HasSubstr("the worst, element 5,"));
}

// An fp16 output too small for fp16's normal range rounds to a multiple of
// 2^-24: that rounding passes the check, an error of a few such steps does
// not.
TEST(Reference, SubnormalHalfOutputsAllowTheirRounding) {
  ConvProblem p;
  p.type = DataType::kFp16;
  std::vector<uint16_t> x(1), w(1), y(1);
  StoreElement(x.data(), p.type, 0, 3.1e-4);
  StoreElement(w.data(), p.type, 0, 2.7e-4);
  const double exact =
      LoadElement(x.data(), p.type, 0) * LoadElement(w.data(), p.type, 0);
  ASSERT_LT(exact, std::ldexp(1.0, -14));  // below fp16's least normal
  std::mt19937_64 rng(1);
  StoreElement(y.data(), p.type, 0, exact);
  EXPECT_EQ(CheckOutput(p, {x.data(), w.data(), nullptr}, y.data(), 0, rng),
            absl::OkStatus())
      << exact << " stored as " << LoadElement(y.data(), p.type, 0);
  StoreElement(y.data(), p.type, 0, exact + 4 * std::ldexp(1.0, -24));
  EXPECT_FALSE(
      CheckOutput(p, {x.data(), w.data(), nullptr}, y.data(), 0, rng).ok());
}

TEST(Reference, RandomTensorsHaveNoZerosInAnyType) {
  std::mt19937_64 rng(std::random_device{}());
  for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    std::vector<char> v(4096 * ElementBytes(t));
    FillRandom(v.data(), t, 4096, rng);
    double sum = 0, lo = 1, hi = -1;
    std::set<double> distinct;
    for (int64_t i = 0; i < 4096; ++i) {
      const double d = LoadElement(v.data(), t, i);
      ASSERT_NE(d, 0.0);
      ASSERT_LE(std::fabs(d), 1.0);
      sum += d;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
      distinct.insert(d);
    }
    // Uniform over [-1, 1]: centred, spread over the range, rarely repeated.
    EXPECT_LT(std::fabs(sum / 4096), 0.05);
    EXPECT_LT(lo, -0.95);
    EXPECT_GT(hi, 0.95);
    EXPECT_GT(distinct.size(), 1000u);
    // Two draws from one generator differ.
    std::vector<char> again(v.size());
    FillRandom(again.data(), t, 4096, rng);
    EXPECT_NE(v, again);
    std::vector<char> poisoned = v;
    FillNaN(poisoned.data(), t, 4096);
    for (int64_t i = 0; i < 4096; ++i)
      ASSERT_TRUE(std::isnan(LoadElement(poisoned.data(), t, i)));
  }
}

}  // namespace
}  // namespace convtune
