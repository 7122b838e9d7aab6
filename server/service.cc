#include "server/service.h"

#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "kernels/problem_proto.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

absl::Status WithField(absl::string_view field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(field, ".", s.message()));
}

}  // namespace

grpc::ServerUnaryReactor* ConvTuneService::GetWorkspaceSize(grpc::CallbackServerContext* ctx,
                                                            const v1::WorkspaceSizeRequest* req,
                                                            v1::WorkspaceSizeResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  resp->set_workspace_bytes(engine_.MaxWorkspace(*p));
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::Find(grpc::CallbackServerContext* ctx,
                                                const v1::FindRequest* req,
                                                v1::FindResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  if (req->request_count() < 0) {
    return Finish(ctx, absl::InvalidArgumentError(absl::StrCat(
                           "request_count: must be >= 0, got ", req->request_count())));
  }
  FindParams options;
  options.workspace_limit =
      req->has_workspace_limit() && req->workspace_limit() >= 0 ? req->workspace_limit() : -1;
  options.exhaustive = req->exhaustive();
  options.mode = options_.default_mode;
  if (req->mode() != v1::FIND_MODE_UNSPECIFIED) {
    absl::StatusOr<FindMode> mode = FindModeFromNumber(req->mode(), "mode");
    if (!mode.ok()) return Finish(ctx, mode.status());
    options.mode = *mode;
  }
  const FindMode mode = options.mode;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const int count = req->request_count();
  const std::string device_key = engine_.device_key();
  engine_.Find(*p, options, [reactor, resp, count, device_key, mode](
                                absl::StatusOr<FindOutcome> outcome) {
    if (!outcome.ok()) {
      reactor->Finish(ToGrpcStatus(outcome.status()));
      return;
    }
    for (const v1::PerfResult& r : outcome->record.results()) {
      if (count > 0 && resp->results_size() >= count) break;
      *resp->add_results() = r;
    }
    resp->set_from_db(outcome->from_db);
    resp->set_mode(static_cast<v1::FindMode>(mode));
    resp->set_source(outcome->source);
    resp->set_device_key(device_key);
    resp->set_problem_key(outcome->record.problem_key());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::GetPlan(grpc::CallbackServerContext* ctx,
                                                   const v1::GetPlanRequest* req,
                                                   v1::GetPlanResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  PerfConfig config(req->perf_config().begin(), req->perf_config().end());
  absl::StatusOr<v1::ExecutionPlan> plan = engine_.Plan(*p, req->solver_id(), config);
  if (!plan.ok()) return Finish(ctx, plan.status());
  *resp->mutable_plan() = *std::move(plan);
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::ListSolvers(grpc::CallbackServerContext* ctx,
                                                       const v1::ListSolversRequest* req,
                                                       v1::ListSolversResponse* resp) {
  std::optional<ConvProblem> problem;
  if (req->has_problem()) {
    absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
    if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
    problem = *p;
  }
  for (const SolverReport& r : engine_.Solvers(problem ? &*problem : nullptr)) {
    v1::SolverInfo* info = resp->add_solvers();
    info->set_id(r.solver->id());
    info->set_name(std::string(r.solver->name()));
    info->set_algorithm(std::string(AlgorithmName(r.solver->family())));
    info->set_dynamic(r.solver->dynamic());
    info->set_backend(std::string(r.solver->backend()));
    if (problem) {
      info->set_applicable(r.applicable.ok());
      info->set_not_applicable_reason(std::string(r.applicable.message()));
      info->set_workspace_bytes(r.workspace_bytes);
    }
  }
  resp->set_device_key(engine_.device_key());
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::Execute(grpc::CallbackServerContext* ctx,
                                                   const v1::ExecuteRequest* req,
                                                   v1::ExecuteResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  const int64_t total = p->x_bytes() + p->w_bytes() + p->y_bytes();
  if (total > options_.max_execute_bytes) {
    return Finish(ctx, absl::ResourceExhaustedError(absl::StrCat(
                           "the tensors of this problem take ", total,
                           " bytes; inline execution is limited to ", options_.max_execute_bytes,
                           " bytes (convtuned --max-execute-bytes)")));
  }
  const Direction dir = p->direction;
  struct Role {
    const char* name;
    const std::string& bytes;
    int64_t expected;
    bool input;
  };
  const Role roles[3] = {
      {"x", req->x(), p->x_bytes(), dir != Direction::kBackwardData},
      {"w", req->w(), p->w_bytes(), dir != Direction::kBackwardWeights},
      {"y", req->y(), p->y_bytes(), dir != Direction::kForward},
  };
  for (const Role& r : roles) {
    const int64_t got = static_cast<int64_t>(r.bytes.size());
    if ((r.input || got != 0) && got != r.expected) {
      return Finish(ctx, absl::InvalidArgumentError(absl::StrCat(
                             r.name, ": expected ", r.expected, " bytes for this problem, got ",
                             got)));
    }
  }
  absl::StatusOr<v1::ExecutionPlan> plan = engine_.Plan(*p, req->solver_id(), {});
  if (!plan.ok()) return Finish(ctx, plan.status());
  auto tensors = std::make_shared<FindEngine::HostRun>();
  tensors->x = req->x();
  tensors->w = req->w();
  tensors->y = req->y();
  tensors->x.resize(p->x_bytes());
  tensors->w.resize(p->w_bytes());
  tensors->y.resize(p->y_bytes());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  engine_.Execute(*std::move(plan), tensors,
                  [reactor, resp, tensors, dir](absl::StatusOr<double> ms) {
                    if (!ms.ok()) {
                      reactor->Finish(ToGrpcStatus(ms.status()));
                      return;
                    }
                    std::string& out = dir == Direction::kForward         ? tensors->y
                                       : dir == Direction::kBackwardData ? tensors->x
                                                                          : tensors->w;
                    resp->set_output(std::move(out));
                    resp->set_time_ms(*ms);
                    reactor->Finish(grpc::Status::OK);
                  });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::DbStats(grpc::CallbackServerContext* ctx,
                                                   const v1::DbStatsRequest* req,
                                                   v1::DbStatsResponse* resp) {
  absl::StatusOr<storage::StoreStats> stats = storage::ComputeStats(&store_);
  if (!stats.ok()) return Finish(ctx, stats.status());
  resp->set_device_key(engine_.device_key());
  resp->set_path(store_.path());
  for (storage::Column c : storage::kAllColumns) {
    auto it = stats->per_column.find(c);
    (*resp->mutable_records())[std::string(storage::ColumnName(c))] =
        it == stats->per_column.end() ? 0 : it->second;
  }
  for (const auto& [device, count] : stats->find_per_device) {
    (*resp->mutable_find_records_per_device())[device] = count;
  }
  if (const SystemFindDb* system = engine_.system_db(); system != nullptr) {
    v1::SystemDbStats* out = resp->mutable_system_db();
    out->set_path(system->path());
    out->set_records(system->size());
    out->set_source_device_key(system->source_device_key());
    out->set_exact(system->exact());
  }
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::DbExport(grpc::CallbackServerContext* ctx,
                                                    const v1::DbExportRequest* req,
                                                    v1::DbExportResponse* resp) {
  storage::ExportOptions options;
  if (req->system()) options.system_device_key = engine_.device_key();
  int64_t entries = 0;
  absl::StatusOr<std::string> file = storage::ExportStore(store_, options, &entries);
  if (!file.ok()) return Finish(ctx, file.status());
  resp->set_device_key(engine_.device_key());
  resp->set_entries(entries);
  resp->set_file(*std::move(file));
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::DbImport(grpc::CallbackServerContext* ctx,
                                                    const v1::DbImportRequest* req,
                                                    v1::DbImportResponse* resp) {
  storage::ImportOptions options;
  options.overwrite = req->overwrite();
  absl::StatusOr<storage::ImportStats> stats = storage::ImportStore(store_, req->file(), options);
  if (!stats.ok()) return Finish(ctx, WithField("file", stats.status()));
  resp->set_imported(stats->imported);
  resp->set_unchanged(stats->unchanged);
  resp->set_conflicting(stats->conflicting);
  resp->set_invalid(stats->invalid);
  resp->set_overwritten(stats->overwritten);
  resp->set_skipped(stats->unchanged + stats->conflicting + stats->invalid);
  return Finish(ctx, absl::OkStatus());
}

namespace {

int64_t LimitOf(bool has, int64_t limit) { return has && limit >= 0 ? limit : -1; }

}  // namespace

grpc::ServerUnaryReactor* ConvTuneService::GetSolutions(grpc::CallbackServerContext* ctx,
                                                        const v1::GetSolutionsRequest* req,
                                                        v1::GetSolutionsResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  if (req->max_count() < 0) {
    return Finish(ctx, absl::InvalidArgumentError(
                           absl::StrCat("max_count: must be >= 0, got ", req->max_count())));
  }
  absl::StatusOr<Solutions> s =
      engine_.GetSolutions(*p, LimitOf(req->has_workspace_limit(), req->workspace_limit()));
  if (!s.ok()) return Finish(ctx, s.status());
  for (const v1::PerfResult& r : s->results) {
    if (req->max_count() > 0 && resp->solutions_size() >= req->max_count()) break;
    v1::Solution* out = resp->add_solutions();
    out->set_solution_id(r.solver_id());
    out->set_solver_name(r.solver_name());
    out->set_algorithm(r.algorithm());
    out->set_time_ms(r.time_ms());
    out->set_workspace_bytes(r.workspace_bytes());
    out->set_measured(r.measured());
  }
  resp->set_source(s->source);
  resp->set_fallback_reason(s->fallback_reason);
  resp->set_device_key(engine_.device_key());
  resp->set_problem_key(ProblemKey(*p));
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::GetSolutionWorkspaceSize(
    grpc::CallbackServerContext* ctx, const v1::SolutionRequest* req,
    v1::WorkspaceSizeResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  absl::StatusOr<v1::ExecutionPlan> plan =
      engine_.Plan(*p, static_cast<uint32_t>(req->solution_id()), {});
  if (!plan.ok()) return Finish(ctx, plan.status());
  resp->set_workspace_bytes(plan->workspace_bytes());
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::CompileSolution(grpc::CallbackServerContext* ctx,
                                                           const v1::SolutionRequest* req,
                                                           v1::CompileSolutionResponse* resp) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(req->problem(), options_.limits);
  if (!p.ok()) return Finish(ctx, WithField("problem", p.status()));
  absl::StatusOr<v1::ExecutionPlan> plan =
      engine_.Plan(*p, static_cast<uint32_t>(req->solution_id()), {});
  if (!plan.ok()) return Finish(ctx, plan.status());
  // CPU plans name built-in kernels: nothing to compile.
  *resp->mutable_plan() = *std::move(plan);
  resp->set_compiled(0);
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ConvTuneService::TrainHeuristic(grpc::CallbackServerContext* ctx,
                                                          const v1::TrainHeuristicRequest* req,
                                                          v1::TrainHeuristicResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const std::string device_key = engine_.device_key();
  engine_.TrainHeuristics([reactor, resp, device_key](absl::StatusOr<TrainReport> report) {
    if (!report.ok()) {
      reactor->Finish(ToGrpcStatus(report.status()));
      return;
    }
    resp->set_records(report->records);
    resp->set_train_accuracy(report->train_accuracy);
    resp->set_device_key(device_key);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ConvTuneService::GetCodeObject(grpc::CallbackServerContext* ctx,
                                                         const v1::GetCodeObjectRequest* req,
                                                         v1::GetCodeObjectResponse* resp) {
  if (req->hash().empty()) return Finish(ctx, absl::InvalidArgumentError("hash: empty"));
  storage::KernelCache cache(&store_);
  absl::StatusOr<v1::KernelCacheRecord> r = cache.Get(req->hash());
  if (!r.ok()) return Finish(ctx, WithField("hash", r.status()));
  resp->set_code_object(r->code_object());
  resp->set_backend(r->backend());
  resp->set_arch(r->arch());
  return Finish(ctx, absl::OkStatus());
}

}  // namespace convtune
