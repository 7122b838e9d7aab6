// The service itself over a real in-process gRPC channel: a kernel build in
// flight on the compile pool holds up no other call, workspace queries never
// compile, and CompileSolution says what it compiled.
#include "server/service.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/notification.h"
#include "kernels/cpu_device.h"
#include "kernels/gpu/compiler.h"
#include "kernels/problem_proto.h"
#include "server/solvers/gpu_solvers.h"
#include "storage/records.h"

namespace convtune {
namespace {

// The CPU device presented as an sm_90 CUDA GPU: the GPU solvers plan for it
// and their kernels are compiled for real; nothing is launched on it.
class PretendSm90 final : public DeviceWrapper {
 public:
  PretendSm90() : DeviceWrapper(&cpu_), info_(cpu_.info()) {
    info_.backend = v1::CUDA;
    info_.arch = "sm_90";
    info_.driver_version = "13000";
    info_.compiler_version = "nvrtc-test";
  }
  const DeviceInfo& info() const override { return info_; }
  absl::Status LoadCodeObject(const std::string& hash,
                              const std::string& binary) override {
    absl::MutexLock lock(&mu_);
    loaded_.insert(hash);
    return absl::OkStatus();
  }
  bool HasCodeObject(const std::string& hash) const override {
    absl::MutexLock lock(&mu_);
    return loaded_.contains(hash);
  }

 private:
  CpuDevice cpu_;
  DeviceInfo info_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> loaded_ ABSL_GUARDED_BY(mu_);
};

// NVRTC held at a gate: each compile says it started, then waits for the
// gate before it compiles.
class GatedCompiler final : public KernelCompiler {
 public:
  explicit GatedCompiler(std::unique_ptr<KernelCompiler> real)
      : real_(std::move(real)) {}
  v1::Backend backend() const override { return real_->backend(); }
  const std::string& version() const override { return real_->version(); }
  absl::StatusOr<std::string> Compile(
      const CompileRequest& req) const override {
    if (calls_++ == 0) started_.Notify();
    gate_.WaitForNotification();
    return real_->Compile(req);
  }
  void Open() const {
    if (!gate_.HasBeenNotified()) gate_.Notify();
  }
  bool WaitStarted(absl::Duration timeout) const {
    return started_.WaitForNotificationWithTimeout(timeout);
  }
  int calls() const { return calls_; }

 private:
  std::unique_ptr<KernelCompiler> real_;
  mutable std::atomic<int> calls_{0};
  mutable absl::Notification started_, gate_;
};

ConvProblem Problem(int64_t k) {
  ConvProblem p;
  p.n = 2;
  p.c = 16;
  p.k = k;
  p.in = {1, 14, 14};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

template <typename Request>
Request WithProblem(const ConvProblem& p) {
  Request r;
  ProblemToProto(p, r.mutable_problem());
  return r;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
    if (!nvrtc.ok())
      GTEST_SKIP() << "needs NVRTC to compile kernels: " << nvrtc.status();
    compiler_ = std::make_unique<GatedCompiler>(*std::move(nvrtc));
    char tmpl[] = "/tmp/convtune-service-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRocksDbStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    builder_ =
        std::make_unique<KernelBuilder>(&device_, *compiler_, *store_, "sm_90");
    core_ = std::make_unique<Core>(device_, SolverRegistry::Default(), *store_,
                                   compile_, timing_, Core::Options(), nullptr,
                                   builder_.get());
    // An in-process channel's caller is this test: an admin.
    service_ = std::make_unique<ConvTuneService>(*core_, *store_, store_pool_,
                                                 access_, ServiceOptions());
    grpc::ServerBuilder server_builder;
    server_builder.RegisterService(service_.get());
    server_ = server_builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ConvTune::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override {
    if (compiler_ != nullptr) compiler_->Open();
    if (server_ != nullptr) server_->Shutdown();
    compile_.WaitIdle();
    timing_.WaitIdle();
    store_pool_.WaitIdle();
    server_.reset();
    service_.reset();
    core_.reset();
    builder_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A record of `p` in the FindDb, as a find on this device would store it.
  void StoreRecord(const ConvProblem& p) {
    v1::FindRecord r;
    r.set_device_key(device_.info().Key());
    r.set_problem_key(ProblemKey(p));
    r.set_workspace_limit(-1);
    v1::PerfResult* best = r.add_results();
    best->set_solver_id(kGpuDirectNaiveId);
    best->set_solver_name("gpu_direct_naive");
    best->set_algorithm("direct");
    best->set_time_ms(0.25);
    best->set_measured(true);
    ASSERT_TRUE(core_->records().Store(r).ok());
  }
  std::unique_ptr<grpc::ClientContext> Context(int seconds) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(seconds));
    return ctx;
  }

  std::string dir_;
  PretendSm90 device_;
  std::unique_ptr<GatedCompiler> compiler_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<KernelBuilder> builder_;
  ThreadPool compile_{"compile", 2};
  ThreadPool timing_{"timing", 1};
  ThreadPool store_pool_{"store", 1};
  std::unique_ptr<Core> core_;
  Access access_{[] {
                   AccessPolicy p = AccessPolicy::Default();
                   p.uncredentialed = Role::kAdmin;
                   return p;
                 }(),
                 nullptr};
  std::unique_ptr<ConvTuneService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ConvTune::Stub> stub_;
};

// Issue 10: no gRPC handler compiles, times or waits on the device.
TEST_F(ServiceTest, ASlowCompileHoldsUpNoFindDbHitAndNoWorkspaceQuery) {
  const ConvProblem hit = Problem(32);
  const ConvProblem cold = Problem(48);
  StoreRecord(hit);

  v1::SolutionRequest compile = WithProblem<v1::SolutionRequest>(cold);
  compile.set_solution_id(kGpuDirectNaiveId);
  v1::CompileSolutionResponse compiled;
  grpc::Status compile_status;
  std::atomic<bool> compile_done{false};
  std::thread compiling([&] {
    auto ctx = Context(300);
    compile_status = stub_->CompileSolution(ctx.get(), compile, &compiled);
    compile_done = true;
  });
  ASSERT_TRUE(compiler_->WaitStarted(absl::Seconds(60)))
      << "the compile never started";

  // With the compiler held, every one of these is answered.
  {
    auto ctx = Context(10);
    v1::FindResponse found;
    grpc::Status s =
        stub_->Find(ctx.get(), WithProblem<v1::FindRequest>(hit), &found);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(found.from_db());
    EXPECT_EQ(found.source(), "user_db");
    ASSERT_EQ(found.results_size(), 1);
    EXPECT_EQ(found.results(0).solver_id(), kGpuDirectNaiveId);
  }
  {
    auto ctx = Context(10);
    v1::GetSolutionsResponse solutions;
    grpc::Status s = stub_->GetSolutions(
        ctx.get(), WithProblem<v1::GetSolutionsRequest>(hit), &solutions);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_GE(solutions.solutions_size(), 1);
    EXPECT_TRUE(solutions.solutions(0).measured());
    EXPECT_EQ(solutions.solutions(0).algorithm(), v1::DIRECT);
  }
  {
    auto ctx = Context(10);
    v1::WorkspaceSizeResponse ws;
    grpc::Status s = stub_->GetWorkspaceSize(
        ctx.get(), WithProblem<v1::WorkspaceSizeRequest>(cold), &ws);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_GE(ws.workspace_bytes(), 0);
  }
  for (uint32_t id : {kGpuDirectNaiveId, kGpuIm2colGemmBlasId}) {
    auto ctx = Context(10);
    v1::SolutionRequest req = WithProblem<v1::SolutionRequest>(cold);
    req.set_solution_id(id);
    v1::WorkspaceSizeResponse ws;
    grpc::Status s = stub_->GetSolutionWorkspaceSize(ctx.get(), req, &ws);
    if (id == kGpuDirectNaiveId) {
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(ws.workspace_bytes(), 0);
    } else {
      // No BLAS on this device: the solver is not one of its solutions.
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND)
          << s.error_message();
    }
  }
  // Workspace queries compiled nothing, and the compile is still held.
  EXPECT_EQ(compiler_->calls(), 1);
  EXPECT_FALSE(compile_done);

  compiler_->Open();
  compiling.join();
  ASSERT_TRUE(compile_status.ok()) << compile_status.error_message();
  EXPECT_GE(compiled.compiled(), 1);
  EXPECT_EQ(compiled.plan().solver_id(), kGpuDirectNaiveId);
  EXPECT_EQ(compiled.plan().backend(), v1::CUDA);
  ASSERT_GT(compiled.plan().steps_size(), 0);
  for (const v1::KernelStep& step : compiled.plan().steps()) {
    EXPECT_EQ(step.code_object_hash().size(), 64u) << step.kernel();
  }

  // The second time everything comes from the kernel cache.
  auto ctx = Context(60);
  v1::CompileSolutionResponse again;
  grpc::Status s = stub_->CompileSolution(ctx.get(), compile, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.compiled(), 0);
  EXPECT_EQ(again.plan().steps(0).code_object_hash(),
            compiled.plan().steps(0).code_object_hash());
}

TEST_F(ServiceTest, GetPlanBuildsOnTheCompilePoolAndNamesBadFields) {
  compiler_->Open();
  v1::GetPlanRequest req = WithProblem<v1::GetPlanRequest>(Problem(32));
  req.set_solver_id(kGpuDirectNaiveId);
  auto ctx = Context(120);
  v1::GetPlanResponse plan;
  grpc::Status s = stub_->GetPlan(ctx.get(), req, &plan);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(plan.plan().steps(0).code_object_hash().size(), 64u);

  req.mutable_problem()->set_n(0);
  auto bad = Context(10);
  s = stub_->GetPlan(bad.get(), req, &plan);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), ::testing::StartsWith("problem."));

  v1::SolutionRequest unknown = WithProblem<v1::SolutionRequest>(Problem(32));
  unknown.set_solution_id(uint64_t{1} << 40);
  auto ctx2 = Context(10);
  v1::CompileSolutionResponse none;
  s = stub_->CompileSolution(ctx2.get(), unknown, &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("solution_id"));
}

}  // namespace
}  // namespace convtune
