// The crash test's long run: bench_crash [--kills N] [--dir DIR]. Kills a
// real convtuned N times (default 1,000) at random moments and at its kill
// points, reads acknowledged records back after each restart (the last
// round's, 200 others, and all of them every 50 rounds and at the end),
// and prints the figures. Exits 1 if anything was lost or corrupt, an
// import was half-applied, the daemon aborted or failed to restart.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "tests/reliability/crash_run.h"
#include "tests/server/daemon_process.h"

int main(int argc, char** argv) {
  convtune::testing::CrashOptions options;
  options.daemon = CONVTUNED_PATH;
  options.kills = 1000;
  options.verify_all_each_restart = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help") {
      std::cout << "usage: bench_crash [--kills N] [--dir DIR]\n"
                   "  --kills N  SIGKILLs of convtuned (default 1000)\n"
                   "  --dir DIR  scratch folder (default: a new one in /tmp, "
                   "removed after)\n";
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "bench_crash: " << flag << ": missing value\n";
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--kills") {
      if (!absl::SimpleAtoi(value, &options.kills) || options.kills < 1) {
        std::cerr << "bench_crash: --kills: expected a positive count\n";
        return 2;
      }
    } else if (flag == "--dir") {
      dir = value;
    } else {
      std::cerr << "bench_crash: unknown flag '" << flag.substr(0, 40) << "'\n";
      return 2;
    }
  }
  const bool temporary = dir.empty();
  if (temporary) dir = convtune::testing::MakeTempDir("convtune-crash");
  options.dir = dir;
  options.progress = [](const std::string& line) {
    std::cerr << line << std::endl;
  };
  const convtune::testing::CrashFigures f = RunCrashTest(options);
  if (temporary) std::filesystem::remove_all(dir);
  std::cout << f.Summary() << "\n";
  for (const std::string& failure : f.failures) {
    std::cout << "  " << failure << "\n";
  }
  const bool clean = f.lost == 0 && f.corrupt == 0 && f.partial_imports == 0 &&
                     f.aborts == 0 && f.failed_restarts == 0 &&
                     f.rounds == options.kills;
  return clean ? 0 : 1;
}
