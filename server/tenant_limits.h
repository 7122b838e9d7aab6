// Per-tenant limits. On what a call holds while it runs: Executes in flight
// and the bytes of their tensors (ExecuteLimiter). On tuning: finds waiting
// on a tuning run, background jobs queued (prefill lists and immediate-mode
// misses), and seconds of the device's timing per minute (TuningQuotas).
// Over a limit, a call is refused at once with ResourceExhausted and a retry
// hint rather than queued, so that one tenant cannot take the daemon's
// memory or its device. Thread-safe.
#ifndef CONVTUNE_SERVER_TENANT_LIMITS_H_
#define CONVTUNE_SERVER_TENANT_LIMITS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"

namespace convtune {

class ExecuteLimiter {
 public:
  struct Limits {
    int max_executes = 2;                    // in flight per tenant
    int64_t max_bytes = int64_t{256} << 20;  // their tensors' bytes
  };
  // How long a refused caller is told to wait before it tries again.
  static constexpr int kRetryAfterMs = 250;

  explicit ExecuteLimiter(Limits limits) : limits_(limits) {}

  // Holds one Execute of `bytes` for `tenant` until the ticket is dropped.
  // ResourceExhausted naming the tenant, the limit and its config key when
  // it would go over one.
  using Ticket = std::shared_ptr<void>;
  absl::StatusOr<Ticket> Acquire(const std::string& tenant, int64_t bytes);

  // What `tenant` holds now.
  std::pair<int, int64_t> InFlight(const std::string& tenant);

 private:
  struct Usage {
    int executes = 0;
    int64_t bytes = 0;
  };
  void Release(const std::string& tenant, int64_t bytes);

  const Limits limits_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);
};

class TuningQuotas {
 public:
  struct Limits {
    // Finds of one tenant waiting on a tuning run at once (joining another
    // caller's run counts too): limits.tenant_tunings_in_flight.
    int max_in_flight = 32;
    // Background jobs of one tenant (prefill, and immediate-mode misses)
    // queued or running: limits.tenant_tunings_queued.
    int max_queued = 1024;
    // Seconds the device spent timing interactive finds of one tenant in
    // the last minute; 0: no limit. A run shared by several tenants is
    // charged to those still waiting, in equal parts. Background jobs run
    // only when no interactive find is queued, and are not charged against
    // it: limits.tenant_benchmark_seconds_per_minute.
    double max_benchmark_seconds_per_minute = 0;
  };
  // How long a caller refused for the number of calls is told to wait.
  static constexpr int64_t kRetryAfterMs = 1000;

  explicit TuningQuotas(Limits limits) : limits_(limits) {}

  using Ticket = std::shared_ptr<void>;
  // A find of `tenant` that is about to wait on a tuning run; `starts_run`
  // when it starts one rather than joining one (only then does the device
  // budget apply). Held until the find is answered. ResourceExhausted
  // naming the limit's key, with a retry hint, when over one.
  absl::StatusOr<Ticket> AdmitFind(const std::string& tenant, bool starts_run);
  // A background job of `tenant` (a prefill entry, or the tuning of an
  // immediate-mode miss), held until the job ends.
  absl::StatusOr<Ticket> AdmitBackground(const std::string& tenant);
  // The device spent `ms` timing a run for `tenants` (equal parts). Only
  // time `against_budget` counts in the last minute's seconds that the
  // budget limits; all of it counts in the totals.
  void ChargeDevice(const std::vector<std::string>& tenants, double ms,
                    bool against_budget = true);
  // A prefill job of `tenant` was queued, or ended (ok: its find answered).
  void NotePrefill(const std::string& tenant);
  void NotePrefillDone(const std::string& tenant, bool ok);

  struct Usage {
    int finds_waiting = 0;       // finds waiting on tuning runs
    int background = 0;          // background jobs queued or running
    int64_t prefill_queued = 0;  // prefill jobs queued since start
    int64_t prefill_done = 0;    // ... that ended with a record
    int64_t prefill_failed = 0;  // ... that ended otherwise
    double device_seconds_last_minute = 0;
    double device_seconds_total = 0;
  };
  Usage UsageOf(const std::string& tenant);
  // Every tenant that has used the daemon's tuning since start, by name.
  std::vector<std::pair<std::string, Usage>> All();

  const Limits& limits() const { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct State {
    Usage usage;
    std::deque<std::pair<Clock::time_point, double>> charges;  // last minute
  };
  // Tickets may outlive the quotas (a pool's last tasks), so what they
  // release lives as long as the last of them.
  struct Shared {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, State> state ABSL_GUARDED_BY(mu);
  };
  // Drops charges older than a minute and sums the rest.
  static void Expire(State& s, Clock::time_point now);
  static Ticket Hold(std::shared_ptr<Shared> shared, const std::string& tenant,
                     bool background);

  const Limits limits_;
  const std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TENANT_LIMITS_H_
