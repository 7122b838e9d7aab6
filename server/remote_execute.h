// Remote execute: runs one solver on the daemon's device with host tensors
// that a request carries (the service limits their size), for CI and for
// machines without a device runtime. The plan's kernels are built on the
// compile pool; the run goes on the device's timing queue, so it never
// overlaps a timing. Thread-safe; callbacks run on a pool thread.
#ifndef CONVTUNE_SERVER_REMOTE_EXECUTE_H_
#define CONVTUNE_SERVER_REMOTE_EXECUTE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/planner.h"
#include "server/stop_flag.h"
#include "server/thread_pool.h"

namespace convtune {

// A problem's three tensors in host memory, indexed by Tensor.
struct InlineTensors {
  std::array<std::string, 3> bytes;
  std::string& operator[](Tensor t) { return bytes[static_cast<int>(t)]; }
};

class RemoteExecutor {
 public:
  // References must outlive the executor. `timing_queue` is the device's
  // one-thread timing queue.
  RemoteExecutor(Device& device, const Planner& planner,
                 ThreadPool& timing_queue, const StopFlag& stop);

  // Runs solver `solver_id`'s plan for p (its tuned config, else the
  // default) on `tensors` and calls `done` with the run's milliseconds; the
  // direction's output tensor is overwritten. Errors of Planner::Plan, of
  // the kernel build and of the device; Unavailable when stopping.
  // REQUIRES: each tensor holds exactly p.bytes(t) bytes.
  void Execute(const ConvProblem& p, uint32_t solver_id,
               std::shared_ptr<InlineTensors> tensors,
               std::function<void(absl::StatusOr<double>)> done);

 private:
  absl::StatusOr<double> Run(const v1::ExecutionPlan& plan,
                             const ConvProblem& p, InlineTensors& tensors);

  Device& device_;
  const Planner& planner_;
  ThreadPool& timing_queue_;
  const StopFlag& stop_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_REMOTE_EXECUTE_H_
