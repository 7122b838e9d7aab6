#include "server/tenant_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convtune {

absl::StatusOr<ExecuteLimiter::Ticket> ExecuteLimiter::Acquire(
    const std::string& tenant, int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    Usage& u = usage_[tenant];
    if (u.executes >= limits_.max_executes) {
      return WithRetryAfter(absl::ResourceExhaustedError(absl::StrCat(
                                "tenant '", tenant, "' has ", u.executes,
                                " Execute call(s) in flight, its limit "
                                "(limits.tenant_executes_in_flight); retry in ",
                                kRetryAfterMs, " ms")),
                            kRetryAfterMs);
    }
    if (u.bytes + bytes > limits_.max_bytes) {
      return WithRetryAfter(
          absl::ResourceExhaustedError(absl::StrCat(
              "tenant '", tenant, "' would hold ", u.bytes + bytes,
              " bytes of Execute tensors, over its limit of ",
              limits_.max_bytes,
              " (limits.tenant_execute_bytes_in_flight); retry in ",
              kRetryAfterMs, " ms")),
          kRetryAfterMs);
    }
    ++u.executes;
    u.bytes += bytes;
  }
  return Ticket(nullptr,
                [this, tenant, bytes](void*) { Release(tenant, bytes); });
}

void ExecuteLimiter::Release(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(tenant);
  if (it == usage_.end()) return;
  --it->second.executes;
  it->second.bytes -= bytes;
  if (it->second.executes == 0) usage_.erase(it);
}

std::pair<int, int64_t> ExecuteLimiter::InFlight(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(tenant);
  if (it == usage_.end()) return {0, 0};
  return {it->second.executes, it->second.bytes};
}

void TuningQuotas::Expire(State& s, Clock::time_point now) {
  while (!s.charges.empty() &&
         now - s.charges.front().first >= std::chrono::minutes(1)) {
    s.charges.pop_front();
  }
  double sum = 0;
  for (const auto& [at, seconds] : s.charges) sum += seconds;
  s.usage.device_seconds_last_minute = sum;
}

TuningQuotas::Ticket TuningQuotas::Hold(std::shared_ptr<Shared> shared,
                                        const std::string& tenant,
                                        bool background) {
  return Ticket(nullptr,
                [shared = std::move(shared), tenant, background](void*) {
                  absl::MutexLock lock(&shared->mu);
                  Usage& u = shared->state[tenant].usage;
                  --(background ? u.background : u.finds_waiting);
                });
}

absl::StatusOr<TuningQuotas::Ticket> TuningQuotas::AdmitFind(
    const std::string& tenant, bool starts_run) {
  {
    absl::MutexLock lock(&shared_->mu);
    State& s = shared_->state[tenant];
    if (s.usage.finds_waiting >= limits_.max_in_flight) {
      return WithRetryAfter(
          absl::ResourceExhaustedError(
              absl::StrCat("tenant '", tenant, "' has ", s.usage.finds_waiting,
                           " find(s) waiting on tuning, its limit "
                           "(limits.tenant_tunings_in_flight); retry in ",
                           kRetryAfterMs, " ms")),
          kRetryAfterMs);
    }
    const double budget = limits_.max_benchmark_seconds_per_minute;
    if (starts_run && budget > 0) {
      const Clock::time_point now = Clock::now();
      Expire(s, now);
      if (s.usage.device_seconds_last_minute >= budget) {
        // When enough of the minute's charges have aged out.
        double over = s.usage.device_seconds_last_minute - budget;
        Clock::time_point free_at = now;
        for (const auto& [at, seconds] : s.charges) {
          free_at = at + std::chrono::minutes(1);
          over -= seconds;
          if (over < 0) break;
        }
        const int64_t wait_ms = std::max<int64_t>(
            1,
            std::chrono::duration_cast<std::chrono::milliseconds>(free_at - now)
                .count());
        return WithRetryAfter(
            absl::ResourceExhaustedError(absl::StrFormat(
                "tenant '%s' used %.1f s of device timing in the last "
                "minute, its limit of %.1f s "
                "(limits.tenant_benchmark_seconds_per_minute); retry in %d "
                "ms",
                tenant, s.usage.device_seconds_last_minute, budget, wait_ms)),
            wait_ms);
      }
    }
    ++s.usage.finds_waiting;
  }
  return Hold(shared_, tenant, false);
}

absl::StatusOr<TuningQuotas::Ticket> TuningQuotas::AdmitBackground(
    const std::string& tenant) {
  {
    absl::MutexLock lock(&shared_->mu);
    State& s = shared_->state[tenant];
    if (s.usage.background >= limits_.max_queued) {
      return WithRetryAfter(
          absl::ResourceExhaustedError(
              absl::StrCat("tenant '", tenant, "' has ", s.usage.background,
                           " background tuning job(s) queued, its limit "
                           "(limits.tenant_tunings_queued); retry in ",
                           kRetryAfterMs, " ms")),
          kRetryAfterMs);
    }
    ++s.usage.background;
  }
  return Hold(shared_, tenant, true);
}

void TuningQuotas::ChargeDevice(const std::vector<std::string>& tenants,
                                double ms, bool against_budget) {
  if (tenants.empty() || ms <= 0) return;
  const double share = ms / 1e3 / static_cast<double>(tenants.size());
  const Clock::time_point now = Clock::now();
  absl::MutexLock lock(&shared_->mu);
  for (const std::string& t : tenants) {
    State& s = shared_->state[t];
    if (against_budget) s.charges.emplace_back(now, share);
    s.usage.device_seconds_total += share;
    Expire(s, now);
  }
}

void TuningQuotas::NotePrefill(const std::string& tenant) {
  absl::MutexLock lock(&shared_->mu);
  ++shared_->state[tenant].usage.prefill_queued;
}

void TuningQuotas::NotePrefillDone(const std::string& tenant, bool ok) {
  absl::MutexLock lock(&shared_->mu);
  Usage& u = shared_->state[tenant].usage;
  ++(ok ? u.prefill_done : u.prefill_failed);
}

TuningQuotas::Usage TuningQuotas::UsageOf(const std::string& tenant) {
  absl::MutexLock lock(&shared_->mu);
  auto it = shared_->state.find(tenant);
  if (it == shared_->state.end()) return Usage{};
  Expire(it->second, Clock::now());
  return it->second.usage;
}

std::vector<std::pair<std::string, TuningQuotas::Usage>> TuningQuotas::All() {
  absl::MutexLock lock(&shared_->mu);
  std::vector<std::pair<std::string, Usage>> out;
  const Clock::time_point now = Clock::now();
  for (auto& [name, s] : shared_->state) {
    Expire(s, now);
    out.emplace_back(name, s.usage);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace convtune
