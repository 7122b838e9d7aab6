#include "kernels/problem_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace convtune {
namespace {

using ::testing::HasSubstr;

v1::ConvProblem Valid() {
  v1::ConvProblem p;
  p.set_spatial_dims(2);
  p.set_n(1);
  p.set_c(8);
  p.set_k(4);
  p.add_in_size(10);
  p.add_in_size(12);
  p.add_filter_size(3);
  p.add_filter_size(3);
  p.set_layout(v1::NCHW);
  p.set_data_type(v1::FP32);
  p.set_direction(v1::FORWARD);
  return p;
}

void ExpectField(const v1::ConvProblem& p, const std::string& field) {
  auto r = ProblemFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(field));
}

TEST(ProblemProtoTest, DefaultsAndRoundTrip) {
  auto r = ProblemFromProto(Valid());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pad, (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(r->stride, (std::array<int64_t, 3>{1, 1, 1}));
  EXPECT_EQ(r->groups, 1);
  v1::ConvProblem wire;
  ProblemToProto(*r, &wire);
  auto back = ProblemFromProto(wire);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *r);
}

TEST(ProblemProtoTest, NamesTheBadField) {
  v1::ConvProblem p = Valid();
  p.clear_data_type();
  ExpectField(p, "data_type");
  p = Valid();
  p.set_layout(static_cast<v1::Layout>(42));
  ExpectField(p, "layout");
  p = Valid();
  p.clear_direction();
  ExpectField(p, "direction");
  p = Valid();
  p.add_in_size(3);
  ExpectField(p, "in_size");
  p = Valid();
  p.add_pad(1);
  ExpectField(p, "pad");
  p = Valid();
  p.set_c(0);
  ExpectField(p, "c:");
  p = Valid();
  p.set_spatial_dims(1);
  ExpectField(p, "spatial_dims");
  p = Valid();
  p.set_groups(3);
  ExpectField(p, "groups");
}

TEST(ProblemProtoTest, TensorByteLimitIsApplied) {
  ProblemLimits limits;
  limits.max_tensor_bytes = 100;
  auto r = ProblemFromProto(Valid(), limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("over the limit"));
}

}  // namespace
}  // namespace convtune
