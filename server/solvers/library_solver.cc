#include "server/solvers/library_solver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace convtune {
namespace {

class LibrarySolver final : public Solver {
 public:
  LibrarySolver(ConvLibrary* library, LibraryMethod method, v1::Backend backend)
      : library_(library), method_(std::move(method)), backend_(backend) {}

  uint32_t id() const override { return method_.solver_id; }
  absl::string_view name() const override { return method_.name; }
  v1::AlgorithmFamily family() const override { return method_.family; }
  v1::Backend backend() const override { return backend_; }
  bool dynamic() const override { return true; }
  std::string library() const override { return library_->version(); }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    return library_->Configs(id(), p).status();
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return ConfigWorkspaceBytes(p, DefaultConfig(p));
  }
  bool workspace_depends_on_config() const override { return true; }
  int64_t ConfigWorkspaceBytes(const ConvProblem& p,
                               const PerfConfig& config) const override {
    absl::StatusOr<LibraryStep> step = library_->Step(id(), p, config);
    return step.ok() ? step->workspace_bytes : 0;
  }

  PerfConfig DefaultConfig(const ConvProblem& p) const override {
    auto configs = library_->Configs(id(), p);
    return configs.ok() && !configs->empty() ? configs->front() : PerfConfig{};
  }
  std::vector<PerfConfig> ConfigSpace(const ConvProblem& p) const override {
    auto configs = library_->Configs(id(), p);
    return configs.ok() ? *std::move(configs) : std::vector<PerfConfig>{};
  }
  std::vector<PerfConfig> FindConfigs(const ConvProblem& p) const override {
    std::vector<PerfConfig> configs = ConfigSpace(p);
    if (configs.size() > kLibraryFindConfigs) {
      configs.resize(kLibraryFindConfigs);
    }
    return configs;
  }
  absl::Status ValidateConfig(const ConvProblem& p,
                              const PerfConfig& config) const override {
    const std::vector<PerfConfig> space = ConfigSpace(p);
    if (std::find(space.begin(), space.end(), config) == space.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("perf_config: {", PerfConfigString(config).substr(0, 64),
                       "} is not a config ", library_->version(), " offers (",
                       space.size(), " do)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    absl::StatusOr<LibraryStep> step = library_->Step(id(), p, config);
    if (!step.ok()) return step.status();
    v1::ExecutionPlan plan = NewPlan(p, config);
    plan.set_workspace_bytes(step->workspace_bytes);
    *plan.add_steps() = std::move(step->step);
    return plan;
  }

 private:
  ConvLibrary* const library_;
  const LibraryMethod method_;
  const v1::Backend backend_;
};

}  // namespace

std::vector<std::unique_ptr<Solver>> MakeLibrarySolvers(Device& device) {
  std::vector<std::unique_ptr<Solver>> out;
  for (ConvLibrary* library : device.conv_libraries()) {
    for (const LibraryMethod& m : library->methods()) {
      out.push_back(
          std::make_unique<LibrarySolver>(library, m, device.info().backend));
    }
  }
  return out;
}

}  // namespace convtune
