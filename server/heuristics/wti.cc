#include "server/heuristics/wti.h"

#include <algorithm>
#include <cstdint>

namespace convtune {

namespace {

// A fixed cost per call (dispatch, thread wake-up), so tiny problems do not
// rank by arithmetic alone.
constexpr double kCallOverheadMs = 0.005;
// What each further pass of a run costs: a launch on a GPU, waking the
// worker threads on the CPU.
constexpr double kGpuDispatchMs = 0.005;
constexpr double kCpuDispatchMs = 0.02;

// The share of a tiled loop's work that is useful when `extent` is cut into
// tiles of `tile`.
double Fill(int64_t extent, int64_t tile) {
  const int64_t tiles = (std::max<int64_t>(extent, 1) + tile - 1) / tile;
  return static_cast<double>(std::max<int64_t>(extent, 1)) /
         static_cast<double>(tiles * tile);
}

// GEMM-shaped algorithms run one GEMM per group; tiles of a narrow or short
// per-group GEMM are mostly padding (a depthwise layer's is 1 wide).
double TileFill(const Solver& s, const ConvProblem& p) {
  if (s.family() == v1::DIRECT || s.family() == v1::FFT) return 1.0;
  const int64_t positions = p.n * p.out_spatial();
  const int64_t taps = p.filter_spatial();
  switch (p.direction) {
    case Direction::kBackwardData:
      return Fill(p.c_per_group(), 16) * Fill(p.k_per_group() * taps, 8) *
             Fill(positions, 16);
    case Direction::kBackwardWeights:
      // The reduction runs over positions, long in every real layer.
      return Fill(p.k_per_group(), 16) * Fill(p.c_per_group() * taps, 16);
    default:
      return Fill(p.k_per_group(), 16) * Fill(p.c_per_group() * taps, 8) *
             Fill(positions, 16);
  }
}

}  // namespace

WtiEstimator::WtiEstimator(const DeviceInfo& device)
    : peak_flops_per_ms_(std::max(1.0, device.peak_gflops) * 1e6),
      bytes_per_ms_(std::max(0.1, device.memory_gbps) * 1e6),
      dispatch_ms_(device.backend == v1::CPU ? kCpuDispatchMs
                                             : kGpuDispatchMs) {}

double WtiEstimator::EstimateMs(const Solver& s, const ConvProblem& p) const {
  // Above 1: tensor-core solvers, against a peak of plain arithmetic.
  const double efficiency =
      std::clamp(s.Efficiency(p), 1e-4, 16.0) * TileFill(s, p);
  const double compute =
      s.EstimatedFlops(p) / (peak_flops_per_ms_ * efficiency);
  const double memory = s.EstimatedBytes(p) / bytes_per_ms_;
  const double passes =
      static_cast<double>(std::max<int64_t>(1, s.Dispatches(p)) - 1);
  return std::max(compute, memory) + kCallOverheadMs + passes * dispatch_ms_;
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
