#include "server/heuristics/heuristics.h"

namespace convtune {

Heuristics::Heuristics(storage::Store& store, const SolverRegistry& registry,
                       const DeviceInfo& device)
    : store_(store), registry_(registry), device_key_(device.Key()), wti_(device) {}

Heuristics::~Heuristics() = default;

Ranking Heuristics::Rank(const ConvProblem& p, const std::vector<const Solver*>& candidates) const {
  Ranking r;
  r.estimates = wti_.Rank(p, candidates);
  r.source = std::string(wti_.name());
  r.fallback_reason = "no learned model for " + device_key_;
  return r;
}

}  // namespace convtune
