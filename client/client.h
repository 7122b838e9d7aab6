// The C++ client of convtuned: problems go to the daemon over gRPC, plans come
// back and run here on host buffers. A Client is thread-safe: gRPC stubs are,
// and the in-process plan cache is guarded by a mutex.
#ifndef CONVTUNE_CLIENT_CLIENT_H_
#define CONVTUNE_CLIENT_CLIENT_H_

#include <grpcpp/channel.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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

struct ClientOptions {
  // Deadline of a Find call (tuning can take minutes).
  absl::Duration find_timeout = absl::Minutes(10);
  // Deadline of every other call.
  absl::Duration call_timeout = absl::Seconds(30);
};

struct FindOptions {
  int64_t workspace_limit = -1;  // -1: no limit
  int32_t request_count = 0;     // 0: all results
  bool exhaustive = false;       // re-time even on a FindDb hit
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
  // A serialized ExportFile and its entry count.
  absl::StatusOr<v1::DbExportResponse> DbExport();
  // Records the daemon already holds with a different value are kept unless
  // `overwrite`.
  absl::StatusOr<v1::DbImportResponse> DbImport(std::string file,
                                                bool overwrite = false);

  // Fetches (or reuses) the plan and runs it here on the CPU. Buffers follow
  // PlanBuffers' roles: for backward data x is written, for backward weights
  // w is. FailedPrecondition if the plan is for a backend this client cannot
  // run; ResourceExhausted if the workspace is too small.
  absl::Status Run(const ConvProblem& problem, uint32_t solver_id,
                   const PlanBuffers& buffers);

 private:
  Client(std::string target, ClientOptions options,
         std::shared_ptr<grpc::Channel> channel);

  // Converts a failed call's status, naming the target when unreachable.
  absl::Status CallError(const grpc::Status& status) const;
  void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) const;

  const std::string target_;
  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::ConvTune::Stub> stub_;
  CpuDevice device_;

  absl::Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, v1::ExecutionPlan> plans_
      ABSL_GUARDED_BY(mu_);
};

// The gRPC target for an address as Connect takes it. InvalidArgument for a
// relative path or an address with spaces.
absl::StatusOr<std::string> ResolveTarget(absl::string_view address);

}  // namespace convtune

#endif  // CONVTUNE_CLIENT_CLIENT_H_
