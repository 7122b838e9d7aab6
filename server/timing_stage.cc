#include "server/timing_stage.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/kill_point.h"
#include "common/status_macros.h"
#include "kernels/gpu/blas_step.h"

namespace convtune {
namespace {

bool Faster(const TimingStage::Timed& a, const TimingStage::Timed& b) {
  return a.ms < b.ms;
}

// Whether plan i of c calls a library (a library solver, or a BLAS step).
bool UsesLibrary(const TimingCandidate& c, size_t i) {
  if (!c.solver->library().empty()) return true;
  for (const v1::KernelStep& step : c.plans[i].steps()) {
    if (gpu::IsLibraryStep(step)) return true;
  }
  return false;
}

}  // namespace

struct TimingStage::Run {
  TimingJob& job;
  TimingResult result;
  std::chrono::steady_clock::time_point started =
      std::chrono::steady_clock::now();
  // The fastest median timed so far in this job.
  double best_ms = 0;
  // Each of result.timed's solvers' timed configs, fastest first.
  std::vector<std::vector<Timed>> configs;
  // Wall milliseconds spent on checked runs and their checks.
  double check_ms = 0;
};

TimingStage::TimingStage(Measurer& measurer, const DeviceInfo& info,
                         ThreadPool& queue, Quarantine& quarantine,
                         Counters& counters, StopFlag& stop, Options options)
    : measurer_(measurer),
      info_(info),
      queue_(queue),
      quarantine_(quarantine),
      counters_(counters),
      stop_(stop),
      options_(options),
      device_key_(info.Key()) {}

double TimingStage::BoundMs(const ConvProblem& p,
                            const TimingCandidate& c) const {
  if (info_.peak_gflops <= 0) return options_.bound_floor_ms;
  // A candidate's own efficiency may be a ranking device (far above 1) or
  // far too hopeful: the bound takes it as at most peak, at least 1/1000.
  const double efficiency = std::clamp(c.solver->Efficiency(p), 1e-3, 1.0);
  const double estimate_ms =
      c.solver->EstimatedFlops(p) / (efficiency * info_.peak_gflops * 1e6);
  const TimingOptions& t = options_.timing;
  const int runs = 2 + std::max(0, t.warmup_runs) + std::max(1, t.max_repeats);
  return options_.bound_floor_ms + options_.bound_factor * runs * estimate_ms;
}

double TimingStage::SideBySideBoundMs(const std::vector<double>& ms) const {
  double round = 0;
  for (double m : ms) round += m;
  return options_.bound_floor_ms +
         options_.bound_factor * std::max(1, options_.retiming.max_repeats) *
             round;
}

void TimingStage::SetDeviceLostHandler(
    std::function<void(const std::string&)> handler) {
  on_device_lost_ = std::move(handler);
}

void TimingStage::Time(std::shared_ptr<TimingJob> job,
                       std::function<void(absl::StatusOr<TimingResult>)> done,
                       ThreadPool::Priority priority,
                       absl::string_view tenant) {
  queue_.Schedule(
      [this, job = std::move(job), done = std::move(done)] {
        const auto started = std::chrono::steady_clock::now();
        const absl::Status usable = Usable();
        absl::StatusOr<TimingResult> result =
            !usable.ok() ? absl::StatusOr<TimingResult>(usable)
            : job->abandoned && job->abandoned()
                ? absl::StatusOr<TimingResult>(absl::CancelledError(
                      "every caller of the find left before its timing"))
                : TimeAll(*job);
        job->device_ms = MsSince(started);
        counters_.Add(&EngineCounters::timing_stage_ms,
                      static_cast<int64_t>(job->device_ms));
        done(std::move(result));
      },
      priority, tenant);
}

void TimingStage::TimeOne(const ConvProblem& p, v1::ExecutionPlan plan,
                          std::function<void(absl::StatusOr<double>)> done) {
  queue_.Schedule([this, p, plan = std::move(plan), done = std::move(done)] {
    auto measure = [&]() -> absl::StatusOr<double> {
      RETURN_IF_ERROR(Usable());
      RETURN_IF_ERROR(
          measurer_.Open(p, plan.workspace_bytes(), seed_.fetch_add(1)));
      ASSIGN_OR_RETURN(Measurement m,
                       measurer_.Measure(plan, options_.timing, 0, false,
                                         options_.bound_floor_ms));
      return m.median_ms;
    };
    counters_.Add(&EngineCounters::plans_timed);
    done(measure());
  });
}

absl::StatusOr<std::vector<TimingStage::Timed>> TimingStage::TimeCandidate(
    Run& run, const TimingCandidate& c) {
  RETURN_IF_ERROR(c.status);
  const double bound_ms = BoundMs(run.job.problem, c);
  std::vector<Timed> timed;
  absl::Status first_failure;
  std::string skipped;  // configs that failed while others ran
  int since_improvement = 0;
  for (size_t i = 0; i < c.plans.size(); ++i) {
    if (run.job.bounded && i > 0 &&
        (MsSince(run.started) > options_.max_tuning_ms ||
         since_improvement >= options_.patience)) {
      break;
    }
    KillPoint("tune.measure");
    absl::StatusOr<Measurement> measured = measurer_.Measure(
        c.plans[i], options_.timing, run.best_ms, !UsesLibrary(c, i), bound_ms);
    if (!measured.ok()) {
      // One config that fails (its check, or its run) costs that config
      // only, unless it broke the device: a library offers many, and a bad
      // one must not hide the rest.
      if (!measurer_.Healthy().ok()) return measured.status();
      if (first_failure.ok()) first_failure = measured.status();
      absl::StrAppend(&skipped, " ", c.solver->name(), " [",
                      PerfConfigString(c.configs[i]).substr(0, 64),
                      "]: ", measured.status().message().substr(0, 200), ";");
      continue;
    }
    const Measurement m = *measured;
    run.check_ms += m.check_ms;
    counters_.Add(&EngineCounters::plans_timed);
    run.result.timed_solvers.push_back(c.solver->id());
    if (run.best_ms == 0 || m.median_ms < run.best_ms)
      run.best_ms = m.median_ms;
    const bool better =
        timed.empty() ||
        m.median_ms < std::min_element(timed.begin(), timed.end(), Faster)->ms;
    since_improvement = better ? 0 : since_improvement + 1;
    timed.push_back({m.median_ms, i});
  }
  if (timed.empty()) {
    return first_failure.ok() ? absl::InternalError("no config was timed")
                              : first_failure;
  }
  if (!skipped.empty()) {
    counters_.Add(&EngineCounters::solver_failures);
    absl::StrAppend(&run.result.failures, skipped);
  }
  std::sort(timed.begin(), timed.end(), Faster);
  return timed;
}

absl::Status TimingStage::Remeasure(Run& run) {
  // Plans of every solver within reach of the best, fastest first.
  struct Entry {
    size_t solver;  // index into run.result.timed and run.configs
    size_t rank;    // index into run.configs[solver]
    double ms;
  };
  std::vector<Entry> near;
  const double reach = options_.timing.hopeless_factor > 0
                           ? run.best_ms * options_.timing.hopeless_factor
                           : std::numeric_limits<double>::infinity();
  for (size_t s = 0; s < run.configs.size(); ++s) {
    for (size_t r = 0; r < run.configs[s].size(); ++r) {
      if (run.configs[s][r].ms <= reach)
        near.push_back({s, r, run.configs[s][r].ms});
    }
  }
  // Each solver's fastest first (configs are sorted, so rank 0), then the
  // other configs, each group fastest first: solvers are what is ranked.
  std::sort(near.begin(), near.end(), [](const Entry& a, const Entry& b) {
    if ((a.rank == 0) != (b.rank == 0)) return a.rank == 0;
    return a.ms < b.ms;
  });
  near.resize(
      std::min<size_t>(near.size(), std::max(0, options_.remeasure_top)));
  // One plan alone has nothing to be ranked against.
  if (near.size() < 2) return absl::OkStatus();
  std::vector<const v1::ExecutionPlan*> plans;
  std::vector<double> first_ms;
  for (const Entry& e : near) {
    const TimingCandidate& c = *run.result.timed[e.solver].candidate;
    plans.push_back(&c.plans[run.configs[e.solver][e.rank].config]);
    first_ms.push_back(e.ms);
  }
  ASSIGN_OR_RETURN(std::vector<Measurement> again,
                   measurer_.TimeSideBySide(plans, options_.retiming,
                                            SideBySideBoundMs(first_ms)));
  counters_.Add(&EngineCounters::plans_retimed,
                static_cast<int64_t>(near.size()));
  // The plans timed again were picked for their low first times, which
  // tend to come out higher a second time: a plan not timed again must not
  // get ahead of them on that luck alone.
  double slowest = 0;
  for (const Measurement& m : again) slowest = std::max(slowest, m.median_ms);
  for (std::vector<Timed>& t : run.configs) {
    for (Timed& config : t) config.ms = std::max(config.ms, slowest);
  }
  for (size_t i = 0; i < near.size(); ++i) {
    run.configs[near[i].solver][near[i].rank].ms = again[i].median_ms;
  }
  for (size_t s = 0; s < run.configs.size(); ++s) {
    std::vector<Timed>& t = run.configs[s];
    std::sort(t.begin(), t.end(), Faster);
    TimedSolver& best = run.result.timed[s];
    const bool changed =
        best.config != t.front().config || best.ms != t.front().ms;
    best.config = t.front().config;
    best.ms = t.front().ms;
    if (changed && run.job.on_timed) run.job.on_timed(best);
  }
  return absl::OkStatus();
}

absl::StatusOr<TimingResult> TimingStage::TimeAll(TimingJob& job) {
  // The bounded search's clock starts here: setting up counts against it.
  Run run{job};
  const ConvProblem& p = job.problem;
  // Configs may need more than their solver's default (a library's do).
  int64_t max_ws = 0;
  for (const TimingCandidate& c : job.candidates) {
    max_ws = std::max(max_ws, c.solver->WorkspaceBytes(p));
    for (const v1::ExecutionPlan& plan : c.plans) {
      max_ws = std::max(max_ws, plan.workspace_bytes());
    }
  }
  RETURN_IF_ERROR(measurer_.Open(p, max_ws, seed_.fetch_add(1)));
  // The likely fastest first, so that the slow-plan cutoff is set early.
  auto estimate = [&](const TimingCandidate& c) {
    return c.solver->EstimatedFlops(p) /
           std::max(1e-6, c.solver->Efficiency(p));
  };
  std::stable_sort(job.candidates.begin(), job.candidates.end(),
                   [&](const TimingCandidate& a, const TimingCandidate& b) {
                     return estimate(a) < estimate(b);
                   });
  int done = 0;
  for (const TimingCandidate& c : job.candidates) {
    RETURN_IF_ERROR(Usable());
    if (job.abandoned && job.abandoned()) {
      return absl::CancelledError(
          absl::StrCat("every caller of the find left; stopped after ", done,
                       " of ", job.candidates.size(), " solvers"));
    }
    ++done;
    if (job.on_progress) job.on_progress(c.solver);
    const auto candidate_started = std::chrono::steady_clock::now();
    const double checks_before = run.check_ms;
    absl::StatusOr<std::vector<Timed>> timed = TimeCandidate(run, c);
    if (job.on_progress) job.on_progress(nullptr);
    if (const double spent = MsSince(candidate_started);
        options_.report_slower_than_ms > 0 &&
        spent > options_.report_slower_than_ms) {
      // Where a long find's time went, for whoever waits on it.
      std::cerr << "convtuned: timing " << c.solver->name() << " on "
                << job.problem_key << " took " << spent / 1e3 << " s ("
                << c.plans.size() << " configs; checks "
                << (run.check_ms - checks_before) / 1e3 << " s"
                << (timed.ok() ? absl::StrCat("; the slowest ",
                                              timed->back().ms, " ms")
                               : std::string())
                << ")\n";
    }
    if (timed.ok()) {
      const TimedSolver best{&c, timed->front().config, timed->front().ms};
      if (job.on_timed) job.on_timed(best);
      run.result.timed.push_back(best);
      run.configs.push_back(*std::move(timed));
      continue;
    }
    // A failing solver is left out of this problem's answer; the rest go on
    // (on fresh buffers if the device had to be reset).
    counters_.Add(&EngineCounters::solver_failures);
    absl::StrAppend(&run.result.failures, " ", c.solver->name(), ": ",
                    timed.status().ToString(), ";");
    ASSIGN_OR_RETURN(const bool reset,
                     Recover(job.problem_key, *c.solver, timed.status()));
    if (reset) RETURN_IF_ERROR(measurer_.Open(p, max_ws, seed_.fetch_add(1)));
  }
  RETURN_IF_ERROR(Usable());
  const bool out_of_time =
      job.bounded && MsSince(run.started) > options_.max_tuning_ms;
  if (absl::Status again = out_of_time ? absl::OkStatus() : Remeasure(run);
      !again.ok()) {
    // The first measurements stand. Plans that ran before cannot be told
    // apart here: none is quarantined, but a device left unusable is reset.
    absl::StrAppend(&run.result.failures,
                    " side-by-side timing: ", again.ToString(), ";");
    if (!measurer_.Healthy().ok()) {
      RETURN_IF_ERROR(ResetOrLose(absl::StrCat("side-by-side timing failed on ",
                                               job.problem_key, " (",
                                               again.message(), ")")));
    }
  }
  return std::move(run.result);
}

absl::StatusOr<bool> TimingStage::Recover(const std::string& problem_key,
                                          const Solver& solver,
                                          const absl::Status& failure) {
  if (measurer_.Healthy().ok()) return false;
  // The solver broke the device, or its worker, or never returned: it is
  // not run on this problem again.
  const absl::Status put = quarantine_.Add(problem_key, solver.id());
  counters_.Add(&EngineCounters::solvers_quarantined);
  counters_.Add(absl::IsDeadlineExceeded(failure)
                    ? &EngineCounters::measure_timeouts
                    : &EngineCounters::measure_faults);
  std::cerr << "convtuned: " << solver.name() << " left " << device_key_
            << " unusable on " << problem_key << " (" << failure.message()
            << "); quarantined for that problem"
            << (put.ok() ? ""
                         : absl::StrCat(" in memory only: ", put.message()))
            << "\n";
  RETURN_IF_ERROR(
      ResetOrLose(absl::StrCat(solver.name(), " faulted on ", problem_key, " (",
                               failure.message(), ")")));
  return true;
}

absl::Status TimingStage::ResetOrLose(const std::string& what) {
  counters_.Add(&EngineCounters::device_resets);
  const absl::Status reset = measurer_.Reset();
  if (reset.ok()) return absl::OkStatus();
  const std::string why = absl::StrCat(
      what, " and the device could not be reset (", reset.message(), ")");
  if (lost_.Stop() && on_device_lost_) on_device_lost_(why);
  return absl::UnavailableError(
      absl::StrCat("device ", device_key_, " lost: ", why));
}

absl::Status TimingStage::Usable() const {
  RETURN_IF_ERROR(stop_.Check());
  if (lost_.stopped()) {
    return absl::UnavailableError(
        absl::StrCat("device ", device_key_, " was lost"));
  }
  return absl::OkStatus();
}

}  // namespace convtune
