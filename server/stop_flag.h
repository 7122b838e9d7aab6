// Whether convtuned is stopping. Set once, by Daemon::Shutdown or after the
// device was lost; each stage reads it before it starts work, so that queued
// work ends with Unavailable instead of running. Thread-safe.
#ifndef CONVTUNE_SERVER_STOP_FLAG_H_
#define CONVTUNE_SERVER_STOP_FLAG_H_

#include <atomic>

#include "absl/status/status.h"

namespace convtune {

class StopFlag {
 public:
  // True for the call that stopped it; false when it was already stopped.
  bool Stop() { return !stopped_.exchange(true); }
  bool stopped() const { return stopped_.load(); }
  // Unavailable when stopped, else OK.
  absl::Status Check() const { return stopped() ? Error() : absl::OkStatus(); }
  static absl::Status Error() {
    return absl::UnavailableError("convtuned is shutting down");
  }

 private:
  std::atomic<bool> stopped_{false};
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_STOP_FLAG_H_
