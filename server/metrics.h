// The daemon's Prometheus text endpoint (prometheus-cpp's exposer at
// http://ADDRESS/metrics). Two kinds of figures:
//   - counted as they happen: RPCs by method, status code and tenant, and
//     their latency by method (a histogram);
//   - read at each scrape from their owners: the find engine's counters
//     (finds, FindDb hits, tunings and abandoned ones, compile and timing
//     seconds, ...), tunings and calls in flight, each queue's waiting tasks
//     by priority, and the kernel cache (entries, memory and store hits,
//     compiles), and whether the database takes writes.
// Thread-safe.
#ifndef CONVTUNE_SERVER_METRICS_H_
#define CONVTUNE_SERVER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/counters.h"
#include "server/thread_pool.h"
#include "storage/store.h"

namespace convtune {

// What a scrape reads; every function runs on the exposer's threads.
struct MetricsSources {
  std::function<EngineCounters()> counters;
  std::function<int64_t()> tunings_in_flight;
  std::function<int64_t()> calls_in_flight;
  // Pools by name ("compile", "timing", "store"); they must outlive the
  // Metrics.
  std::vector<std::pair<std::string, const ThreadPool*>> pools;
  // Kernel cache: entries stored, hits in memory, hits in the store, and
  // compiler runs. Empty on the CPU backend.
  std::function<std::vector<std::pair<std::string, int64_t>>()> kernel_cache;
  // Whether the database takes writes, its failed writes and recoveries.
  std::function<storage::StoreHealth()> storage;
  // Each device's tuning: runs queued or timed, runs done, and their device
  // time. Optional.
  struct DeviceFigures {
    int ordinal = 0;
    int64_t jobs_waiting = 0;
    int64_t jobs_done = 0;
    double busy_ms = 0;
  };
  std::function<std::vector<DeviceFigures>()> devices;
};

class Metrics {
 public:
  // Serves on `address` ("127.0.0.1:9464"; port 0 picks one). Unavailable
  // if it cannot listen there.
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(
      const std::string& address, MetricsSources sources);
  ~Metrics();

  // The port it listens on.
  int port() const { return port_; }

  // One finished RPC: `rpc` its method's short name, `code` its status's
  // name ("OK", "PERMISSION_DENIED").
  void CountRpc(absl::string_view rpc, absl::string_view code,
                absl::string_view tenant, double seconds);

 private:
  class Scraped;
  Metrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Scraped> scraped_;
  prometheus::Family<prometheus::Counter>* rpcs_ = nullptr;
  prometheus::Family<prometheus::Histogram>* latency_ = nullptr;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_METRICS_H_
