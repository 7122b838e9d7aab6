// Runs an execution plan on a device. The daemon times plans with this same
// executor, so what was timed is what runs in the client. Stateless.
#ifndef CONVTUNE_KERNELS_PLAN_EXECUTOR_H_
#define CONVTUNE_KERNELS_PLAN_EXECUTOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/device.h"

namespace convtune {

// Device addresses of the four roles. For backward data x is the output, for
// backward weights w is.
struct PlanBuffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// ResourceExhausted if the plan needs more workspace than given;
// InvalidArgument if a step names an unknown buffer role or a null buffer.
absl::Status ExecutePlan(Device& device, const v1::ExecutionPlan& plan,
                         const PlanBuffers& buffers);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_PLAN_EXECUTOR_H_
