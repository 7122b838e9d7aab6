// All solvers known to this build, by stable id. Built once; read-only after,
// so thread-safe.
#ifndef CONVTUNE_SERVER_SOLVER_REGISTRY_H_
#define CONVTUNE_SERVER_SOLVER_REGISTRY_H_

#include <memory>
#include <vector>

#include "kernels/device.h"
#include "server/solver.h"

namespace convtune {

class SolverRegistry {
 public:
  // The registry of every built-in solver.
  static const SolverRegistry& Default();

  // The built-in solvers and the library solvers of `device` (oneDNN on the
  // CPU, cuDNN on CUDA), which must outlive the registry, and `extra`.
  static std::unique_ptr<SolverRegistry> WithLibraries(
      Device& device, std::vector<std::unique_ptr<Solver>> extra = {});

  explicit SolverRegistry(std::vector<std::unique_ptr<Solver>> solvers);
  // The solvers of `base`, which must outlive this, and `extra`.
  SolverRegistry(const SolverRegistry& base,
                 std::vector<std::unique_ptr<Solver>> extra);

  // nullptr if no solver has that id.
  const Solver* Find(uint32_t id) const;
  // Solvers of one backend, in id order (GPU solvers count for CUDA and HIP).
  std::vector<const Solver*> ForBackend(v1::Backend backend) const;
  // Solvers that run on this device, in id order.
  std::vector<const Solver*> ForDevice(const DeviceInfo& device) const;
  // Whether `s` runs on this device.
  static bool Runs(const Solver& s, const DeviceInfo& device);
  // Every solver, in id order.
  const std::vector<const Solver*>& all() const { return solvers_; }

 private:
  // Aborts when two solvers share an id.
  void SortAndCheck();

  std::vector<std::unique_ptr<Solver>> owned_;
  std::vector<const Solver*> solvers_;  // sorted by id
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVER_REGISTRY_H_
