// The leaving-callers check shared by the CPU and GPU tests: a real
// convtuned given a thousand finds whose deadlines pass mid-tuning stops
// their runs, and is left with no run, queued task, thread or memory of
// theirs (host memory, and device memory where the test can measure it);
// the next honest find is tuned as usual. Makes gtest expectations.
#ifndef CONVTUNE_TESTS_SERVER_LEAVING_CALLERS_H_
#define CONVTUNE_TESTS_SERVER_LEAVING_CALLERS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convtune/v1/problem.pb.h"

namespace convtune::testing {

struct LeavingCallers {
  std::string convtuned;             // the binary
  std::vector<std::string> backend;  // e.g. {"--backend", "cpu"}
  // The i-th caller's problem, a different one for each i.
  std::function<v1::ConvProblem(int)> problem;
  int callers = 1000;
  // Deadlines from min_ms to min_ms + spread_ms - 1.
  int min_ms = 40;
  int spread_ms = 61;
  // Bursts of `callers`, each of the same problems.
  int bursts = 1;
  // What the bursts may leave: gRPC's pools grow with the load (in the
  // first), and caches keep what was compiled and planned for the shapes.
  int thread_slack = 8;
  int64_t rss_slack_kb = 128 * 1024;
  // Bytes of device memory in use, where the test can tell; empty else.
  std::function<int64_t()> device_used_bytes;
  // How much device memory may stay in use after the burst (kernels loaded,
  // library caches), well under what one benchmark session per run would
  // leave.
  int64_t device_slack_bytes = int64_t{512} << 20;
};

// Runs the check in a fresh folder; prints one line of what it measured.
void CheckLeavingCallersLeaveNothing(const LeavingCallers& c);

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_SERVER_LEAVING_CALLERS_H_
