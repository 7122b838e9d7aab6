// Where candidate plans are measured: the timing stage's only way to the
// device. One benchmark session is open at a time (Open replaces it), and
// calls come from one thread (the device's timing queue).
//
// InProcessMeasurer runs sessions on a Device of this process. The daemon
// measures in a worker process instead (WorkerMeasurer, measure_worker.h):
// a candidate that faults the device or never returns takes down only the
// worker.
#ifndef CONVTUNE_SERVER_MEASURER_H_
#define CONVTUNE_SERVER_MEASURER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/benchmark.h"

namespace convtune {

class Measurer {
 public:
  virtual ~Measurer() = default;

  // Opens a session for p: buffers with `workspace_bytes` of workspace and
  // inputs drawn from `seed` (BenchmarkSession::Create).
  virtual absl::Status Open(const ConvProblem& p, int64_t workspace_bytes,
                            uint64_t seed) = 0;

  // BenchmarkSession::Measure on the open session. `bound_ms` bounds the
  // call's wall time where the measurer can enforce it (a worker past it is
  // killed: DeadlineExceeded); 0: no bound.
  virtual absl::StatusOr<Measurement> Measure(const v1::ExecutionPlan& plan,
                                              const TimingOptions& options,
                                              double best_ms,
                                              bool cold_run_is_timing,
                                              double bound_ms) = 0;

  // BenchmarkSession::TimeSideBySide on the open session, bounded as
  // Measure is.
  virtual absl::StatusOr<std::vector<Measurement>> TimeSideBySide(
      const std::vector<const v1::ExecutionPlan*>& plans,
      const TimingOptions& options, double bound_ms) = 0;

  // OK while the device still answers; after a failure, an error says the
  // device (or the worker that owns it) is unusable until Reset.
  virtual absl::Status Healthy() = 0;

  // Makes the device usable again after a fault: resets it, or replaces
  // the worker. The open session is gone. An error means the device is
  // lost.
  virtual absl::Status Reset() = 0;
};

// Measures on `device` in this process. Bounds are not enforced: a plan
// that never returns holds the timing queue.
class InProcessMeasurer final : public Measurer {
 public:
  explicit InProcessMeasurer(Device& device) : device_(device) {}

  absl::Status Open(const ConvProblem& p, int64_t workspace_bytes,
                    uint64_t seed) override;
  absl::StatusOr<Measurement> Measure(const v1::ExecutionPlan& plan,
                                      const TimingOptions& options,
                                      double best_ms, bool cold_run_is_timing,
                                      double bound_ms) override;
  absl::StatusOr<std::vector<Measurement>> TimeSideBySide(
      const std::vector<const v1::ExecutionPlan*>& plans,
      const TimingOptions& options, double bound_ms) override;
  absl::Status Healthy() override { return device_.Synchronize(); }
  absl::Status Reset() override;

 private:
  absl::Status CheckOpen() const;

  Device& device_;
  std::unique_ptr<BenchmarkSession> session_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_MEASURER_H_
