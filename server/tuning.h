// Internal to the find engine (find_engine.cc, tuning.cc): the state of one
// tuning run shared by its compile and benchmark stages.
#ifndef CONVTUNE_SERVER_TUNING_H_
#define CONVTUNE_SERVER_TUNING_H_

#include <atomic>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "server/find_engine.h"

namespace convtune {

absl::Status ShuttingDown();

struct FindEngine::Tuning {
  ConvProblem problem;
  FindParams params;
  std::string dedup_key;
  std::string problem_key;
  bool dynamic_only = false;
  bool search = false;   // search each solver's configs
  bool bounded = false;  // stop a search on the time budget or patience
  bool excluded_by_limit = false;
  std::vector<Candidate> candidates;
  std::vector<uint32_t> timed;
  std::atomic<int> to_compile{0};
  std::chrono::steady_clock::time_point compile_started;
  std::chrono::steady_clock::time_point started;
  // The fastest median timed so far in this tuning (bench queue only).
  double best_ms = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TUNING_H_
