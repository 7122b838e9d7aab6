// Plans, in two parts. The cheap part: which solvers apply to a problem
// (within a workspace limit, quarantined ones left out), the config a plan
// uses, and the execution plan of (solver, config) with its steps and
// workspace, none of which compiles anything. The kernel build: compiling a
// plan's sources through the kernel cache, which can take seconds and so runs
// on the compile pool only. Thread-safe.
#ifndef CONVTUNE_SERVER_PLANNER_H_
#define CONVTUNE_SERVER_PLANNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/kernel_builder.h"
#include "server/quarantine.h"
#include "server/solver_registry.h"
#include "server/thread_pool.h"
#include "storage/records.h"

namespace convtune {

// " within a workspace of N bytes" for a limit, "" for none (negative): the
// tail of the messages that say no solver applies.
std::string WithinWorkspace(int64_t workspace_limit);

struct SolverReport {
  const Solver* solver = nullptr;
  absl::Status applicable;
  int64_t workspace_bytes = 0;
};

// A plan whose kernels are built, and how many of them this build compiled
// (0 when every one was in the kernel cache).
struct BuiltPlan {
  v1::ExecutionPlan plan;
  int compiled = 0;
};

class Planner {
 public:
  // References must outlive the planner. `kernel_builder` compiles the
  // sources of GPU plans; null on the CPU. Builds run on `compile_pool`.
  Planner(const DeviceInfo& device, const SolverRegistry& registry,
          storage::Store& store, const Quarantine& quarantine,
          KernelBuilder* kernel_builder, ThreadPool& compile_pool);

  // The solvers that run on this device and apply to p (dynamic ones only,
  // if asked), not quarantined for p, with a config within the workspace
  // limit (negative: none; see AnyConfigFits). *over_limit (may be null) is set
  // when the limit left one out.
  std::vector<const Solver*> Candidates(const ConvProblem& p,
                                        int64_t workspace_limit,
                                        bool dynamic_only,
                                        bool* over_limit) const;
  // The workspace of the plan Plan(p, s.id(), {}) builds: the tuned (or
  // default) config's, read from the PerfDb only where configs differ in it.
  int64_t PlanWorkspace(const Solver& s, const ConvProblem& p) const;
  // Whether the tuned (or default) config of `s`, or one a find would time,
  // needs at most `limit` bytes of workspace.
  bool AnyConfigFits(const Solver& s, const ConvProblem& p,
                     int64_t limit) const;
  // Every solver of this device's backend with its applicability to p (none
  // checked when p is null).
  std::vector<SolverReport> Solvers(const ConvProblem* p) const;

  // Solver `solver_id` when it runs here and applies to p. NotFound for a
  // solver this device does not have, FailedPrecondition naming the failed
  // constraint.
  absl::StatusOr<const Solver*> Applicable(const ConvProblem& p,
                                           uint32_t solver_id) const;
  // The PerfDb's tuned config of `s` for p while it is still valid, else
  // the solver's default.
  PerfConfig TunedOrDefault(const Solver& s, const ConvProblem& p) const;
  // What a find that does not search times: the tuned config while it is
  // valid, else the solver's FindConfigs (the default alone for most; the
  // configs a vendor library suggests for a library solver).
  std::vector<PerfConfig> FindConfigs(const Solver& s,
                                      const ConvProblem& p) const;

  // The plan of `solver_id` for p without its kernels built: `config` if
  // given, else TunedOrDefault. Never compiles. Errors as Applicable, and
  // InvalidArgument for a bad config.
  absl::StatusOr<v1::ExecutionPlan> Plan(const ConvProblem& p,
                                         uint32_t solver_id,
                                         const PerfConfig& config) const;
  // The plan of an applicable solver for a valid config, its backend set to
  // this device's (a GPU solver's plan runs on the device's GPU backend).
  absl::StatusOr<v1::ExecutionPlan> Plan(const Solver& s, const ConvProblem& p,
                                         const PerfConfig& config) const;

  // Compiles (or finds) the plan's kernels and stamps its steps with their
  // code objects; sets *compiled (may be null) to the kernels this call
  // compiled. Nothing to do for a plan without sources. FailedPrecondition
  // when the plan needs kernels and this device compiles none; the kernel
  // builder's errors. May block for seconds: call it on the compile pool.
  absl::Status BuildKernels(v1::ExecutionPlan* plan,
                            int* compiled = nullptr) const;
  // BuildKernels on the compile pool; `done` runs there, or at once on the
  // caller's thread when the plan has no sources.
  void Build(v1::ExecutionPlan plan,
             std::function<void(absl::StatusOr<BuiltPlan>)> done) const;

 private:
  const DeviceInfo& device_;
  const std::string device_key_;
  const SolverRegistry& registry_;
  mutable storage::PerfDb perf_db_;
  const Quarantine& quarantine_;
  KernelBuilder* const kernel_builder_;
  ThreadPool& compile_pool_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_PLANNER_H_
