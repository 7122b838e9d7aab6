#include "server/service.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/import_check.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {
namespace {

// A refusal's retry hint goes to the client as trailing metadata. Call
// before the call is finished.
void AddRetryHint(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  if (const int64_t ms = RetryAfter(s); ms > 0) {
    ctx->AddTrailingMetadata(kRetryAfterKey, std::to_string(ms));
  }
}

// Finishes `reactor` with `s` and its retry hint.
void FinishWith(grpc::CallbackServerContext* ctx,
                grpc::ServerUnaryReactor* reactor, const absl::Status& s) {
  AddRetryHint(ctx, s);
  reactor->Finish(ToGrpcStatus(s));
}

// The bytes of the regular files in `dir` and below; 0 if it cannot be read.
int64_t FolderBytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) bytes += static_cast<int64_t>(size);
    }
  }
  return bytes;
}

// Finishes the call at once.
grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                 const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  FinishWith(ctx, reactor, s);
  return reactor;
}

// A FindStream call: progress events as the tuning run gets on, then the
// answer. The tuner's threads hand events over without waiting: while one
// is being written, a newer progress event replaces the one that waits, and
// the answer goes after the write in progress. A caller who cancels is
// answered at once, and the find sees it gone. The reactor lives until gRPC
// is done with it and the find has answered, whichever is later.
class FindStreamReactor final : public grpc::ServerWriteReactor<v1::FindEvent> {
 public:
  explicit FindStreamReactor(grpc::CallbackServerContext* ctx)
      : ctx_(ctx), started_(std::chrono::steady_clock::now()) {}

  // Keeps the reactor alive until OnDone.
  void Hold(std::shared_ptr<FindStreamReactor> self) {
    absl::MutexLock lock(&mu_);
    self_ = std::move(self);
  }

  // Whether the caller stopped waiting; from any thread.
  bool Gone() {
    absl::MutexLock lock(&mu_);
    return done_ || cancelled_ || ctx_->IsCancelled();
  }

  void Progress(const TuneProgress& p) {
    v1::FindEvent event;
    FillFindProgress(p, MsSince(started_) / 1e3, event.mutable_progress());
    {
      absl::MutexLock lock(&mu_);
      if (answered_ || cancelled_) return;
      if (writing_) {
        waiting_ = std::move(event);
        return;
      }
      writing_ = true;
      out_ = std::move(event);
    }
    StartWrite(&out_);
  }

  // The find's answer: an event written last, or the call's status.
  void Answer(const absl::Status& status, v1::FindEvent event) {
    {
      absl::MutexLock lock(&mu_);
      answered_ = true;
      status_ = status;
      answer_ = std::move(event);
      if (writing_) return;  // OnWriteDone finishes the call
      writing_ = true;
    }
    FinishNow();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      if (!ok) cancelled_ = true;
      if (!answered_ && !cancelled_) {
        if (!waiting_.has_value()) {
          writing_ = false;
          return;
        }
        out_ = *std::move(waiting_);
        waiting_.reset();
      }
    }
    if (Finishing()) {
      FinishNow();
    } else {
      StartWrite(&out_);
    }
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (writing_) return;  // OnWriteDone finishes the call
      writing_ = true;
    }
    FinishNow();
  }

  void OnDone() override {
    std::shared_ptr<FindStreamReactor> self;
    absl::MutexLock lock(&mu_);
    done_ = true;
    self = std::move(self_);  // may be the last reference
  }

 private:
  bool Finishing() {
    absl::MutexLock lock(&mu_);
    return answered_ || cancelled_;
  }

  // Once, with writing_ held: the answer, or the status.
  void FinishNow() {
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      status =
          answered_ ? status_ : absl::CancelledError("the caller cancelled");
      if (cancelled_ && status.ok()) {
        status = absl::CancelledError("the caller cancelled");
      }
    }
    if (status.ok()) {
      StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    AddRetryHint(ctx_, status);
    Finish(ToGrpcStatus(status));
  }

  grpc::CallbackServerContext* const ctx_;
  const std::chrono::steady_clock::time_point started_;
  absl::Mutex mu_;
  std::shared_ptr<FindStreamReactor> self_ ABSL_GUARDED_BY(mu_);
  v1::FindEvent out_;     // being written
  v1::FindEvent answer_;  // the last event
  std::optional<v1::FindEvent> waiting_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

void PendingCalls::Call::Answer(const std::function<absl::Status()>& fill) {
  {
    absl::MutexLock lock(&mu_);
    if (answered_) return;
    answered_ = true;
    FinishWith(ctx_, reactor_, fill());
  }
  registry_->Forget(id_);
}

bool PendingCalls::Call::Gone() {
  absl::MutexLock lock(&mu_);
  return answered_ || ctx_->IsCancelled();
}

void PendingCalls::Call::Cut(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (answered_) return;
  answered_ = true;
  FinishWith(ctx_, reactor_, why);
}

std::shared_ptr<PendingCalls::Call> PendingCalls::Begin(
    grpc::CallbackServerContext* ctx) {
  std::shared_ptr<Call> call;
  std::optional<absl::Status> cut;
  {
    absl::MutexLock lock(&mu_);
    call = std::make_shared<Call>(this, next_id_++, ctx, ctx->DefaultReactor());
    if (cut_all_.has_value()) {
      cut = *cut_all_;
    } else {
      cuts_[call->id_] = [call](const absl::Status& why) { call->Cut(why); };
    }
  }
  if (cut.has_value()) call->Cut(*cut);
  return call;
}

uint64_t PendingCalls::Add(std::function<void(const absl::Status&)> cut) {
  std::optional<absl::Status> now;
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    if (cut_all_.has_value()) {
      now = *cut_all_;
    } else {
      cuts_[id] = cut;
    }
  }
  if (now.has_value()) cut(*now);
  return id;
}

void PendingCalls::Forget(uint64_t id) {
  absl::MutexLock lock(&mu_);
  cuts_.erase(id);
}

void PendingCalls::CutAll(const absl::Status& why) {
  std::vector<std::function<void(const absl::Status&)>> cuts;
  {
    absl::MutexLock lock(&mu_);
    cut_all_ = why;
    for (auto& [id, cut] : cuts_) cuts.push_back(std::move(cut));
    cuts_.clear();
  }
  for (const auto& cut : cuts) cut(why);
}

absl::Status ConvTuneService::Allowed(grpc::CallbackServerContext* ctx,
                                      Right right, absl::string_view rpc,
                                      Caller* caller) const {
  Caller c = access_.IdentifyCall(*ctx);
  absl::Status s = Access::Check(c, right, rpc);
  if (caller != nullptr) *caller = std::move(c);
  return s;
}

ConvTuneService::ConvTuneService(std::vector<Core*> cores,
                                 storage::Store& store, ThreadPool& store_pool,
                                 const Access& access, ServiceOptions options)
    : cores_(std::move(cores)),
      core_(*cores_.front()),
      store_(store),
      store_pool_(store_pool),
      access_(access),
      options_(std::move(options)),
      executes_(options_.tenant_executes) {
  for (Core* core : cores_) {
    for (int ordinal : core->ordinals()) {
      by_ordinal_[ordinal] = core;
      ordinals_.push_back(ordinal);
    }
  }
}

Core& ConvTuneService::CoreOf(std::optional<int> ordinal) const {
  if (!ordinal.has_value()) return core_;
  auto it = by_ordinal_.find(*ordinal);
  return it == by_ordinal_.end() ? core_ : *it->second;
}

absl::Status ConvTuneService::CheckDevice(int ordinal,
                                          absl::string_view field) const {
  if (by_ordinal_.contains(ordinal)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": no device ", ordinal,
                   " here (devices: ", absl::StrJoin(ordinals_, ", "), ")"));
}

grpc::ServerUnaryReactor* ConvTuneService::GetWorkspaceSize(
    grpc::CallbackServerContext* ctx, const v1::WorkspaceSizeRequest* req,
    v1::WorkspaceSizeResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kQuery, "GetWorkspaceSize");
      !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ConvProblem> p = ProblemFrom(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, p.status());
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  resp->set_workspace_bytes((*core)->immediate().MaxWorkspace(*p));
  return Finish(ctx, absl::OkStatus());
}

absl::StatusOr<Core*> ConvTuneService::TakeDevices(const FindInput& in) {
  if (in.params.device.has_value()) {
    RETURN_IF_ERROR(CheckDevice(*in.params.device, "tune_on_device"));
  }
  // The caller may run on a device the daemon does not own: nothing to
  // leave to it then.
  if (in.client_device.has_value() && by_ordinal_.contains(*in.client_device)) {
    CoreOf(in.client_device).timing().MarkInUse(*in.client_device);
  }
  return &CoreOf(in.params.device.has_value() ? in.params.device
                                              : in.client_device);
}

grpc::ServerUnaryReactor* ConvTuneService::Find(
    grpc::CallbackServerContext* ctx, const v1::FindRequest* req,
    v1::FindResponse* resp) {
  Caller caller;
  if (absl::Status s = Allowed(ctx, Right::kTune, "Find", &caller); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<FindInput> in = FindInputFrom(*req, options_);
  if (!in.ok()) return Finish(ctx, in.status());
  absl::StatusOr<Core*> core = TakeDevices(*in);
  if (!core.ok()) return Finish(ctx, core.status());
  // A caller whose deadline passed, or who cancelled, no longer holds up
  // the tuning: when every caller of a run has gone, it stops.
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  in->params.gone = [call] { return call->Gone(); };
  in->params.tenant = caller.tenant;
  (*core)->find().Find(in->problem, in->params,
                       [core = *core, call, resp,
                        in = *in](absl::StatusOr<FindOutcome> outcome) {
                         call->Answer([&] {
                           if (outcome.ok()) {
                             FillFindResponse(*outcome, in, core->device_key(),
                                              resp);
                           }
                           return outcome.status();
                         });
                       });
  return call->reactor();
}

grpc::ServerWriteReactor<v1::FindEvent>* ConvTuneService::FindStream(
    grpc::CallbackServerContext* ctx, const v1::FindRequest* req) {
  auto reactor = std::make_shared<FindStreamReactor>(ctx);
  reactor->Hold(reactor);
  Caller caller;
  const absl::Status allowed =
      Allowed(ctx, Right::kTune, "FindStream", &caller);
  absl::StatusOr<FindInput> in = allowed.ok()
                                     ? FindInputFrom(*req, options_)
                                     : absl::StatusOr<FindInput>(allowed);
  absl::StatusOr<Core*> core =
      in.ok() ? TakeDevices(*in) : absl::StatusOr<Core*>(in.status());
  if (!core.ok()) {
    reactor->Answer(core.status(), {});
    return reactor.get();
  }
  in->params.gone = [reactor] { return reactor->Gone(); };
  in->params.tenant = caller.tenant;
  in->params.progress = [reactor](const TuneProgress& p) {
    reactor->Progress(p);
  };
  // At shutdown the stream is answered Unavailable at once.
  const uint64_t pending = pending_.Add(
      [reactor](const absl::Status& why) { reactor->Answer(why, {}); });
  FindStreamReactor* raw = reactor.get();
  (*core)->find().Find(in->problem, in->params,
                       [this, core = *core, reactor, pending,
                        in = *in](absl::StatusOr<FindOutcome> outcome) {
                         v1::FindEvent event;
                         if (outcome.ok()) {
                           FillFindResponse(*outcome, in, core->device_key(),
                                            event.mutable_result());
                         }
                         reactor->Answer(outcome.status(), std::move(event));
                         pending_.Forget(pending);
                       });
  return raw;
}

grpc::ServerUnaryReactor* ConvTuneService::Prefill(
    grpc::CallbackServerContext* ctx, const v1::PrefillRequest* req,
    v1::PrefillResponse* resp) {
  Caller caller;
  // Work for the whole fleet is an operator's to queue.
  if (absl::Status s =
          req->cluster()
              ? Allowed(ctx, Right::kAdmin, "Prefill (cluster)", &caller)
              : Allowed(ctx, Right::kTune, "Prefill", &caller);
      !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<PrefillInput> in = PrefillInputFrom(*req, options_);
  if (!in.ok()) return Finish(ctx, in.status());
  absl::StatusOr<Core*> found = CoreFor(*req);
  if (!found.ok()) return Finish(ctx, found.status());
  Core* core = *found;
  if (req->cluster()) {
    FindTier* tier = core->tier();
    if (tier == nullptr) {
      return Finish(ctx, absl::FailedPreconditionError(
                             "cluster: this daemon has no cluster tier "
                             "(convtuned --tier)"));
    }
    std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
    store_pool_.Schedule([core, call, resp, tier,
                          in = std::make_shared<PrefillInput>(*std::move(in))] {
      std::vector<std::string> keys;
      keys.reserve(in->problems.size());
      for (const ConvProblem& p : in->problems) keys.push_back(ProblemKey(p));
      absl::StatusOr<int> added = tier->AddJobs(keys, in->workspace_limit);
      call->Answer([&]() -> absl::Status {
        if (!added.ok()) return added.status();
        resp->set_queued(*added);
        resp->set_taken(*added);
        resp->set_device_key(core->device_key());
        return absl::OkStatus();
      });
    });
    return call->reactor();
  }
  // A list looks up every problem in the FindDb: on the store pool.
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  store_pool_.Schedule([core, call, resp, tenant = caller.tenant,
                        in = std::make_shared<PrefillInput>(*std::move(in))] {
    absl::StatusOr<Core::PrefillOutcome> out =
        core->Prefill(tenant, in->problems, in->workspace_limit);
    call->Answer([&]() -> absl::Status {
      if (!out.ok()) return out.status();
      // Nothing taken at all: the caller is over its limit, and told when
      // to come back. Part of the list taken: the response says how much.
      if (out->taken == 0 && !out->refusal.ok()) return out->refusal;
      resp->set_queued(out->queued);
      resp->set_already_tuned(out->already_tuned);
      resp->set_taken(out->taken);
      resp->set_refusal(std::string(out->refusal.message()));
      resp->set_device_key(core->device_key());
      return absl::OkStatus();
    });
  });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::GetPlan(
    grpc::CallbackServerContext* ctx, const v1::GetPlanRequest* req,
    v1::GetPlanResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kTune, "GetPlan"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ConvProblem> p = ProblemFrom(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, p.status());
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<v1::ExecutionPlan> plan =
      (*core)->planner().Plan(*p, req->solver_id(), PerfConfigFrom(*req));
  if (!plan.ok()) return Finish(ctx, plan.status());
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  (*core)->planner().Build(*std::move(plan),
                           [call, resp](absl::StatusOr<BuiltPlan> built) {
                             call->Answer([&] {
                               if (built.ok()) {
                                 *resp->mutable_plan() = std::move(built->plan);
                               }
                               return built.status();
                             });
                           });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::ListSolvers(
    grpc::CallbackServerContext* ctx, const v1::ListSolversRequest* req,
    v1::ListSolversResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kQuery, "ListSolvers"); !s.ok()) {
    return Finish(ctx, s);
  }
  std::optional<ConvProblem> problem;
  if (req->has_problem()) {
    absl::StatusOr<ConvProblem> p =
        ProblemFrom(req->problem(), options_.limits);
    if (!p.ok()) return Finish(ctx, p.status());
    problem = *p;
  }
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  FillSolversResponse((*core)->planner().Solvers(problem ? &*problem : nullptr),
                      problem.has_value(), (*core)->device_key(), resp);
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::Execute(
    grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* req,
    v1::ExecuteResponse* resp) {
  Caller caller;
  if (absl::Status s = Allowed(ctx, Right::kExecute, "Execute", &caller);
      !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ExecuteInput> in = ExecuteInputFrom(*req, options_);
  if (!in.ok()) return Finish(ctx, in.status());
  if (in->device.has_value()) {
    if (absl::Status s = CheckDevice(*in->device, "device"); !s.ok()) {
      return Finish(ctx, s);
    }
  }
  Core& core = CoreOf(in->device);
  absl::StatusOr<RemoteExecutor*> executor =
      in->device.has_value()
          ? core.executor(*in->device)
          : absl::StatusOr<RemoteExecutor*>(&core.executor());
  if (!executor.ok()) return Finish(ctx, executor.status());
  // The tensors are held until the call is done: counted against the
  // tenant's limits for as long.
  const ConvProblem& p = in->problem;
  absl::StatusOr<ExecuteLimiter::Ticket> ticket =
      executes_.Acquire(caller.tenant, req->ByteSizeLong() + p.x_bytes() +
                                           p.w_bytes() + p.y_bytes());
  if (!ticket.ok()) return Finish(ctx, ticket.status());
  if (in->device.has_value()) core.timing().MarkInUse(*in->device);
  // The slot is given back before the answer goes out: a caller who has its
  // answer may call again at once.
  auto held = std::make_shared<ExecuteLimiter::Ticket>(*std::move(ticket));
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  auto run = std::make_shared<ExecuteInput>(*std::move(in));
  (*executor)->Execute(run->problem, run->solver_id, run->tensors,
                       [call, resp, run, held](absl::StatusOr<double> ms) {
                         call->Answer([&] {
                           if (ms.ok()) FillExecuteResponse(*run, *ms, resp);
                           held->reset();
                           return ms.status();
                         });
                         held->reset();
                       });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::DbStats(
    grpc::CallbackServerContext* ctx, const v1::DbStatsRequest* req,
    v1::DbStatsResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbStats"); !s.ok()) {
    return Finish(ctx, s);
  }
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  store_pool_.Schedule([this, call, resp] {
    absl::StatusOr<storage::StoreStats> stats = storage::ComputeStats(&store_);
    call->Answer([&] {
      if (stats.ok()) {
        FillDbStatsResponse(*stats, store_.path(), core_.records().system_db(),
                            core_.device_key(), resp);
      }
      return stats.status();
    });
  });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::DbExport(
    grpc::CallbackServerContext* ctx, const v1::DbExportRequest* req,
    v1::DbExportResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbExport"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  storage::ExportOptions options;
  if (req->system()) options.system_device_key = (*core)->device_key();
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  store_pool_.Schedule([this, core = *core, call, resp, options] {
    int64_t entries = 0;
    absl::StatusOr<std::string> file =
        storage::ExportStore(store_, options, &entries);
    call->Answer([&] {
      if (file.ok()) {
        resp->set_device_key(core->device_key());
        resp->set_entries(entries);
        resp->set_file(*std::move(file));
      }
      return file.status();
    });
  });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::DbImport(
    grpc::CallbackServerContext* ctx, const v1::DbImportRequest* req,
    v1::DbImportResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbImport"); !s.ok()) {
    return Finish(ctx, s);
  }
  storage::ImportOptions options;
  options.overwrite = req->overwrite();
  // Each key's records are checked against that key's devices and solvers.
  std::vector<ImportCheck::Served> served;
  for (Core* core : cores_) {
    served.push_back({&core->registry(), &core->device_info()});
  }
  options.check = ImportCheck(std::move(served));
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  // The call may be answered (at shutdown) while the import still reads:
  // the file is its own copy.
  store_pool_.Schedule([this, call, resp, options,
                        file = std::make_shared<std::string>(req->file())] {
    absl::StatusOr<storage::ImportStats> stats =
        storage::ImportStore(store_, *file, options);
    call->Answer([&] {
      if (stats.ok()) FillImportResponse(*stats, resp);
      return WithField("file", stats.status());
    });
  });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::GetSolutions(
    grpc::CallbackServerContext* ctx, const v1::GetSolutionsRequest* req,
    v1::GetSolutionsResponse* resp) {
  Caller caller;
  if (absl::Status s = Allowed(ctx, Right::kQuery, "GetSolutions", &caller);
      !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<SolutionsInput> in = SolutionsInputFrom(*req, options_);
  if (!in.ok()) return Finish(ctx, in.status());
  // A miss is tuned in the background only for callers that may tune.
  if (!Access::Check(caller, Right::kTune, "GetSolutions").ok()) {
    in->background_tune = false;
  }
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<Solutions> s = (*core)->immediate().GetSolutions(
      in->problem, in->workspace_limit, in->background_tune, caller.tenant);
  if (!s.ok()) return Finish(ctx, s.status());
  FillSolutionsResponse(*s, *in, (*core)->device_key(), resp);
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::GetSolutionWorkspaceSize(
    grpc::CallbackServerContext* ctx, const v1::SolutionRequest* req,
    v1::WorkspaceSizeResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kQuery, "GetSolutionWorkspaceSize");
      !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ConvProblem> p = ProblemFrom(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, p.status());
  absl::StatusOr<uint32_t> solver = SolverIdFrom(req->solution_id());
  if (!solver.ok()) return Finish(ctx, solver.status());
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<int64_t> ws =
      (*core)->immediate().SolutionWorkspace(*p, *solver);
  if (ws.ok()) resp->set_workspace_bytes(*ws);
  return Finish(ctx, ws.status());
}

grpc::ServerUnaryReactor* ConvTuneService::CompileSolution(
    grpc::CallbackServerContext* ctx, const v1::SolutionRequest* req,
    v1::CompileSolutionResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kTune, "CompileSolution"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ConvProblem> p = ProblemFrom(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, p.status());
  absl::StatusOr<uint32_t> solver = SolverIdFrom(req->solution_id());
  if (!solver.ok()) return Finish(ctx, solver.status());
  absl::StatusOr<Core*> core = CoreFor(*req);
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<v1::ExecutionPlan> plan =
      (*core)->planner().Plan(*p, *solver, {});
  if (!plan.ok()) return Finish(ctx, plan.status());
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  (*core)->planner().Build(*std::move(plan),
                           [call, resp](absl::StatusOr<BuiltPlan> built) {
                             call->Answer([&] {
                               if (built.ok()) {
                                 *resp->mutable_plan() = std::move(built->plan);
                                 resp->set_compiled(built->compiled);
                               }
                               return built.status();
                             });
                           });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::TrainHeuristic(
    grpc::CallbackServerContext* ctx, const v1::TrainHeuristicRequest* req,
    v1::TrainHeuristicResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "TrainHeuristic"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<Core*> found = CoreFor(*req);
  if (!found.ok()) return Finish(ctx, found.status());
  Core* core = *found;
  std::shared_ptr<PendingCalls::Call> call = pending_.Begin(ctx);
  core->TrainHeuristics([core, call, resp](absl::StatusOr<TrainReport> report) {
    call->Answer([&] {
      if (report.ok()) FillTrainResponse(*report, core->device_key(), resp);
      return report.status();
    });
  });
  return call->reactor();
}

grpc::ServerUnaryReactor* ConvTuneService::GetCodeObject(
    grpc::CallbackServerContext* ctx, const v1::GetCodeObjectRequest* req,
    v1::GetCodeObjectResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kQuery, "GetCodeObject"); !s.ok()) {
    return Finish(ctx, s);
  }
  if (absl::Status s = CheckCodeObjectRequest(*req); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<v1::KernelCacheRecord> r =
      storage::KernelCache(&store_).Get(req->hash());
  if (!r.ok()) return Finish(ctx, WithField("hash", r.status()));
  return Finish(ctx, FillCodeObjectResponse(*r, resp));
}

grpc::ServerUnaryReactor* ConvTuneService::GetStatus(
    grpc::CallbackServerContext* ctx, const v1::GetStatusRequest* req,
    v1::GetStatusResponse* resp) {
  Caller caller;
  if (absl::Status s = Allowed(ctx, Right::kQuery, "GetStatus", &caller);
      !s.ok()) {
    return Finish(ctx, s);
  }
  resp->set_tenant(caller.tenant);
  resp->set_role(std::string(RoleName(caller.role)));
  resp->set_device_key(core_.device_key());
  // Summed over the device keys.
  int64_t tunings = 0;
  for (Core* core : cores_) {
    tunings += core->tunings_in_flight();
    for (const auto& [name, value] : NamedCounters(core->counters())) {
      (*resp->mutable_counters())[name] += value;
    }
  }
  resp->set_tunings_in_flight(tunings);
  // A tenant sees its own usage; an admin every tenant's, and the
  // database's size.
  TuningQuotas& quotas = core_.quotas();
  const storage::StoreHealth storage = store_.Health();
  resp->set_db_writable(storage.writable);
  if (caller.role == Role::kAdmin) {
    resp->set_db_bytes(FolderBytes(store_.path()));
    resp->set_db_error(storage.error);
    resp->set_db_mended(storage.opened_damaged);
    for (const auto& [tenant, usage] : quotas.All()) {
      FillTenantUsage(tenant, usage, quotas.limits(),
                      executes_.InFlight(tenant), resp->add_tenants());
    }
  } else if (caller.role == Role::kTenant) {
    FillTenantUsage(caller.tenant, quotas.UsageOf(caller.tenant),
                    quotas.limits(), executes_.InFlight(caller.tenant),
                    resp->add_tenants());
  }
  if (options_.status) options_.status(resp);
  for (Core* core : cores_) {
    v1::KeyStatus* key = resp->add_keys();
    key->set_device_key(core->device_key());
    if (core->tier() == nullptr) continue;
    key->set_tier(core->tier()->Describe());
    if (req->cluster()) *key->mutable_cluster_jobs() = core->tier()->Jobs();
  }
  if (req->cluster() && core_.tier() != nullptr) {
    *resp->mutable_cluster_jobs() = resp->keys(0).cluster_jobs();
  }
  return Finish(ctx, absl::OkStatus());
}

}  // namespace convtune
