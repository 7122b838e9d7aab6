#include "kernels/plan_executor.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {

absl::Status ExecutePlan(Device& device, const v1::ExecutionPlan& plan,
                         const PlanBuffers& buffers) {
  if (plan.workspace_bytes() > 0 &&
      (buffers.workspace == nullptr ||
       buffers.workspace_bytes < plan.workspace_bytes())) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "solver ", plan.solver_id(), " needs ", plan.workspace_bytes(),
        " bytes of workspace; ", buffers.workspace_bytes, " given"));
  }
  std::vector<void*> resolved;
  for (const v1::KernelStep& step : plan.steps()) {
    resolved.clear();
    for (const v1::BufferRef& ref : step.buffers()) {
      char* base = nullptr;
      switch (ref.role()) {
        case v1::BUFFER_X:
          base = static_cast<char*>(buffers.x);
          break;
        case v1::BUFFER_W:
          base = static_cast<char*>(buffers.w);
          break;
        case v1::BUFFER_Y:
          base = static_cast<char*>(buffers.y);
          break;
        case v1::BUFFER_WORKSPACE:
          base = static_cast<char*>(buffers.workspace);
          break;
        default:
          return absl::InvalidArgumentError(absl::StrCat(
              "step ", step.kernel(), ": unknown buffer role ", ref.role()));
      }
      if (base == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("step ", step.kernel(), ": buffer ",
                         v1::BufferRole_Name(ref.role()), " is null"));
      }
      resolved.push_back(base + ref.offset_bytes());
    }
    RETURN_IF_ERROR(device.Launch(step, resolved));
  }
  return absl::OkStatus();
}

}  // namespace convtune
