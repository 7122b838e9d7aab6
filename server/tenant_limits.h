// Per-tenant limits on what a call holds while it runs: Executes in flight
// and the bytes of their tensors. Over a limit, a call is refused at once
// with ResourceExhausted and a retry hint rather than queued, so that one
// tenant cannot take the daemon's memory. Thread-safe.
#ifndef CONVTUNE_SERVER_TENANT_LIMITS_H_
#define CONVTUNE_SERVER_TENANT_LIMITS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

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

}  // namespace convtune

#endif  // CONVTUNE_SERVER_TENANT_LIMITS_H_
