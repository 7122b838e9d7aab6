#include "server/service.h"

#include <memory>
#include <optional>
#include <utility>

#include "common/grpc_status.h"
#include "server/import_check.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {
namespace {

// Finishes the call at once.
grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                 const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

absl::Status ConvTuneService::Allowed(grpc::CallbackServerContext* ctx,
                                      Right right, absl::string_view rpc,
                                      Caller* caller) const {
  Caller c = access_.Identify(ctx->peer());
  absl::Status s = Access::Check(c, right, rpc);
  if (caller != nullptr) *caller = std::move(c);
  return s;
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
  resp->set_workspace_bytes(core_.immediate().MaxWorkspace(*p));
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::Find(
    grpc::CallbackServerContext* ctx, const v1::FindRequest* req,
    v1::FindResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kTune, "Find"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<FindInput> in = FindInputFrom(*req, options_);
  if (!in.ok()) return Finish(ctx, in.status());
  // A caller whose deadline passed, or who cancelled, no longer holds up
  // the tuning: when every caller of a run has gone, it stops.
  in->params.gone = [ctx] { return ctx->IsCancelled(); };
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  core_.find().Find(
      in->problem, in->params,
      [this, reactor, resp, in = *in](absl::StatusOr<FindOutcome> outcome) {
        if (outcome.ok()) {
          FillFindResponse(*outcome, in, core_.device_key(), resp);
        }
        reactor->Finish(ToGrpcStatus(outcome.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::GetPlan(
    grpc::CallbackServerContext* ctx, const v1::GetPlanRequest* req,
    v1::GetPlanResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kTune, "GetPlan"); !s.ok()) {
    return Finish(ctx, s);
  }
  absl::StatusOr<ConvProblem> p = ProblemFrom(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, p.status());
  absl::StatusOr<v1::ExecutionPlan> plan =
      core_.planner().Plan(*p, req->solver_id(), PerfConfigFrom(*req));
  if (!plan.ok()) return Finish(ctx, plan.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  core_.planner().Build(*std::move(plan),
                        [reactor, resp](absl::StatusOr<BuiltPlan> built) {
                          if (built.ok()) {
                            *resp->mutable_plan() = std::move(built->plan);
                          }
                          reactor->Finish(ToGrpcStatus(built.status()));
                        });
  return reactor;
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
  FillSolversResponse(core_.planner().Solvers(problem ? &*problem : nullptr),
                      problem.has_value(), core_.device_key(), resp);
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
  // The tensors are held until the call is done: counted against the
  // tenant's limits for as long.
  const ConvProblem& p = in->problem;
  absl::StatusOr<ExecuteLimiter::Ticket> ticket =
      executes_.Acquire(caller.tenant, req->ByteSizeLong() + p.x_bytes() +
                                           p.w_bytes() + p.y_bytes());
  if (!ticket.ok()) {
    ctx->AddTrailingMetadata("convtune-retry-after-ms",
                             std::to_string(ExecuteLimiter::kRetryAfterMs));
    return Finish(ctx, ticket.status());
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto run = std::make_shared<ExecuteInput>(*std::move(in));
  core_.executor().Execute(run->problem, run->solver_id, run->tensors,
                           [reactor, resp, run, ticket = *std::move(ticket)](
                               absl::StatusOr<double> ms) {
                             if (ms.ok()) FillExecuteResponse(*run, *ms, resp);
                             reactor->Finish(ToGrpcStatus(ms.status()));
                           });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::DbStats(
    grpc::CallbackServerContext* ctx, const v1::DbStatsRequest* req,
    v1::DbStatsResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbStats"); !s.ok()) {
    return Finish(ctx, s);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  store_pool_.Schedule([this, reactor, resp] {
    absl::StatusOr<storage::StoreStats> stats = storage::ComputeStats(&store_);
    if (stats.ok()) {
      FillDbStatsResponse(*stats, store_.path(), core_.records().system_db(),
                          core_.device_key(), resp);
    }
    reactor->Finish(ToGrpcStatus(stats.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::DbExport(
    grpc::CallbackServerContext* ctx, const v1::DbExportRequest* req,
    v1::DbExportResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbExport"); !s.ok()) {
    return Finish(ctx, s);
  }
  storage::ExportOptions options;
  if (req->system()) options.system_device_key = core_.device_key();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  store_pool_.Schedule([this, reactor, resp, options] {
    int64_t entries = 0;
    absl::StatusOr<std::string> file =
        storage::ExportStore(store_, options, &entries);
    if (file.ok()) {
      resp->set_device_key(core_.device_key());
      resp->set_entries(entries);
      resp->set_file(*std::move(file));
    }
    reactor->Finish(ToGrpcStatus(file.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::DbImport(
    grpc::CallbackServerContext* ctx, const v1::DbImportRequest* req,
    v1::DbImportResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "DbImport"); !s.ok()) {
    return Finish(ctx, s);
  }
  storage::ImportOptions options;
  options.overwrite = req->overwrite();
  options.check = ImportCheck(core_.registry(), core_.device_info());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The request outlives the call, so its file is read in place.
  store_pool_.Schedule([this, reactor, req, resp, options] {
    absl::StatusOr<storage::ImportStats> stats =
        storage::ImportStore(store_, req->file(), options);
    if (stats.ok()) FillImportResponse(*stats, resp);
    reactor->Finish(ToGrpcStatus(WithField("file", stats.status())));
  });
  return reactor;
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
  absl::StatusOr<Solutions> s = core_.immediate().GetSolutions(
      in->problem, in->workspace_limit, in->background_tune);
  if (!s.ok()) return Finish(ctx, s.status());
  FillSolutionsResponse(*s, *in, core_.device_key(), resp);
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
  absl::StatusOr<int64_t> ws = core_.immediate().SolutionWorkspace(*p, *solver);
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
  absl::StatusOr<v1::ExecutionPlan> plan =
      core_.planner().Plan(*p, *solver, {});
  if (!plan.ok()) return Finish(ctx, plan.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  core_.planner().Build(*std::move(plan),
                        [reactor, resp](absl::StatusOr<BuiltPlan> built) {
                          if (built.ok()) {
                            *resp->mutable_plan() = std::move(built->plan);
                            resp->set_compiled(built->compiled);
                          }
                          reactor->Finish(ToGrpcStatus(built.status()));
                        });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::TrainHeuristic(
    grpc::CallbackServerContext* ctx, const v1::TrainHeuristicRequest* req,
    v1::TrainHeuristicResponse* resp) {
  if (absl::Status s = Allowed(ctx, Right::kAdmin, "TrainHeuristic"); !s.ok()) {
    return Finish(ctx, s);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  core_.TrainHeuristics(
      [this, reactor, resp](absl::StatusOr<TrainReport> report) {
        if (report.ok()) FillTrainResponse(*report, core_.device_key(), resp);
        reactor->Finish(ToGrpcStatus(report.status()));
      });
  return reactor;
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
  resp->set_tunings_in_flight(core_.tunings_in_flight());
  for (const auto& [name, value] : NamedCounters(core_.counters())) {
    (*resp->mutable_counters())[name] = value;
  }
  if (options_.status) options_.status(resp);
  return Finish(ctx, absl::OkStatus());
}

}  // namespace convtune
