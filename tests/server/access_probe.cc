// A client of convtuned that calls as another Unix user: it reads what it
// needs, drops to --uid/--gid (as root), and then calls each named RPC on the
// socket, printing one line per call: "<rpc> <code> <message>".
//
//   access_probe --socket S [--uid U --gid G] [--import FILE] RPC...
//
// RPCs: Find GetSolutions ListSolvers DbStats DbExport DbImport
// TrainHeuristic Execute.
#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem_proto.h"

namespace convtune {
namespace {

v1::ConvProblem Problem() {
  ConvProblem p;
  p.n = 1;
  p.c = 16;
  p.k = 16;
  p.in = {1, 12, 12};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

grpc::Status Call(v1::ConvTune::Stub& stub, const std::string& rpc,
                  const std::string& import_file) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (rpc == "Find") {
    v1::FindRequest req;
    *req.mutable_problem() = Problem();
    v1::FindResponse resp;
    return stub.Find(&ctx, req, &resp);
  }
  if (rpc == "GetSolutions") {
    v1::GetSolutionsRequest req;
    *req.mutable_problem() = Problem();
    v1::GetSolutionsResponse resp;
    return stub.GetSolutions(&ctx, req, &resp);
  }
  if (rpc == "ListSolvers") {
    v1::ListSolversRequest req;
    v1::ListSolversResponse resp;
    return stub.ListSolvers(&ctx, req, &resp);
  }
  if (rpc == "DbStats") {
    v1::DbStatsRequest req;
    v1::DbStatsResponse resp;
    return stub.DbStats(&ctx, req, &resp);
  }
  if (rpc == "DbExport") {
    v1::DbExportRequest req;
    v1::DbExportResponse resp;
    return stub.DbExport(&ctx, req, &resp);
  }
  if (rpc == "DbImport") {
    v1::DbImportRequest req;
    req.set_file(import_file);
    req.set_overwrite(true);
    v1::DbImportResponse resp;
    return stub.DbImport(&ctx, req, &resp);
  }
  if (rpc == "TrainHeuristic") {
    v1::TrainHeuristicRequest req;
    v1::TrainHeuristicResponse resp;
    return stub.TrainHeuristic(&ctx, req, &resp);
  }
  if (rpc == "PrefillCluster") {
    v1::PrefillRequest req;
    *req.add_problems() = Problem();
    req.set_cluster(true);
    v1::PrefillResponse resp;
    return stub.Prefill(&ctx, req, &resp);
  }
  if (rpc == "Execute") {
    v1::ExecuteRequest req;
    *req.mutable_problem() = Problem();
    req.set_solver_id(1);
    v1::ExecuteResponse resp;
    return stub.Execute(&ctx, req, &resp);
  }
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "probe: unknown rpc");
}

int Main(int argc, char** argv) {
  std::string socket, import_path;
  long uid = -1, gid = -1;
  std::vector<std::string> rpcs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (a == "--uid" && i + 1 < argc) {
      uid = std::atol(argv[++i]);
    } else if (a == "--gid" && i + 1 < argc) {
      gid = std::atol(argv[++i]);
    } else if (a == "--import" && i + 1 < argc) {
      import_path = argv[++i];
    } else {
      rpcs.push_back(a);
    }
  }
  std::string import_file;
  if (!import_path.empty()) {
    std::ifstream in(import_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    import_file = ss.str();
  }
  // Drop privileges before any connection is made.
  if (gid >= 0 &&
      (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0)) {
    std::perror("probe: setgid");
    return 3;
  }
  if (uid >= 0 && setresuid(uid, uid, uid) != 0) {
    std::perror("probe: setuid");
    return 3;
  }
  auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      UnixTarget(socket), grpc::InsecureChannelCredentials()));
  for (const std::string& rpc : rpcs) {
    grpc::Status s = Call(*stub, rpc, import_file);
    std::cout << rpc << " "
              << absl::StatusCodeToString(
                     static_cast<absl::StatusCode>(s.error_code()))
              << " " << s.error_message().substr(0, 300) << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
