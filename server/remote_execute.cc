#include "server/remote_execute.h"

#include "common/status_macros.h"
#include "kernels/plan_executor.h"

namespace convtune {

RemoteExecutor::RemoteExecutor(Device& device, const Planner& planner,
                               ThreadPool& timing_queue, const StopFlag& stop)
    : device_(device),
      planner_(planner),
      timing_queue_(timing_queue),
      stop_(stop) {}

void RemoteExecutor::Execute(const ConvProblem& p, uint32_t solver_id,
                             std::shared_ptr<InlineTensors> tensors,
                             std::function<void(absl::StatusOr<double>)> done) {
  if (absl::Status s = stop_.Check(); !s.ok()) {
    done(s);
    return;
  }
  absl::StatusOr<v1::ExecutionPlan> plan = planner_.Plan(p, solver_id, {});
  if (!plan.ok()) {
    done(plan.status());
    return;
  }
  planner_.Build(
      *std::move(plan), [this, p, tensors, done = std::move(done)](
                            absl::StatusOr<BuiltPlan> built) mutable {
        if (!built.ok()) {
          done(built.status());
          return;
        }
        timing_queue_.Schedule([this, p, tensors, done = std::move(done),
                                plan = std::move(built->plan)] {
          absl::Status stopping = stop_.Check();
          done(stopping.ok() ? Run(plan, p, *tensors)
                             : absl::StatusOr<double>(stopping));
        });
      });
}

absl::StatusOr<double> RemoteExecutor::Run(const v1::ExecutionPlan& plan,
                                           const ConvProblem& p,
                                           InlineTensors& tensors) {
  std::unique_ptr<DeviceBuffer> bufs[3];
  for (Tensor t : kAllTensors) {
    const std::string& host = tensors[t];
    const int i = static_cast<int>(t);
    ASSIGN_OR_RETURN(bufs[i], device_.Allocate(host.size()));
    RETURN_IF_ERROR(
        device_.CopyToDevice(bufs[i].get(), host.data(), host.size()));
  }
  ASSIGN_OR_RETURN(auto ws, device_.Allocate(plan.workspace_bytes()));
  PlanBuffers b{bufs[0]->data(), bufs[1]->data(), bufs[2]->data(), ws->data(),
                ws->size()};
  ASSIGN_OR_RETURN(
      double ms, device_.TimeMs([&] { return ExecutePlan(device_, plan, b); }));
  const Tensor out = p.output();
  std::string& host = tensors[out];
  RETURN_IF_ERROR(device_.CopyFromDevice(
      host.data(), *bufs[static_cast<int>(out)], host.size()));
  return ms;
}

}  // namespace convtune
