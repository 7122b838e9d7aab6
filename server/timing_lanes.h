// The devices of one device key that tuning runs on, one lane each: a
// TimingStage over the device's own measurer and timing queue (one thread),
// so that timings never overlap on a device and do overlap across devices.
// A job goes to the device the caller names. Otherwise, with several
// devices, it waits in the dispatch queue (a ThreadPool of one thread per
// device: low priority after normal, tenants taking turns) until a device
// has no job, and takes the first listed such device that no client said it
// runs on (MarkInUse); a device in use is taken only when every device is.
// With one device, jobs queue on it directly. A device that is lost (a
// fault it could not be reset from) leaves the lanes: jobs naming it are
// refused, the others go to the devices left; only when every device is
// lost do the lanes stop (the core's StopFlag) and call the lost handler.
// Thread-safe; callbacks run on the chosen lane's timing queue.
#ifndef CONVTUNE_SERVER_TIMING_LANES_H_
#define CONVTUNE_SERVER_TIMING_LANES_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "kernels/device.h"
#include "server/counters.h"
#include "server/measurer.h"
#include "server/quarantine.h"
#include "server/stop_flag.h"
#include "server/thread_pool.h"
#include "server/timing_stage.h"

namespace convtune {

class TimingLanes {
 public:
  struct Lane {
    int ordinal = 0;               // the device's number, as clients name it
    Measurer* measurer = nullptr;  // runs its plans; must outlive the lanes
    ThreadPool* queue = nullptr;   // exactly one thread
  };
  // What a lane is doing (Status).
  struct LaneStatus {
    int ordinal = 0;
    int64_t jobs_waiting = 0;  // tuning runs and re-timings queued or running
    int64_t jobs_done = 0;     // tuning runs ended (timed, failed or cut)
    double busy_ms = 0;        // their device time
    bool in_use = false;       // a client said it runs there, recently
    bool lost = false;         // lost: no longer used
  };

  // A device a client named is left to it for `in_use_for` after the call
  // that named it. REQUIRES: lanes non-empty, ordinals distinct, each lane's
  // measurer and queue set. `info` describes every lane's device (one key).
  TimingLanes(std::vector<Lane> lanes, const DeviceInfo& info,
              Quarantine& quarantine, Counters& counters, StopFlag& stop,
              TimingStage::Options options,
              std::chrono::milliseconds in_use_for = std::chrono::seconds(10));

  // Called once, when the last device left is lost, with the reasons (and
  // with several devices their ordinals). Set before the first timing.
  void SetDeviceLostHandler(std::function<void(const std::string&)> handler);
  // Called with the ordinal of each device lost, the last too, before the
  // handler above. Set before the first timing.
  void SetLaneLostHandler(std::function<void(int)> handler);
  // Whether device `ordinal` is one of the lanes and not lost.
  bool Usable(int ordinal) const;

  // TimingStage::Time on device `device` when set, else on the lane chosen
  // as above. InvalidArgument (through `done`) for a device not among the
  // lanes.
  void Time(std::shared_ptr<TimingJob> job,
            std::function<void(absl::StatusOr<TimingResult>)> done,
            ThreadPool::Priority priority = ThreadPool::Priority::kNormal,
            absl::string_view tenant = {},
            std::optional<int> device = std::nullopt);
  // TimingStage::TimeOne, on a lane chosen the same way.
  void TimeOne(const ConvProblem& p, v1::ExecutionPlan plan,
               std::function<void(absl::StatusOr<double>)> done,
               std::optional<int> device = std::nullopt);

  // A client runs its own work on `device` (its training job): tuning
  // leaves that device to it for a while where another is free. Unknown
  // devices are ignored.
  void MarkInUse(int device);

  // OK; InvalidArgument naming `field` and the devices there are; or
  // Unavailable when `device` was lost.
  absl::Status CheckDevice(int device,
                           absl::string_view field = "device") const;

  const TimingStage::Options& options() const {
    return stages_.front()->options();
  }
  // The dispatch queue (null with one device): a daemon drains it with the
  // timing queues.
  ThreadPool* dispatch_queue() { return dispatch_.get(); }
  size_t size() const { return stages_.size(); }
  std::vector<LaneStatus> Status() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct State {
    int64_t waiting = 0;
    int64_t done = 0;
    double busy_ms = 0;
    Clock::time_point in_use_until;
    std::string lost;  // why, once lost
  };
  // The index of the lane a job goes to; counts the job there.
  // Unavailable when that device, or every device, was lost.
  absl::StatusOr<size_t> Take(std::optional<int> device);
  // Waits for a lane with no job (see above) and counts the job there;
  // Unavailable when every device was lost.
  absl::StatusOr<size_t> TakeFree();
  // Device `lane` was lost, for `why`.
  void Lost(size_t lane, const std::string& why);
  absl::Status AllLost() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job of `lane` ended; `run`: a tuning run of `device_ms`.
  void Finished(size_t lane, bool run, double device_ms);

  std::vector<int> ordinals_;
  StopFlag& stop_;
  std::vector<std::unique_ptr<TimingStage>> stages_;
  const std::chrono::milliseconds in_use_for_;
  mutable absl::Mutex mu_;
  std::vector<State> state_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> on_lost_ ABSL_GUARDED_BY(mu_);
  std::function<void(int)> on_lane_lost_ ABSL_GUARDED_BY(mu_);
  absl::CondVar freed_;                   // a lane's job ended
  std::unique_ptr<ThreadPool> dispatch_;  // declared last: destroyed first
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TIMING_LANES_H_
