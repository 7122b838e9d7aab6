// The C++ client of convtuned: problems go to the daemon over gRPC, plans (and
// GPU code objects) come back and run here: cpu plans on host buffers, cuda
// and hip plans on this process's GPU (device memory, the same device the
// daemon tuned). A Client is thread-safe: gRPC stubs are, and the in-process
// caches, devices and counters are guarded by a mutex.
#ifndef CONVTUNE_CLIENT_CLIENT_H_
#define CONVTUNE_CLIENT_CLIENT_H_

#include <grpcpp/channel.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/cpu_device.h"
#include "kernels/plan_executor.h"
#include "kernels/problem.h"

namespace convtune {

// TLS to a daemon's --listen-tls port: the CA that signed the daemon's
// certificate, and this client's certificate and key, which the daemon's
// client CA signed (its names are the client's identity there). PEM text.
struct TlsOptions {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  // The name to expect in the daemon's certificate when it differs from
  // the address's host. Empty: the host.
  std::string server_name;
};

struct ClientOptions {
  // Deadline of a Find call (tuning can take minutes).
  absl::Duration find_timeout = absl::Minutes(10);
  // Deadline of every other call.
  absl::Duration call_timeout = absl::Seconds(30);
  // The GPU that cuda and hip plans run on (opened on the first such plan).
  // Set, it is also named to the daemon in every find as the device this
  // client runs on, which tuning then leaves to it where another is free.
  // Unset: GPU 0, named to no one.
  std::optional<int> device_ordinal;
  // Set: connect with TLS (the address must be host:port).
  std::optional<TlsOptions> tls;
};

struct FindOptions {
  int64_t workspace_limit = -1;  // negative: no limit (left out of the request)
  int32_t request_count = 0;     // 0: all results
  bool exhaustive = false;       // re-time even on a FindDb hit
  // FIND_MODE_UNSPECIFIED: the daemon's default mode.
  v1::FindMode mode = v1::FIND_MODE_UNSPECIFIED;
  // The daemon's device a tuning run times on; unset: the daemon picks
  // one, leaving the client's own device (ClientOptions::device_ordinal)
  // to it where another is free.
  std::optional<int> tune_on_device;
};

// What this client has asked the daemon for and answered itself, so callers
// (and tests) can see that a compiled or cached plan costs no round trip.
struct ClientCounters {
  int64_t plan_rpcs = 0;         // GetPlan calls sent
  int64_t plan_cache_hits = 0;   // plans served from the in-process cache
  int64_t compile_rpcs = 0;      // CompileSolution calls sent
  int64_t code_object_rpcs = 0;  // GetCodeObject calls sent
  int64_t code_object_cache_hits = 0;
};

class Client {
 public:
  // `address`: "unix:/path", "/abs/path" (a socket), or "host:port"; empty
  // means DefaultSocketPath(). The channel connects lazily: an absent daemon
  // shows up as Unavailable on the first call. InvalidArgument for a relative
  // socket path.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      std::string address, ClientOptions options = {});

  // The gRPC target in use, e.g. "unix:/run/user/1000/convtune/convtuned.sock".
  const std::string& target() const { return target_; }

  // Every call returns the daemon's status (InvalidArgument naming the bad
  // field, FailedPrecondition when no solver applies, ...), or Unavailable
  // (mentioning target()) when the daemon cannot be reached, or
  // DeadlineExceeded past the configured deadline.
  absl::StatusOr<int64_t> WorkspaceSize(const ConvProblem& problem);
  absl::StatusOr<v1::FindResponse> Find(const ConvProblem& problem,
                                        const FindOptions& options = {});
  // Find, calling `progress` (on this thread) as the daemon's tuning run
  // gets on: once per event, not at all for a FindDb hit (nor from a daemon
  // without FindStream, which is asked a plain Find).
  absl::StatusOr<v1::FindResponse> Find(
      const ConvProblem& problem, const FindOptions& options,
      const std::function<void(const v1::FindProgress&)>& progress);
  // Queues the problems to tune at background priority; returns at once.
  // The response says how many were taken (the rest: over the tenant's
  // limit on queued jobs; send them again later).
  // `cluster`: onto the cluster tier's job stream instead, for every daemon
  // of the fleet (an admin call).
  absl::StatusOr<v1::PrefillResponse> Prefill(
      const std::vector<ConvProblem>& problems, int64_t workspace_limit = -1,
      bool cluster = false);
  // Cached in-process per (problem key, solver id) after the first fetch.
  absl::StatusOr<v1::ExecutionPlan> GetPlan(const ConvProblem& problem,
                                            uint32_t solver_id);
  absl::StatusOr<v1::ListSolversResponse> ListSolvers(
      const std::optional<ConvProblem>& problem = std::nullopt);
  // Runs on the daemon with inline tensors; returns the output tensor bytes.
  absl::StatusOr<std::string> Execute(const ConvProblem& problem,
                                      uint32_t solver_id, std::string x,
                                      std::string w, std::string y);
  absl::StatusOr<v1::DbStatsResponse> DbStats();
  // The daemon's device, queues, counters, and who it takes this client for.
  // `cluster`: with the cluster tier's prefill jobs (cluster_jobs).
  absl::StatusOr<v1::GetStatusResponse> GetStatus(bool cluster = false);
  // grpc.health.v1 Check of `service` ("" for the daemon as a whole,
  // "convtune.storage" for whether its database takes writes): the serving
  // status's name ("SERVING", "NOT_SERVING", ...). Anyone may ask.
  absl::StatusOr<std::string> Health(const std::string& service);
  // A serialized ExportFile and its entry count. `system`: only this
  // daemon's device's find and perf records, as a system FindDb (the
  // response's device_key names the device).
  absl::StatusOr<v1::DbExportResponse> DbExport(bool system = false);
  // Records the daemon already holds with a different value are kept unless
  // `overwrite`.
  absl::StatusOr<v1::DbImportResponse> DbImport(std::string file,
                                                bool overwrite = false);

  // Immediate mode. The applicable solutions, best first, from the FindDb
  // (measured) or a fallback ranking (estimated); at most `max_count` (0:
  // all) needing at most `workspace_limit` bytes (negative: no limit). On a
  // miss the daemon queues a find of the problem in the background unless
  // `background_tune` says otherwise (absent: the daemon's default).
  // FailedPrecondition when no solver applies.
  absl::StatusOr<v1::GetSolutionsResponse> GetSolutions(
      const ConvProblem& problem, int32_t max_count = 0,
      int64_t workspace_limit = -1,
      std::optional<bool> background_tune = std::nullopt);
  // The workspace bytes of one solution. NotFound for an id that names no
  // solver; the daemon's code when the solver does not apply.
  absl::StatusOr<int64_t> GetSolutionWorkspaceSize(const ConvProblem& problem,
                                                   uint64_t solution_id);
  // Has the daemon compile the solution's kernels, keeps the returned plan in
  // the plan cache (a later Run or RunImmediate sends no GetPlan) and fetches
  // its code objects. Errors as GetSolutionWorkspaceSize.
  absl::StatusOr<v1::CompileSolutionResponse> CompileSolution(
      const ConvProblem& problem, uint64_t solution_id);
  // A code object by hash, fetched once per client. NotFound when the daemon
  // holds none (always on a CPU daemon).
  absl::StatusOr<v1::GetCodeObjectResponse> GetCodeObject(
      const std::string& hash);
  // Trains the daemon's learned heuristic from its FindDb records.
  // Unimplemented from a daemon that cannot train.
  absl::StatusOr<v1::TrainHeuristicResponse> TrainHeuristic();
  // Runs solution `solution_id` here, as Run does. NotFound for an id no
  // solver can have.
  absl::Status RunImmediate(const ConvProblem& problem, uint64_t solution_id,
                            const PlanBuffers& buffers);

  ClientCounters counters() const;

  // Fetches (or reuses) the plan and runs it here. Buffers follow
  // PlanBuffers' roles: for backward data x is written, for backward weights
  // w is. A cpu plan takes host addresses; a cuda or hip plan takes device
  // addresses on ClientOptions::device_ordinal (CUdeviceptr / hipMalloc
  // memory of the primary context) and returns once the output is written.
  // FailedPrecondition if this process cannot open the plan's backend;
  // ResourceExhausted if the workspace is too small.
  absl::Status Run(const ConvProblem& problem, uint32_t solver_id,
                   const PlanBuffers& buffers);

  // GPU plans run on `stream` (a CUstream / cudaStream_t or hipStream_t of
  // the device's primary context, kept alive by the caller) from now on,
  // and Run returns once they are queued there: the caller orders later
  // work on that stream. Null (the default): the device's own stream, and
  // Run returns once the output is written.
  void SetStream(void* stream);

  // The deadlines of later calls: Find calls' and every other call's
  // (ClientOptions' find_timeout and call_timeout).
  void SetTimeouts(absl::Duration call, absl::Duration find);

 private:
  Client(std::string target, ClientOptions options,
         std::shared_ptr<grpc::Channel> channel);

  // Names the client's device (ClientOptions::device_ordinal) in a request
  // answered for that device's key, or run there.
  template <typename Request>
  void NameDevice(Request* request) const {
    if (options_.device_ordinal.has_value()) {
      request->set_device(*options_.device_ordinal);
    }
  }
  // The request of Find and its streaming form: the client's device named
  // as the one it runs on.
  v1::FindRequest FindRequestFor(const ConvProblem& problem,
                                 const FindOptions& options) const;

  // The plan of (problem, solver) in the plan cache, fetched on a miss.
  // Cache entries are never removed, so the pointer stays valid.
  absl::StatusOr<const v1::ExecutionPlan*> PlanRef(const ConvProblem& problem,
                                                   uint32_t solver_id);
  // Converts a failed call's status, naming the target when unreachable; a
  // retry hint in `context`'s trailing metadata comes along (RetryAfter).
  absl::Status CallError(const grpc::Status& status,
                         const grpc::ClientContext* context = nullptr) const;
  void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) const;
  // The device that runs `backend`'s plans here, opened on first use.
  // FailedPrecondition, saying why, when this process cannot open it.
  absl::StatusOr<Device*> DeviceFor(v1::Backend backend);
  // Makes every code object `plan` names loadable on `device`.
  absl::Status LoadCodeObjects(const v1::ExecutionPlan& plan, Device& device);

  const std::string target_;
  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::ConvTune::Stub> stub_;
  CpuDevice cpu_;

  // Runs on a GPU one at a time: the device's stream is chosen per run.
  absl::Mutex run_mu_;
  std::atomic<void*> stream_{nullptr};
  // options_' timeouts as SetTimeouts left them, in microseconds.
  std::atomic<int64_t> call_timeout_us_;
  std::atomic<int64_t> find_timeout_us_;
  absl::Duration CallTimeout() const {
    return absl::Microseconds(call_timeout_us_.load());
  }
  absl::Duration FindTimeout() const {
    return absl::Microseconds(find_timeout_us_.load());
  }

  absl::Mutex device_mu_;
  // By backend name; a failed open is remembered, not retried per call.
  std::map<v1::Backend, absl::StatusOr<std::unique_ptr<Device>>> gpus_
      ABSL_GUARDED_BY(device_mu_);

  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, v1::ExecutionPlan> plans_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::GetCodeObjectResponse> code_objects_
      ABSL_GUARDED_BY(mu_);
  ClientCounters counters_ ABSL_GUARDED_BY(mu_);
};

// The gRPC target for an address as Connect takes it. InvalidArgument for a
// relative path or an address with spaces.
absl::StatusOr<std::string> ResolveTarget(absl::string_view address);

}  // namespace convtune

#endif  // CONVTUNE_CLIENT_CLIENT_H_
