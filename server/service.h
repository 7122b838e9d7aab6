// The gRPC edge of convtuned: each handler converts its request with the
// transport-free functions of requests.h and hands the work to the core. A
// handler never compiles, times or waits on the device: kernel builds run on
// the compile pool, timings and remote execution on the device's timing
// queue, and bulk store operations (stats, export, import) on the store pool;
// each finishes its reactor from there. FindDb hits, immediate-mode answers
// and workspace sizes are answered on the callback thread at once.
// Each handler first identifies its caller (server/access.h) and refuses a
// call its role does not allow with PermissionDenied, before anything runs.
// Thread-safe.
#ifndef CONVTUNE_SERVER_SERVICE_H_
#define CONVTUNE_SERVER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "convtune/v1/service.grpc.pb.h"
#include "server/access.h"
#include "server/core.h"
#include "server/requests.h"
#include "server/thread_pool.h"
#include "storage/store.h"

namespace convtune {

// Calls answered later, from another thread: each is answered exactly
// once, by its work or, at shutdown, by CutAll. Thread-safe.
class PendingCalls {
 public:
  // One call's answer. Its response may be written only inside Answer.
  class Call {
   public:
    Call(PendingCalls* registry, uint64_t id, grpc::CallbackServerContext* ctx,
         grpc::ServerUnaryReactor* reactor)
        : registry_(registry), id_(id), ctx_(ctx), reactor_(reactor) {}
    // Unless the call was cut, runs `fill` (which writes the response and
    // returns the call's status) and finishes the call with its status.
    void Answer(const std::function<absl::Status()>& fill);
    void Answer(const absl::Status& s) {
      Answer([&] { return s; });
    }
    grpc::ServerUnaryReactor* reactor() const { return reactor_; }
    // Whether the caller stopped waiting: the call was answered (or cut),
    // or the caller cancelled. From any thread, for as long as the Call
    // lives: once answered, the server context (which gRPC frees after the
    // call finishes) is not read again.
    bool Gone();

   private:
    friend class PendingCalls;
    // Finishes with `why` unless answered already.
    void Cut(const absl::Status& why);

    PendingCalls* const registry_;
    const uint64_t id_;
    grpc::CallbackServerContext* const ctx_;
    grpc::ServerUnaryReactor* const reactor_;
    absl::Mutex mu_;
    bool answered_ ABSL_GUARDED_BY(mu_) = false;
  };

  // A unary call to be answered later.
  std::shared_ptr<Call> Begin(grpc::CallbackServerContext* ctx);
  // Any other call (a stream): `cut` answers it with the status given;
  // Forget once it is answered.
  uint64_t Add(std::function<void(const absl::Status&)> cut);
  void Forget(uint64_t id);
  // Answers every call not answered yet with `why`; later calls are cut
  // as they begin.
  void CutAll(const absl::Status& why);

 private:
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::function<void(const absl::Status&)>> cuts_
      ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> cut_all_ ABSL_GUARDED_BY(mu_);
};

// Serves one core per device key: a request that names its device
// (`device`, or a find's `tune_on_device`) is answered by the core of that
// device's key, one that names none (or a device the daemon does not have)
// by the first core's.
class ConvTuneService final : public v1::ConvTune::CallbackService {
 public:
  // References must outlive the service. REQUIRES: `cores` non-empty, of
  // distinct keys, no ordinal in two of them.
  ConvTuneService(std::vector<Core*> cores, storage::Store& store,
                  ThreadPool& store_pool, const Access& access,
                  ServiceOptions options);
  ConvTuneService(Core& core, storage::Store& store, ThreadPool& store_pool,
                  const Access& access, ServiceOptions options)
      : ConvTuneService(std::vector<Core*>{&core}, store, store_pool, access,
                        std::move(options)) {}

  grpc::ServerUnaryReactor* GetWorkspaceSize(
      grpc::CallbackServerContext* ctx, const v1::WorkspaceSizeRequest* req,
      v1::WorkspaceSizeResponse* resp) override;
  grpc::ServerUnaryReactor* Find(grpc::CallbackServerContext* ctx,
                                 const v1::FindRequest* req,
                                 v1::FindResponse* resp) override;
  grpc::ServerWriteReactor<v1::FindEvent>* FindStream(
      grpc::CallbackServerContext* ctx, const v1::FindRequest* req) override;
  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* ctx,
                                    const v1::PrefillRequest* req,
                                    v1::PrefillResponse* resp) override;
  grpc::ServerUnaryReactor* GetPlan(grpc::CallbackServerContext* ctx,
                                    const v1::GetPlanRequest* req,
                                    v1::GetPlanResponse* resp) override;
  grpc::ServerUnaryReactor* ListSolvers(grpc::CallbackServerContext* ctx,
                                        const v1::ListSolversRequest* req,
                                        v1::ListSolversResponse* resp) override;
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx,
                                    const v1::ExecuteRequest* req,
                                    v1::ExecuteResponse* resp) override;
  grpc::ServerUnaryReactor* DbStats(grpc::CallbackServerContext* ctx,
                                    const v1::DbStatsRequest* req,
                                    v1::DbStatsResponse* resp) override;
  grpc::ServerUnaryReactor* DbExport(grpc::CallbackServerContext* ctx,
                                     const v1::DbExportRequest* req,
                                     v1::DbExportResponse* resp) override;
  grpc::ServerUnaryReactor* DbImport(grpc::CallbackServerContext* ctx,
                                     const v1::DbImportRequest* req,
                                     v1::DbImportResponse* resp) override;
  grpc::ServerUnaryReactor* GetSolutions(
      grpc::CallbackServerContext* ctx, const v1::GetSolutionsRequest* req,
      v1::GetSolutionsResponse* resp) override;
  grpc::ServerUnaryReactor* GetSolutionWorkspaceSize(
      grpc::CallbackServerContext* ctx, const v1::SolutionRequest* req,
      v1::WorkspaceSizeResponse* resp) override;
  grpc::ServerUnaryReactor* CompileSolution(
      grpc::CallbackServerContext* ctx, const v1::SolutionRequest* req,
      v1::CompileSolutionResponse* resp) override;
  grpc::ServerUnaryReactor* TrainHeuristic(
      grpc::CallbackServerContext* ctx, const v1::TrainHeuristicRequest* req,
      v1::TrainHeuristicResponse* resp) override;
  grpc::ServerUnaryReactor* GetCodeObject(
      grpc::CallbackServerContext* ctx, const v1::GetCodeObjectRequest* req,
      v1::GetCodeObjectResponse* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::GetStatusRequest* req,
                                      v1::GetStatusResponse* resp) override;

  // Answers every call still waiting on work with Unavailable ("convtuned
  // is shutting down"), so that no caller is cut off without a status.
  void CutPendingCalls() {
    pending_.CutAll(absl::UnavailableError("convtuned is shutting down"));
  }

 private:
  // OK if the caller of `ctx` holds `right`; PermissionDenied otherwise.
  absl::Status Allowed(grpc::CallbackServerContext* ctx, Right right,
                       absl::string_view rpc, Caller* caller = nullptr) const;
  // The core a find is for: that of the device it is to be tuned on
  // (InvalidArgument naming tune_on_device if the daemon has no such
  // device), else that of the caller's own device. Notes the caller's
  // device as in use.
  absl::StatusOr<Core*> TakeDevices(const FindInput& in);
  // The core of device `ordinal`; the first where it is unset or names a
  // device the daemon does not have.
  Core& CoreOf(std::optional<int> ordinal) const;
  // That of a request's optional `device` (InvalidArgument if negative).
  template <typename Request>
  absl::StatusOr<Core*> CoreFor(const Request& req) const {
    absl::StatusOr<std::optional<int>> device =
        OrdinalFrom("device", req.has_device(), req.device());
    if (!device.ok()) return device.status();
    return &CoreOf(*device);
  }
  // OK if the daemon has device `ordinal`; InvalidArgument naming `field`
  // and the devices there are otherwise.
  absl::Status CheckDevice(int ordinal, absl::string_view field) const;

  const std::vector<Core*> cores_;
  Core& core_;  // the first
  absl::flat_hash_map<int, Core*> by_ordinal_;
  std::vector<int> ordinals_;
  storage::Store& store_;
  ThreadPool& store_pool_;
  const Access& access_;
  const ServiceOptions options_;
  ExecuteLimiter executes_;
  PendingCalls pending_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SERVICE_H_
