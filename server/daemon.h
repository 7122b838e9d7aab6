// convtuned's wiring: opens the store, picks the device, starts the pools, the
// core (find engine, immediate mode, tuner, remote execute) and the gRPC server
// (Unix socket, optional TCP, health service).
// Members are declared in dependency order so teardown runs in reverse.
// Start/Shutdown/Wait are thread-safe.
#ifndef CONVTUNE_SERVER_DAEMON_H_
#define CONVTUNE_SERVER_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/device.h"
#include "kernels/gpu/compiler.h"
#include "server/access.h"
#include "server/call_log.h"
#include "server/core.h"
#include "server/find_tier.h"
#include "server/kernel_builder.h"
#include "server/measure_worker.h"
#include "server/service.h"
#include "server/thread_pool.h"
#include "server/unix_listener.h"
#include "storage/store.h"

namespace convtune {

struct DaemonOptions {
  // Unix socket path. Default: DefaultSocketPath().
  std::string socket_path;
  // Who may connect to the socket at all; Access then decides what each
  // caller may do. Default: 0660 (the daemon's user and group).
  mode_t socket_mode = 0660;
  // Optional plaintext TCP address, "host:port": its callers are anonymous
  // and get read-only queries. Default: none.
  std::string listen_address;
  // Optional TLS address, "host:port": each caller must present a client
  // certificate that `tls.client_ca_file` signed, and is known by its names
  // (Tenant::cert_names). Default: none.
  std::string tls_address;
  struct TlsFiles {
    std::string cert_file;       // the server's certificate chain (PEM)
    std::string key_file;        // its private key (PEM)
    std::string client_ca_file;  // CA certificates of the clients (PEM)
  } tls;
  // Tenants, admins and what unlisted users get. Default:
  // AccessPolicy::Default().
  AccessPolicy access = AccessPolicy::Default();
  // One log line per RPC on stderr. Default: on.
  bool log_rpcs = true;
  // Prometheus text endpoint, "host:port" (http://host:port/metrics).
  // Default: none.
  std::string metrics_address;
  // Database folder. Default: $XDG_STATE_HOME/convtune/db or
  // ~/.local/state/convtune/db.
  std::string db_dir;
  // Free space (MiB) the database leaves on its filesystem: below it, finds
  // still answer but store nothing, and say so. Default: 64.
  int64_t db_min_free_mb = 64;
  // When a write-ahead log is damaged, or CURRENT is missing: "continue"
  // (keep what can be read, copy the logs to <db>/lost/, say so at start
  // and in status) or "refuse" (do not start; the error names the file).
  // Default: continue.
  std::string db_recovery = "continue";
  // "auto" (CUDA, then HIP, else the CPU), "cpu", "cuda" or "hip". Default:
  // auto.
  std::string backend = "auto";
  // The GPU's ordinal for cuda / hip. Default: 0.
  int device_ordinal = 0;
  // The GPUs' ordinals for cuda / hip when the daemon owns several (each
  // with its own timing queue and measurement worker); they must share one
  // device key. Empty: device_ordinal alone. Default: empty.
  std::vector<int> devices;
  // The CPU backend's devices: its tuning threads split into this many
  // devices of an equal share (ordinals 0 to N-1, one device key), each
  // with its own timing queue and measurement worker, so that tuning runs
  // on several at once. More than one needs measure_in_worker. Default: 1.
  int cpu_devices = 1;
  // Folder of system FindDb files ("<device_key>.ctsys"). Default: none.
  std::string system_db_dir;
  // The find mode of requests that name none. Default: $CONVTUNE_FIND_MODE,
  // else DYNAMIC_HYBRID (set by Start when empty).
  std::string find_mode;
  // The nice value (0 to 19) of the threads that compile and time: serving
  // answers comes first. Default: 10.
  int tuning_nice = 10;
  // Hardware threads tuning may keep busy: the threads that build and
  // compile plans, and those that run the CPU backend's timed kernels (the
  // CPU device's compute units), and its reference checks. One hardware
  // thread is left to serving by default: when tuning keeps every CPU busy,
  // a kernel that does not preempt a running thread on a wakeup (this
  // machine's does not before its next tick, whatever the threads' nice
  // values) makes each answer wait up to a tick. Default: hardware threads
  // minus one, at least one.
  int tuning_threads = 0;
  // Threads that build and compile plans. Default:
  // CONVTUNE_COMPILE_PARALLEL_LEVEL, else tuning_threads.
  int compile_threads = 0;
  // Check and time candidate kernels in a worker process that owns the
  // device (WorkerMeasurer), so that one that faults or hangs costs only the
  // worker. Off: in this process, where a fault the device cannot be reset
  // from stops convtuned. Default: on.
  bool measure_in_worker = true;
  // The worker's binary: convtuned itself. Default: /proc/self/exe.
  std::string measure_worker_exe = "/proc/self/exe";
  // The cluster tier shared with the fleet's other daemons (Redis).
  // Default: none (tier.address empty). Its password is read from
  // tier_password_file, never given on the command line.
  FindTier::Options tier;
  std::string tier_password_file;
  Core::Options core;
  ServiceOptions service;
};

// The default database folder.
std::string DefaultDbDir();

class Daemon {
 public:
  // InvalidArgument for bad options, FailedPrecondition when the database or
  // the socket is in use by another daemon, Unavailable when a listener
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options);

  ~Daemon();

  // Says NOT_SERVING to health checks, stops accepting connections, fails
  // queued tunings with Unavailable, waits up to `grace_ms` for calls in
  // flight (health checks are still answered meanwhile), and answers those
  // still waiting Unavailable ("convtuned is shutting down"). A tuning run
  // still measuring stores nothing. Idempotent.
  void Shutdown(int grace_ms = kShutdownGraceMs);
  // How long calls in flight get at shutdown; main gives the whole process
  // kExitWithinMs from the signal, abandoning a measurement still running.
  static constexpr int kShutdownGraceMs = 1500;
  static constexpr int kExitWithinMs = 2000;
  // Blocks until Shutdown.
  void Wait();

  const DaemonOptions& options() const { return options_; }
  // The core of the first device's key.
  Core& core() { return *keys_.front().core; }
  const std::string& device_key() const {
    return keys_.front().core->device_key();
  }
  // Which backend was chosen and why ("backend auto: no CUDA driver ...").
  const std::string& backend_note() const { return backend_note_; }
  // A line about the system FindDb in use ("none" if there is none).
  std::string SystemDbSummary() const;
  // The cluster tier: where it is and whether it answers ("none").
  std::string TierSummary();
  // The TCP port bound for --listen-plaintext (useful with port 0), or 0
  // without TCP.
  int tcp_port() const { return tcp_port_; }
  // The port bound for --listen-tls, or 0 without TLS.
  int tls_port() const { return tls_port_; }
  // The metrics endpoint's port, or 0 without one.
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  // The gRPC health name that is NOT_SERVING while the database takes no
  // writes (a full disk, a failed write): answers still come, nothing new
  // is stored.
  static constexpr char kStorageHealthName[] = "convtune.storage";
  // Why the device was lost (a kernel fault it could not be reset from),
  // after which the daemon shuts itself down; empty while it is fine.
  std::string device_lost() const;

 private:
  explicit Daemon(DaemonOptions options) : options_(std::move(options)) {}
  absl::Status Init();
  // The devices' timing queues by name: "timing" for one device, else
  // "timing0", "timing1", ...
  std::vector<std::pair<std::string, ThreadPool*>> TimingQueues() const;
  // The ordinal of the i-th device: a GPU's own, a CPU device's index.
  int Ordinal(size_t i) const;
  // The index of the device of `ordinal` (past the last if none).
  size_t DeviceIndex(int ordinal) const;
  // The CPUs the i-th CPU device's worker runs on: its tuning threads'
  // share, in order (wrapping past the last CPU); empty for one device.
  std::vector<int> CpuShare(size_t i) const;
  absl::Status StartTier();
  void JoinLostShutdown();
  void WatchStorage();

  DaemonOptions options_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Device> device_;  // the first device
  // The others (GPUs or CPU devices past the first).
  std::vector<std::unique_ptr<Device>> more_devices_;
  std::unique_ptr<KernelCompiler> compiler_;  // null on the CPU
  // Each device's measurement worker; none when measuring in process.
  std::vector<std::unique_ptr<WorkerMeasurer>> measurers_;
  std::string backend_note_;
  std::unique_ptr<ThreadPool> compile_pool_;
  // One per device, one thread each.
  std::vector<std::unique_ptr<ThreadPool>> timing_queues_;
  std::unique_ptr<ThreadPool> store_pool_;
  // The tenants' tuning usage and limits, across every key's core
  // (which point at it: declared before them).
  std::unique_ptr<TuningQuotas> quotas_;
  // The devices of one key and what they share: kernels built for them,
  // the key's system FindDb, the solvers (built-in and the first device's
  // libraries) and a core. In the order of the devices' first appearance.
  struct KeyGroup {
    std::vector<size_t> devices;  // indices into the daemon's devices
    std::unique_ptr<KernelBuilder> kernel_builder;  // null on the CPU
    std::unique_ptr<SystemFindDb> system_db;
    std::unique_ptr<SolverRegistry> registry;
    std::unique_ptr<Core> core;
  };
  std::vector<KeyGroup> keys_;
  // Every key's core, for the service and status.
  std::vector<Core*> Cores() const;
  PeerTable peers_;
  std::unique_ptr<Access> access_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<CallLog> call_log_;
  std::unique_ptr<ConvTuneService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<UnixListener> listener_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::string device_lost_ ABSL_GUARDED_BY(mu_);
  std::thread lost_shutdown_
      ABSL_GUARDED_BY(mu_);  // Shutdown after a device loss
  // Once a second: reports whether the database takes writes (the
  // "convtune.storage" health name), and reopens it once it can again.
  std::thread storage_watch_;
  bool storage_writable_ = true;  // as last reported; the watcher's own
  bool owns_socket_ = false;      // the socket file is ours to remove
  int tcp_port_ = 0;
  int tls_port_ = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_DAEMON_H_
