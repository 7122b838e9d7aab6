// The find engine's tuning: candidates, compile stage, timing, config search,
// TRUST_VERIFY's verification, and completion of the waiting finds.
#include <algorithm>
#include <iostream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tuning.h"

namespace convtune {
namespace {

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void AddResult(const Solver& s, const ConvProblem& p, double ms, const PerfConfig& config,
               v1::FindRecord* record) {
  v1::PerfResult* r = record->add_results();
  r->set_solver_id(s.id());
  r->set_solver_name(std::string(s.name()));
  r->set_algorithm(std::string(AlgorithmName(s.family())));
  r->set_time_ms(ms);
  r->set_workspace_bytes(s.WorkspaceBytes(p));
  for (int64_t v : config) r->add_perf_config(v);
  r->set_measured(true);
}

}  // namespace

std::vector<PerfConfig> FindEngine::ConfigsToTry(const Solver& s, const ConvProblem& p,
                                                 bool search) {
  if (search) {
    std::vector<PerfConfig> space = s.ConfigSpace(p);
    const size_t cap = static_cast<size_t>(std::max(1, options_.max_configs_per_solver));
    if (space.size() <= cap) return space;
    std::vector<PerfConfig> sampled;
    for (size_t i = 0; i < cap; ++i) sampled.push_back(space[i * space.size() / cap]);
    return sampled;
  }
  absl::StatusOr<v1::PerfDbRecord> tuned = perf_db_.Get(ProblemKey(p), s.id());
  if (tuned.ok()) {
    PerfConfig c(tuned->perf_config().begin(), tuned->perf_config().end());
    if (s.ValidateConfig(p, c).ok()) return {c};
  }
  return {s.DefaultConfig(p)};
}

void FindEngine::Tune(const ConvProblem& p, const FindParams& params, Done done) {
  auto t = std::make_shared<Tuning>();
  t->problem = p;
  t->params = params;
  t->problem_key = ProblemKey(p);
  const FindMode m = params.mode;
  const bool verify_mode = m == FindMode::kTrustVerify || m == FindMode::kTrustVerifyFull;
  t->dynamic_only = m == FindMode::kDynamicHybrid || verify_mode;
  t->search = params.exhaustive || verify_mode;
  t->bounded = m == FindMode::kTrustVerify;
  t->dedup_key = absl::StrCat(t->problem_key, "|", params.workspace_limit, "|",
                              t->dynamic_only, t->search, t->bounded);
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = in_flight_.try_emplace(t->dedup_key);
    it->second.push_back(std::move(done));
    if (!inserted) {
      ++counters_.joined;
      return;
    }
    ++counters_.tunings;
  }
  StartTuning(std::move(t));
}

void FindEngine::StartTuning(std::shared_ptr<Tuning> t) {
  const ConvProblem& p = t->problem;
  for (const Solver* s :
       Candidates(p, t->params.workspace_limit, t->dynamic_only, &t->excluded_by_limit)) {
    t->candidates.push_back(Candidate{s, ConfigsToTry(*s, p, t->search), {}, {}});
  }
  if (t->candidates.empty()) {
    Complete(t->dedup_key,
             absl::FailedPreconditionError(absl::StrCat(
                 "no ", t->dynamic_only ? "dynamic " : "", "solver on ", device_key_,
                 " applies to ", t->problem_key,
                 t->params.workspace_limit >= 0
                     ? absl::StrCat(" within a workspace of ", t->params.workspace_limit, " bytes")
                     : "")));
    return;
  }
  t->to_compile = static_cast<int>(t->candidates.size());
  t->compile_started = std::chrono::steady_clock::now();
  for (size_t i = 0; i < t->candidates.size(); ++i) {
    // Plans are built (and, on GPUs, compiled) in parallel; timing waits for all.
    compile_pool_.Schedule([this, t, i] {
      Candidate& c = t->candidates[i];
      for (const PerfConfig& config : c.configs) {
        absl::StatusOr<v1::ExecutionPlan> plan = c.solver->MakePlan(t->problem, config);
        if (plan.ok()) {
          if (absl::Status built = BuildKernels(&*plan); !built.ok()) plan = built;
        }
        if (!plan.ok()) {
          c.status = plan.status();
          break;
        }
        c.plans.push_back(*std::move(plan));
      }
      if (--t->to_compile == 0) {
        Count(&EngineCounters::compile_stage_ms,
              static_cast<int64_t>(MsSince(t->compile_started)));
        bench_queue_.Schedule([this, t] { TimeCandidates(t); });
      }
    });
  }
}

void FindEngine::TimeCandidates(std::shared_ptr<Tuning> t) {
  t->started = std::chrono::steady_clock::now();
  absl::StatusOr<v1::FindRecord> record =
      stopping_ ? absl::StatusOr<v1::FindRecord>(ShuttingDown()) : RunTimings(*t);
  Count(&EngineCounters::timing_stage_ms, static_cast<int64_t>(MsSince(t->started)));
  if (!record.ok()) {
    Complete(t->dedup_key, record.status());
    return;
  }
  v1::FindRecord stored = *record;
  if (t->excluded_by_limit) {
    stored.set_problem_key(LimitedProblemKey(t->problem_key, t->params.workspace_limit));
  }
  absl::Status put = find_db_.Put(stored);
  if (put.ok()) {
    Count(&EngineCounters::records_stored);
    heuristics_->NoteRecordStored(compile_pool_);
  } else {
    std::cerr << "convtuned: could not store find record " << stored.problem_key() << ": "
              << put << "\n";
  }
  FindOutcome outcome{*std::move(record), false, "tuned", std::move(t->timed), put.ok()};
  Complete(t->dedup_key, std::move(outcome));
}

absl::StatusOr<FindEngine::Timed> FindEngine::TimeCandidate(Tuning& t, BenchmarkSession& session,
                                                            Candidate& c) {
  RETURN_IF_ERROR(c.status);
  std::vector<Timed> timed;
  int since_improvement = 0;
  for (size_t i = 0; i < c.plans.size(); ++i) {
    if (t.bounded && i > 0 &&
        (MsSince(t.started) > options_.max_tuning_ms || since_improvement >= options_.patience)) {
      break;
    }
    const double cutoff_ms = t.best_ms > 0 && options_.timing.slow_factor > 0
                                 ? t.best_ms * options_.timing.slow_factor
                                 : std::numeric_limits<double>::infinity();
    ASSIGN_OR_RETURN(Measurement m, session.Measure(c.plans[i], options_.timing, cutoff_ms));
    Count(&EngineCounters::plans_timed);
    t.timed.push_back(c.solver->id());
    if (t.best_ms == 0 || m.median_ms < t.best_ms) t.best_ms = m.median_ms;
    const bool better = timed.empty() || m.median_ms < std::min_element(
        timed.begin(), timed.end(), [](const Timed& a, const Timed& b) { return a.ms < b.ms; })->ms;
    since_improvement = better ? 0 : since_improvement + 1;
    timed.push_back({m.median_ms, i});
  }
  std::sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) { return a.ms < b.ms; });
  // Timings of neighbouring configs are noisy; the few best are measured
  // again side by side and the best second measurement wins.
  if (timed.size() > 1) {
    const size_t top = std::min<size_t>(timed.size(), std::max(1, options_.remeasure_top));
    for (size_t i = 0; i < top; ++i) {
      ASSIGN_OR_RETURN(Measurement m, session.TimeOnly(c.plans[timed[i].config], options_.timing));
      Count(&EngineCounters::plans_timed);
      timed[i].ms = m.median_ms;
    }
    std::sort(timed.begin(), timed.begin() + top,
              [](const Timed& a, const Timed& b) { return a.ms < b.ms; });
  }
  return timed.front();
}

absl::StatusOr<v1::FindRecord> FindEngine::RunTimings(Tuning& t) {
  int64_t max_ws = 0;
  for (const Candidate& c : t.candidates) {
    max_ws = std::max(max_ws, c.solver->WorkspaceBytes(t.problem));
  }
  ASSIGN_OR_RETURN(auto session,
                   BenchmarkSession::Create(&device_, t.problem, max_ws, seed_.fetch_add(1)));
  // The likely fastest first, so that the slow-plan cutoff is set early.
  auto estimate = [&](const Candidate& c) {
    return c.solver->EstimatedFlops(t.problem) / std::max(1e-6, c.solver->Efficiency(t.problem));
  };
  std::stable_sort(t.candidates.begin(), t.candidates.end(),
                   [&](const Candidate& a, const Candidate& b) { return estimate(a) < estimate(b); });
  v1::FindRecord record;
  record.set_device_key(device_key_);
  record.set_problem_key(t.problem_key);
  record.set_workspace_limit(t.excluded_by_limit ? t.params.workspace_limit : -1);
  record.set_timing_repeats(options_.timing.max_repeats);
  std::string failures;
  for (Candidate& c : t.candidates) {
    if (stopping_) return ShuttingDown();
    absl::StatusOr<Timed> best = TimeCandidate(t, *session, c);
    if (!best.ok()) {
      // A failing solver is left out of this problem's answer; the rest go on
      // (on fresh buffers if the device had to be reset).
      Count(&EngineCounters::solver_failures);
      absl::StrAppend(&failures, " ", c.solver->name(), ": ", best.status().ToString(), ";");
      ASSIGN_OR_RETURN(const bool reset, RecoverDevice(t.problem_key, *c.solver, best.status()));
      if (reset) {
        session.reset();
        ASSIGN_OR_RETURN(session, BenchmarkSession::Create(&device_, t.problem, max_ws,
                                                           seed_.fetch_add(1)));
      }
      continue;
    }
    const PerfConfig& config = c.configs[best->config];
    if (c.configs.size() > 1) {
      v1::PerfDbRecord tuned;
      tuned.set_solver_id(c.solver->id());
      for (int64_t v : config) tuned.add_perf_config(v);
      tuned.set_time_ms(best->ms);
      absl::Status s = perf_db_.Put(t.problem_key, tuned);
      if (!s.ok()) std::cerr << "convtuned: could not store perf config: " << s << "\n";
    }
    AddResult(*c.solver, t.problem, best->ms, config, &record);
  }
  if (record.results_size() == 0) {
    return absl::InternalError(absl::StrCat("every applicable solver failed on ",
                                            t.problem_key, ":", failures));
  }
  std::sort(record.mutable_results()->begin(), record.mutable_results()->end(),
            [](const v1::PerfResult& a, const v1::PerfResult& b) {
              return a.time_ms() < b.time_ms();
            });
  record.set_created_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  return record;
}

void FindEngine::Verify(const ConvProblem& p, const FindParams& params, FindOutcome system,
                        Done done) {
  bench_queue_.Schedule([this, p, params, system = std::move(system),
                         done = std::move(done)]() mutable {
    const v1::PerfResult& best = system.record.results(0);
    auto measure = [&]() -> absl::StatusOr<double> {
      if (stopping_) return ShuttingDown();
      PerfConfig config(best.perf_config().begin(), best.perf_config().end());
      ASSIGN_OR_RETURN(v1::ExecutionPlan plan, Plan(p, best.solver_id(), config));
      ASSIGN_OR_RETURN(auto session, BenchmarkSession::Create(&device_, p, plan.workspace_bytes(),
                                                              seed_.fetch_add(1)));
      ASSIGN_OR_RETURN(Measurement m, session->Measure(plan, options_.timing));
      return m.median_ms;
    };
    Count(&EngineCounters::verifications);
    Count(&EngineCounters::plans_timed);
    absl::StatusOr<double> ms = measure();
    if (!ms.ok() && absl::IsUnavailable(ms.status())) {
      done(ms.status());
      return;
    }
    if (ms.ok() && *ms <= best.time_ms() * (1 + options_.verify_tolerance)) {
      system.timed_solvers = {best.solver_id()};
      system.stored = find_db_.Put(system.record).ok();
      if (system.stored) {
        Count(&EngineCounters::records_stored);
        heuristics_->NoteRecordStored(compile_pool_);
      }
      done(std::move(system));
      return;
    }
    // Slower here than the system record says (or it failed): tune.
    Count(&EngineCounters::verify_rejected);
    Tune(p, params, [best = best.solver_id(), done = std::move(done)](
                        absl::StatusOr<FindOutcome> r) {
      if (r.ok()) r->timed_solvers.insert(r->timed_solvers.begin(), best);
      done(std::move(r));
    });
  });
}

void FindEngine::Complete(const std::string& dedup_key, absl::StatusOr<FindOutcome> result) {
  std::vector<Done> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(dedup_key);
    if (it != in_flight_.end()) {
      waiters = std::move(it->second);
      in_flight_.erase(it);
    }
  }
  for (Done& done : waiters) done(result);
}

}  // namespace convtune
