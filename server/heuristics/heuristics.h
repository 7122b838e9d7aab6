// The immediate-mode fallback of one device: the learned model when it
// applies, else the weighted-throughput estimate. Says which it used and why.
// Thread-safe.
#ifndef CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_
#define CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "server/heuristics/ranker.h"
#include "server/heuristics/wti.h"
#include "server/solver_registry.h"
#include "storage/store.h"

namespace convtune {

struct Ranking {
  std::vector<Estimate> estimates;  // fastest first
  std::string source;               // "heuristic" or "estimate"
  std::string fallback_reason;      // why the learned model was not used
};

class Heuristics {
 public:
  Heuristics(storage::Store& store, const SolverRegistry& registry, const DeviceInfo& device);
  ~Heuristics();

  // Ranks `candidates` (each applicable to p).
  Ranking Rank(const ConvProblem& p, const std::vector<const Solver*>& candidates) const;

  const WtiEstimator& wti() const { return wti_; }

 private:
  storage::Store& store_;
  const SolverRegistry& registry_;
  const std::string device_key_;
  WtiEstimator wti_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_
