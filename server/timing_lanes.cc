#include "server/timing_lanes.h"

#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace convtune {

TimingLanes::TimingLanes(std::vector<Lane> lanes, const DeviceInfo& info,
                         Quarantine& quarantine, Counters& counters,
                         StopFlag& stop, TimingStage::Options options,
                         std::chrono::milliseconds in_use_for)
    : in_use_for_(in_use_for), state_(lanes.size()) {
  for (const Lane& l : lanes) {
    ordinals_.push_back(l.ordinal);
    stages_.push_back(std::make_unique<TimingStage>(
        *l.measurer, info, *l.queue, quarantine, counters, stop, options));
  }
}

void TimingLanes::SetDeviceLostHandler(
    std::function<void(const std::string&)> handler) {
  auto shared =
      std::make_shared<std::function<void(const std::string&)>>(handler);
  auto once = std::make_shared<std::once_flag>();
  for (size_t i = 0; i < stages_.size(); ++i) {
    const bool several = stages_.size() > 1;
    stages_[i]->SetDeviceLostHandler([shared, once, several,
                                      ordinal = ordinals_[i]](
                                         const std::string& why) {
      std::call_once(*once, [&] {
        (*shared)(several ? absl::StrCat("device ", ordinal, ": ", why) : why);
      });
    });
  }
}

absl::Status TimingLanes::CheckDevice(int device,
                                      absl::string_view field) const {
  for (int o : ordinals_) {
    if (o == device) return absl::OkStatus();
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
  size_t best = 0;
  bool found = false;
  for (size_t i = 0; i < state_.size(); ++i) {
    if (device.has_value()) {
      if (ordinals_[i] != *device) continue;
      best = i, found = true;
      break;
    }
    const auto rank = [&](size_t j) {
      return std::make_pair(state_[j].in_use_until > now, state_[j].waiting);
    };
    if (!found || rank(i) < rank(best)) best = i, found = true;
  }
  ++state_[best].waiting;
  return best;
}

void TimingLanes::Finished(size_t lane, bool run, double device_ms) {
  absl::MutexLock lock(&mu_);
  --state_[lane].waiting;
  if (!run) return;
  ++state_[lane].done;
  state_[lane].busy_ms += device_ms;
}

void TimingLanes::Time(std::shared_ptr<TimingJob> job,
                       std::function<void(absl::StatusOr<TimingResult>)> done,
                       ThreadPool::Priority priority, absl::string_view tenant,
                       std::optional<int> device) {
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
                   .in_use = state_[i].in_use_until > now});
  }
  return out;
}

}  // namespace convtune
