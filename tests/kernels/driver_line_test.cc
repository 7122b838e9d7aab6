#include "kernels/driver_line.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace convtune {
namespace {

using ::testing::HasSubstr;

TEST(DriverLineTest, ShortFlags) {
  auto r = ParseDriverLine(
      "conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  const ConvProblem& p = (*r)[0];
  EXPECT_EQ(ProblemKey(p), "64-56-56-3x3-64-56-56-1-1x1-1x1-1x1-1-NCHW-FP32-F");
}

TEST(DriverLineTest, ForwMaskGivesDirections) {
  auto all =
      ParseDriverLine("convfp16 -n 2 -c 8 -H 9 -W 9 -k 4 -y 1 -x 1 -F 0");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].direction, Direction::kForward);
  EXPECT_EQ((*all)[1].direction, Direction::kBackwardData);
  EXPECT_EQ((*all)[2].direction, Direction::kBackwardWeights);
  EXPECT_EQ((*all)[0].type, DataType::kFp16);
  auto bwd =
      ParseDriverLine("convbfp16 -n 2 -c 8 -H 9 -W 9 -k 4 -y 1 -x 1 --forw 2");
  ASSERT_TRUE(bwd.ok());
  ASSERT_EQ(bwd->size(), 1u);
  EXPECT_EQ((*bwd)[0].direction, Direction::kBackwardData);
  EXPECT_EQ((*bwd)[0].type, DataType::kBf16);
  auto wrw = ParseDriverLine("conv -n 2 -c 8 -H 9 -W 9 -k 4 -y 1 -x 1 -F 4");
  ASSERT_TRUE(wrw.ok());
  EXPECT_EQ((*wrw)[0].direction, Direction::kBackwardWeights);
}

TEST(DriverLineTest, LongFlagsAnd3d) {
  auto r = ParseDriverLine(
      "./bin/MIOpenDriver conv --batchsize 2 --spatial_dim 3 --in_channels 4 "
      "--out_channels 8 "
      "--in_d 6 --in_h 7 --in_w 8 --fil_d 3 --fil_h 3 --fil_w 3 --pad_d 1 "
      "--pad_h 1 --pad_w 1 "
      "--conv_stride_d 2 --conv_stride_h 1 --conv_stride_w 1 --dilation_d 1 "
      "--dilation_h 1 "
      "--dilation_w 1 --group_count 2 --mode conv --pad_mode default "
      "--in_layout NDHWC "
      "--forw 1 --time 1 --verify=0");
  ASSERT_TRUE(r.ok()) << r.status();
  const ConvProblem& p = (*r)[0];
  EXPECT_EQ(p.spatial_dims, 3);
  EXPECT_EQ(p.layout, Layout::kNHWC);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.out(0), 3);
  EXPECT_EQ(ProblemKey(p),
            "4-6-7-8-3x3x3-8-3-7-8-2-1x1x1-2x1x1-1x1x1-2-NDHWC-FP32-F");
  auto short3d = ParseDriverLine(
      "conv -_ 3 -n 1 -c 2 -k 2 -! 4 -@ 3 -$ 1 -H 5 -W 5 -y 1 -x 1");
  ASSERT_TRUE(short3d.ok()) << short3d.status();
  EXPECT_EQ((*short3d)[0].in[0], 4);
  EXPECT_EQ((*short3d)[0].filter[0], 3);
}

TEST(DriverLineTest, DepthFlagsOfA2dProblemAreIgnored) {
  auto r = ParseDriverLine(
      "conv -n 1 -c 4 -k 4 -H 8 -W 8 --in_d 4 --conv_stride_d 0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].in[0], 1);
  EXPECT_EQ((*r)[0].stride[0], 1);
}

TEST(DriverLineTest, FormatRoundTrips) {
  auto r = ParseDriverLine(
      "conv -n 3 -c 6 -H 11 -W 13 -k 9 -y 3 -x 5 -p 1 -q 2 -u 2 -v 1 "
      "-l 1 -j 2 -g 3 -F 2 --in_layout NHWC");
  ASSERT_TRUE(r.ok()) << r.status();
  auto back = ParseDriverLine(FormatDriverLine((*r)[0]));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0], (*r)[0]);
}

void ExpectError(const std::string& line, const std::string& mention) {
  auto r = ParseDriverLine(line);
  ASSERT_FALSE(r.ok()) << line;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(mention))
      << r.status();
}

TEST(DriverLineTest, ErrorsNameTheFlag) {
  ExpectError("pool -n 1", "command");
  ExpectError("", "command");
  ExpectError("conv -n", "missing value");
  ExpectError("conv -n one", "'one' is not an integer");
  ExpectError("conv --bogus 3", "--bogus");
  ExpectError("conv -Q 3", "-Q");
  ExpectError("conv -F 9", "-F");
  ExpectError("conv --mode trans -n 1", "mode");
  ExpectError("conv --in_layout CHWN", "layout");
  ExpectError("conv -n 1 -c 4 -k 4 -H 8 -W 8 -y 3 -x 3 -p -1", "pad_h");
  ExpectError("conv -n 1 -c 4 -k 4 -H 8 -W 8 -y 3 -x 3 -g 3", "groups");
  ExpectError("conv -n 1 -c 4 -k 4 -H 2 -W 8 -y 5 -x 3", "out_h");
}

// Every line of the shared MIOpen perf-model lists must parse.
TEST(DriverLineTest, ParsesEverySharedProblemList) {
  const std::string dir =
      std::string(CONVTUNE_SHARED_DIR) + "/problems/miopen-perf-models";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) GTEST_SKIP() << "no problem lists at " << dir;
  int files = 0, lines = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".txt") continue;
    ++files;
    std::ifstream in(dir + "/" + name);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      auto r = ParseDriverLine(line);
      ASSERT_TRUE(r.ok()) << name << ":" << lineno << ": " << r.status();
      ASSERT_EQ(r->size(), 1u) << name << ":" << lineno;
      ++lines;
    }
  }
  closedir(d);
  EXPECT_GE(files, 60);
  EXPECT_GE(lines, 4800);
}

}  // namespace
}  // namespace convtune
