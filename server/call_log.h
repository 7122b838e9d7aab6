// Every call the daemon serves, seen from a gRPC server interceptor: one
// structured (logfmt) line per finished RPC on stderr, a count in the
// metrics, and the number of calls in flight, which shutdown waits on. Health
// checks are counted apart and not logged (a supervisor polls them).
// Thread-safe.
#ifndef CONVTUNE_SERVER_CALL_LOG_H_
#define CONVTUNE_SERVER_CALL_LOG_H_

#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/access.h"
#include "server/metrics.h"

namespace convtune {

class CallLog {
 public:
  // `access` and `metrics` (may be null) must outlive this. With `log`
  // false, calls are only counted.
  CallLog(const Access& access, bool log, Metrics* metrics = nullptr);
  // Writes what is buffered.
  ~CallLog();

  // The factory to hand to ServerBuilder::experimental()
  // .SetInterceptorCreators; it must not outlive this.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  Factory();

  // Calls other than health checks that have started and not finished.
  int64_t in_flight() const;
  // Waits until in_flight() is 0 or `timeout` passes; true if it reached 0.
  bool WaitIdle(absl::Duration timeout) const;

  // For the interceptor.
  void Started();
  void Finished(const char* method, const Caller& caller,
                const grpc::Status& status, absl::Duration took);
  const Access& access() const { return access_; }
  // Whether Finished uses its caller (a line or a metric is written).
  bool needs_caller() const { return log_ || metrics_ != nullptr; }

 private:
  // Lines go to stderr from a writer thread, so that no call waits on the
  // log's file; past 1 MiB waiting, lines are dropped and counted.
  void WriterLoop();

  const Access& access_;
  const bool log_;
  Metrics* const metrics_;
  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex log_mu_;
  std::string pending_ ABSL_GUARDED_BY(log_mu_);
  int64_t dropped_ ABSL_GUARDED_BY(log_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(log_mu_) = false;
  std::thread writer_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_CALL_LOG_H_
