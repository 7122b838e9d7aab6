#include "server/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/keys.h"

namespace convtune {
namespace {

int64_t UnixMsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* StageName(TuneProgress::Stage stage) {
  switch (stage) {
    case TuneProgress::Stage::kQueued:
      return "queued";
    case TuneProgress::Stage::kCompiling:
      return "compiling";
    case TuneProgress::Stage::kTiming:
      return "timing";
  }
  return "queued";
}

struct Tuner::Run {
  TuneRequest request;
  std::string dedup_key;
  // The tenant that started the run: its tasks take that tenant's turns.
  std::string tenant;
  bool excluded_by_limit = false;
  std::shared_ptr<TimingJob> job = std::make_shared<TimingJob>();
  std::atomic<int> to_build{0};
  std::chrono::steady_clock::time_point build_started;
  // Held while callers are told of a change, so they hear them in order.
  absl::Mutex progress_mu;
  TuneProgress progress ABSL_GUARDED_BY(progress_mu);
  // The cluster tier's lease on tuning this problem, while this run holds
  // it: released with the record's publication, or when the run ends.
  FindTier* tier = nullptr;
  std::string lease;
  // Until when it waits for another daemon's record.
  absl::Time wait_until = absl::InfinitePast();

  ~Run() {
    if (tier != nullptr && !lease.empty()) tier->Release(lease);
  }
};

Tuner::Tuner(const Planner& planner, TimingLanes& timing, FindRecords& records,
             storage::Store& store, ThreadPool& compile_pool,
             Counters& counters, const StopFlag& stop, Options options,
             TuningQuotas* quotas)
    : planner_(planner),
      timing_(timing),
      records_(records),
      perf_db_(&store, records.device_key()),
      compile_pool_(compile_pool),
      counters_(counters),
      stop_(stop),
      options_(options),
      quotas_(quotas) {}

std::vector<PerfConfig> Tuner::SearchSpace(const Solver& s,
                                           const ConvProblem& p) const {
  std::vector<PerfConfig> space = s.ConfigSpace(p);
  const size_t cap =
      static_cast<size_t>(std::max(1, options_.max_configs_per_solver));
  if (space.size() <= cap) return space;
  std::vector<PerfConfig> sampled;
  for (size_t i = 0; i < cap; ++i) {
    sampled.push_back(space[i * space.size() / cap]);
  }
  return sampled;
}

void Tuner::Tune(const ConvProblem& p, const TuneRequest& request, Done done,
                 TuneCaller caller) {
  if (absl::Status s = stop_.Check(); !s.ok()) {
    done(s);
    return;
  }
  // A run on a device there is not would fail only once its plans are
  // built, and fail every caller that joined it.
  if (request.device.has_value()) {
    if (absl::Status s = timing_.CheckDevice(*request.device, "device");
        !s.ok()) {
      done(s);
      return;
    }
  }
  auto run = std::make_shared<Run>();
  run->request = request;
  run->tenant = caller.tenant;
  run->job->problem = p;
  run->job->problem_key = ProblemKey(p);
  run->job->bounded = request.bounded;
  run->progress.problem_key = run->job->problem_key;
  // A find that waits does not join one that runs at low priority.
  run->dedup_key =
      absl::StrCat(run->job->problem_key, "|", request.workspace_limit, "|",
                   request.dynamic_only, request.search, request.bounded,
                   request.background, request.reads_tier && tier_ != nullptr);
  std::function<void(const TuneProgress&)> follows = caller.progress;
  std::shared_ptr<Run> joined;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(run->dedup_key);
    const bool starts = it == in_flight_.end();
    TuningQuotas::Ticket ticket;
    if (quotas_ != nullptr && !request.background) {
      absl::StatusOr<TuningQuotas::Ticket> admitted =
          quotas_->AdmitFind(caller.tenant, starts);
      if (admitted.ok()) {
        ticket = *std::move(admitted);
      } else {
        refused = admitted.status();
      }
    }
    if (refused.ok()) {
      if (starts) {
        it = in_flight_.try_emplace(run->dedup_key).first;
        it->second.run = run;
      } else {
        joined = it->second.run.lock();
      }
      it->second.waiters.push_back(
          {std::move(done), std::move(caller), std::move(ticket)});
      counters_.Add(starts ? &EngineCounters::tunings
                           : &EngineCounters::joined);
    }
    if (!starts || !refused.ok()) run = nullptr;
  }
  if (!refused.ok()) {
    done(refused);
    return;
  }
  if (run == nullptr) {
    // Joined: this caller hears where the run has got so far, unless the
    // run ended meanwhile (its answer is then on its way).
    if (joined != nullptr && follows) {
      absl::MutexLock progress_lock(&joined->progress_mu);
      bool running;
      {
        absl::MutexLock lock(&mu_);
        auto it = in_flight_.find(joined->dedup_key);
        running = it != in_flight_.end() &&
                  it->second.run.lock().get() == joined.get();
      }
      if (running) follows(joined->progress);
    }
    return;
  }
  // Enumerating the candidates and their configs asks the libraries (a
  // cuDNN heuristics query takes milliseconds): it runs on the compile
  // pool, never on the caller's thread.
  const std::string tenant = run->tenant;
  const ThreadPool::Priority priority = PriorityOf(*run);
  compile_pool_.Schedule(
      [this, run = std::move(run)]() mutable {
        Begin(std::move(run), /*waited=*/false);
      },
      priority, tenant);
}

void Tuner::Begin(std::shared_ptr<Run> run, bool waited) {
  if (absl::Status s = stop_.Check(); !s.ok()) {
    Complete(run->dedup_key, s);
    return;
  }
  if (Abandoned(run->dedup_key)) {
    Complete(run->dedup_key,
             absl::CancelledError("every caller of the find left before "
                                  "it started"));
    return;
  }
  // A find that waited may have tuned a background run's problem
  // meanwhile.
  if (run->request.background) {
    absl::StatusOr<FindOutcome> hit =
        records_.LookupUser(run->job->problem, run->request.workspace_limit);
    if (hit.ok()) {
      Complete(run->dedup_key, *std::move(hit));
      return;
    }
  }
  if (tier_ == nullptr || !run->request.reads_tier || run->request.search) {
    Start(std::move(run));
    return;
  }
  // Another daemon of the fleet may have tuned it.
  absl::StatusOr<FindOutcome> hit =
      FromTier(run->job->problem, run->request.workspace_limit);
  if (hit.ok()) {
    Complete(run->dedup_key, *std::move(hit));
    return;
  }
  // Past the wait (or the tier away): tune here.
  if (!absl::IsNotFound(hit.status()) ||
      (waited && absl::Now() >= run->wait_until)) {
    Start(std::move(run));
    return;
  }
  // Or tuning it now: one daemon tunes, the others wait for its record.
  const std::string lease =
      FindTier::LeaseName(run->job->problem_key, run->request.workspace_limit);
  switch (tier_->Acquire(lease)) {
    case FindTier::LeaseState::kAcquired:
      run->tier = tier_;
      run->lease = lease;
      Start(std::move(run));
      return;
    case FindTier::LeaseState::kUnavailable:
      Start(std::move(run));
      return;
    case FindTier::LeaseState::kHeld:
      break;
  }
  if (!waited) run->wait_until = absl::Now() + tier_->options().max_wait;
  counters_.Add(&EngineCounters::tier_waits);
  const ThreadPool::Priority priority = PriorityOf(*run);
  const std::string tenant = run->tenant;
  const absl::Time until = run->wait_until;
  const std::string dedup_key = run->dedup_key;
  tier_->AwaitFree(
      lease, until, [this, dedup_key] { return Abandoned(dedup_key); },
      [this, run = std::move(run), priority, tenant](bool) mutable {
        compile_pool_.Schedule(
            [this, run = std::move(run)]() mutable {
              Begin(std::move(run), /*waited=*/true);
            },
            priority, tenant);
      });
}

absl::Status Tuner::ValidateTierRecord(const ConvProblem& p,
                                       const std::string& stored_key,
                                       int64_t workspace_limit,
                                       const v1::FindRecord& record) const {
  if (record.device_key() != records_.device_key()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_key \"", record.device_key().substr(0, 60),
                     "\" is not this device's"));
  }
  if (record.problem_key() != stored_key) {
    return absl::InvalidArgumentError(
        absl::StrCat("problem_key \"", record.problem_key().substr(0, 60),
                     "\" is not the one asked for"));
  }
  const bool limited = stored_key != ProblemKey(p);
  if (limited ? record.workspace_limit() != workspace_limit
              : record.workspace_limit() != -1) {
    return absl::InvalidArgumentError(absl::StrCat("workspace_limit ",
                                                   record.workspace_limit(),
                                                   " does not match its key"));
  }
  // Decodes as the local FindDb would take it: schema, key, times.
  if (absl::Status s = storage::ValidateStoredPair(
          storage::Column::kFindDb,
          storage::FindDbKey(record.device_key(), stored_key),
          record.SerializeAsString());
      !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  if (record.results_size() == 0) {
    return absl::InvalidArgumentError("no results");
  }
  for (const v1::PerfResult& r : record.results()) {
    absl::StatusOr<const Solver*> s = planner_.Applicable(p, r.solver_id());
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("solver ", r.solver_id(), ": ", s.status().message()));
    }
    if ((*s)->name() != r.solver_name()) {
      return absl::InvalidArgumentError(
          absl::StrCat("solver ", r.solver_id(), " is ", (*s)->name(),
                       " here, not \"", r.solver_name().substr(0, 40), "\""));
    }
    const PerfConfig config(r.perf_config().begin(), r.perf_config().end());
    absl::StatusOr<v1::ExecutionPlan> plan =
        planner_.Plan(p, r.solver_id(), config);
    if (!plan.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("solver ", (*s)->name(), ": ", plan.status().message()));
    }
    // A record may not claim less workspace than its plan takes here.
    if (!r.measured() || r.workspace_bytes() < plan->workspace_bytes() ||
        (limited && r.workspace_bytes() > workspace_limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "solver ", (*s)->name(), ": not measured, or its workspace of ",
          r.workspace_bytes(), " bytes is out of range"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FindOutcome> Tuner::FromTier(const ConvProblem& p,
                                            int64_t workspace_limit) {
  const std::string key = ProblemKey(p);
  std::vector<std::string> keys = {key};
  if (workspace_limit >= 0) {
    keys.push_back(storage::LimitedProblemKey(key, workspace_limit));
  }
  for (const std::string& stored_key : keys) {
    absl::StatusOr<v1::FindRecord> record = tier_->Get(stored_key);
    if (absl::IsNotFound(record.status())) continue;
    if (!record.ok() && !absl::IsInvalidArgument(record.status())) {
      return record.status();  // the tier cannot be asked now
    }
    absl::Status valid =
        record.ok()
            ? ValidateTierRecord(p, stored_key, workspace_limit, *record)
            : record.status();
    if (!valid.ok()) {
      counters_.Add(&EngineCounters::tier_rejected);
      std::cerr << "convtuned: refused the tier's record of " << stored_key
                << ": " << valid.message() << "\n";
      continue;
    }
    record->mutable_origin()->set_via("tier");
    // A limited record is the limit's whole answer; an unlimited one
    // answers with what fits, as a local record would.
    v1::FindRecord answer =
        stored_key == key ? Fitting(*record, workspace_limit) : *record;
    if (answer.results_size() == 0) continue;
    answer.set_problem_key(key);
    const absl::Status put = records_.Store(*record);
    counters_.Add(&EngineCounters::tier_hits);
    return FindOutcome{std::move(answer),
                       true,
                       "tier",
                       {},
                       put.ok(),
                       put.ok() ? "" : std::string(put.message())};
  }
  return absl::NotFoundError(key);
}

ThreadPool::Priority Tuner::PriorityOf(const Run& run) {
  return run.request.background ? ThreadPool::Priority::kLow
                                : ThreadPool::Priority::kNormal;
}

void Tuner::Start(std::shared_ptr<Run> run) {
  const ConvProblem& p = run->job->problem;
  const TuneRequest& r = run->request;
  run->job->abandoned = [this, key = run->dedup_key] { return Abandoned(key); };
  for (const Solver* s : planner_.Candidates(
           p, r.workspace_limit, r.dynamic_only, &run->excluded_by_limit)) {
    std::vector<PerfConfig> configs =
        r.search ? SearchSpace(*s, p) : planner_.FindConfigs(*s, p);
    // Configs may differ in workspace (a library's do): each must fit.
    if (r.workspace_limit >= 0) {
      const size_t before = configs.size();
      configs.erase(std::remove_if(configs.begin(), configs.end(),
                                   [&](const PerfConfig& c) {
                                     return s->ConfigWorkspaceBytes(p, c) >
                                            r.workspace_limit;
                                   }),
                    configs.end());
      if (configs.size() < before) run->excluded_by_limit = true;
      if (configs.empty()) continue;
    }
    run->job->candidates.push_back(
        TimingCandidate{s, std::move(configs), {}, {}});
  }
  if (run->job->candidates.empty()) {
    Complete(run->dedup_key,
             absl::FailedPreconditionError(absl::StrCat(
                 "no ", r.dynamic_only ? "dynamic " : "", "solver on ",
                 records_.device_key(), " applies to ", run->job->problem_key,
                 WithinWorkspace(r.workspace_limit))));
    return;
  }
  run->job->on_progress = [this, run = run.get()](const Solver* current) {
    Publish(*run, [&](TuneProgress& p) {
      p.stage = TuneProgress::Stage::kTiming;
      if (current == nullptr) {
        ++p.timed;
        p.current.clear();
      } else {
        p.current = std::string(current->name());
      }
    });
  };
  run->job->on_timed = [this, run = run.get()](const TimedSolver& t) {
    StoreConfig(run->job->problem_key, t);
    Publish(*run, [&](TuneProgress& p) {
      const absl::string_view name = t.candidate->solver->name();
      if (p.best.empty() || t.ms < p.best_ms || p.best == name) {
        p.best = std::string(name);
        p.best_ms = t.ms;
      }
    });
  };
  run->to_build = static_cast<int>(run->job->candidates.size());
  run->build_started = std::chrono::steady_clock::now();
  Publish(*run, [&](TuneProgress& p) {
    p.stage = TuneProgress::Stage::kCompiling;
    p.solvers = static_cast<int>(run->job->candidates.size());
  });
  // Plans are built (and, on GPUs, compiled) in parallel; timing waits for
  // all of them.
  for (size_t i = 0; i < run->job->candidates.size(); ++i) {
    compile_pool_.Schedule([this, run, i] { BuildPlans(run, i); },
                           PriorityOf(*run), run->tenant);
  }
}

void Tuner::BuildPlans(std::shared_ptr<Run> run, size_t candidate) {
  TimingCandidate& c = run->job->candidates[candidate];
  // Stopping, or nobody waits: nothing more is compiled; the timing stage
  // ends the run.
  if (absl::Status s = stop_.Check(); !s.ok()) c.status = s;
  if (c.status.ok() && Abandoned(run->dedup_key)) {
    c.status = absl::CancelledError("every caller of the find left");
  }
  for (const PerfConfig& config : c.configs) {
    if (!c.status.ok()) break;
    absl::StatusOr<v1::ExecutionPlan> plan =
        planner_.Plan(*c.solver, run->job->problem, config);
    if (plan.ok()) {
      if (absl::Status built = planner_.BuildKernels(&*plan); !built.ok()) {
        plan = built;
      }
    }
    if (!plan.ok()) {
      c.status = plan.status();
      break;
    }
    c.plans.push_back(*std::move(plan));
  }
  Publish(*run, [](TuneProgress& p) { ++p.built; });
  if (--run->to_build > 0) return;
  counters_.Add(&EngineCounters::compile_stage_ms,
                static_cast<int64_t>(MsSince(run->build_started)));
  Publish(*run,
          [](TuneProgress& p) { p.stage = TuneProgress::Stage::kTiming; });
  timing_.Time(
      run->job,
      [this, run](absl::StatusOr<TimingResult> timed) {
        Finish(run, std::move(timed));
      },
      PriorityOf(*run), run->tenant, run->request.device);
}

absl::StatusOr<v1::FindRecord> Tuner::Record(const Run& run,
                                             const TimingResult& timed) {
  v1::FindRecord record;
  record.set_device_key(records_.device_key());
  record.set_problem_key(run.job->problem_key);
  record.set_workspace_limit(run.excluded_by_limit ? run.request.workspace_limit
                                                   : -1);
  record.set_timing_repeats(timing_.options().timing.max_repeats);
  for (const TimedSolver& t : timed.timed) {
    v1::PerfResult* r = record.add_results();
    *r = PerfResultOf(*t.candidate->solver, run.job->problem, t.ms,
                      /*measured=*/true, t.candidate->configs[t.config]);
    // The workspace of the plan that was timed.
    r->set_workspace_bytes(t.candidate->plans[t.config].workspace_bytes());
  }
  if (record.results_size() == 0) {
    return absl::InternalError(
        absl::StrCat("every applicable solver failed on ", run.job->problem_key,
                     ":", timed.failures));
  }
  std::sort(record.mutable_results()->begin(), record.mutable_results()->end(),
            [](const v1::PerfResult& a, const v1::PerfResult& b) {
              return a.time_ms() < b.time_ms();
            });
  record.set_created_unix_ms(UnixMsNow());
  return record;
}

void Tuner::StoreConfig(const std::string& problem_key, const TimedSolver& t) {
  // A solver with one config to try has nothing tuned to keep.
  if (t.candidate->configs.size() <= 1) return;
  v1::PerfDbRecord tuned;
  tuned.set_solver_id(t.candidate->solver->id());
  for (int64_t v : t.candidate->configs[t.config]) tuned.add_perf_config(v);
  tuned.set_time_ms(t.ms);
  absl::Status put = perf_db_.Put(problem_key, tuned);
  if (!put.ok()) {
    std::cerr << "convtuned: could not store perf config: " << put << "\n";
  }
}

void Tuner::Finish(std::shared_ptr<Run> run,
                   absl::StatusOr<TimingResult> timed) {
  // The device's time goes to the tenants still waiting, in equal parts.
  // Background runs take the device only when no interactive find wants
  // it: they count in the tenants' totals, not against their budgets.
  if (quotas_ != nullptr) {
    quotas_->ChargeDevice(TenantsOf(*run), run->job->device_ms,
                          /*against_budget=*/!run->request.background);
  }
  if (!timed.ok()) {
    Complete(run->dedup_key, timed.status());
    return;
  }
  // Stopping: what was measured is not stored as the whole answer.
  if (absl::Status s = stop_.Check(); !s.ok()) {
    Complete(run->dedup_key, s);
    return;
  }
  absl::StatusOr<v1::FindRecord> record = Record(*run, *timed);
  if (!record.ok()) {
    Complete(run->dedup_key, record.status());
    return;
  }
  v1::FindRecord stored = *record;
  // Published again only while the tier's generation is the one it was
  // measured under.
  if (tier_ != nullptr) {
    stored.mutable_origin()->set_generation(
        std::max<int64_t>(0, tier_->generation()));
  }
  if (run->excluded_by_limit) {
    stored.set_problem_key(storage::LimitedProblemKey(
        run->job->problem_key, run->request.workspace_limit));
  }
  const absl::Status put = records_.Store(stored);
  if (!put.ok()) {
    std::cerr << "convtuned: could not store find record "
              << stored.problem_key() << ": " << put << "\n";
  }
  // A search's record is as good as any; a limited one stays under its key.
  // The lease (if this run holds one) goes once the record is there.
  if (tier_ != nullptr) {
    tier_->Publish(stored, run->lease);
    run->lease.clear();
  }
  Complete(run->dedup_key,
           FindOutcome{*std::move(record), false, "tuned",
                       std::move(timed->timed_solvers), put.ok(),
                       put.ok() ? "" : std::string(put.message())});
}

void Tuner::Remeasure(const ConvProblem& p, const v1::PerfResult& r,
                      std::function<void(absl::StatusOr<double>)> done) {
  if (absl::Status s = stop_.Check(); !s.ok()) {
    done(s);
    return;
  }
  const PerfConfig config(r.perf_config().begin(), r.perf_config().end());
  absl::StatusOr<v1::ExecutionPlan> plan =
      planner_.Plan(p, r.solver_id(), config);
  if (!plan.ok()) {
    done(plan.status());
    return;
  }
  planner_.Build(*std::move(plan),
                 [this, p, done = std::move(done)](
                     absl::StatusOr<BuiltPlan> built) mutable {
                   if (!built.ok()) {
                     done(built.status());
                     return;
                   }
                   timing_.TimeOne(p, std::move(built->plan), std::move(done));
                 });
}

int64_t Tuner::runs_in_flight() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(in_flight_.size());
}

bool Tuner::Abandoned(const std::string& dedup_key) {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(dedup_key);
  if (it == in_flight_.end()) return false;
  bool all_gone = true;
  for (Waiter& w : it->second.waiters) {
    if (w.caller.gone && w.caller.gone()) {
      // A caller who left no longer counts against its tenant's limit.
      w.ticket.reset();
    } else {
      all_gone = false;
    }
  }
  return all_gone;
}

std::vector<std::string> Tuner::TenantsOf(const Run& run) {
  std::vector<std::string> tenants;
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(run.dedup_key);
  if (it != in_flight_.end()) {
    for (const Waiter& w : it->second.waiters) {
      if (w.caller.gone && w.caller.gone()) continue;
      if (std::find(tenants.begin(), tenants.end(), w.caller.tenant) ==
          tenants.end()) {
        tenants.push_back(w.caller.tenant);
      }
    }
  }
  // Everyone left: the tenant that started it.
  if (tenants.empty()) tenants.push_back(run.tenant);
  return tenants;
}

void Tuner::Publish(Run& run,
                    const std::function<void(TuneProgress&)>& update) {
  absl::MutexLock progress_lock(&run.progress_mu);
  update(run.progress);
  std::vector<std::function<void(const TuneProgress&)>> followers;
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(run.dedup_key);
    if (it == in_flight_.end()) return;
    for (const Waiter& w : it->second.waiters) {
      if (w.caller.progress) followers.push_back(w.caller.progress);
    }
  }
  for (const auto& f : followers) f(run.progress);
}

void Tuner::Complete(const std::string& dedup_key,
                     absl::StatusOr<FindOutcome> result) {
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(dedup_key);
    if (it != in_flight_.end()) {
      waiters = std::move(it->second.waiters);
      in_flight_.erase(it);
    }
  }
  if (absl::IsCancelled(result.status())) {
    counters_.Add(&EngineCounters::tunings_abandoned);
  }
  for (Waiter& w : waiters) {
    // The slot is free before the caller hears: its next find fits.
    w.ticket.reset();
    w.done(result);
  }
}

}  // namespace convtune
