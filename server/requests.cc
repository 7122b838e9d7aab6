#include "server/requests.h"

#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "kernels/problem_proto.h"

namespace convtune {

absl::Status WithField(absl::string_view field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(field, ".", s.message()));
}

absl::StatusOr<ConvProblem> ProblemFrom(const v1::ConvProblem& wire,
                                        const ProblemLimits& limits) {
  absl::StatusOr<ConvProblem> p = ProblemFromProto(wire, limits);
  if (!p.ok()) return WithField("problem", p.status());
  return p;
}

int64_t WorkspaceLimitFrom(bool has_limit, int64_t limit) {
  return has_limit && limit >= 0 ? limit : -1;
}

absl::StatusOr<std::optional<int>> OrdinalFrom(absl::string_view field,
                                               bool has, int32_t value) {
  if (!has) return std::nullopt;
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be >= 0, got ", value));
  }
  return std::optional<int>(value);
}

absl::StatusOr<FindInput> FindInputFrom(const v1::FindRequest& req,
                                        const ServiceOptions& options) {
  FindInput in;
  absl::StatusOr<ConvProblem> p = ProblemFrom(req.problem(), options.limits);
  if (!p.ok()) return p.status();
  in.problem = *p;
  if (req.request_count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_count: must be >= 0, got ", req.request_count()));
  }
  in.request_count = req.request_count();
  in.params.workspace_limit =
      WorkspaceLimitFrom(req.has_workspace_limit(), req.workspace_limit());
  in.params.exhaustive = req.exhaustive();
  in.params.mode = options.default_mode;
  if (req.mode() != v1::FIND_MODE_UNSPECIFIED) {
    absl::StatusOr<v1::FindMode> mode = FindModeFromNumber(req.mode(), "mode");
    if (!mode.ok()) return mode.status();
    in.params.mode = *mode;
  }
  absl::StatusOr<std::optional<int>> device =
      OrdinalFrom("device", req.has_device(), req.device());
  if (!device.ok()) return device.status();
  in.client_device = *device;
  absl::StatusOr<std::optional<int>> tune_on = OrdinalFrom(
      "tune_on_device", req.has_tune_on_device(), req.tune_on_device());
  if (!tune_on.ok()) return tune_on.status();
  in.params.device = *tune_on;
  return in;
}

void FillFindResponse(const FindOutcome& outcome, const FindInput& in,
                      const std::string& device_key, v1::FindResponse* resp) {
  for (const v1::PerfResult& r : outcome.record.results()) {
    if (in.request_count > 0 && resp->results_size() >= in.request_count) break;
    *resp->add_results() = r;
  }
  resp->set_from_db(outcome.from_db);
  resp->set_mode(in.params.mode);
  resp->set_source(outcome.source);
  resp->set_device_key(device_key);
  resp->set_problem_key(outcome.record.problem_key());
  resp->set_not_stored(outcome.not_stored);
}

void FillFindProgress(const TuneProgress& progress, double elapsed_s,
                      v1::FindProgress* out) {
  out->set_problem_key(progress.problem_key);
  out->set_stage(StageName(progress.stage));
  out->set_solvers(progress.solvers);
  out->set_built(progress.built);
  out->set_timed(progress.timed);
  out->set_current_solver(progress.current);
  out->set_best_solver(progress.best);
  out->set_best_ms(progress.best_ms);
  out->set_elapsed_s(elapsed_s);
}

absl::StatusOr<PrefillInput> PrefillInputFrom(const v1::PrefillRequest& req,
                                              const ServiceOptions& options) {
  if (req.problems_size() == 0) {
    return absl::InvalidArgumentError("problems: none given");
  }
  if (req.problems_size() > kMaxPrefillProblems) {
    return absl::InvalidArgumentError(
        absl::StrCat("problems: ", req.problems_size(), " given, at most ",
                     kMaxPrefillProblems, " per call"));
  }
  PrefillInput in;
  in.workspace_limit =
      WorkspaceLimitFrom(req.has_workspace_limit(), req.workspace_limit());
  in.problems.reserve(req.problems_size());
  for (int i = 0; i < req.problems_size(); ++i) {
    absl::StatusOr<ConvProblem> p =
        ProblemFromProto(req.problems(i), options.limits);
    if (!p.ok())
      return WithField(absl::StrCat("problems[", i, "]"), p.status());
    in.problems.push_back(*p);
  }
  return in;
}

void FillTenantUsage(const std::string& tenant,
                     const TuningQuotas::Usage& usage,
                     const TuningQuotas::Limits& limits,
                     std::pair<int, int64_t> executes, v1::TenantUsage* out) {
  out->set_tenant(tenant);
  out->set_finds_waiting(usage.finds_waiting);
  out->set_background_jobs(usage.background);
  out->set_prefill_queued(usage.prefill_queued);
  out->set_prefill_done(usage.prefill_done);
  out->set_prefill_failed(usage.prefill_failed);
  out->set_device_seconds_last_minute(usage.device_seconds_last_minute);
  out->set_device_seconds_total(usage.device_seconds_total);
  out->set_executes_in_flight(executes.first);
  out->set_execute_bytes_in_flight(executes.second);
  out->set_limit_finds_waiting(limits.max_in_flight);
  out->set_limit_background_jobs(limits.max_queued);
  out->set_limit_device_seconds_per_minute(
      limits.max_benchmark_seconds_per_minute);
}

absl::StatusOr<ExecuteInput> ExecuteInputFrom(const v1::ExecuteRequest& req,
                                              const ServiceOptions& options) {
  absl::StatusOr<ConvProblem> p = ProblemFrom(req.problem(), options.limits);
  if (!p.ok()) return p.status();
  const int64_t total = p->x_bytes() + p->w_bytes() + p->y_bytes();
  if (total > options.max_execute_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the tensors of this problem take ", total,
        " bytes; inline execution is limited to ", options.max_execute_bytes,
        " bytes (convtuned --max-execute-bytes)"));
  }
  const std::string* wire[3] = {&req.x(), &req.w(), &req.y()};
  const Tensor out = p->output();
  ExecuteInput in;
  in.problem = *p;
  in.solver_id = req.solver_id();
  absl::StatusOr<std::optional<int>> device =
      OrdinalFrom("device", req.has_device(), req.device());
  if (!device.ok()) return device.status();
  in.device = *device;
  in.tensors = std::make_shared<InlineTensors>();
  for (Tensor t : kAllTensors) {
    const std::string& bytes = *wire[static_cast<int>(t)];
    const int64_t got = static_cast<int64_t>(bytes.size());
    const int64_t expected = p->bytes(t);
    // The output may be left out; an input never.
    if ((t != out || got != 0) && got != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(TensorName(t), ": expected ", expected,
                       " bytes for this problem, got ", got));
    }
    std::string& host = (*in.tensors)[t];
    host = bytes;
    host.resize(expected);
  }
  return in;
}

void FillExecuteResponse(ExecuteInput& in, double ms,
                         v1::ExecuteResponse* resp) {
  resp->set_output(std::move((*in.tensors)[in.problem.output()]));
  resp->set_time_ms(ms);
}

absl::StatusOr<SolutionsInput> SolutionsInputFrom(
    const v1::GetSolutionsRequest& req, const ServiceOptions& options) {
  absl::StatusOr<ConvProblem> p = ProblemFrom(req.problem(), options.limits);
  if (!p.ok()) return p.status();
  if (req.max_count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_count: must be >= 0, got ", req.max_count()));
  }
  return SolutionsInput{
      *p, WorkspaceLimitFrom(req.has_workspace_limit(), req.workspace_limit()),
      req.max_count(),
      req.has_background_tune() ? std::optional<bool>(req.background_tune())
                                : std::nullopt};
}

void FillSolutionsResponse(const Solutions& s, const SolutionsInput& in,
                           const std::string& device_key,
                           v1::GetSolutionsResponse* resp) {
  for (size_t i = 0; i < s.results.size(); ++i) {
    const v1::PerfResult& r = s.results[i];
    if (in.max_count > 0 && resp->solutions_size() >= in.max_count) break;
    absl::StatusOr<v1::AlgorithmFamily> family =
        ParseAlgorithm(r.algorithm(), "algorithm");
    // A result whose family has no name here (written by another tool)
    // cannot be described as a solution: it is left out.
    if (!family.ok()) continue;
    v1::Solution* out = resp->add_solutions();
    out->set_solution_id(r.solver_id());
    out->set_solver_name(r.solver_name());
    out->set_algorithm(*family);
    out->set_time_ms(r.time_ms());
    out->set_workspace_bytes(r.workspace_bytes());
    out->set_measured(r.measured());
    const AnswerQuality q =
        i < s.quality.size() ? s.quality[i] : AnswerQuality{};
    out->set_provenance(q.provenance);
    out->set_confidence(q.confidence);
  }
  if (resp->solutions_size() > 0) {
    resp->set_provenance(resp->solutions(0).provenance());
    resp->set_confidence(resp->solutions(0).confidence());
  }
  resp->set_source(s.source);
  resp->set_fallback_reason(s.fallback_reason);
  resp->set_tuning_queued(s.tuning_queued);
  resp->set_device_key(device_key);
  resp->set_problem_key(ProblemKey(in.problem));
}

absl::StatusOr<uint32_t> SolverIdFrom(uint64_t solution_id) {
  if (solution_id > std::numeric_limits<uint32_t>::max()) {
    return absl::NotFoundError(
        absl::StrCat("solution_id: no solver ", solution_id));
  }
  return static_cast<uint32_t>(solution_id);
}

PerfConfig PerfConfigFrom(const v1::GetPlanRequest& req) {
  return PerfConfig(req.perf_config().begin(), req.perf_config().end());
}

void FillSolversResponse(const std::vector<SolverReport>& reports,
                         bool with_problem, const std::string& device_key,
                         v1::ListSolversResponse* resp) {
  for (const SolverReport& r : reports) {
    v1::SolverInfo* info = resp->add_solvers();
    info->set_id(r.solver->id());
    info->set_name(std::string(r.solver->name()));
    info->set_algorithm(r.solver->family());
    info->set_dynamic(r.solver->dynamic());
    info->set_backend(r.solver->backend());
    info->set_library(r.solver->library());
    if (with_problem) {
      info->set_applicable(r.applicable.ok());
      info->set_not_applicable_reason(std::string(r.applicable.message()));
      info->set_workspace_bytes(r.workspace_bytes);
    }
  }
  resp->set_device_key(device_key);
}

void FillDbStatsResponse(const storage::StoreStats& stats,
                         const std::string& path, const SystemFindDb* system_db,
                         const std::string& device_key,
                         v1::DbStatsResponse* resp) {
  resp->set_device_key(device_key);
  resp->set_path(path);
  for (storage::Column c : storage::kAllColumns) {
    auto it = stats.per_column.find(c);
    (*resp->mutable_records())[std::string(storage::ColumnName(c))] =
        it == stats.per_column.end() ? 0 : it->second;
  }
  for (const auto& [device, count] : stats.find_per_device) {
    (*resp->mutable_find_records_per_device())[device] = count;
  }
  if (system_db != nullptr) {
    v1::SystemDbStats* out = resp->mutable_system_db();
    out->set_path(system_db->path());
    out->set_records(system_db->size());
    out->set_source_device_key(system_db->source_device_key());
    out->set_exact(system_db->exact());
  }
}

void FillImportResponse(const storage::ImportStats& stats,
                        v1::DbImportResponse* resp) {
  resp->set_imported(stats.imported);
  resp->set_unchanged(stats.unchanged);
  resp->set_conflicting(stats.conflicting);
  resp->set_invalid(stats.invalid);
  resp->set_overwritten(stats.overwritten);
  resp->set_refused(stats.refused);
  resp->set_first_refusal(stats.first_refusal);
  resp->set_skipped(stats.unchanged + stats.conflicting + stats.invalid +
                    stats.refused);
}

void FillTrainResponse(const TrainReport& report, const std::string& device_key,
                       v1::TrainHeuristicResponse* resp) {
  resp->set_records(report.records);
  resp->set_train_accuracy(report.train_accuracy);
  resp->set_device_key(device_key);
}

absl::Status CheckCodeObjectRequest(const v1::GetCodeObjectRequest& req) {
  if (req.hash().empty()) return absl::InvalidArgumentError("hash: empty");
  // Code-object hashes are 64 hex digits.
  if (req.hash().size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hash: ", req.hash().size(), " characters, expected at most 128"));
  }
  return absl::OkStatus();
}

absl::Status FillCodeObjectResponse(const v1::KernelCacheRecord& record,
                                    v1::GetCodeObjectResponse* resp) {
  absl::StatusOr<v1::Backend> backend =
      ParseBackend(record.backend(), "backend");
  if (!backend.ok()) {
    return absl::DataLossError(
        absl::StrCat("kernel cache record: ", backend.status().message()));
  }
  resp->set_code_object(record.code_object());
  resp->set_backend(*backend);
  resp->set_arch(record.arch());
  return absl::OkStatus();
}

}  // namespace convtune
