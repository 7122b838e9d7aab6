// The crash test: a real convtuned on the CPU backend, killed with SIGKILL
// again and again, at random moments and at its named kill points
// (common/kill_point.h), while a client tunes new problems and imports an
// export. Every find the daemon acknowledged as stored goes into an
// expected-state log; after each restart the acknowledged records are read
// back through the daemon and compared. Not thread-safe.
#ifndef CONVTUNE_TESTS_RELIABILITY_CRASH_RUN_H_
#define CONVTUNE_TESTS_RELIABILITY_CRASH_RUN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace convtune::testing {

struct CrashOptions {
  std::string daemon;  // the convtuned binary
  std::string dir;     // a scratch folder for the database, socket and logs
  int kills = 50;
  // Every acknowledged record is read back after every restart when true;
  // otherwise those of the last round, 200 others at random, and all of
  // them every 50 rounds and at the end.
  bool verify_all_each_restart = true;
  // Called with a line of figures every few rounds; may be empty.
  std::function<void(const std::string&)> progress;
};

struct CrashFigures {
  int rounds = 0;
  // How each round's daemon ended: by the driver's SIGKILL at a random
  // moment, or at a kill point, by name.
  int timed_kills = 0;
  std::map<std::string, int> point_kills;
  int aborts = 0;           // ended any other way (a crash, an abort)
  int failed_restarts = 0;  // did not come back to serving
  int64_t finds = 0;
  int64_t acknowledged = 0;  // finds answered as tuned and stored
  int64_t verified = 0;      // acknowledged records read back, summed
  int64_t lost = 0;          // acknowledged, then not answered from the FindDb
  int64_t corrupt = 0;       // answered from the FindDb, not as acknowledged
  int imports = 0;  // imports acknowledged (each must be all there after)
  // Restarts after an import was cut off that found some of its records
  // but not all (an import is one atomic batch).
  int partial_imports = 0;
  double seconds = 0;
  // The first failures, described.
  std::vector<std::string> failures;

  std::string Summary() const;
};

CrashFigures RunCrashTest(const CrashOptions& options);

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_RELIABILITY_CRASH_RUN_H_
