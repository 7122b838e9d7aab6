#include "server/tenant_limits.h"

#include "absl/strings/str_cat.h"

namespace convtune {

absl::StatusOr<ExecuteLimiter::Ticket> ExecuteLimiter::Acquire(
    const std::string& tenant, int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    Usage& u = usage_[tenant];
    if (u.executes >= limits_.max_executes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tenant '", tenant, "' has ", u.executes,
                       " Execute call(s) in flight, its limit "
                       "(limits.tenant_executes_in_flight); retry in ",
                       kRetryAfterMs, " ms"));
    }
    if (u.bytes + bytes > limits_.max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "tenant '", tenant, "' would hold ", u.bytes + bytes,
          " bytes of Execute tensors, over its limit of ", limits_.max_bytes,
          " (limits.tenant_execute_bytes_in_flight); retry in ", kRetryAfterMs,
          " ms"));
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

}  // namespace convtune
