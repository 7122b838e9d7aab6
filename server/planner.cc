#include "server/planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/kill_point.h"
#include "common/status_macros.h"

namespace convtune {

std::string WithinWorkspace(int64_t limit) {
  return limit >= 0 ? absl::StrCat(" within a workspace of ", limit, " bytes")
                    : "";
}

Planner::Planner(const DeviceInfo& device, const SolverRegistry& registry,
                 storage::Store& store, const Quarantine& quarantine,
                 KernelBuilder* kernel_builder, ThreadPool& compile_pool)
    : device_(device),
      device_key_(device.Key()),
      registry_(registry),
      perf_db_(&store, device_key_),
      quarantine_(quarantine),
      kernel_builder_(kernel_builder),
      compile_pool_(compile_pool) {}

int64_t Planner::PlanWorkspace(const Solver& s, const ConvProblem& p) const {
  return s.workspace_depends_on_config()
             ? s.ConfigWorkspaceBytes(p, TunedOrDefault(s, p))
             : s.WorkspaceBytes(p);
}

bool Planner::AnyConfigFits(const Solver& s, const ConvProblem& p,
                            int64_t limit) const {
  if (PlanWorkspace(s, p) <= limit) return true;
  if (!s.workspace_depends_on_config()) return false;
  for (const PerfConfig& c : s.FindConfigs(p)) {
    if (s.ConfigWorkspaceBytes(p, c) <= limit) return true;
  }
  return false;
}

std::vector<const Solver*> Planner::Candidates(const ConvProblem& p,
                                               int64_t limit, bool dynamic_only,
                                               bool* over_limit) const {
  // The key is built only when something is quarantined at all: this runs
  // on every immediate-mode miss.
  const std::vector<uint32_t> quarantined =
      quarantine_.empty() ? std::vector<uint32_t>()
                          : quarantine_.For(ProblemKey(p));
  std::vector<const Solver*> out;
  for (const Solver* s : registry_.ForDevice(device_)) {
    if (!s->IsApplicable(p).ok()) continue;
    if (dynamic_only && !s->dynamic()) continue;
    if (std::find(quarantined.begin(), quarantined.end(), s->id()) !=
        quarantined.end()) {
      continue;
    }
    if (limit >= 0 && !AnyConfigFits(*s, p, limit)) {
      if (over_limit != nullptr) *over_limit = true;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

std::vector<SolverReport> Planner::Solvers(const ConvProblem* p) const {
  std::vector<SolverReport> out;
  for (const Solver* s : registry_.ForDevice(device_)) {
    SolverReport r;
    r.solver = s;
    if (p != nullptr) {
      r.applicable = s->IsApplicable(*p);
      if (r.applicable.ok()) r.workspace_bytes = s->WorkspaceBytes(*p);
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<const Solver*> Planner::Applicable(const ConvProblem& p,
                                                  uint32_t solver_id) const {
  const Solver* s = registry_.Find(solver_id);
  if (s == nullptr || !SolverRegistry::Runs(*s, device_)) {
    return absl::NotFoundError(absl::StrCat("solver_id: no solver ", solver_id,
                                            " on backend ",
                                            BackendName(device_.backend)));
  }
  RETURN_IF_ERROR(s->IsApplicable(p));
  return s;
}

PerfConfig Planner::TunedOrDefault(const Solver& s,
                                   const ConvProblem& p) const {
  absl::StatusOr<v1::PerfDbRecord> tuned = perf_db_.Get(ProblemKey(p), s.id());
  if (tuned.ok()) {
    PerfConfig c(tuned->perf_config().begin(), tuned->perf_config().end());
    if (s.ValidateConfig(p, c).ok()) return c;
  }
  return s.DefaultConfig(p);
}

std::vector<PerfConfig> Planner::FindConfigs(const Solver& s,
                                             const ConvProblem& p) const {
  absl::StatusOr<v1::PerfDbRecord> tuned = perf_db_.Get(ProblemKey(p), s.id());
  if (tuned.ok()) {
    PerfConfig c(tuned->perf_config().begin(), tuned->perf_config().end());
    if (s.ValidateConfig(p, c).ok()) return {c};
  }
  return s.FindConfigs(p);
}

absl::StatusOr<v1::ExecutionPlan> Planner::Plan(
    const ConvProblem& p, uint32_t solver_id, const PerfConfig& config) const {
  ASSIGN_OR_RETURN(const Solver* s, Applicable(p, solver_id));
  const PerfConfig chosen = config.empty() ? TunedOrDefault(*s, p) : config;
  RETURN_IF_ERROR(s->ValidateConfig(p, chosen));
  return Plan(*s, p, chosen);
}

absl::StatusOr<v1::ExecutionPlan> Planner::Plan(
    const Solver& s, const ConvProblem& p, const PerfConfig& config) const {
  ASSIGN_OR_RETURN(v1::ExecutionPlan plan, s.MakePlan(p, config));
  plan.set_backend(device_.backend);
  return plan;
}

absl::Status Planner::BuildKernels(v1::ExecutionPlan* plan,
                                   int* compiled) const {
  KillPoint("tune.build");
  if (compiled != nullptr) *compiled = 0;
  if (plan->sources_size() == 0) return absl::OkStatus();
  if (kernel_builder_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("solver ", plan->solver_id(), " needs GPU kernels; ",
                     device_key_, " compiles none"));
  }
  return kernel_builder_->BuildPlan(plan, compiled);
}

void Planner::Build(v1::ExecutionPlan plan,
                    std::function<void(absl::StatusOr<BuiltPlan>)> done) const {
  // A plan of built-in kernels has nothing to compile: answered at once.
  if (plan.sources_size() == 0) {
    done(BuiltPlan{std::move(plan), 0});
    return;
  }
  compile_pool_.Schedule(
      [this, plan = std::move(plan), done = std::move(done)]() mutable {
        BuiltPlan built{std::move(plan), 0};
        absl::Status s = BuildKernels(&built.plan, &built.compiled);
        if (!s.ok()) {
          done(s);
          return;
        }
        done(std::move(built));
      });
}

}  // namespace convtune
