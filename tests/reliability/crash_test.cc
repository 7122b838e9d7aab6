// The crash test's short run, part of the suite: 50 SIGKILLs of a real
// convtuned, at random moments and at every kill point, with every
// acknowledged record read back after every restart. tests/bench has the
// long run (bench_crash).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_join.h"
#include "tests/reliability/crash_run.h"
#include "tests/server/daemon_process.h"

namespace convtune::testing {
namespace {

TEST(CrashTest, FiftyKillsLoseAndCorruptNothing) {
  const std::string dir = MakeTempDir("convtune-crash");
  ASSERT_FALSE(dir.empty());
  CrashOptions options;
  options.daemon = CONVTUNED_PATH;
  options.dir = dir;
  options.kills = 50;
  options.progress = [](const std::string& line) {
    std::cerr << line << std::endl;
  };
  const CrashFigures f = RunCrashTest(options);
  std::filesystem::remove_all(dir);
  std::cerr << f.Summary() << std::endl;
  EXPECT_EQ(f.rounds, 50) << absl::StrJoin(f.failures, "\n");
  EXPECT_EQ(f.lost, 0) << absl::StrJoin(f.failures, "\n");
  EXPECT_EQ(f.corrupt, 0) << absl::StrJoin(f.failures, "\n");
  EXPECT_EQ(f.partial_imports, 0) << absl::StrJoin(f.failures, "\n");
  EXPECT_EQ(f.aborts, 0) << absl::StrJoin(f.failures, "\n");
  EXPECT_EQ(f.failed_restarts, 0) << absl::StrJoin(f.failures, "\n");
  EXPECT_TRUE(f.failures.empty()) << absl::StrJoin(f.failures, "\n");
  // The run did what it is for: records were acknowledged and read back,
  // and every kill point fired at least once.
  EXPECT_GT(f.acknowledged, 20);
  EXPECT_GE(f.verified, f.acknowledged);
  for (const char* point : {"find_db.before_write", "find_db.after_write",
                            "tune.build", "tune.measure", "import"}) {
    EXPECT_GE(f.point_kills.count(point) ? f.point_kills.at(point) : 0, 1)
        << point << "; " << f.Summary();
  }
}

}  // namespace
}  // namespace convtune::testing
