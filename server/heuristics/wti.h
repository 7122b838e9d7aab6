// The weighted-throughput estimate: each solver's time from a roofline of the
// device's nominal peak and bandwidth, weighted by the solver's declared
// efficiency and, for GEMM-shaped algorithms, by the share of their tiles the
// per-group GEMM fills, plus a fixed cost per pass. The prior of the learned
// model, which corrects it with the device's measurements; alone, it answers
// where nothing was measured. Applies to every problem. Immutable;
// thread-safe.
#ifndef CONVTUNE_SERVER_HEURISTICS_WTI_H_
#define CONVTUNE_SERVER_HEURISTICS_WTI_H_

#include "kernels/device.h"
#include "server/heuristics/ranker.h"

namespace convtune {

class WtiEstimator final : public Ranker {
 public:
  explicit WtiEstimator(const DeviceInfo& device);

  absl::string_view name() const override { return "estimate"; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return absl::OkStatus();
  }
  std::vector<Estimate> Rank(
      const ConvProblem& p,
      const std::vector<const Solver*>& candidates) const override;

  // One solver's estimate in milliseconds.
  double EstimateMs(const Solver& s, const ConvProblem& p) const;

 private:
  double peak_flops_per_ms_;
  double bytes_per_ms_;
  double dispatch_ms_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_WTI_H_
