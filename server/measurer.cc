#include "server/measurer.h"

#include <utility>

#include "common/status_macros.h"

namespace convtune {

absl::Status InProcessMeasurer::Open(const ConvProblem& p,
                                     int64_t workspace_bytes, uint64_t seed) {
  session_.reset();
  ASSIGN_OR_RETURN(
      session_, BenchmarkSession::Create(&device_, p, workspace_bytes, seed));
  return absl::OkStatus();
}

absl::Status InProcessMeasurer::CheckOpen() const {
  if (session_ == nullptr) {
    return absl::FailedPreconditionError("no benchmark session is open");
  }
  return absl::OkStatus();
}

absl::StatusOr<Measurement> InProcessMeasurer::Measure(
    const v1::ExecutionPlan& plan, const TimingOptions& options, double best_ms,
    bool cold_run_is_timing, double /*bound_ms*/) {
  RETURN_IF_ERROR(CheckOpen());
  return session_->Measure(plan, options, best_ms, cold_run_is_timing);
}

absl::StatusOr<std::vector<Measurement>> InProcessMeasurer::TimeSideBySide(
    const std::vector<const v1::ExecutionPlan*>& plans,
    const TimingOptions& options, double /*bound_ms*/) {
  RETURN_IF_ERROR(CheckOpen());
  return session_->TimeSideBySide(plans, options);
}

absl::Status InProcessMeasurer::Reset() {
  session_.reset();
  return device_.Reset();
}

}  // namespace convtune
