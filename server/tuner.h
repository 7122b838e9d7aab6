// Tuning runs. A run enumerates the applicable solvers of a problem and the
// configs to try, builds their plans on the compile pool (compiling kernels
// in parallel), hands them to the timing stage, and stores the ranked
// FindRecord and each searched solver's best config. Identical concurrent
// requests share one run. Thread-safe; callbacks run on a pool thread, or
// inline when there is nothing to tune.
#ifndef CONVTUNE_SERVER_TUNER_H_
#define CONVTUNE_SERVER_TUNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/problem.h"
#include "server/counters.h"
#include "server/find_outcome.h"
#include "server/find_records.h"
#include "server/planner.h"
#include "server/stop_flag.h"
#include "server/thread_pool.h"
#include "server/timing_stage.h"
#include "storage/records.h"

namespace convtune {

// How a run searches; the find policy of the mode decides.
struct TuneRequest {
  // Largest workspace the caller offers; negative: no limit.
  int64_t workspace_limit = -1;
  bool dynamic_only = false;  // skip solvers that compile per size
  bool search = false;        // time each solver's configs, not one
  bool bounded = false;       // stop a search on time budget or patience
  // Nobody waits on it: it builds and times after all other work queued,
  // and does nothing when the FindDb has the problem by the time it starts.
  bool background = false;
};

class Tuner {
 public:
  struct Options {
    // Configs tried per solver in a config search (the space is sampled
    // evenly beyond that).
    int max_configs_per_solver = 16;
  };

  // References must outlive the tuner.
  Tuner(const Planner& planner, TimingStage& timing, FindRecords& records,
        storage::Store& store, ThreadPool& compile_pool, Counters& counters,
        const StopFlag& stop, Options options);

  using Done = std::function<void(absl::StatusOr<FindOutcome>)>;

  // Tunes p and calls `done` exactly once. FailedPrecondition when no
  // solver applies (within the workspace limit); Internal when every
  // applicable solver failed; Unavailable when stopping.
  //
  // `gone` (optional) says when this caller stopped waiting. When every
  // caller of a run has gone, the run stops at the next boundary (before it
  // is started, before each solver's plans are built, before each solver is
  // timed), stores no find record, and ends with Cancelled; the configs of
  // solvers it finished stay in the PerfDb. A run nobody can leave (a
  // caller without `gone`) always completes.
  // REQUIRES: ValidateProblem(p).ok().
  void Tune(const ConvProblem& p, const TuneRequest& request, Done done,
            std::function<bool()> gone = nullptr);

  // Runs started and not finished (a shared run counts once).
  int64_t runs_in_flight();

  // Measures result `r` of a stored record of p again: its plan is built on
  // the compile pool and timed by the timing stage.
  void Remeasure(const ConvProblem& p, const v1::PerfResult& r,
                 std::function<void(absl::StatusOr<double>)> done);

 private:
  struct Run;

  std::vector<PerfConfig> SearchSpace(const Solver& s,
                                      const ConvProblem& p) const;
  void Start(std::shared_ptr<Run> run);
  // Background runs queue behind all other work.
  static ThreadPool::Priority PriorityOf(const Run& run);
  void BuildPlans(std::shared_ptr<Run> run, size_t candidate);
  void Finish(std::shared_ptr<Run> run, absl::StatusOr<TimingResult> timed);
  absl::StatusOr<v1::FindRecord> Record(const Run& run,
                                        const TimingResult& timed);
  // Keeps a searched solver's best config in the PerfDb.
  void StoreConfig(const std::string& problem_key, const TimedSolver& t);
  void Complete(const std::string& dedup_key,
                absl::StatusOr<FindOutcome> result);
  // True when every caller of the run under `dedup_key` has gone.
  bool Abandoned(const std::string& dedup_key);

  struct Waiter {
    Done done;
    std::function<bool()> gone;  // empty: never goes
  };

  const Planner& planner_;
  TimingStage& timing_;
  FindRecords& records_;
  storage::PerfDb perf_db_;
  ThreadPool& compile_pool_;
  Counters& counters_;
  const StopFlag& stop_;
  const Options options_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Waiter>> in_flight_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TUNER_H_
