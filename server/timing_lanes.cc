#include "server/timing_lanes.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace convtune {

TimingLanes::TimingLanes(std::vector<Lane> lanes, const DeviceInfo& info,
                         Quarantine& quarantine, Counters& counters,
                         StopFlag& stop, TimingStage::Options options,
                         std::chrono::milliseconds in_use_for)
    : stop_(stop), in_use_for_(in_use_for), state_(lanes.size()) {
  for (size_t i = 0; i < lanes.size(); ++i) {
    const Lane& l = lanes[i];
    ordinals_.push_back(l.ordinal);
    stages_.push_back(std::make_unique<TimingStage>(
        *l.measurer, info, *l.queue, quarantine, counters, stop, options));
    stages_.back()->SetDeviceLostHandler(
        [this, i](const std::string& why) { Lost(i, why); });
  }
  if (lanes.size() > 1) {
    dispatch_ = std::make_unique<ThreadPool>("ct-dispatch",
                                             static_cast<int>(lanes.size()));
  }
}

void TimingLanes::SetDeviceLostHandler(
    std::function<void(const std::string&)> handler) {
  absl::MutexLock lock(&mu_);
  on_lost_ = std::move(handler);
}

void TimingLanes::SetLaneLostHandler(std::function<void(int)> handler) {
  absl::MutexLock lock(&mu_);
  on_lane_lost_ = std::move(handler);
}

bool TimingLanes::Usable(int ordinal) const {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (ordinals_[i] == ordinal) return state_[i].lost.empty();
  }
  return false;
}

void TimingLanes::Lost(size_t lane, const std::string& why) {
  const bool several = stages_.size() > 1;
  std::function<void(const std::string&)> handler;
  std::function<void(int)> lane_handler;
  std::vector<std::string> reasons;
  std::vector<int> left;
  {
    absl::MutexLock lock(&mu_);
    state_[lane].lost = why.empty() ? "lost" : why;
    freed_.SignalAll();
    for (size_t i = 0; i < state_.size(); ++i) {
      if (state_[i].lost.empty()) {
        left.push_back(ordinals_[i]);
      } else {
        reasons.push_back(several ? absl::StrCat("device ", ordinals_[i], ": ",
                                                 state_[i].lost)
                                  : state_[i].lost);
      }
    }
    if (left.empty()) handler = on_lost_;
    lane_handler = on_lane_lost_;
  }
  if (lane_handler) lane_handler(ordinals_[lane]);
  if (!left.empty()) {
    std::cerr << "convtuned: device " << ordinals_[lane] << " lost: " << why
              << "; tuning goes on on device(s) " << absl::StrJoin(left, ", ")
              << std::endl;
    return;
  }
  // The last device: the core stops, once.
  if (stop_.Stop() && handler) handler(absl::StrJoin(reasons, "; "));
}

absl::Status TimingLanes::AllLost() const {
  for (const State& s : state_) {
    if (s.lost.empty()) return absl::OkStatus();
  }
  return absl::UnavailableError("every device of this key was lost");
}

absl::Status TimingLanes::CheckDevice(int device,
                                      absl::string_view field) const {
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (ordinals_[i] != device) continue;
    absl::MutexLock lock(&mu_);
    if (!state_[i].lost.empty()) {
      return absl::UnavailableError(
          absl::StrCat(field, ": device ", device,
                       " was lost: ", state_[i].lost.substr(0, 200)));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": no device ", device,
                   " here (devices: ", absl::StrJoin(ordinals_, ", "), ")"));
}

absl::StatusOr<size_t> TimingLanes::Take(std::optional<int> device) {
  if (device.has_value()) {
    if (absl::Status s = CheckDevice(*device); !s.ok()) return s;
  }
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(AllLost());
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (device.has_value()) {
      if (ordinals_[i] != *device) continue;
      best = i, found = true;
      break;
    }
    if (!state_[i].lost.empty()) continue;
    const auto rank = [&](size_t j) {
      return std::make_pair(state_[j].in_use_until > now, state_[j].waiting);
    };
    if (!found || rank(i) < rank(best)) best = i, found = true;
  }
  ++state_[best].waiting;
  return best;
}

absl::StatusOr<size_t> TimingLanes::TakeFree() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    RETURN_IF_ERROR(AllLost());
    const Clock::time_point now = Clock::now();
    bool any_free_of_clients = false;
    for (const State& s : state_) {
      any_free_of_clients |= s.lost.empty() && s.in_use_until <= now;
    }
    std::optional<size_t> pick;
    for (size_t i = 0; i < state_.size() && !pick.has_value(); ++i) {
      const bool in_use = state_[i].in_use_until > now;
      if (state_[i].lost.empty() && state_[i].waiting == 0 &&
          (!in_use || !any_free_of_clients)) {
        pick = i;
      }
    }
    if (pick.has_value()) {
      ++state_[*pick].waiting;
      return *pick;
    }
    // A device's job ending wakes this; a client's mark running out does
    // not, so look again now and then.
    freed_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
  }
}

void TimingLanes::Finished(size_t lane, bool run, double device_ms) {
  absl::MutexLock lock(&mu_);
  --state_[lane].waiting;
  freed_.SignalAll();
  if (!run) return;
  ++state_[lane].done;
  state_[lane].busy_ms += device_ms;
}

void TimingLanes::Time(std::shared_ptr<TimingJob> job,
                       std::function<void(absl::StatusOr<TimingResult>)> done,
                       ThreadPool::Priority priority, absl::string_view tenant,
                       std::optional<int> device) {
  if (dispatch_ != nullptr && !device.has_value()) {
    // Held here, fairly ordered, until a device is free: then it takes
    // that device, and this thread waits for the job to end.
    dispatch_->Schedule(
        [this, job = std::move(job), done = std::move(done), priority,
         tenant = std::string(tenant)]() mutable {
          const absl::StatusOr<size_t> free = TakeFree();
          if (!free.ok()) return done(free.status());
          const size_t lane = *free;
          absl::Notification ended;
          stages_[lane]->Time(
              job,
              [this, lane, job, &done,
               &ended](absl::StatusOr<TimingResult> result) {
                Finished(lane, /*run=*/true, job->device_ms);
                done(std::move(result));
                ended.Notify();
              },
              priority, tenant);
          ended.WaitForNotification();
        },
        priority, tenant);
    return;
  }
  absl::StatusOr<size_t> lane = Take(device);
  if (!lane.ok()) return done(lane.status());
  stages_[*lane]->Time(
      job,
      [this, lane = *lane, job,
       done = std::move(done)](absl::StatusOr<TimingResult> result) {
        Finished(lane, /*run=*/true, job->device_ms);
        done(std::move(result));
      },
      priority, tenant);
}

void TimingLanes::TimeOne(const ConvProblem& p, v1::ExecutionPlan plan,
                          std::function<void(absl::StatusOr<double>)> done,
                          std::optional<int> device) {
  absl::StatusOr<size_t> lane = Take(device);
  if (!lane.ok()) return done(lane.status());
  stages_[*lane]->TimeOne(
      p, std::move(plan),
      [this, lane = *lane, done = std::move(done)](absl::StatusOr<double> ms) {
        Finished(lane, /*run=*/false, 0);
        done(std::move(ms));
      });
}

void TimingLanes::MarkInUse(int device) {
  const Clock::time_point until = Clock::now() + in_use_for_;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (ordinals_[i] == device) state_[i].in_use_until = until;
  }
}

std::vector<TimingLanes::LaneStatus> TimingLanes::Status() const {
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&mu_);
  std::vector<LaneStatus> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    out.push_back({.ordinal = ordinals_[i],
                   .jobs_waiting = state_[i].waiting,
                   .jobs_done = state_[i].done,
                   .busy_ms = state_[i].busy_ms,
                   .in_use = state_[i].in_use_until > now,
                   .lost = !state_[i].lost.empty()});
  }
  return out;
}

}  // namespace convtune
