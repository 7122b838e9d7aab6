// The timing stage of tuning, and the only part of it that touches the
// device: candidate plans of one problem are measured one at a time on the
// device's timing queue (one thread, so timings never overlap), each checked
// against the float64 reference first. Plans far slower than the best so far
// are cut short, a bounded config search stops on its time budget or
// patience, and the few plans nearest the best, whatever their solver, are
// timed again side by side. Plans run through a Measurer: in convtuned, a
// worker process that owns the device, with each measurement's wall time
// bounded by its estimate. When a plan leaves the device unusable (or kills
// its worker, or runs past its bound), the device is reset (a fresh worker
// started) and the solver quarantined for the problem; a device that cannot
// be reset is lost, and convtuned stops. Thread-safe; callbacks run on the
// timing queue.
#ifndef CONVTUNE_SERVER_TIMING_STAGE_H_
#define CONVTUNE_SERVER_TIMING_STAGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/benchmark.h"
#include "server/counters.h"
#include "server/measurer.h"
#include "server/quarantine.h"
#include "server/solver.h"
#include "server/stop_flag.h"
#include "server/thread_pool.h"

namespace convtune {

// One solver of a tuning run with its configs and their built plans.
struct TimingCandidate {
  const Solver* solver = nullptr;
  std::vector<PerfConfig> configs;
  std::vector<v1::ExecutionPlan> plans;  // one per config, kernels built
  absl::Status status;                   // why its plans could not be built
};

struct TimingJob {
  ConvProblem problem;
  std::string problem_key;
  std::vector<TimingCandidate> candidates;
  // Stop a solver's config search on the time budget or patience.
  bool bounded = false;
  // Called on the timing queue as each candidate's best config is known,
  // so that what a search found is kept even if the job ends early.
  std::function<void(const struct TimedSolver&)> on_timed;
  // True when nobody waits for the job any more: it ends with Cancelled
  // before its next candidate. Empty: never.
  std::function<bool()> abandoned;
  // Called on the timing queue with each candidate before it is timed, and
  // with null after it (timed or failed). Optional.
  std::function<void(const Solver*)> on_progress;
  // Set on the timing queue when the job ends: how long it held the device.
  double device_ms = 0;
};

struct TimedSolver {
  const TimingCandidate* candidate = nullptr;
  size_t config = 0;  // index of the fastest config
  double ms = 0;      // its median
};

struct TimingResult {
  // The candidates that measured, in the order they were timed.
  std::vector<TimedSolver> timed;
  // Every plan measurement's solver id, in order.
  std::vector<uint32_t> timed_solvers;
  // "name: error;" for each candidate that failed.
  std::string failures;
};

class TimingStage {
 public:
  struct Options {
    TimingOptions timing;
    // The side-by-side rounds at the end of a job: more repeats than a
    // first measurement, as they decide between near-equal plans.
    TimingOptions retiming = Retiming();
    // Plans timed again side by side at the end of a job: the fastest of
    // every solver's configs within hopeless_factor of the best, at most
    // this many. Each solver's answer is its fastest after that.
    int remeasure_top = 4;
    // Bounded searches: total milliseconds, and configs in a row without
    // improvement before a solver's search stops.
    double max_tuning_ms = 30000;
    int patience = 4;
    // A solver whose configs took longer than this to time is reported on
    // stderr. 0: never.
    double report_slower_than_ms = 2000;
    // Each measurement's wall-time bound: this floor (loading code and
    // libraries, the first reference) plus bound_factor times the plan's
    // estimated time for every run it may make. Past it, the worker is
    // killed and the solver quarantined.
    double bound_floor_ms = 20000;
    double bound_factor = 50;
  };

  // References must outlive the stage. `queue` must have exactly one thread:
  // everything here runs on it. `info` describes the measurer's device.
  TimingStage(Measurer& measurer, const DeviceInfo& info, ThreadPool& queue,
              Quarantine& quarantine, Counters& counters, StopFlag& stop,
              Options options);

  // Called once, from the timing queue, when the device is lost (a fault it
  // could not be reset from); from then on the stage refuses work with
  // Unavailable. Set before the first timing.
  void SetDeviceLostHandler(std::function<void(const std::string&)> handler);

  // Times the job's candidates, the likely fastest first. A candidate whose
  // plans failed to build or to run is left out with its error in
  // `failures`; the others go on (on fresh buffers after a reset).
  // Unavailable when stopping or when the device was lost.
  // A kLow job waits for every other job queued; jobs of one priority take
  // turns by `tenant` (ThreadPool).
  void Time(std::shared_ptr<TimingJob> job,
            std::function<void(absl::StatusOr<TimingResult>)> done,
            ThreadPool::Priority priority = ThreadPool::Priority::kNormal,
            absl::string_view tenant = {});

  // Measures one built plan of p on fresh inputs: its median milliseconds.
  void TimeOne(const ConvProblem& p, v1::ExecutionPlan plan,
               std::function<void(absl::StatusOr<double>)> done);

  const Options& options() const { return options_; }
  static TimingOptions Retiming() {
    TimingOptions t;
    t.warmup_runs = 0;
    t.min_repeats = 5;
    t.max_repeats = 20;
    t.budget_ms = 50;
    return t;
  }

  // One config's first measurement (an index into its candidate's configs).
  struct Timed {
    double ms;
    size_t config;
  };

 private:
  struct Run;  // one job's progress (timing queue only)

  absl::StatusOr<TimingResult> TimeAll(TimingJob& job);
  // The candidate's configs that measured, fastest first.
  absl::StatusOr<std::vector<Timed>> TimeCandidate(Run& run,
                                                   const TimingCandidate& c);
  // Times the plans near the best again side by side and updates each
  // solver's answer.
  absl::Status Remeasure(Run& run);
  // After a solver failed: false when the device still answers, true when
  // it was reset (buffers allocated before are gone) with the solver
  // quarantined, Unavailable when the device is lost.
  absl::StatusOr<bool> Recover(const std::string& problem_key,
                               const Solver& solver,
                               const absl::Status& failure);
  // Resets the device after `what` left it unusable; Unavailable (the
  // device lost, the handler called) when it cannot be reset.
  absl::Status ResetOrLose(const std::string& what);
  // Unavailable when stopping or when the device was lost, else OK.
  absl::Status Usable() const;
  // The wall-time bound of measuring plan i of c (see Options).
  double BoundMs(const ConvProblem& p, const TimingCandidate& c) const;
  // The bound of timing `plans` side by side whose single times are `ms`.
  double SideBySideBoundMs(const std::vector<double>& ms) const;

  Measurer& measurer_;
  const DeviceInfo& info_;
  ThreadPool& queue_;
  Quarantine& quarantine_;
  Counters& counters_;
  StopFlag& stop_;
  const Options options_;
  const std::string device_key_;
  std::atomic<uint64_t> seed_{0x5eed};
  std::function<void(const std::string&)> on_device_lost_;
  StopFlag lost_;  // set once, when the device is lost
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TIMING_STAGE_H_
