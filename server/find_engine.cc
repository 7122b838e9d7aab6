#include "server/find_engine.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "kernels/plan_executor.h"
#include "server/kernel_builder.h"
#include "storage/records.h"
#include "server/tuning.h"

namespace convtune {

std::string LimitedProblemKey(absl::string_view problem_key, int64_t workspace_limit) {
  return absl::StrCat(problem_key, "|ws=", workspace_limit);
}

absl::Status ShuttingDown() { return absl::UnavailableError("convtuned is shutting down"); }

FindEngine::FindEngine(Device& device, const SolverRegistry& registry, storage::Store& store,
                       ThreadPool& compile_pool, ThreadPool& bench_queue, Options options,
                       const SystemFindDb* system_db, KernelBuilder* kernel_builder)
    : device_(device),
      registry_(registry),
      store_(store),
      compile_pool_(compile_pool),
      bench_queue_(bench_queue),
      options_(options),
      system_db_(system_db),
      kernel_builder_(kernel_builder),
      device_key_(device.info().Key()),
      find_db_(&store, device_key_),
      perf_db_(&store, device_key_),
      heuristics_(std::make_unique<Heuristics>(store, registry, device.info())) {
  LoadQuarantine();
}

FindEngine::~FindEngine() = default;

void FindEngine::Shutdown() { stopping_ = true; }

void FindEngine::SetDeviceLostHandler(std::function<void(const std::string&)> handler) {
  on_device_lost_ = std::move(handler);
}

namespace {

std::string QuarantineName(absl::string_view device_key, absl::string_view problem_key) {
  return absl::StrCat("quarantine/", device_key, "/", problem_key);
}

}  // namespace

void FindEngine::LoadQuarantine() {
  const std::string prefix = QuarantineName(device_key_, "");
  std::vector<std::string> names;
  absl::Status scanned = store_.Scan(storage::Column::kMeta, prefix,
                                     [&](absl::string_view key, absl::string_view) {
                                       names.emplace_back(key);
                                       return true;
                                     });
  if (!scanned.ok()) std::cerr << "convtuned: cannot read the quarantine: " << scanned << "\n";
  absl::MutexLock lock(&mu_);
  for (const std::string& name : names) {
    absl::StatusOr<std::string> value = storage::Meta(&store_).Get(name);
    if (!value.ok()) continue;
    std::vector<uint32_t>& ids = quarantine_[name.substr(prefix.size())];
    for (absl::string_view part : absl::StrSplit(*value, ',', absl::SkipEmpty())) {
      uint32_t id = 0;
      if (absl::SimpleAtoi(part, &id)) ids.push_back(id);
    }
  }
}

std::vector<uint32_t> FindEngine::Quarantined(const std::string& problem_key) const {
  absl::MutexLock lock(&mu_);
  auto it = quarantine_.find(problem_key);
  return it == quarantine_.end() ? std::vector<uint32_t>() : it->second;
}

absl::StatusOr<bool> FindEngine::RecoverDevice(const std::string& problem_key,
                                               const Solver& solver, const absl::Status& failure) {
  if (device_.Synchronize().ok()) return false;
  // The solver broke the device: it is not run on this problem again.
  std::vector<uint32_t> ids;
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint32_t>& q = quarantine_[problem_key];
    if (std::find(q.begin(), q.end(), solver.id()) == q.end()) q.push_back(solver.id());
    ids = q;
  }
  absl::Status put =
      storage::Meta(&store_).Put(QuarantineName(device_key_, problem_key), absl::StrJoin(ids, ","));
  Count(&EngineCounters::solvers_quarantined);
  std::cerr << "convtuned: " << solver.name() << " left " << device_key_ << " unusable on "
            << problem_key << " (" << failure.message() << "); quarantined for that problem"
            << (put.ok() ? "" : absl::StrCat(" in memory only: ", put.message())) << "\n";
  Count(&EngineCounters::device_resets);
  absl::Status reset = device_.Reset();
  if (reset.ok()) return true;
  const std::string why = absl::StrCat(solver.name(), " faulted on ", problem_key, " (",
                                       failure.message(), ") and the device could not be reset (",
                                       reset.message(), ")");
  if (!stopping_.exchange(true) && on_device_lost_) on_device_lost_(why);
  return absl::UnavailableError(absl::StrCat("device ", device_key_, " lost: ", why));
}

void FindEngine::TrainHeuristics(std::function<void(absl::StatusOr<TrainReport>)> done) {
  if (stopping_) {
    done(ShuttingDown());
    return;
  }
  compile_pool_.Schedule([this, done = std::move(done)] { done(heuristics_->Train()); });
}

EngineCounters FindEngine::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

void FindEngine::Count(int64_t EngineCounters::*counter, int64_t n) {
  absl::MutexLock lock(&mu_);
  counters_.*counter += n;
}

absl::Status FindEngine::BuildKernels(v1::ExecutionPlan* plan) {
  // A "gpu" solver's plan runs on whichever GPU backend this device has.
  plan->set_backend(device_.info().backend);
  if (plan->sources_size() == 0) return absl::OkStatus();
  if (kernel_builder_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "solver ", plan->solver_id(), " needs GPU kernels; ", device_key_, " compiles none"));
  }
  return kernel_builder_->BuildPlan(plan);
}

namespace {

// The results of `record` that fit the workspace limit (all when negative).
v1::FindRecord Fitting(const v1::FindRecord& record, int64_t workspace_limit) {
  if (workspace_limit < 0) return record;
  v1::FindRecord out = record;
  out.clear_results();
  for (const v1::PerfResult& r : record.results()) {
    if (r.workspace_bytes() <= workspace_limit) *out.add_results() = r;
  }
  return out;
}

}  // namespace

absl::StatusOr<FindOutcome> FindEngine::LookupUser(const ConvProblem& p, int64_t limit) {
  const std::string key = ProblemKey(p);
  auto get = [&](const std::string& k) -> absl::StatusOr<v1::FindRecord> {
    absl::StatusOr<v1::FindRecord> r = find_db_.Get(k);
    if (r.status().code() == absl::StatusCode::kDataLoss) {
      // The corrupt record is gone; this find re-tunes and stores a new one.
      std::cerr << "convtuned: dropped unreadable find record " << k << ": " << r.status()
                << "\n";
      Count(&EngineCounters::records_dropped);
      return absl::NotFoundError(k);
    }
    return r;
  };
  absl::StatusOr<v1::FindRecord> full = get(key);
  if (full.ok()) {
    v1::FindRecord fitting = Fitting(*full, limit);
    if (fitting.results_size() > 0) return FindOutcome{std::move(fitting), true, "user_db"};
  } else if (!absl::IsNotFound(full.status())) {
    return full.status();
  }
  if (limit < 0) return absl::NotFoundError(key);
  ASSIGN_OR_RETURN(v1::FindRecord limited, get(LimitedProblemKey(key, limit)));
  limited.set_problem_key(key);
  return FindOutcome{std::move(limited), true, "user_db"};
}

absl::StatusOr<FindOutcome> FindEngine::LookupSystem(const ConvProblem& p, int64_t limit) {
  if (system_db_ == nullptr) return absl::NotFoundError("no system FindDb");
  ASSIGN_OR_RETURN(v1::FindRecord record, system_db_->Get(ProblemKey(p)));
  v1::FindRecord fitting = Fitting(record, limit);
  if (fitting.results_size() == 0) return absl::NotFoundError("nothing fits the workspace");
  fitting.set_device_key(device_key_);
  return FindOutcome{std::move(fitting), true, "system_db"};
}

void FindEngine::Find(const ConvProblem& p, const FindParams& params, Done done) {
  Count(&EngineCounters::finds);
  if (stopping_) {
    done(ShuttingDown());
    return;
  }
  const FindMode mode = params.mode;
  if (mode != FindMode::kNormal && !params.exhaustive) {
    absl::StatusOr<FindOutcome> user = LookupUser(p, params.workspace_limit);
    if (user.ok() || !absl::IsNotFound(user.status())) {
      if (user.ok()) Count(&EngineCounters::db_hits);
      done(std::move(user));
      return;
    }
    absl::StatusOr<FindOutcome> system = LookupSystem(p, params.workspace_limit);
    if (system.ok()) {
      Count(&EngineCounters::system_hits);
      if (mode == FindMode::kTrustVerify || mode == FindMode::kTrustVerifyFull) {
        Verify(p, params, *std::move(system), std::move(done));
      } else {
        done(std::move(system));
      }
      return;
    }
    if (mode == FindMode::kFast) {
      absl::StatusOr<Solutions> s = GetSolutions(p, params.workspace_limit);
      if (!s.ok()) {
        done(s.status());
        return;
      }
      Count(&EngineCounters::fallbacks);
      done(Fallback(p, *s));
      return;
    }
  }
  Tune(p, params, std::move(done));
}

absl::StatusOr<FindOutcome> FindEngine::FindBlocking(const ConvProblem& p,
                                                     const FindParams& params) {
  absl::Notification done;
  absl::StatusOr<FindOutcome> result;
  Find(p, params, [&](absl::StatusOr<FindOutcome> r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

FindOutcome FindEngine::Fallback(const ConvProblem& p, const Solutions& s) {
  FindOutcome out;
  out.record.set_device_key(device_key_);
  out.record.set_problem_key(ProblemKey(p));
  for (const v1::PerfResult& r : s.results) *out.record.add_results() = r;
  out.source = "fallback";
  return out;
}

std::vector<const Solver*> FindEngine::Candidates(const ConvProblem& p, int64_t limit,
                                                  bool dynamic_only, bool* over_limit) const {
  std::vector<const Solver*> out;
  std::vector<uint32_t> quarantined;
  {
    // The key is built only when something is quarantined at all: this runs
    // on every immediate-mode miss.
    absl::MutexLock lock(&mu_);
    if (!quarantine_.empty()) {
      auto it = quarantine_.find(ProblemKey(p));
      if (it != quarantine_.end()) quarantined = it->second;
    }
  }
  for (const Solver* s : registry_.ForDevice(device_.info())) {
    if (!s->IsApplicable(p).ok()) continue;
    if (dynamic_only && !s->dynamic()) continue;
    if (std::find(quarantined.begin(), quarantined.end(), s->id()) != quarantined.end()) continue;
    if (limit >= 0 && s->WorkspaceBytes(p) > limit) {
      if (over_limit != nullptr) *over_limit = true;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

absl::StatusOr<Solutions> FindEngine::GetSolutions(const ConvProblem& p, int64_t limit) {
  Solutions out;
  absl::StatusOr<FindOutcome> hit = LookupUser(p, limit);
  if (!hit.ok() && absl::IsNotFound(hit.status())) hit = LookupSystem(p, limit);
  if (hit.ok()) {
    out.results.assign(hit->record.results().begin(), hit->record.results().end());
    out.source = hit->source;
    return out;
  }
  if (!absl::IsNotFound(hit.status())) return hit.status();
  const std::vector<const Solver*> candidates = Candidates(p, limit, true, nullptr);
  if (candidates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no dynamic solver on ", device_key_, " applies to ", ProblemKey(p),
        limit >= 0 ? absl::StrCat(" within a workspace of ", limit, " bytes") : ""));
  }
  Ranking ranking = heuristics_->Rank(p, candidates);
  for (const Estimate& e : ranking.estimates) {
    v1::PerfResult r;
    r.set_solver_id(e.solver->id());
    r.set_solver_name(std::string(e.solver->name()));
    r.set_algorithm(std::string(AlgorithmName(e.solver->family())));
    r.set_time_ms(e.time_ms);
    r.set_workspace_bytes(e.solver->WorkspaceBytes(p));
    r.set_measured(false);
    out.results.push_back(std::move(r));
  }
  out.source = ranking.source;
  out.fallback_reason = ranking.fallback_reason;
  return out;
}

int64_t FindEngine::MaxWorkspace(const ConvProblem& p) const {
  int64_t ws = 0;
  for (const Solver* s : Candidates(p, -1, false, nullptr)) ws = std::max(ws, s->WorkspaceBytes(p));
  return ws;
}

std::vector<SolverReport> FindEngine::Solvers(const ConvProblem* p) const {
  std::vector<SolverReport> out;
  for (const Solver* s : registry_.ForDevice(device_.info())) {
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
  if (s == nullptr || !SolverRegistry::Runs(*s, device_.info())) {
    return absl::NotFoundError(
        absl::StrCat("solver_id: no solver ", solver_id, " on backend ", device_.info().backend));
  }
  RETURN_IF_ERROR(s->IsApplicable(p));
  PerfConfig chosen = config.empty() ? ConfigsToTry(*s, p, false).front() : config;
  RETURN_IF_ERROR(s->ValidateConfig(p, chosen));
  ASSIGN_OR_RETURN(v1::ExecutionPlan plan, s->MakePlan(p, chosen));
  RETURN_IF_ERROR(BuildKernels(&plan));
  return plan;
}

void FindEngine::Execute(v1::ExecutionPlan plan, std::shared_ptr<HostRun> tensors,
                         std::function<void(absl::StatusOr<double>)> done) {
  if (stopping_) {
    done(ShuttingDown());
    return;
  }
  bench_queue_.Schedule([this, plan = std::move(plan), tensors, done = std::move(done)] {
    auto run = [&]() -> absl::StatusOr<double> {
      // The daemon compiles a wire plan's sources itself: hashes a client
      // sent are never trusted.
      v1::ExecutionPlan built = plan;
      RETURN_IF_ERROR(BuildKernels(&built));
      std::string* host[3] = {&tensors->x, &tensors->w, &tensors->y};
      std::unique_ptr<DeviceBuffer> bufs[3];
      for (int i = 0; i < 3; ++i) {
        ASSIGN_OR_RETURN(bufs[i], device_.Allocate(host[i]->size()));
        RETURN_IF_ERROR(device_.CopyToDevice(bufs[i].get(), host[i]->data(), host[i]->size()));
      }
      ASSIGN_OR_RETURN(auto ws, device_.Allocate(plan.workspace_bytes()));
      PlanBuffers b{bufs[0]->data(), bufs[1]->data(), bufs[2]->data(), ws->data(), ws->size()};
      ASSIGN_OR_RETURN(double ms,
                       device_.TimeMs([&] { return ExecutePlan(device_, built, b); }));
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
