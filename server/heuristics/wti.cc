#include "server/heuristics/wti.h"

#include <algorithm>

namespace convtune {

namespace {

// A fixed cost per call (dispatch, thread wake-up), so tiny problems do not
// rank by arithmetic alone.
constexpr double kCallOverheadMs = 0.005;

}  // namespace

WtiEstimator::WtiEstimator(const DeviceInfo& device)
    : peak_flops_per_ms_(std::max(1.0, device.peak_gflops) * 1e6),
      bytes_per_ms_(std::max(0.1, device.memory_gbps) * 1e6) {}

double WtiEstimator::EstimateMs(const Solver& s, const ConvProblem& p) const {
  const double efficiency = std::clamp(s.Efficiency(p), 1e-4, 1.0);
  const double compute =
      s.EstimatedFlops(p) / (peak_flops_per_ms_ * efficiency);
  const double memory = s.EstimatedBytes(p) / bytes_per_ms_;
  return std::max(compute, memory) + kCallOverheadMs;
}

std::vector<Estimate> WtiEstimator::Rank(
    const ConvProblem& p, const std::vector<const Solver*>& candidates) const {
  std::vector<Estimate> out;
  out.reserve(candidates.size());
  for (const Solver* s : candidates) out.push_back({s, EstimateMs(*s, p)});
  std::stable_sort(out.begin(), out.end(),
                   [](const Estimate& a, const Estimate& b) {
                     return a.time_ms < b.time_ms;
                   });
  return out;
}

}  // namespace convtune
