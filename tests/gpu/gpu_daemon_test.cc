// convtuned end to end on the GPU: find, store, restart, hit. Skips with a
// message where there is no CUDA device.
#include <signal.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/cuda_device.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;
using testing::DaemonProcess;

// $CONVTUNED (e.g. a bundled copy) wins over the build tree's binary.
std::string Convtuned() {
  const char* env = std::getenv("CONVTUNED");
  return env != nullptr && *env != '\0' ? env : CONVTUNED_PATH;
}

class GpuDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaDevice>> dev = CudaDevice::Open(0);
    if (!dev.ok()) GTEST_SKIP() << "no CUDA device here: " << dev.status().message();
    dir_ = testing::MakeTempDir("convtune-gpu-daemon");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  v1::FindResponse Find(const std::string& socket, v1::DataType type) {
    ConvProblem p;
    p.n = 8;
    p.c = 64;
    p.k = 64;
    p.in = {1, 28, 28};
    p.filter = {1, 3, 3};
    p.pad = {0, 1, 1};
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    req.mutable_problem()->set_data_type(type);
    auto stub = v1::ConvTune::NewStub(
        grpc::CreateChannel(UnixTarget(socket), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
    v1::FindResponse resp;
    grpc::Status s = stub->Find(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  std::string dir_;
};

TEST_F(GpuDaemonTest, FindStoreRestartHit) {
  const std::string socket = dir_ + "/d.sock", db = dir_ + "/db";
  std::vector<v1::FindResponse> first;
  {
    DaemonProcess d;
    ASSERT_TRUE(d.Start(Convtuned(), {"--backend", "cuda", "--socket", socket, "--db", db},
                        dir_ + "/1.log"));
    ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
    EXPECT_THAT(d.log(), HasSubstr("device cuda-sm_"));
    for (v1::DataType t : {v1::FP32, v1::FP16}) {
      first.push_back(Find(socket, t));
      EXPECT_FALSE(first.back().from_db());
      ASSERT_GT(first.back().results_size(), 0);
      EXPECT_GE(first.back().results(0).solver_id(), 100u);  // a GPU solver
    }
    EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
  }
  DaemonProcess d;
  ASSERT_TRUE(d.Start(Convtuned(), {"--backend", "cuda", "--socket", socket, "--db", db},
                      dir_ + "/2.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  int i = 0;
  for (v1::DataType t : {v1::FP32, v1::FP16}) {
    v1::FindResponse again = Find(socket, t);
    EXPECT_TRUE(again.from_db());
    ASSERT_EQ(again.results_size(), first[i].results_size());
    EXPECT_EQ(again.results(0).solver_id(), first[i].results(0).solver_id());
    ++i;
  }
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

}  // namespace
}  // namespace convtune
