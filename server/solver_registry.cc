#include "server/solver_registry.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "server/solvers/cpu_solvers.h"
#include "server/solvers/gpu_solvers.h"
#include "server/solvers/library_solver.h"

namespace convtune {

const SolverRegistry& SolverRegistry::Default() {
  static const SolverRegistry* registry = [] {
    std::vector<std::unique_ptr<Solver>> all;
    for (auto& s : MakeCpuSolvers()) all.push_back(std::move(s));
    for (auto& s : MakeGpuSolvers()) all.push_back(std::move(s));
    return new SolverRegistry(std::move(all));
  }();
  return *registry;
}

std::unique_ptr<SolverRegistry> SolverRegistry::WithLibraries(
    Device& device, std::vector<std::unique_ptr<Solver>> extra) {
  for (auto& s : MakeLibrarySolvers(device)) extra.push_back(std::move(s));
  return std::make_unique<SolverRegistry>(Default(), std::move(extra));
}

SolverRegistry::SolverRegistry(std::vector<std::unique_ptr<Solver>> solvers)
    : owned_(std::move(solvers)) {
  for (const auto& s : owned_) solvers_.push_back(s.get());
  SortAndCheck();
}

SolverRegistry::SolverRegistry(const SolverRegistry& base,
                               std::vector<std::unique_ptr<Solver>> extra)
    : owned_(std::move(extra)), solvers_(base.solvers_) {
  for (const auto& s : owned_) solvers_.push_back(s.get());
  SortAndCheck();
}

void SolverRegistry::SortAndCheck() {
  std::sort(solvers_.begin(), solvers_.end(),
            [](const auto& a, const auto& b) { return a->id() < b->id(); });
  for (size_t i = 1; i < solvers_.size(); ++i) {
    if (solvers_[i]->id() == solvers_[i - 1]->id()) {
      // Two solvers with one id would corrupt every stored record: a build bug.
      std::cerr << "solver id " << solvers_[i]->id() << " is used twice\n";
      std::abort();
    }
  }
}

const Solver* SolverRegistry::Find(uint32_t id) const {
  auto it =
      std::lower_bound(solvers_.begin(), solvers_.end(), id,
                       [](const auto& s, uint32_t v) { return s->id() < v; });
  return it != solvers_.end() && (*it)->id() == id ? *it : nullptr;
}

namespace {

bool ForBackendOf(const Solver& s, v1::Backend backend) {
  return s.backend() == backend ||
         (s.backend() == v1::GPU &&
          (backend == v1::CUDA || backend == v1::HIP));
}

}  // namespace

std::vector<const Solver*> SolverRegistry::ForBackend(
    v1::Backend backend) const {
  std::vector<const Solver*> out;
  for (const auto& s : solvers_) {
    if (ForBackendOf(*s, backend)) out.push_back(s);
  }
  return out;
}

bool SolverRegistry::Runs(const Solver& s, const DeviceInfo& device) {
  return ForBackendOf(s, device.backend) && s.SupportsDevice(device);
}

std::vector<const Solver*> SolverRegistry::ForDevice(
    const DeviceInfo& device) const {
  std::vector<const Solver*> out;
  for (const auto& s : solvers_) {
    if (Runs(*s, device)) out.push_back(s);
  }
  return out;
}

}  // namespace convtune
