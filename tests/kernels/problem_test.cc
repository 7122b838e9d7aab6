#include "kernels/problem.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem Resnet3x3() {
  ConvProblem p;
  p.n = 2;
  p.c = 64;
  p.k = 128;
  p.in = {1, 56, 56};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  p.stride = {1, 2, 2};
  return p;
}

void ExpectInvalid(const ConvProblem& p, const std::string& field,
                   const ProblemLimits& limits = {}) {
  absl::Status s = ValidateProblem(p, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(field)) << s;
}

TEST(ProblemTest, OutputSizesAndCounts) {
  ConvProblem p = Resnet3x3();
  ASSERT_TRUE(ValidateProblem(p).ok());
  EXPECT_EQ(p.out(1), 28);
  EXPECT_EQ(p.out(2), 28);
  EXPECT_EQ(p.y_elements(), 2 * 128 * 28 * 28);
  EXPECT_EQ(p.w_elements(), 128 * 64 * 9);
  p.dilation = {1, 2, 2};
  EXPECT_EQ(p.out(1), 27);
}

TEST(ProblemTest, RejectsEachBadField) {
  ConvProblem p = Resnet3x3();
  p.n = 0;
  ExpectInvalid(p, "n:");
  p = Resnet3x3();
  p.c = -1;
  ExpectInvalid(p, "c:");
  p = Resnet3x3();
  p.k = 0;
  ExpectInvalid(p, "k:");
  p = Resnet3x3();
  p.in[1] = 0;
  ExpectInvalid(p, "in_h");
  p = Resnet3x3();
  p.filter[2] = 0;
  ExpectInvalid(p, "filter_w");
  p = Resnet3x3();
  p.pad[1] = -1;
  ExpectInvalid(p, "pad_h");
  p = Resnet3x3();
  p.stride[2] = 0;
  ExpectInvalid(p, "stride_w");
  p = Resnet3x3();
  p.dilation[1] = 0;
  ExpectInvalid(p, "dilation_h");
  p = Resnet3x3();
  p.groups = 0;
  ExpectInvalid(p, "groups");
  p = Resnet3x3();
  p.groups = 3;  // 64 % 3 != 0
  ExpectInvalid(p, "groups");
  p = Resnet3x3();
  p.c = 96;
  p.k = 100;
  p.groups = 3;  // c ok, k not
  ExpectInvalid(p, "k=100");
  p = Resnet3x3();
  p.filter = {1, 7, 7};
  p.in = {1, 4, 4};
  p.pad = {0, 0, 0};
  ExpectInvalid(p, "out_h");
  p = Resnet3x3();
  p.layout = static_cast<Layout>(7);
  ExpectInvalid(p, "layout");
  p = Resnet3x3();
  p.type = static_cast<DataType>(9);
  ExpectInvalid(p, "data_type");
  p = Resnet3x3();
  p.direction = static_cast<Direction>(0);
  ExpectInvalid(p, "direction");
  p = Resnet3x3();
  p.spatial_dims = 4;
  ExpectInvalid(p, "spatial_dims");
  p = Resnet3x3();
  p.in[0] = 4;  // depth on a 2-D problem
  ExpectInvalid(p, "spatial_dims");
}

TEST(ProblemTest, RejectsOverflowAndOversizedTensors) {
  ConvProblem p = Resnet3x3();
  p.n = int64_t{1} << 40;
  p.c = int64_t{1} << 20;
  ExpectInvalid(p, "overflows int64");
  p = Resnet3x3();
  ProblemLimits small;
  small.max_tensor_bytes = 1 << 20;
  ExpectInvalid(p, "over the limit", small);
  p.n = 1;
  p.c = 4;
  p.k = 4;
  EXPECT_TRUE(ValidateProblem(p, small).ok());
}

TEST(ProblemTest, StridesFollowLayout) {
  ConvProblem p = Resnet3x3();
  EXPECT_EQ(XStrides(p), (Strides{64 * 56 * 56, 56 * 56, 56 * 56, 56, 1}));
  p.layout = Layout::kNHWC;
  EXPECT_EQ(XStrides(p), (Strides{64 * 56 * 56, 1, 56 * 56 * 64, 56 * 64, 64}));
  EXPECT_EQ(WStrides(p), (Strides{64 * 9, 1, 9 * 64, 3 * 64, 64}));
  EXPECT_EQ(YStrides(p),
            (Strides{128 * 28 * 28, 1, 28 * 28 * 128, 28 * 128, 128}));
}

TEST(ProblemTest, KeyIsMiopenOrder) {
  ConvProblem p = Resnet3x3();
  EXPECT_EQ(ProblemKey(p),
            "64-56-56-3x3-128-28-28-2-1x1-2x2-1x1-1-NCHW-FP32-F");
  p.type = DataType::kBf16;
  p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardWeights;
  p.groups = 2;
  EXPECT_EQ(ProblemKey(p),
            "64-56-56-3x3-128-28-28-2-1x1-2x2-1x1-2-NHWC-BF16-W");
}

TEST(ProblemTest, KeyRoundTrips2dAnd3d) {
  ConvProblem p = Resnet3x3();
  p.dilation = {1, 2, 1};
  p.type = DataType::kFp16;
  p.direction = Direction::kBackwardData;
  auto back = ParseProblemKey(ProblemKey(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);

  ConvProblem q;
  q.spatial_dims = 3;
  q.n = 1;
  q.c = 8;
  q.k = 16;
  q.in = {9, 10, 11};
  q.filter = {3, 3, 1};
  q.pad = {1, 0, 2};
  q.stride = {2, 1, 1};
  q.dilation = {1, 1, 2};
  q.layout = Layout::kNHWC;
  ASSERT_TRUE(ValidateProblem(q).ok());
  const std::string key = ProblemKey(q);
  EXPECT_EQ(key,
            "8-9-10-11-3x3x1-16-5-8-15-1-1x0x2-2x1x1-1x1x2-1-NDHWC-FP32-F");
  auto back3 = ParseProblemKey(key);
  ASSERT_TRUE(back3.ok()) << back3.status();
  EXPECT_EQ(*back3, q);
}

TEST(ProblemTest, KeyParserRejectsMalformedKeys) {
  EXPECT_EQ(ParseProblemKey("1-2-3").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Output size that disagrees with the rest.
  auto s = ParseProblemKey("64-56-56-3x3-128-27-28-2-1x1-2x2-1x1-1-NCHW-FP32-F")
               .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("out_h"));
  s = ParseProblemKey("64-56-56-3x3-128-28-28-2-1x1-2x2-1x1-1-CHWN-FP32-F")
          .status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("layout"));
  s = ParseProblemKey("64-56-56-3x3-128-28-28-2-1x1-2x2-1x1-1-NCHW-FP64-F")
          .status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("data_type"));
  s = ParseProblemKey("64-56-56-3x3-128-28-28-2-1x1-2x2-1x1-1-NCHW-FP32-X")
          .status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("direction"));
  s = ParseProblemKey("64-56-56-3-128-28-28-2-1x1-2x2-1x1-1-NCHW-FP32-F")
          .status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("filter"));
  s = ParseProblemKey("sixty-56-56-3x3-128-28-28-2-1x1-2x2-1x1-1-NCHW-FP32-F")
          .status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("c:"));
}

}  // namespace
}  // namespace convtune
