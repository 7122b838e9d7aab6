#include "server/solver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/problem_proto.h"

namespace convtune {

v1::PerfResult PerfResultOf(const Solver& s, const ConvProblem& p,
                            double time_ms, bool measured,
                            const PerfConfig& config) {
  v1::PerfResult r;
  r.set_solver_id(s.id());
  r.set_solver_name(std::string(s.name()));
  r.set_algorithm(std::string(AlgorithmName(s.family())));
  r.set_time_ms(time_ms);
  r.set_workspace_bytes(config.empty() ? s.WorkspaceBytes(p)
                                       : s.ConfigWorkspaceBytes(p, config));
  for (int64_t v : config) r.add_perf_config(v);
  r.set_measured(measured);
  r.set_library(s.library());
  return r;
}

std::string PerfConfigString(const PerfConfig& config) {
  return absl::StrJoin(config, ",");
}

absl::Status Solver::ValidateConfig(const ConvProblem& p,
                                    const PerfConfig& config) const {
  const std::vector<PerfConfig> space = ConfigSpace(p);
  if (std::find(space.begin(), space.end(), config) != space.end())
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("perf_config: [", PerfConfigString(config).substr(0, 64),
                   "] is not a config of solver ", name()));
}

double Solver::EstimatedFlops(const ConvProblem& p) const {
  return 2.0 * p.macs();
}

double Solver::EstimatedBytes(const ConvProblem& p) const {
  return static_cast<double>(p.x_bytes() + p.w_bytes() + p.y_bytes()) +
         2.0 * static_cast<double>(WorkspaceBytes(p));
}

double Solver::Efficiency(const ConvProblem& p) const {
  // Rough fractions of peak per family; solvers that know better override.
  switch (family()) {
    case v1::DIRECT:
      return 0.05;
    case v1::GEMM:
      return 0.5;
    case v1::WINOGRAD:
      return 0.35;
    case v1::FFT:
      return 0.3;
    case v1::IMPLICIT_GEMM:
      return 0.4;
  }
  return 0.1;
}

v1::ExecutionPlan Solver::NewPlan(const ConvProblem& p,
                                  const PerfConfig& config) const {
  v1::ExecutionPlan plan;
  plan.set_backend(backend());
  plan.set_solver_id(id());
  ProblemToProto(p, plan.mutable_problem());
  for (int64_t v : config) plan.add_perf_config(v);
  // `config` is one of the solver's (MakePlan validates it first), so an
  // empty one is a config of its own where workspaces differ by config.
  plan.set_workspace_bytes(workspace_depends_on_config()
                               ? ConfigWorkspaceBytes(p, config)
                               : WorkspaceBytes(p));
  return plan;
}

}  // namespace convtune
