// The Client's immediate-mode calls (solutions, workspace of a solution,
// compile, code objects, run), heuristic training and find-mode names.
#include <grpcpp/grpcpp.h>

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/status_macros.h"
#include "kernels/problem_proto.h"

namespace convtune {
namespace {

// Solution ids are solver ids, which are 32-bit on the wire of GetPlan: a
// larger id can name no solver, and the daemon must not see it truncated.
absl::Status CheckSolutionId(uint64_t solution_id) {
  if (solution_id > std::numeric_limits<uint32_t>::max()) {
    return absl::NotFoundError(absl::StrCat("solution_id: no solution ",
                                            solution_id,
                                            " (ids are solver ids, < 2^32)"));
  }
  return absl::OkStatus();
}

// Names the solution in the daemon's answer about it (which speaks of
// solvers), unless the answer is about reaching the daemon.
absl::Status AboutSolution(absl::Status status, uint64_t solution_id) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return absl::Status(status.code(), absl::StrCat("solution ", solution_id,
                                                      ": ", status.message()));
    default:
      return status;
  }
}

v1::SolutionRequest MakeSolutionRequest(const ConvProblem& problem,
                                        uint64_t solution_id,
                                        std::optional<int> device) {
  v1::SolutionRequest request;
  ProblemToProto(problem, request.mutable_problem());
  request.set_solution_id(solution_id);
  if (device.has_value()) request.set_device(*device);
  return request;
}

}  // namespace

absl::StatusOr<v1::GetSolutionsResponse> Client::GetSolutions(
    const ConvProblem& problem, int32_t max_count, int64_t workspace_limit,
    std::optional<bool> background_tune) {
  v1::GetSolutionsRequest request;
  ProblemToProto(problem, request.mutable_problem());
  request.set_max_count(max_count);
  if (workspace_limit >= 0) request.set_workspace_limit(workspace_limit);
  if (background_tune) request.set_background_tune(*background_tune);
  NameDevice(&request);
  v1::GetSolutionsResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->GetSolutions(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<int64_t> Client::GetSolutionWorkspaceSize(
    const ConvProblem& problem, uint64_t solution_id) {
  RETURN_IF_ERROR(CheckSolutionId(solution_id));
  const v1::SolutionRequest request =
      MakeSolutionRequest(problem, solution_id, options_.device_ordinal);
  v1::WorkspaceSizeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status =
      stub_->GetSolutionWorkspaceSize(&context, request, &response);
  if (!status.ok()) return AboutSolution(CallError(status), solution_id);
  return response.workspace_bytes();
}

absl::StatusOr<v1::CompileSolutionResponse> Client::CompileSolution(
    const ConvProblem& problem, uint64_t solution_id) {
  RETURN_IF_ERROR(CheckSolutionId(solution_id));
  RETURN_IF_ERROR(ValidateProblem(problem));
  const v1::SolutionRequest request =
      MakeSolutionRequest(problem, solution_id, options_.device_ordinal);
  v1::CompileSolutionResponse response;
  grpc::ClientContext context;
  // Compiling GPU kernels can take as long as a find.
  SetDeadline(&context, FindTimeout());
  {
    absl::MutexLock lock(&mu_);
    ++counters_.compile_rpcs;
  }
  grpc::Status status = stub_->CompileSolution(&context, request, &response);
  if (!status.ok()) return AboutSolution(CallError(status), solution_id);
  if (response.plan().solver_id() != solution_id) {
    return absl::InternalError(
        absl::StrCat("convtuned compiled solver ", response.plan().solver_id(),
                     " when asked for solution ", solution_id));
  }
  // Fetches the code objects now when this process can run the plan, so
  // that the first immediate run sends no RPC; Run reports it otherwise.
  if (absl::StatusOr<Device*> device = DeviceFor(response.plan().backend());
      device.ok()) {
    RETURN_IF_ERROR(LoadCodeObjects(response.plan(), **device));
  }
  absl::MutexLock lock(&mu_);
  // Never overwritten: Run reads a cached plan in place, unlocked. The
  // daemon's plan of a (problem, solution) does not change.
  plans_.try_emplace({ProblemKey(problem), static_cast<uint32_t>(solution_id)},
                     response.plan());
  return response;
}

absl::StatusOr<v1::GetCodeObjectResponse> Client::GetCodeObject(
    const std::string& hash) {
  if (hash.empty()) return absl::InvalidArgumentError("hash: empty");
  {
    absl::MutexLock lock(&mu_);
    auto it = code_objects_.find(hash);
    if (it != code_objects_.end()) {
      ++counters_.code_object_cache_hits;
      return it->second;
    }
    ++counters_.code_object_rpcs;
  }
  v1::GetCodeObjectRequest request;
  request.set_hash(hash);
  v1::GetCodeObjectResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->GetCodeObject(&context, request, &response);
  if (!status.ok()) return CallError(status);
  absl::MutexLock lock(&mu_);
  return code_objects_.emplace(hash, std::move(response)).first->second;
}

absl::Status Client::LoadCodeObjects(const v1::ExecutionPlan& plan,
                                     Device& device) {
  for (const v1::KernelStep& step : plan.steps()) {
    const std::string& hash = step.code_object_hash();
    if (hash.empty() || device.HasCodeObject(hash)) continue;
    ASSIGN_OR_RETURN(v1::GetCodeObjectResponse object, GetCodeObject(hash));
    RETURN_IF_ERROR(device.LoadCodeObject(hash, object.code_object()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::TrainHeuristicResponse> Client::TrainHeuristic() {
  v1::TrainHeuristicResponse response;
  grpc::ClientContext context;
  // Training reads every FindDb record of the device.
  SetDeadline(&context, FindTimeout());
  v1::TrainHeuristicRequest request;
  NameDevice(&request);
  grpc::Status status = stub_->TrainHeuristic(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::UnimplementedError(absl::StrCat(
        "convtuned at ", target_,
        " cannot train its heuristic (TrainHeuristic is not "
        "implemented there)",
        status.error_message().empty() ? "" : ": ", status.error_message()));
  }
  if (!status.ok()) return CallError(status);
  return response;
}

absl::Status Client::RunImmediate(const ConvProblem& problem,
                                  uint64_t solution_id,
                                  const PlanBuffers& buffers) {
  RETURN_IF_ERROR(CheckSolutionId(solution_id));
  absl::Status s = Run(problem, static_cast<uint32_t>(solution_id), buffers);
  // Workspace and buffer errors are the caller's, not the solution's.
  return s.code() == absl::StatusCode::kNotFound
             ? AboutSolution(std::move(s), solution_id)
             : s;
}

ClientCounters Client::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace convtune
