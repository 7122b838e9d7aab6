#include "server/find_engine.h"

#include <memory>

#include "absl/synchronization/notification.h"

namespace convtune {

FindEngine::FindEngine(FindRecords& records, Immediate& immediate, Tuner& tuner,
                       Counters& counters, const StopFlag& stop,
                       Options options)
    : records_(records),
      immediate_(immediate),
      tuner_(tuner),
      counters_(counters),
      stop_(stop),
      options_(options) {}

void FindEngine::Find(const ConvProblem& p, const FindParams& params,
                      Done done) {
  counters_.Add(&EngineCounters::finds);
  if (absl::Status s = stop_.Check(); !s.ok()) {
    done(s);
    return;
  }
  const FindPolicy* policy = PolicyFor(params.mode);
  if (policy == nullptr) {
    done(FindModeFromNumber(params.mode).status());
    return;
  }
  if (policy->reads_find_db && !params.exhaustive) {
    absl::StatusOr<FindOutcome> user =
        records_.LookupUser(p, params.workspace_limit);
    if (user.ok() || !absl::IsNotFound(user.status())) {
      if (user.ok()) counters_.Add(&EngineCounters::db_hits);
      done(std::move(user));
      return;
    }
    absl::StatusOr<FindOutcome> system =
        records_.LookupSystem(p, params.workspace_limit);
    if (system.ok()) {
      counters_.Add(&EngineCounters::system_hits);
      if (policy->verifies_system_db) {
        Verify(p, params, *std::move(system), std::move(done));
      } else {
        done(std::move(system));
      }
      return;
    }
    if (policy->falls_back_on_miss) {
      absl::StatusOr<FindOutcome> fallback =
          immediate_.Fallback(p, params.workspace_limit);
      if (fallback.ok()) counters_.Add(&EngineCounters::fallbacks);
      done(std::move(fallback));
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

void FindEngine::Tune(const ConvProblem& p, const FindParams& params,
                      Done done) {
  // Find checked the mode before anything reached here.
  const FindPolicy& policy = *PolicyFor(params.mode);
  TuneRequest request;
  request.workspace_limit = params.workspace_limit;
  request.dynamic_only = policy.dynamic_only;
  request.search = params.exhaustive || policy.searches_configs;
  request.bounded = policy.bounded;
  request.background = params.background;
  request.reads_tier =
      (policy.reads_find_db && !params.exhaustive) || params.background;
  request.device = params.device;
  tuner_.Tune(p, request, std::move(done),
              TuneCaller{params.tenant, params.gone, params.progress});
}

void FindEngine::Verify(const ConvProblem& p, const FindParams& params,
                        FindOutcome system, Done done) {
  counters_.Add(&EngineCounters::verifications);
  const v1::PerfResult best = system.record.results(0);
  auto shared = std::make_shared<FindOutcome>(std::move(system));
  tuner_.Remeasure(
      p, best,
      [this, p, params, best, shared,
       done = std::move(done)](absl::StatusOr<double> ms) mutable {
        if (!ms.ok() && absl::IsUnavailable(ms.status())) {
          done(ms.status());
          return;
        }
        if (ms.ok() &&
            *ms <= best.time_ms() * (1 + options_.verify_tolerance)) {
          shared->timed_solvers = {best.solver_id()};
          const absl::Status put = records_.Store(shared->record);
          shared->stored = put.ok();
          if (!put.ok()) shared->not_stored = std::string(put.message());
          done(std::move(*shared));
          return;
        }
        // Slower here than the system record says (or it failed): tune.
        counters_.Add(&EngineCounters::verify_rejected);
        Tune(p, params,
             [best = best.solver_id(),
              done = std::move(done)](absl::StatusOr<FindOutcome> r) {
               if (r.ok())
                 r->timed_solvers.insert(r->timed_solvers.begin(), best);
               done(std::move(r));
             });
      });
}

}  // namespace convtune
