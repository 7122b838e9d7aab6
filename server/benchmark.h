// Measures execution plans of one problem on one device: buffers with fresh
// random inputs, the output poisoned before every checked run, sampled outputs
// compared with the float64 reference, then warm-up, repeats and the median.
// Not thread-safe: one session runs on one device's timing queue.
#ifndef CONVTUNE_SERVER_BENCHMARK_H_
#define CONVTUNE_SERVER_BENCHMARK_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "kernels/reference.h"

namespace convtune {

struct TimingOptions {
  int warmup_runs = 1;
  int min_repeats = 3;
  int max_repeats = 8;
  // Stop repeating once this much time was spent (after min_repeats).
  double budget_ms = 25;
  // Output elements compared with the float64 reference on every checked
  // run. Their reference is computed once per session: the inputs stay.
  int verify_samples = 48;
  // A second run slower than this many times the fastest plan of the same
  // find ends that plan's timing. 0: time every plan in full. A plan that
  // slow cannot win; repeats would only cost the find time. One such run
  // alone does not: it may be a stall (a library loading its kernels).
  double slow_factor = 3;
  // A checked run that slow, and at least this long (so that loading the
  // plan's code is a small part of it), is the plan's time: it is not run
  // again.
  double first_run_trusted_ms = 2;
  // After min_repeats, a plan whose fastest run so far is this many times
  // the fastest plan of the same find stops repeating: it cannot win, and
  // its median over min_repeats is its time. 0: time every plan in full.
  double hopeless_factor = 1.3;
};

struct Measurement {
  double median_ms = 0;
  int repeats = 0;
  // Wall milliseconds Measure spent on the checked run and its check (the
  // session's reference included, the first time).
  double check_ms = 0;
};

class BenchmarkSession {
 public:
  // Allocates x, w, y and `workspace_bytes` of workspace on `device` and fills
  // the direction's inputs with random values. ResourceExhausted if the
  // device cannot hold them.
  static absl::StatusOr<std::unique_ptr<BenchmarkSession>> Create(
      Device* device, const ConvProblem& p, int64_t workspace_bytes,
      uint64_t seed);

  // Runs `plan` once on a poisoned output and checks it (Internal naming the
  // wrong element if it disagrees with the reference), then times it; the
  // checked run is its warm-up. `best_ms` is the fastest plan of the find so
  // far (0: none yet): timing stops after the second run longer than
  // slow_factor times it, and after min_repeats when no run came within
  // hopeless_factor of it.
  // `cold_run_is_timing`: the plan's first run costs what its later runs do
  // (its code is loaded when built; not so for a library, which may set up
  // on its first call), so a checked run far behind the best may be its time.
  absl::StatusOr<Measurement> Measure(const v1::ExecutionPlan& plan,
                                      const TimingOptions& options,
                                      double best_ms = 0,
                                      bool cold_run_is_timing = false);

  // Times without checking (for re-measuring configs already checked).
  absl::StatusOr<Measurement> TimeOnly(const v1::ExecutionPlan& plan,
                                       const TimingOptions& options,
                                       double best_ms = 0);

  // The checked output elements and their reference (empty before the
  // first Measure).
  const std::vector<ReferenceSample>& samples() const { return samples_; }

  // Times plans already checked side by side: one run of each in turn per
  // round, the order reversed every other round, so that drift in the
  // device's clocks reaches all alike. Rounds follow `options` as one plan's
  // repeats do in TimeOnly (the budget is per plan); no warm-up.
  absl::StatusOr<std::vector<Measurement>> TimeSideBySide(
      const std::vector<const v1::ExecutionPlan*>& plans,
      const TimingOptions& options);

 private:
  BenchmarkSession(Device* device, const ConvProblem& p)
      : device_(device), problem_(p) {}
  absl::Status Run(const v1::ExecutionPlan& plan);
  DeviceBuffer* output_buffer();

  Device* device_;
  ConvProblem problem_;
  std::unique_ptr<DeviceBuffer> x_, w_, y_, workspace_;
  std::vector<char> host_x_, host_w_, host_y_;
  std::mt19937_64 rng_;
  // The checked elements and their reference, from the first checked run.
  std::vector<ReferenceSample> samples_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_BENCHMARK_H_
