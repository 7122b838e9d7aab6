// Measurement in a worker process. convtuned starts one worker per device
// (its own binary, run as `convtuned --measure-worker ...`); the worker opens
// the device, and every candidate plan is checked and timed there. A plan
// that faults the device or kills the worker costs only the worker: the
// timing stage quarantines the solver, and the next call starts a fresh one.
// A call past its time bound has its worker killed (SIGKILL).
//
// Code objects are sent with the first plan that needs them, so the worker
// never opens the store.
#ifndef CONVTUNE_SERVER_MEASURE_WORKER_H_
#define CONVTUNE_SERVER_MEASURE_WORKER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "convtune/v1/worker.pb.h"
#include "server/measurer.h"

namespace convtune {

struct WorkerOptions {
  // The binary that runs as a worker (convtuned itself: /proc/self/exe).
  std::string exe = "/proc/self/exe";
  // The device the worker opens: cpu, cuda or hip, and the GPU ordinal.
  std::string backend = "cpu";
  int ordinal = 0;
  // The daemon's device key: a worker that opens another device is refused.
  std::string device_key;
  // CPU kernel threads, and the nice value (0 to 19) of the worker.
  int threads = 1;
  int nice = 0;
  // The CPUs the worker's threads may run on (a CPU device's share of the
  // machine). Empty: any.
  std::vector<int> cpus;
  // Wall time allowed for a worker to open its device and say so.
  double start_bound_ms = 120000;
  // A compiled code object by its hash, for plans the worker has not seen.
  std::function<absl::StatusOr<std::string>(const std::string& hash)>
      code_object;
};

// What the workers have cost so far. Thread-safe to read via stats().
struct WorkerStats {
  int64_t starts = 0;   // workers started (the first included)
  int64_t crashes = 0;  // workers that died during a call
  int64_t killed = 0;   // workers killed past a call's time bound
};

class WorkerMeasurer final : public Measurer {
 public:
  explicit WorkerMeasurer(WorkerOptions options);
  ~WorkerMeasurer() override;

  // Starts the first worker now, so that a device it cannot open is an
  // error at daemon start. Later workers start on demand.
  absl::Status Start();

  absl::Status Open(const ConvProblem& p, int64_t workspace_bytes,
                    uint64_t seed) override;
  absl::StatusOr<Measurement> Measure(const v1::ExecutionPlan& plan,
                                      const TimingOptions& options,
                                      double best_ms, bool cold_run_is_timing,
                                      double bound_ms) override;
  absl::StatusOr<std::vector<Measurement>> TimeSideBySide(
      const std::vector<const v1::ExecutionPlan*>& plans,
      const TimingOptions& options, double bound_ms) override;
  absl::Status Healthy() override;
  absl::Status Reset() override;

  WorkerStats stats() const;
  // The running worker's process id; -1 when none runs.
  pid_t pid() const;

 private:
  absl::Status EnsureRunning();
  // Sends `request` and waits up to `bound_ms` (0: no bound) for the answer.
  // A worker that dies or runs past the bound is gone afterwards, and
  // broken_ says why.
  absl::StatusOr<v1::WorkerResponse> Call(v1::WorkerRequest& request,
                                          double bound_ms);
  absl::Status AttachCodeObjects(const v1::ExecutionPlan& plan,
                                 v1::WorkerRequest& request);
  // Signals and reaps the running worker (if any) and closes its socket;
  // its wait status (0 when none ran).
  int Stop(int signal);

  const WorkerOptions options_;
  int fd_ = -1;
  pid_t pid_ = -1;
  // Code objects the running worker has loaded.
  absl::flat_hash_set<std::string> loaded_;
  // Why the last worker is unusable (it died, was killed, or its device
  // stopped answering); OK while it is fine.
  absl::Status broken_;
  std::atomic<int64_t> starts_{0}, crashes_{0}, killed_{0};
  std::atomic<pid_t> running_pid_{-1};
};

// The worker's side: `argv` after "--measure-worker". Serves requests on the
// socket until it closes; the exit status.
int MeasureWorkerMain(const std::vector<std::string>& args);

// The arguments WorkerMeasurer passes after "--measure-worker" (exposed for
// tests that start workers by hand): FD BACKEND ORDINAL THREADS NICE
// PARENT_PID, then CPUS ("0,1") when the worker is confined to some.
std::vector<std::string> MeasureWorkerArgs(const WorkerOptions& options,
                                           int fd);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_MEASURE_WORKER_H_
