// Tuning runs. A run enumerates the applicable solvers of a problem and the
// configs to try, and builds their plans, on the compile pool (compiling
// kernels in parallel); hands them to the timing stage; and stores the
// ranked FindRecord and each searched solver's best config. Identical
// concurrent requests share one run. Thread-safe; callbacks run on a pool
// thread, or inline when a request is refused before it is queued.
#ifndef CONVTUNE_SERVER_TUNER_H_
#define CONVTUNE_SERVER_TUNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
#include "server/find_tier.h"
#include "server/planner.h"
#include "server/stop_flag.h"
#include "server/tenant_limits.h"
#include "server/thread_pool.h"
#include "server/timing_lanes.h"
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
  // A record of the cluster tier answers it, when one is set and holds a
  // valid record (the find mode reads FindDbs, or the run is background).
  bool reads_tier = false;
  // The device (ordinal) to time on; unset: the timing lanes choose. A run
  // that others join keeps the device of the caller that started it.
  std::optional<int> device;
};

// How far a run has got, as its callers see it.
struct TuneProgress {
  enum class Stage {
    kQueued,     // waiting for the compile pool (background runs)
    kCompiling,  // building the candidates' plans
    kTiming,     // on the device's timing queue, or being timed
  };
  std::string problem_key;
  Stage stage = Stage::kQueued;
  int solvers = 0;      // candidates of the run
  int built = 0;        // candidates whose plans are built (or failed to build)
  int timed = 0;        // candidates timed (or failed) so far
  std::string current;  // the solver being timed; empty between solvers
  std::string best;     // the fastest solver so far; empty before the first
  double best_ms = 0;
};

// "queued", "compiling", "timing".
const char* StageName(TuneProgress::Stage stage);

// Who waits on a run.
struct TuneCaller {
  // The tenant the run is done for: its limits apply (TuningQuotas), it is
  // charged for the device's time, and its tasks take turns with other
  // tenants' on the pools.
  std::string tenant;
  // True once the caller stopped waiting; may be called from any thread
  // until `done` runs. Empty: never.
  std::function<bool()> gone;
  // Called as the run gets further, from any thread, until `done` runs
  // (one at a time, in order); must not call into the tuner. Optional.
  std::function<void(const TuneProgress&)> progress;
};

class Tuner {
 public:
  struct Options {
    // Configs tried per solver in a config search (the space is sampled
    // evenly beyond that).
    int max_configs_per_solver = 16;
  };

  // References must outlive the tuner; `quotas` may be null (no limits).
  Tuner(const Planner& planner, TimingLanes& timing, FindRecords& records,
        storage::Store& store, ThreadPool& compile_pool, Counters& counters,
        const StopFlag& stop, Options options, TuningQuotas* quotas = nullptr);

  using Done = std::function<void(absl::StatusOr<FindOutcome>)>;

  // Tunes p and calls `done` exactly once. FailedPrecondition when no
  // solver applies (within the workspace limit); Internal when every
  // applicable solver failed; Unavailable when stopping;
  // ResourceExhausted (with RetryAfter) when the caller's tenant is over a
  // limit of TuningQuotas (not for background requests, whose jobs are
  // admitted where they are queued).
  //
  // `caller.gone` says when this caller stopped waiting. When every
  // caller of a run has gone, the run stops at the next boundary (before it
  // is started, before each solver's plans are built, before each solver is
  // timed), stores no find record, and ends with Cancelled; the configs of
  // solvers it finished stay in the PerfDb. A run nobody can leave (a
  // caller without `gone`) always completes.
  // REQUIRES: ValidateProblem(p).ok().
  void Tune(const ConvProblem& p, const TuneRequest& request, Done done,
            TuneCaller caller = {});

  // Runs started and not finished (a shared run counts once).
  int64_t runs_in_flight();

  // The cluster tier: runs that read it ask it before they tune, and every
  // record tuned is published to it. Null (the default): none. Set before
  // the first Tune; must outlive the tuner's runs.
  void SetTier(FindTier* tier) { tier_ = tier; }

  // OK when `record`, read from the tier under `stored_key` for p (with the
  // run's workspace limit), may be used here: this device's key and schema,
  // the key asked for, times finite and sorted, and each result's solver
  // known here by the same name, running on this device, applicable to p,
  // taking its config, within the limit. InvalidArgument saying what is not.
  absl::Status ValidateTierRecord(const ConvProblem& p,
                                  const std::string& stored_key,
                                  int64_t workspace_limit,
                                  const v1::FindRecord& record) const;

  // Measures result `r` of a stored record of p again: its plan is built on
  // the compile pool and timed by the timing stage.
  void Remeasure(const ConvProblem& p, const v1::PerfResult& r,
                 std::function<void(absl::StatusOr<double>)> done);

 private:
  struct Run;

  std::vector<PerfConfig> SearchSpace(const Solver& s,
                                      const ConvProblem& p) const;
  // On the compile pool: answers from the FindDb or the tier when they
  // have the problem now, waits on another daemon's lease, or starts.
  // `waited`: called again after a wait.
  void Begin(std::shared_ptr<Run> run, bool waited);
  void Start(std::shared_ptr<Run> run);
  // The tier's valid record of p, stored locally as read from the tier;
  // NotFound or Unavailable when there is none to use.
  absl::StatusOr<FindOutcome> FromTier(const ConvProblem& p,
                                       int64_t workspace_limit);
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
  // True when every caller of the run under `dedup_key` has gone. Callers
  // found gone stop counting against their tenants' limits.
  bool Abandoned(const std::string& dedup_key);
  // The distinct tenants of the run's callers still waiting; the run's own
  // tenant when none is.
  std::vector<std::string> TenantsOf(const Run& run);
  // Updates the run's progress and tells its callers who follow it.
  void Publish(Run& run, const std::function<void(TuneProgress&)>& update);

  struct Waiter {
    Done done;
    TuneCaller caller;
    TuningQuotas::Ticket ticket;  // held until answered
  };
  struct InFlight {
    std::vector<Waiter> waiters;
    std::weak_ptr<Run> run;
  };

  const Planner& planner_;
  TimingLanes& timing_;
  FindRecords& records_;
  storage::PerfDb perf_db_;
  ThreadPool& compile_pool_;
  Counters& counters_;
  const StopFlag& stop_;
  const Options options_;
  TuningQuotas* const quotas_;
  FindTier* tier_ = nullptr;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TUNER_H_
