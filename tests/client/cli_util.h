// Helpers of the CLI tests: run the `convtune` binary, and draw random
// MIOpenDriver lines. Not thread-safe (the generator is the caller's).
#ifndef CONVTUNE_TESTS_CLIENT_CLI_UTIL_H_
#define CONVTUNE_TESTS_CLIENT_CLI_UTIL_H_

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/driver_line.h"
#include "kernels/problem.h"
#include "tests/client/process_util.h"

namespace convtune {

inline testing::ProcessResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), CONVTUNE_CLI_PATH);
  return testing::RunProcess(args);
}

// A random forward problem as MIOpenDriver arguments, and its key.
inline std::vector<std::string> RandomDriverArgs(std::mt19937& rng,
                                                 std::string* key) {
  std::uniform_int_distribution<int> channels(2, 12), spatial(5, 16),
      filter(0, 1);
  const int f = filter(rng) ? 3 : 1;
  std::vector<std::string> args = {"conv",
                                   "-n",
                                   "1",
                                   "-c",
                                   absl::StrCat(channels(rng)),
                                   "-H",
                                   absl::StrCat(spatial(rng)),
                                   "-W",
                                   absl::StrCat(spatial(rng)),
                                   "-k",
                                   absl::StrCat(channels(rng)),
                                   "-y",
                                   absl::StrCat(f),
                                   "-x",
                                   absl::StrCat(f),
                                   "-p",
                                   absl::StrCat(f / 2),
                                   "-q",
                                   absl::StrCat(f / 2),
                                   "-F",
                                   "1"};
  auto problems = ParseDriverArgs(args);
  EXPECT_TRUE(problems.ok() && problems->size() == 1);
  *key = ProblemKey(problems->front());
  return args;
}

}  // namespace convtune

#endif  // CONVTUNE_TESTS_CLIENT_CLI_UTIL_H_
