// The solver interface. A solver is stateless: for a problem it says whether it
// applies (and which constraint fails if not), how much workspace it needs,
// which perf configs it has, and builds the execution plan. Solvers neither
// compile nor time. All methods are const and thread-safe.
#ifndef CONVTUNE_SERVER_SOLVER_H_
#define CONVTUNE_SERVER_SOLVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/vocabulary.h"
#include "convtune/v1/plan.pb.h"
#include "convtune/v1/records.pb.h"
#include "kernels/device.h"
#include "kernels/problem.h"

namespace convtune {

// A point in a solver's tuning space; the solver gives the values meaning.
using PerfConfig = std::vector<int64_t>;
std::string PerfConfigString(const PerfConfig& config);  // "4,8,16"

class Solver;

// A result line of `s` for p: its name, family and workspace, and a time that
// was measured or estimated.
v1::PerfResult PerfResultOf(const Solver& s, const ConvProblem& p,
                            double time_ms, bool measured,
                            const PerfConfig& config = {});

class Solver {
 public:
  virtual ~Solver() = default;

  // Stable across releases; never reused for another solver.
  virtual uint32_t id() const = 0;
  virtual absl::string_view name() const = 0;
  virtual v1::AlgorithmFamily family() const = 0;
  // CPU, or GPU for solvers whose kernels build for CUDA and HIP alike.
  virtual v1::Backend backend() const = 0;
  // True when problem sizes are kernel arguments (nothing compiled per size).
  virtual bool dynamic() const = 0;
  // Where the solver's code comes from: empty for convtune's own kernels, the
  // vendor library and its version ("cudnn9.19.0") for a library solver.
  virtual std::string library() const { return ""; }

  // False when the solver cannot run on this device at all (an arch without
  // the instructions it needs). Default: true.
  virtual bool SupportsDevice(const DeviceInfo& device) const { return true; }

  // OK, or FailedPrecondition naming the constraint that fails.
  // REQUIRES: ValidateProblem(p).ok().
  virtual absl::Status IsApplicable(const ConvProblem& p) const = 0;

  // REQUIRES: IsApplicable(p).ok().
  virtual int64_t WorkspaceBytes(const ConvProblem& p) const = 0;
  // Whether configs differ in workspace; a solver that says so overrides
  // ConfigWorkspaceBytes. Default: false.
  virtual bool workspace_depends_on_config() const { return false; }
  // The workspace of one config. Default: WorkspaceBytes(p).
  // REQUIRES: ValidateConfig(p, config).ok().
  virtual int64_t ConfigWorkspaceBytes(const ConvProblem& p,
                                       const PerfConfig& config) const {
    return WorkspaceBytes(p);
  }

  virtual PerfConfig DefaultConfig(const ConvProblem& p) const { return {}; }
  // Every config worth trying, the default among them.
  virtual std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const {
    return {DefaultConfig(p)};
  }
  // The configs a find times when it does not search the config space (and
  // the PerfDb holds none for p). Default: the default config alone.
  virtual std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const {
    return {DefaultConfig(p)};
  }
  // InvalidArgument if `config` is not one this solver can run for p.
  virtual absl::Status ValidateConfig(const ConvProblem& p,
                                      const PerfConfig& config) const;

  // REQUIRES: IsApplicable(p).ok() and ValidateConfig(p, config).ok().
  virtual absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const = 0;

  // The weighted-throughput estimate's inputs. Floating-point operations the
  // solver performs (default: 2 per multiply-accumulate), bytes it moves
  // (default: the three tensors plus twice the workspace), and the fraction of
  // the device's peak it reaches on p (default: by algorithm family).
  virtual double EstimatedFlops(const ConvProblem& p) const;
  virtual double EstimatedBytes(const ConvProblem& p) const;
  virtual double Efficiency(const ConvProblem& p) const;
  // The separate passes (kernel launches, parallel regions) one run makes,
  // each with a fixed cost (default 1).
  virtual int64_t Dispatches(const ConvProblem& p) const { return 1; }

 protected:
  // Fills the plan header (backend, solver id, problem, config, workspace).
  v1::ExecutionPlan NewPlan(const ConvProblem& p,
                            const PerfConfig& config) const;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVER_H_
