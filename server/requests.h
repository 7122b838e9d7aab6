// The service's requests turned into engine parameters, and the engine's
// answers into responses, without gRPC: every field from the wire is checked
// here, and each error names its field. The service edge (service.h) only
// moves these between the transport and the engine. Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_REQUESTS_H_
#define CONVTUNE_SERVER_REQUESTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/vocabulary.h"
#include "convtune/v1/service.pb.h"
#include "kernels/problem.h"
#include "server/find_outcome.h"
#include "server/heuristics/heuristics.h"
#include "server/planner.h"
#include "server/remote_execute.h"
#include "server/system_db.h"
#include "server/tenant_limits.h"
#include "server/tuner.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {

struct ServiceOptions {
  ProblemLimits limits;
  // The mode of a find that names none.
  v1::FindMode default_mode = kDefaultFindMode;
  // Largest total of inline tensors an Execute request may carry.
  int64_t max_execute_bytes = int64_t{64} << 20;
  // What one tenant's Executes may hold at once.
  ExecuteLimiter::Limits tenant_executes;
  // Fills what GetStatus reports beyond the core (version, backend, queues,
  // calls in flight). Optional.
  std::function<void(v1::GetStatusResponse*)> status;
};

// The problem of a request, validated; errors name "problem.<field>".
absl::StatusOr<ConvProblem> ProblemFrom(const v1::ConvProblem& wire,
                                        const ProblemLimits& limits);
// An optional workspace limit: absent or negative means none (-1).
int64_t WorkspaceLimitFrom(bool has_limit, int64_t limit);

// Find: the problem and the find's parameters (the daemon's default mode
// when the request names none). InvalidArgument naming problem.*,
// request_count or mode.
struct FindInput {
  ConvProblem problem;
  FindParams params;  // params.device: the request's tune_on_device
  int32_t request_count = 0;
  std::optional<int> client_device;  // the device the caller runs on
};
// An optional device ordinal of a request: unset when absent,
// InvalidArgument naming `field` when negative.
absl::StatusOr<std::optional<int>> OrdinalFrom(absl::string_view field,
                                               bool has, int32_t value);

absl::StatusOr<FindInput> FindInputFrom(const v1::FindRequest& req,
                                        const ServiceOptions& options);
void FillFindResponse(const FindOutcome& outcome, const FindInput& in,
                      const std::string& device_key, v1::FindResponse* resp);

// A progress event of a FindStream call; `elapsed_s` since the find began.
void FillFindProgress(const TuneProgress& progress, double elapsed_s,
                      v1::FindProgress* out);

// Prefill: the problems, each checked (errors name problems[i].<field>),
// at most kMaxPrefillProblems of them.
inline constexpr int kMaxPrefillProblems = 10000;
struct PrefillInput {
  std::vector<ConvProblem> problems;
  int64_t workspace_limit = -1;
};
absl::StatusOr<PrefillInput> PrefillInputFrom(const v1::PrefillRequest& req,
                                              const ServiceOptions& options);

// Tenants' usage for GetStatus.
void FillTenantUsage(const std::string& tenant,
                     const TuningQuotas::Usage& usage,
                     const TuningQuotas::Limits& limits,
                     std::pair<int, int64_t> executes, v1::TenantUsage* out);

// Execute: the problem, the solver and the tensors, each checked against
// the problem's sizes and the inline limit. InvalidArgument naming the
// tensor; ResourceExhausted over the limit.
struct ExecuteInput {
  ConvProblem problem;
  uint32_t solver_id = 0;
  std::shared_ptr<InlineTensors> tensors;
  std::optional<int> device;  // unset: the daemon's first
};
absl::StatusOr<ExecuteInput> ExecuteInputFrom(const v1::ExecuteRequest& req,
                                              const ServiceOptions& options);
void FillExecuteResponse(ExecuteInput& in, double ms,
                         v1::ExecuteResponse* resp);

// GetSolutions: InvalidArgument naming problem.* or max_count.
struct SolutionsInput {
  ConvProblem problem;
  int64_t workspace_limit = -1;
  int32_t max_count = 0;
  std::optional<bool> background_tune;  // absent: the daemon's default
};
absl::StatusOr<SolutionsInput> SolutionsInputFrom(
    const v1::GetSolutionsRequest& req, const ServiceOptions& options);
// Results whose algorithm family has no name here are left out.
void FillSolutionsResponse(const Solutions& s, const SolutionsInput& in,
                           const std::string& device_key,
                           v1::GetSolutionsResponse* resp);

// The solver id of an immediate-mode solution id. NotFound for an id no
// solver can have.
absl::StatusOr<uint32_t> SolverIdFrom(uint64_t solution_id);

// A solver's plan as GetPlan asks for it: the solver and perf config.
PerfConfig PerfConfigFrom(const v1::GetPlanRequest& req);

void FillSolversResponse(const std::vector<SolverReport>& reports,
                         bool with_problem, const std::string& device_key,
                         v1::ListSolversResponse* resp);
void FillDbStatsResponse(const storage::StoreStats& stats,
                         const std::string& path, const SystemFindDb* system_db,
                         const std::string& device_key,
                         v1::DbStatsResponse* resp);
void FillImportResponse(const storage::ImportStats& stats,
                        v1::DbImportResponse* resp);
void FillTrainResponse(const TrainReport& report, const std::string& device_key,
                       v1::TrainHeuristicResponse* resp);
// GetCodeObject: InvalidArgument for an empty hash.
absl::Status CheckCodeObjectRequest(const v1::GetCodeObjectRequest& req);
// DataLoss when the cached record names a backend this build does not know.
absl::Status FillCodeObjectResponse(const v1::KernelCacheRecord& record,
                                    v1::GetCodeObjectResponse* resp);

// `s` with its message prefixed by "<field>." (OK stays OK).
absl::Status WithField(absl::string_view field, const absl::Status& s);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_REQUESTS_H_
