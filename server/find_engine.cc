#include "server/find_engine.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "kernels/plan_executor.h"

namespace convtune {

struct FindEngine::Tuning {
  ConvProblem problem;
  FindParams options;
  std::string dedup_key;
  std::string problem_key;
  bool excluded_by_limit = false;
  std::vector<Candidate> candidates;
  std::atomic<int> to_compile{0};
};

std::string LimitedProblemKey(absl::string_view problem_key, int64_t workspace_limit) {
  return absl::StrCat(problem_key, "|ws=", workspace_limit);
}

FindEngine::FindEngine(Device& device, const SolverRegistry& registry, storage::Store& store,
                       ThreadPool& compile_pool, ThreadPool& bench_queue, Options options)
    : device_(device),
      registry_(registry),
      store_(store),
      compile_pool_(compile_pool),
      bench_queue_(bench_queue),
      options_(options),
      device_key_(device.info().Key()),
      find_db_(&store, device_key_),
      perf_db_(&store, device_key_) {}

EngineCounters FindEngine::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

absl::StatusOr<FindOutcome> FindEngine::Lookup(const ConvProblem& p, const FindParams& o) {
  const std::string key = ProblemKey(p);
  auto get = [&](const std::string& k) -> absl::StatusOr<v1::FindRecord> {
    absl::StatusOr<v1::FindRecord> r = find_db_.Get(k);
    if (r.status().code() == absl::StatusCode::kDataLoss) {
      // The corrupt record is gone; this find re-tunes and stores a new one.
      std::cerr << "convtuned: dropped unreadable find record " << k << ": " << r.status()
                << "\n";
      absl::MutexLock lock(&mu_);
      ++counters_.records_dropped;
      return absl::NotFoundError(k);
    }
    return r;
  };
  absl::StatusOr<v1::FindRecord> full = get(key);
  if (full.ok()) {
    if (o.workspace_limit < 0) return FindOutcome{*std::move(full), true};
    v1::FindRecord fitting = *full;
    fitting.clear_results();
    for (const v1::PerfResult& r : full->results()) {
      if (r.workspace_bytes() <= o.workspace_limit) *fitting.add_results() = r;
    }
    if (fitting.results_size() > 0) return FindOutcome{std::move(fitting), true};
  } else if (!absl::IsNotFound(full.status())) {
    return full.status();
  }
  if (o.workspace_limit < 0) return absl::NotFoundError(key);
  ASSIGN_OR_RETURN(v1::FindRecord limited, get(LimitedProblemKey(key, o.workspace_limit)));
  limited.set_problem_key(key);
  return FindOutcome{std::move(limited), true};
}

namespace {

absl::Status ShuttingDown() { return absl::UnavailableError("convtuned is shutting down"); }

}  // namespace

void FindEngine::Shutdown() { stopping_ = true; }

void FindEngine::Find(const ConvProblem& p, const FindParams& o, Done done) {
  {
    absl::MutexLock lock(&mu_);
    ++counters_.finds;
  }
  if (stopping_) {
    done(ShuttingDown());
    return;
  }
  if (!o.exhaustive) {
    absl::StatusOr<FindOutcome> hit = Lookup(p, o);
    if (hit.ok() || !absl::IsNotFound(hit.status())) {
      if (hit.ok()) {
        absl::MutexLock lock(&mu_);
        ++counters_.db_hits;
      }
      done(std::move(hit));
      return;
    }
  }
  const std::string dedup_key = absl::StrCat(ProblemKey(p), "|", o.workspace_limit, "|",
                                             o.exhaustive ? "x" : "n");
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = in_flight_.try_emplace(dedup_key);
    it->second.push_back(std::move(done));
    if (!inserted) {
      ++counters_.joined;
      return;
    }
    ++counters_.tunings;
  }
  StartTuning(p, o, dedup_key);
}

absl::StatusOr<FindOutcome> FindEngine::FindBlocking(const ConvProblem& p,
                                                     const FindParams& options) {
  absl::Notification done;
  absl::StatusOr<FindOutcome> result;
  Find(p, options, [&](absl::StatusOr<FindOutcome> r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

std::vector<PerfConfig> FindEngine::ConfigsToTry(const Solver& s, const ConvProblem& p,
                                                 bool exhaustive) {
  if (exhaustive) {
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

void FindEngine::StartTuning(const ConvProblem& p, const FindParams& o,
                             const std::string& dedup_key) {
  auto t = std::make_shared<Tuning>();
  t->problem = p;
  t->options = o;
  t->dedup_key = dedup_key;
  t->problem_key = ProblemKey(p);
  for (const Solver* s : registry_.ForBackend(device_.info().backend)) {
    if (!s->IsApplicable(p).ok()) continue;
    if (o.workspace_limit >= 0 && s->WorkspaceBytes(p) > o.workspace_limit) {
      t->excluded_by_limit = true;
      continue;
    }
    t->candidates.push_back(Candidate{s, ConfigsToTry(*s, p, o.exhaustive), {}, {}});
  }
  if (t->candidates.empty()) {
    Complete(dedup_key,
             absl::FailedPreconditionError(absl::StrCat(
                 "no solver on ", device_key_, " applies to ", t->problem_key,
                 t->excluded_by_limit ? absl::StrCat(" within a workspace of ", o.workspace_limit,
                                                     " bytes")
                                      : "")));
    return;
  }
  t->to_compile = static_cast<int>(t->candidates.size());
  for (size_t i = 0; i < t->candidates.size(); ++i) {
    // Plans are built (and, on GPUs, compiled) in parallel; timing waits for all.
    compile_pool_.Schedule([this, t, i] {
      Candidate& c = t->candidates[i];
      for (const PerfConfig& config : c.configs) {
        absl::StatusOr<v1::ExecutionPlan> plan = c.solver->MakePlan(t->problem, config);
        if (!plan.ok()) {
          c.status = plan.status();
          break;
        }
        c.plans.push_back(*std::move(plan));
      }
      if (--t->to_compile == 0) bench_queue_.Schedule([this, t] { TimeCandidates(t); });
    });
  }
}

void FindEngine::TimeCandidates(std::shared_ptr<Tuning> t) {
  absl::StatusOr<v1::FindRecord> record =
      stopping_ ? absl::StatusOr<v1::FindRecord>(ShuttingDown()) : RunTimings(*t);
  if (!record.ok()) {
    Complete(t->dedup_key, record.status());
    return;
  }
  v1::FindRecord stored = *record;
  if (t->excluded_by_limit) {
    stored.set_problem_key(LimitedProblemKey(t->problem_key, t->options.workspace_limit));
  }
  absl::Status put = find_db_.Put(stored);
  if (put.ok()) {
    absl::MutexLock lock(&mu_);
    ++counters_.records_stored;
  } else {
    std::cerr << "convtuned: could not store find record " << stored.problem_key() << ": "
              << put << "\n";
  }
  Complete(t->dedup_key, FindOutcome{*std::move(record), false});
}

absl::StatusOr<v1::FindRecord> FindEngine::RunTimings(Tuning& t) {
  int64_t max_ws = 0;
  for (const Candidate& c : t.candidates) {
    max_ws = std::max(max_ws, c.solver->WorkspaceBytes(t.problem));
  }
  ASSIGN_OR_RETURN(auto session,
                   BenchmarkSession::Create(&device_, t.problem, max_ws, seed_.fetch_add(1)));
  v1::FindRecord record;
  record.set_device_key(device_key_);
  record.set_problem_key(t.problem_key);
  record.set_workspace_limit(t.excluded_by_limit ? t.options.workspace_limit : -1);
  record.set_timing_repeats(options_.timing.max_repeats);
  std::string failures;
  for (Candidate& c : t.candidates) {
    if (stopping_) return ShuttingDown();
    absl::Status status = c.status;
    double best_ms = -1;
    size_t best = 0;
    for (size_t i = 0; status.ok() && i < c.plans.size(); ++i) {
      absl::StatusOr<Measurement> m = session->Measure(c.plans[i], options_.timing);
      {
        absl::MutexLock lock(&mu_);
        ++counters_.plans_timed;
      }
      if (!m.ok()) {
        status = m.status();
        break;
      }
      if (best_ms < 0 || m->median_ms < best_ms) {
        best_ms = m->median_ms;
        best = i;
      }
    }
    if (!status.ok()) {
      // A failing solver is left out of this problem's answer; the rest go on.
      absl::MutexLock lock(&mu_);
      ++counters_.solver_failures;
      absl::StrAppend(&failures, " ", c.solver->name(), ": ", status.ToString(), ";");
      continue;
    }
    const PerfConfig& config = c.configs[best];
    if (c.configs.size() > 1) {
      v1::PerfDbRecord tuned;
      tuned.set_solver_id(c.solver->id());
      for (int64_t v : config) tuned.add_perf_config(v);
      tuned.set_time_ms(best_ms);
      absl::Status s = perf_db_.Put(t.problem_key, tuned);
      if (!s.ok()) std::cerr << "convtuned: could not store perf config: " << s << "\n";
    }
    v1::PerfResult* r = record.add_results();
    r->set_solver_id(c.solver->id());
    r->set_solver_name(std::string(c.solver->name()));
    r->set_algorithm(std::string(AlgorithmName(c.solver->family())));
    r->set_time_ms(best_ms);
    r->set_workspace_bytes(c.solver->WorkspaceBytes(t.problem));
    for (int64_t v : config) r->add_perf_config(v);
    r->set_measured(true);
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

int64_t FindEngine::MaxWorkspace(const ConvProblem& p) const {
  int64_t ws = 0;
  for (const Solver* s : registry_.ForBackend(device_.info().backend)) {
    if (s->IsApplicable(p).ok()) ws = std::max(ws, s->WorkspaceBytes(p));
  }
  return ws;
}

std::vector<SolverReport> FindEngine::Solvers(const ConvProblem* p) const {
  std::vector<SolverReport> out;
  for (const Solver* s : registry_.ForBackend(device_.info().backend)) {
    SolverReport r;
    r.solver = s;
    if (p != nullptr) {
      r.applicable = s->IsApplicable(*p);
      if (r.applicable.ok()) r.workspace_bytes = s->WorkspaceBytes(*p);
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<v1::ExecutionPlan> FindEngine::Plan(const ConvProblem& p, uint32_t solver_id,
                                                   const PerfConfig& config) {
  const Solver* s = registry_.Find(solver_id);
  if (s == nullptr || s->backend() != device_.info().backend) {
    return absl::NotFoundError(
        absl::StrCat("solver_id: no solver ", solver_id, " on backend ", device_.info().backend));
  }
  RETURN_IF_ERROR(s->IsApplicable(p));
  PerfConfig chosen = config.empty() ? ConfigsToTry(*s, p, false).front() : config;
  RETURN_IF_ERROR(s->ValidateConfig(p, chosen));
  return s->MakePlan(p, chosen);
}

void FindEngine::Execute(v1::ExecutionPlan plan, std::shared_ptr<HostRun> tensors,
                         std::function<void(absl::StatusOr<double>)> done) {
  if (stopping_) {
    done(ShuttingDown());
    return;
  }
  bench_queue_.Schedule([this, plan = std::move(plan), tensors, done = std::move(done)] {
    auto run = [&]() -> absl::StatusOr<double> {
      std::string* host[3] = {&tensors->x, &tensors->w, &tensors->y};
      std::unique_ptr<DeviceBuffer> bufs[3];
      for (int i = 0; i < 3; ++i) {
        ASSIGN_OR_RETURN(bufs[i], device_.Allocate(host[i]->size()));
        RETURN_IF_ERROR(device_.CopyToDevice(bufs[i].get(), host[i]->data(), host[i]->size()));
      }
      ASSIGN_OR_RETURN(auto ws, device_.Allocate(plan.workspace_bytes()));
      PlanBuffers b{bufs[0]->data(), bufs[1]->data(), bufs[2]->data(), ws->data(), ws->size()};
      ASSIGN_OR_RETURN(double ms, device_.TimeMs([&] { return ExecutePlan(device_, plan, b); }));
      const int out = plan.problem().direction() == v1::FORWARD         ? 2
                      : plan.problem().direction() == v1::BACKWARD_DATA ? 0
                                                                        : 1;
      RETURN_IF_ERROR(device_.CopyFromDevice(host[out]->data(), *bufs[out], host[out]->size()));
      return ms;
    };
    done(run());
  });
}

}  // namespace convtune
