// The names and numbers of find modes, algorithm families and backends, as
// the client and the daemon both read and write them.
#include "common/vocabulary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace convtune {
namespace {

using ::testing::HasSubstr;

TEST(FindModeTest, NamesAndNumbersInAnyCase) {
  EXPECT_EQ(*ParseFindMode("normal"), v1::NORMAL);
  EXPECT_EQ(*ParseFindMode("2"), v1::FAST);
  EXPECT_EQ(*ParseFindMode("5", "m"), v1::DYNAMIC_HYBRID);
  EXPECT_EQ(*ParseFindMode("Dynamic_Hybrid"), v1::DYNAMIC_HYBRID);
  EXPECT_EQ(*ParseFindMode("7"), v1::TRUST_VERIFY_FULL);
  EXPECT_EQ(*ParseFindMode("TRUST_VERIFY_FULL", "m"), v1::TRUST_VERIFY_FULL);
  EXPECT_EQ(FindModeName(v1::TRUST_VERIFY), "TRUST_VERIFY");
  EXPECT_EQ(FindModeName(v1::FIND_MODE_UNSPECIFIED), "DEFAULT");
}

TEST(FindModeTest, FourIsReservedAndUnknownModesNameTheField) {
  for (const char* bad :
       {"4", "0", "8", "", "SLOW", "fastest", "FIND_MODE_UNSPECIFIED"}) {
    absl::StatusOr<v1::FindMode> m = ParseFindMode(bad, "CONVTUNE_FIND_MODE");
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(m.status().message()),
                HasSubstr("CONVTUNE_FIND_MODE"))
        << bad;
  }
  EXPECT_THAT(std::string(ParseFindMode("4").status().message()),
              HasSubstr("reserved"));
  EXPECT_EQ(FindModeFromNumber(4, "mode").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*FindModeFromNumber(6), v1::TRUST_VERIFY);
}

TEST(FindModeTest, ALongBadValueIsQuotedOnlyByItsPrefix) {
  const std::string junk(4000, 'x');
  absl::StatusOr<v1::FindMode> m = ParseFindMode(junk, "mode");
  ASSERT_FALSE(m.ok());
  EXPECT_LT(m.status().message().size(), 300u);
}

TEST(FindModeTest, EnvironmentDefaultAndBadValue) {
  unsetenv("CONVTUNE_FIND_MODE");
  EXPECT_EQ(*FindModeFromEnvironment(), kDefaultFindMode);
  EXPECT_EQ(kDefaultFindMode, v1::DYNAMIC_HYBRID);
  setenv("CONVTUNE_FIND_MODE", "hybrid", 1);
  EXPECT_EQ(*FindModeFromEnvironment(), v1::HYBRID);
  setenv("CONVTUNE_FIND_MODE", "4", 1);
  EXPECT_THAT(std::string(FindModeFromEnvironment().status().message()),
              HasSubstr("CONVTUNE_FIND_MODE"));
  unsetenv("CONVTUNE_FIND_MODE");
}

TEST(AlgorithmFamilyTest, MIOpenNumbersAndStoredNames) {
  EXPECT_EQ(static_cast<int>(v1::GEMM), 0);
  EXPECT_EQ(static_cast<int>(v1::DIRECT), 1);
  EXPECT_EQ(static_cast<int>(v1::FFT), 2);
  EXPECT_EQ(static_cast<int>(v1::WINOGRAD), 3);
  EXPECT_EQ(static_cast<int>(v1::IMPLICIT_GEMM), 5);
  for (v1::AlgorithmFamily f :
       {v1::GEMM, v1::DIRECT, v1::FFT, v1::WINOGRAD, v1::IMPLICIT_GEMM}) {
    EXPECT_EQ(*ParseAlgorithm(AlgorithmName(f), "algorithm"), f);
  }
  EXPECT_EQ(AlgorithmName(v1::IMPLICIT_GEMM), "implicit_gemm");
  absl::StatusOr<v1::AlgorithmFamily> bad = ParseAlgorithm("gemo", "algorithm");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("algorithm"));
}

TEST(BackendTest, NamesAsDeviceKeysAndRecordsSpellThem) {
  for (v1::Backend b : {v1::CPU, v1::CUDA, v1::HIP, v1::GPU}) {
    EXPECT_EQ(*ParseBackend(BackendName(b), "backend"), b);
  }
  EXPECT_EQ(BackendName(v1::CUDA), "cuda");
  EXPECT_EQ(ParseBackend("rocm", "backend").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace convtune
