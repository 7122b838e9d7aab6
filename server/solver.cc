#include "server/solver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/problem_proto.h"

namespace convtune {

absl::string_view AlgorithmName(AlgorithmFamily family) {
  switch (family) {
    case AlgorithmFamily::kDirect: return "direct";
    case AlgorithmFamily::kGemm: return "gemm";
    case AlgorithmFamily::kWinograd: return "winograd";
    case AlgorithmFamily::kFft: return "fft";
    case AlgorithmFamily::kImplicitGemm: return "implicit_gemm";
  }
  return "?";
}

std::string PerfConfigString(const PerfConfig& config) { return absl::StrJoin(config, ","); }

absl::Status Solver::ValidateConfig(const ConvProblem& p, const PerfConfig& config) const {
  const std::vector<PerfConfig> space = ConfigSpace(p);
  if (std::find(space.begin(), space.end(), config) != space.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("perf_config: [", PerfConfigString(config),
                                                 "] is not a config of solver ", name()));
}

v1::ExecutionPlan Solver::NewPlan(const ConvProblem& p, const PerfConfig& config) const {
  v1::ExecutionPlan plan;
  plan.set_backend(std::string(backend()));
  plan.set_solver_id(id());
  ProblemToProto(p, plan.mutable_problem());
  for (int64_t v : config) plan.add_perf_config(v);
  plan.set_workspace_bytes(WorkspaceBytes(p));
  return plan;
}

}  // namespace convtune
