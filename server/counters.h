// What the find stack did, counted where it happens: finds and where their
// answers came from, tuning runs and their stages, plans timed, failures and
// device recovery. Tests and benchmarks read a snapshot. Thread-safe.
#ifndef CONVTUNE_SERVER_COUNTERS_H_
#define CONVTUNE_SERVER_COUNTERS_H_

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace convtune {

struct EngineCounters {
  int64_t finds = 0;        // Find calls
  int64_t db_hits = 0;      // answered from the user FindDb
  int64_t system_hits = 0;  // answered from the system FindDb (verified or not)
  int64_t fallbacks = 0;    // answered by the immediate-mode fallback (FAST)
  int64_t tunings = 0;      // tuning runs started
  int64_t joined = 0;       // finds that joined a tuning already running
  // Tuning runs stopped early because every caller had gone.
  int64_t tunings_abandoned = 0;
  int64_t plans_timed = 0;  // plan measurements (one per solver and config)
  // Plans near a find's best, timed again side by side at its end.
  int64_t plans_retimed = 0;
  int64_t verifications = 0;  // system records re-timed (TRUST_VERIFY)
  int64_t verify_rejected = 0;
  int64_t solver_failures = 0;
  int64_t records_stored = 0;
  // Tuned records the database would not take (a full disk, a failed
  // write): answered, not stored.
  int64_t records_not_stored = 0;
  int64_t records_dropped = 0;  // corrupt records removed (DataLoss)
  // Where tuning time goes: milliseconds from a tuning's start until its
  // plans were built (kernels compiled, in parallel), and milliseconds its
  // timing held the device, summed over tunings.
  int64_t compile_stage_ms = 0;
  int64_t timing_stage_ms = 0;
  int64_t device_resets = 0;  // resets after a solver left the device unusable
  // Candidates that left the device (or the worker measuring on it)
  // unusable, and measurements whose worker was killed past their time
  // bound: each is quarantined for its problem.
  int64_t measure_faults = 0;
  int64_t measure_timeouts = 0;
  // Finds queued by immediate-mode misses, and misses that queued none as
  // too many were waiting.
  int64_t background_tunings = 0;
  int64_t background_refused = 0;
  int64_t solvers_quarantined = 0;
  // The cluster tier: records found there (valid), looked for and absent,
  // found and refused by validation; lookups and writes that failed (the
  // tier down, slow or refusing), lookups skipped while the circuit breaker
  // was open; records published, published again after the tier lost its
  // data, and dropped from a full publish queue.
  int64_t tier_hits = 0;
  int64_t tier_misses = 0;
  int64_t tier_rejected = 0;
  int64_t tier_errors = 0;
  int64_t tier_skipped = 0;
  int64_t tier_published = 0;
  int64_t tier_republished = 0;
  int64_t tier_dropped = 0;
  // Runs that waited for another daemon's record (its lease held).
  int64_t tier_waits = 0;
  // Prefill jobs of the tier's stream this daemon finished; failed and
  // queued again; failed for the last time (dead-lettered); and took over
  // from a daemon that had stopped.
  int64_t tier_jobs_done = 0;
  int64_t tier_jobs_failed = 0;
  int64_t tier_jobs_dead = 0;
  int64_t tier_jobs_claimed = 0;
};

// Every counter with its name (the field's), in declaration order: what
// status and metrics report.
inline constexpr std::pair<const char*, int64_t EngineCounters::*>
    kCounterFields[] = {
        {"finds", &EngineCounters::finds},
        {"db_hits", &EngineCounters::db_hits},
        {"system_hits", &EngineCounters::system_hits},
        {"fallbacks", &EngineCounters::fallbacks},
        {"tunings", &EngineCounters::tunings},
        {"joined", &EngineCounters::joined},
        {"tunings_abandoned", &EngineCounters::tunings_abandoned},
        {"plans_timed", &EngineCounters::plans_timed},
        {"plans_retimed", &EngineCounters::plans_retimed},
        {"verifications", &EngineCounters::verifications},
        {"verify_rejected", &EngineCounters::verify_rejected},
        {"solver_failures", &EngineCounters::solver_failures},
        {"records_stored", &EngineCounters::records_stored},
        {"records_not_stored", &EngineCounters::records_not_stored},
        {"records_dropped", &EngineCounters::records_dropped},
        {"compile_stage_ms", &EngineCounters::compile_stage_ms},
        {"timing_stage_ms", &EngineCounters::timing_stage_ms},
        {"device_resets", &EngineCounters::device_resets},
        {"measure_faults", &EngineCounters::measure_faults},
        {"measure_timeouts", &EngineCounters::measure_timeouts},
        {"background_tunings", &EngineCounters::background_tunings},
        {"background_refused", &EngineCounters::background_refused},
        {"solvers_quarantined", &EngineCounters::solvers_quarantined},
        {"tier_hits", &EngineCounters::tier_hits},
        {"tier_misses", &EngineCounters::tier_misses},
        {"tier_rejected", &EngineCounters::tier_rejected},
        {"tier_errors", &EngineCounters::tier_errors},
        {"tier_skipped", &EngineCounters::tier_skipped},
        {"tier_published", &EngineCounters::tier_published},
        {"tier_republished", &EngineCounters::tier_republished},
        {"tier_dropped", &EngineCounters::tier_dropped},
        {"tier_waits", &EngineCounters::tier_waits},
        {"tier_jobs_done", &EngineCounters::tier_jobs_done},
        {"tier_jobs_failed", &EngineCounters::tier_jobs_failed},
        {"tier_jobs_dead", &EngineCounters::tier_jobs_dead},
        {"tier_jobs_claimed", &EngineCounters::tier_jobs_claimed}};

inline std::vector<std::pair<const char*, int64_t>> NamedCounters(
    const EngineCounters& c) {
  std::vector<std::pair<const char*, int64_t>> out;
  for (const auto& [name, field] : kCounterFields) {
    out.emplace_back(name, c.*field);
  }
  return out;
}

// Adds every counter of `b` to `a` (the counters of several cores).
inline EngineCounters& operator+=(EngineCounters& a, const EngineCounters& b) {
  for (const auto& [name, field] : kCounterFields) a.*field += b.*field;
  return a;
}

// Milliseconds since `t` on the steady clock: how stages are timed.
inline double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t)
      .count();
}

class Counters {
 public:
  void Add(int64_t EngineCounters::*counter, int64_t n = 1) {
    absl::MutexLock lock(&mu_);
    counts_.*counter += n;
  }
  EngineCounters Snapshot() const {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  mutable absl::Mutex mu_;
  EngineCounters counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_COUNTERS_H_
