// The gRPC adapter of convtuned: converts requests, validates every field from
// the wire, and hands work to the find engine. Handlers never block on tuning
// or timing (callback API); they hold no logic of their own. Thread-safe.
#ifndef CONVTUNE_SERVER_SERVICE_H_
#define CONVTUNE_SERVER_SERVICE_H_

#include <cstdint>

#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "server/find_engine.h"
#include "server/find_mode.h"
#include "storage/store.h"

namespace convtune {

struct ServiceOptions {
  ProblemLimits limits;
  // The mode of a find that names none.
  FindMode default_mode = kDefaultFindMode;
  // Largest total of inline tensors an Execute request may carry.
  int64_t max_execute_bytes = int64_t{64} << 20;
};

class ConvTuneService final : public v1::ConvTune::CallbackService {
 public:
  ConvTuneService(FindEngine& engine, storage::Store& store, ServiceOptions options)
      : engine_(engine), store_(store), options_(options) {}

  grpc::ServerUnaryReactor* GetWorkspaceSize(grpc::CallbackServerContext* ctx,
                                             const v1::WorkspaceSizeRequest* req,
                                             v1::WorkspaceSizeResponse* resp) override;
  grpc::ServerUnaryReactor* Find(grpc::CallbackServerContext* ctx, const v1::FindRequest* req,
                                 v1::FindResponse* resp) override;
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
  grpc::ServerUnaryReactor* GetSolutions(grpc::CallbackServerContext* ctx,
                                         const v1::GetSolutionsRequest* req,
                                         v1::GetSolutionsResponse* resp) override;
  grpc::ServerUnaryReactor* GetSolutionWorkspaceSize(grpc::CallbackServerContext* ctx,
                                                     const v1::SolutionRequest* req,
                                                     v1::WorkspaceSizeResponse* resp) override;
  grpc::ServerUnaryReactor* CompileSolution(grpc::CallbackServerContext* ctx,
                                            const v1::SolutionRequest* req,
                                            v1::CompileSolutionResponse* resp) override;
  grpc::ServerUnaryReactor* TrainHeuristic(grpc::CallbackServerContext* ctx,
                                           const v1::TrainHeuristicRequest* req,
                                           v1::TrainHeuristicResponse* resp) override;
  grpc::ServerUnaryReactor* GetCodeObject(grpc::CallbackServerContext* ctx,
                                          const v1::GetCodeObjectRequest* req,
                                          v1::GetCodeObjectResponse* resp) override;

 private:
  FindEngine& engine_;
  storage::Store& store_;
  const ServiceOptions options_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SERVICE_H_
