// The client against a real convtuned on a temporary socket and database:
// the C++ API, the C API find workflow, raw malformed requests, the example.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/convtune.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/problem_proto.h"
#include "kernels/reference.h"
#include "tests/client/c_descriptors.h"
#include "tests/client/process_util.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    daemon_ = new testing::Daemon;
    start_status_ = daemon_->Start(dir_->path(), dir_->path() + "/db");
  }
  static void TearDownTestSuite() {
    if (start_status_.ok()) {
      absl::Status stopped = daemon_->Stop();
      EXPECT_TRUE(stopped.ok()) << stopped;
    }
    delete daemon_;
    delete dir_;
  }
  void SetUp() override {
    if (testing::ConvtunedPath().empty())
      GTEST_SKIP() << "convtuned is not part of this build";
    ASSERT_TRUE(start_status_.ok()) << start_status_;
    auto client = Client::Connect(daemon_->address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  ConvProblem RandomProblem(Direction direction) {
    std::uniform_int_distribution<int> small(1, 2), channels(2, 9),
        spatial(6, 15);
    ConvProblem p;
    p.n = small(rng_);
    p.c = channels(rng_);
    p.k = channels(rng_);
    p.in = {1, spatial(rng_), spatial(rng_)};
    const int64_t f = small(rng_) == 1 ? 1 : 3;
    p.filter = {1, f, f};
    p.pad = {0, f / 2, f / 2};
    p.stride = {1, small(rng_), small(rng_)};
    p.direction = direction;
    EXPECT_TRUE(ValidateProblem(p).ok());
    return p;
  }

  // Runs `solver` on fresh random inputs and checks every output element.
  void RunAndCheck(const ConvProblem& p, uint32_t solver) {
    std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    FillRandom(x.data(), p.type, p.x_elements(), rng64_);
    FillRandom(w.data(), p.type, p.w_elements(), rng64_);
    FillRandom(y.data(), p.type, p.y_elements(), rng64_);
    void* out = ByTensor(p.output(), x, w, y).data();
    FillNaN(out, p.type, p.output_elements());
    absl::StatusOr<v1::ExecutionPlan> plan = client_->GetPlan(p, solver);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->solver_id(), solver);
    std::vector<char> workspace(plan->workspace_bytes());
    PlanBuffers buffers{x.data(), w.data(), y.data(), workspace.data(),
                        static_cast<int64_t>(workspace.size())};
    ASSERT_TRUE(client_->Run(p, solver, buffers).ok());
    HostTensors t{x.data(), w.data(), y.data()};
    absl::Status check = CheckOutput(p, t, out, 0, rng64_);
    EXPECT_TRUE(check.ok())
        << "solver " << solver << " on " << ProblemKey(p) << ": " << check;
  }

  static testing::TempDir* dir_;
  static testing::Daemon* daemon_;
  static absl::Status start_status_;
  std::unique_ptr<Client> client_;
  std::mt19937 rng_{std::random_device{}()};
  std::mt19937_64 rng64_{std::random_device{}()};
};

testing::TempDir* DaemonTest::dir_ = nullptr;
testing::Daemon* DaemonTest::daemon_ = nullptr;
absl::Status DaemonTest::start_status_;

TEST_F(DaemonTest, FindTwiceThenRunEverySolverLocally) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<v1::FindResponse> first = client_->Find(p);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->from_db());
  EXPECT_EQ(first->problem_key(), ProblemKey(p));
  ASSERT_GT(first->results_size(), 0);
  for (int i = 1; i < first->results_size(); ++i) {
    EXPECT_LE(first->results(i - 1).time_ms(), first->results(i).time_ms());
  }
  absl::StatusOr<v1::FindResponse> second = client_->Find(p);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->from_db());
  ASSERT_EQ(second->results_size(), first->results_size());
  for (int i = 0; i < first->results_size(); ++i) {
    EXPECT_EQ(second->results(i).solver_id(), first->results(i).solver_id());
  }
  for (const v1::PerfResult& r : first->results())
    RunAndCheck(p, r.solver_id());
}

TEST_F(DaemonTest, BackwardDirectionsRunLocally) {
  for (Direction d : {Direction::kBackwardData, Direction::kBackwardWeights}) {
    const ConvProblem p = RandomProblem(d);
    absl::StatusOr<v1::FindResponse> found = client_->Find(p);
    ASSERT_TRUE(found.ok()) << found.status();
    ASSERT_GT(found->results_size(), 0);
    RunAndCheck(p, found->results(0).solver_id());
  }
}

// oneDNN's solvers (built in wherever libdnnl is) are listed with their
// library, and their plans run here on host memory in every direction.
TEST_F(DaemonTest, OnednnPlansRunLocally) {
  absl::StatusOr<v1::ListSolversResponse> listed = client_->ListSolvers();
  ASSERT_TRUE(listed.ok()) << listed.status();
  const v1::SolverInfo* direct = nullptr;
  for (const v1::SolverInfo& s : listed->solvers()) {
    if (s.name() == "onednn_direct") direct = &s;
  }
  if (direct == nullptr) GTEST_SKIP() << "convtuned was built without oneDNN";
  EXPECT_THAT(direct->library(), ::testing::StartsWith("onednn"));
  EXPECT_THAT(listed->device_key(), HasSubstr(direct->library()));
  for (Direction d : {Direction::kForward, Direction::kBackwardData,
                      Direction::kBackwardWeights}) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      ConvProblem p = RandomProblem(d);
      p.layout = layout;
      SCOPED_TRACE(DescribeProblem(p));
      RunAndCheck(p, direct->id());
    }
  }
}

TEST_F(DaemonTest, WorkspaceLimitAndTooSmallWorkspace) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<int64_t> max_ws = client_->WorkspaceSize(p);
  ASSERT_TRUE(max_ws.ok()) << max_ws.status();
  FindOptions zero_ws;
  zero_ws.workspace_limit = 0;
  absl::StatusOr<v1::FindResponse> found = client_->Find(p, zero_ws);
  ASSERT_TRUE(found.ok()) << found.status();
  for (const v1::PerfResult& r : found->results())
    EXPECT_EQ(r.workspace_bytes(), 0);
  absl::StatusOr<v1::FindResponse> all = client_->Find(p);
  ASSERT_TRUE(all.ok()) << all.status();
  for (const v1::PerfResult& r : all->results()) {
    EXPECT_LE(r.workspace_bytes(), *max_ws);
    if (r.workspace_bytes() == 0) continue;
    std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    std::vector<char> ws(r.workspace_bytes() - 1);
    PlanBuffers b{x.data(), w.data(), y.data(), ws.data(),
                  static_cast<int64_t>(ws.size())};
    EXPECT_EQ(client_->Run(p, r.solver_id(), b).code(),
              absl::StatusCode::kResourceExhausted);
  }
}

TEST_F(DaemonTest, RemoteExecuteMatchesTheReference) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<v1::FindResponse> found = client_->Find(p);
  ASSERT_TRUE(found.ok()) << found.status();
  std::string x(p.x_bytes(), '\0'), w(p.w_bytes(), '\0');
  FillRandom(x.data(), p.type, p.x_elements(), rng64_);
  FillRandom(w.data(), p.type, p.w_elements(), rng64_);
  absl::StatusOr<std::string> y =
      client_->Execute(p, found->results(0).solver_id(), x, w, "");
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(static_cast<int64_t>(y->size()), p.y_bytes());
  HostTensors t{x.data(), w.data(), nullptr};
  EXPECT_TRUE(CheckOutput(p, t, y->data(), 0, rng64_).ok());
}

TEST_F(DaemonTest, MalformedRequestsAreInvalidArgumentNamingTheField) {
  auto channel = grpc::CreateChannel(daemon_->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::ConvTune::NewStub(channel);
  v1::FindRequest request;
  ProblemToProto(RandomProblem(Direction::kForward), request.mutable_problem());
  request.set_workspace_limit(-1);
  request.mutable_problem()->clear_data_type();
  {
    grpc::ClientContext context;
    v1::FindResponse response;
    grpc::Status s = stub->Find(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("data_type"));
  }
  request.mutable_problem()->set_data_type(v1::FP32);
  request.mutable_problem()->set_c(0);
  {
    grpc::ClientContext context;
    v1::FindResponse response;
    grpc::Status s = stub->Find(&context, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("c: must be positive"));
  }
  v1::GetPlanRequest plan_request;
  *plan_request.mutable_problem() = request.problem();
  grpc::ClientContext context;
  v1::GetPlanResponse plan_response;
  EXPECT_EQ(stub->GetPlan(&context, plan_request, &plan_response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DaemonTest, ExampleProgramPasses) {
  testing::ProcessResult r =
      testing::RunProcess({CONVTUNE_EXAMPLE_PATH, daemon_->address()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("PASS"));
}

class CApiDaemonTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(convtuneCreateWithAddress(&handle_, daemon_->address().c_str()),
              convtuneStatusSuccess);
  }
  void TearDown() override {
    if (handle_ != nullptr) convtuneDestroy(handle_);
  }
  // Workspace size, find, then forward runs with two alpha/beta pairs.
  void ForwardWorkflow(const ConvProblem& p);
  convtuneHandle_t handle_ = nullptr;
};

TEST_F(CApiDaemonTest, ForwardFindWorkflow) {
  for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    SCOPED_TRACE(DataTypeName(type));
    ConvProblem p = RandomProblem(Direction::kForward);
    p.type = type;
    ForwardWorkflow(p);
  }
}

void CApiDaemonTest::ForwardWorkflow(const ConvProblem& p) {
  CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  size_t max_ws = 0;
  ASSERT_EQ(convtuneConvolutionForwardGetWorkSpaceSize(handle_, d.w, d.x,
                                                       d.conv, d.y, &max_ws),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  EXPECT_EQ(static_cast<int64_t>(max_ws), *client_->WorkspaceSize(p));
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes()), ws(max_ws);
  FillRandom(x.data(), p.type, p.x_elements(), rng64_);
  FillRandom(w.data(), p.type, p.w_elements(), rng64_);
  convtuneConvAlgoPerf_t perf[4];
  int returned = 0;
  ASSERT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, d.x, x.data(), d.w, w.data(), d.conv, d.y, y.data(), 4,
                &returned, perf, ws.data(), max_ws, false),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  absl::StatusOr<v1::FindResponse> found = client_->Find(p);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(returned, std::min(4, found->results_size()));
  for (int i = 0; i < returned; ++i) {
    EXPECT_EQ(perf[i].solution_id, found->results(i).solver_id());
    EXPECT_STREQ(perf[i].solver_name, found->results(i).solver_name().c_str());
    EXPECT_LE(perf[i].memory, max_ws);
    if (i > 0) {
      EXPECT_LE(perf[i - 1].time, perf[i].time);
    }
  }
  // alpha = 1, beta = 0: y is overwritten (poisoned first).
  std::vector<char> run_ws(perf[0].memory);
  const float one = 1, zero = 0;
  FillNaN(y.data(), p.type, p.y_elements());
  ASSERT_EQ(
      convtuneConvolutionForward(handle_, &one, d.x, x.data(), d.w, w.data(),
                                 d.conv, perf[0].fwd_algo, &zero, d.y, y.data(),
                                 run_ws.data(), run_ws.size()),
      convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  HostTensors t{x.data(), w.data(), nullptr};
  EXPECT_TRUE(CheckOutput(p, t, y.data(), 0, rng64_).ok());

  // Other alpha and beta: y = alpha * conv + beta * y.
  FillRandom(y.data(), p.type, p.y_elements(), rng64_);
  const std::vector<char> prior = y;
  const float alpha = 0.5f, beta = -2.0f;
  ASSERT_EQ(
      convtuneConvolutionForward(handle_, &alpha, d.x, x.data(), d.w, w.data(),
                                 d.conv, perf[0].fwd_algo, &beta, d.y, y.data(),
                                 run_ws.data(), run_ws.size()),
      convtuneStatusSuccess);
  for (int64_t i = 0; i < p.y_elements(); ++i) {
    const ReferenceValue ref = ReferenceElement(p, t, i);
    const double before = LoadElement(prior.data(), p.type, i);
    const double want = alpha * ref.value + beta * before;
    const double allowed =
        Tolerance(p.type) * (alpha * ref.abs_sum + 2 * std::fabs(before) + 1);
    ASSERT_NEAR(LoadElement(y.data(), p.type, i), want, allowed)
        << "element " << i;
  }
}

TEST_F(CApiDaemonTest, WorkspaceTooSmallAndMissingAlgorithm) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  absl::StatusOr<v1::FindResponse> found = client_->Find(p);
  ASSERT_TRUE(found.ok()) << found.status();
  std::map<std::string, int64_t> least_ws;  // per family
  for (const v1::PerfResult& r : found->results()) {
    auto [it, added] = least_ws.emplace(r.algorithm(), r.workspace_bytes());
    if (!added) it->second = std::min(it->second, r.workspace_bytes());
  }
  const std::map<std::string, int> numbers = {{"gemm", 0},
                                              {"direct", 1},
                                              {"fft", 2},
                                              {"winograd", 3},
                                              {"implicit_gemm", 5}};
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng64_);
  FillRandom(w.data(), p.type, p.w_elements(), rng64_);
  const float one = 1, zero = 0;
  for (const auto& [family, number] : numbers) {
    auto it = least_ws.find(family);
    if (it != least_ws.end() && it->second == 0) continue;
    const convtuneStatus_t want = it == least_ws.end()
                                      ? convtuneStatusNotFound
                                      : convtuneStatusResourceExhausted;
    EXPECT_EQ(convtuneConvolutionForward(
                  handle_, &one, d.x, x.data(), d.w, w.data(), d.conv,
                  static_cast<convtuneConvFwdAlgorithm_t>(number), &zero, d.y,
                  y.data(), nullptr, 0),
              want)
        << family;
    EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr(family));
  }
}

TEST_F(CApiDaemonTest, BackwardFindAndRun) {
  for (Direction dir :
       {Direction::kBackwardData, Direction::kBackwardWeights}) {
    const ConvProblem p = RandomProblem(dir);
    CDescriptors d(p);
    ASSERT_TRUE(d.ok);
    std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    const bool data = dir == Direction::kBackwardData;
    FillRandom(y.data(), p.type, p.y_elements(), rng64_);
    FillRandom(data ? w.data() : x.data(), p.type,
               data ? p.w_elements() : p.x_elements(), rng64_);
    char* out = data ? x.data() : w.data();
    FillNaN(out, p.type, p.output_elements());
    size_t max_ws = 0;
    convtuneConvAlgoPerf_t perf[2];
    int returned = 0;
    const float one = 1, zero = 0;
    if (data) {
      ASSERT_EQ(convtuneConvolutionBackwardDataGetWorkSpaceSize(
                    handle_, d.y, d.w, d.conv, d.x, &max_ws),
                0);
      std::vector<char> ws(max_ws);
      ASSERT_EQ(convtuneFindConvolutionBackwardDataAlgorithm(
                    handle_, d.y, y.data(), d.w, w.data(), d.conv, d.x,
                    x.data(), 2, &returned, perf, ws.data(), max_ws, false),
                0)
          << convtuneGetLastError(handle_);
      ASSERT_GE(returned, 1);
      ASSERT_EQ(
          convtuneConvolutionBackwardData(
              handle_, &one, d.y, y.data(), d.w, w.data(), d.conv,
              perf[0].bwd_data_algo, &zero, d.x, x.data(), ws.data(), max_ws),
          0)
          << convtuneGetLastError(handle_);
    } else {
      ASSERT_EQ(convtuneConvolutionBackwardWeightsGetWorkSpaceSize(
                    handle_, d.y, d.x, d.conv, d.w, &max_ws),
                0);
      std::vector<char> ws(max_ws);
      ASSERT_EQ(convtuneFindConvolutionBackwardWeightsAlgorithm(
                    handle_, d.y, y.data(), d.x, x.data(), d.conv, d.w,
                    w.data(), 2, &returned, perf, ws.data(), max_ws, false),
                0)
          << convtuneGetLastError(handle_);
      ASSERT_GE(returned, 1);
      ASSERT_EQ(convtuneConvolutionBackwardWeights(
                    handle_, &one, d.y, y.data(), d.x, x.data(), d.conv,
                    perf[0].bwd_weights_algo, &zero, d.w, w.data(), ws.data(),
                    max_ws),
                0)
          << convtuneGetLastError(handle_);
    }
    HostTensors t{x.data(), w.data(), y.data()};
    absl::Status check = CheckOutput(p, t, out, 0, rng64_);
    EXPECT_TRUE(check.ok()) << DirectionName(dir) << ": " << check;
  }
}

// A daemon with two CPU devices; a device a client names stays in use for
// the whole test.
class ClientDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::ConvtunedPath().empty())
      GTEST_SKIP() << "convtuned is not part of this build";
    if (std::thread::hardware_concurrency() < 2) {
      GTEST_SKIP() << "two CPU devices need two CPUs";
    }
    ASSERT_EQ(daemon_.Start(
                  dir_.path(), dir_.path() + "/db",
                  {"--backend", "cpu", "--cpu-devices", "2",
                   "--background-tune", "off", "--device-in-use-ms", "600000"}),
              absl::OkStatus())
        << daemon_.Log();
  }
  static ConvProblem Problem() {
    ConvProblem p;
    p.n = 1, p.c = 8, p.k = 8, p.in = {1, 9, 9}, p.filter = {1, 3, 3};
    p.pad = {0, 1, 1};
    return p;
  }

  testing::TempDir dir_;
  testing::Daemon daemon_;
};

// A client says which device it runs on: with two CPU devices, its finds
// tune on the other, unless it names the device to tune on.
TEST_F(ClientDevicesTest, TheClientsDeviceIsLeftToItUnlessItNamesOne) {
  ClientOptions options;
  options.device_ordinal = 0;
  auto client = Client::Connect(daemon_.address(), options);
  ASSERT_TRUE(client.ok()) << client.status();
  ConvProblem p = Problem();
  FindOptions find;
  find.mode = v1::HYBRID;
  absl::StatusOr<v1::FindResponse> found = (*client)->Find(p, find);
  ASSERT_TRUE(found.ok()) << found.status();
  absl::StatusOr<v1::GetStatusResponse> status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->devices_size(), 2);
  EXPECT_EQ(status->devices(0).jobs_done(), 0);
  EXPECT_EQ(status->devices(0).state(), "in use");
  EXPECT_EQ(status->devices(1).jobs_done(), 1);
  p.c = 16;
  find.tune_on_device = 0;
  found = (*client)->Find(p, find);
  ASSERT_TRUE(found.ok()) << found.status();
  status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices(0).jobs_done(), 1);
  EXPECT_EQ(status->devices(1).jobs_done(), 1);
  EXPECT_EQ(daemon_.Stop(), absl::OkStatus()) << daemon_.Log();
}

// Remote execution runs on the client's device; a device the daemon does
// not have is refused by name.
TEST_F(ClientDevicesTest, ExecuteRunsOnTheClientsDevice) {
  const ConvProblem p = Problem();
  // A client that names no device: its find marks none in use.
  auto anywhere = Client::Connect(daemon_.address());
  ASSERT_TRUE(anywhere.ok()) << anywhere.status();
  absl::StatusOr<v1::FindResponse> found = (*anywhere)->Find(p);
  ASSERT_TRUE(found.ok()) << found.status();
  absl::StatusOr<v1::GetStatusResponse> status = (*anywhere)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->devices_size(), 2);
  EXPECT_NE(status->devices(1).state(), "in use");

  std::mt19937_64 rng(20261203);
  std::string x(p.x_bytes(), '\0'), w(p.w_bytes(), '\0');
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  ClientOptions on_one;
  on_one.device_ordinal = 1;
  auto client = Client::Connect(daemon_.address(), on_one);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> y =
      (*client)->Execute(p, found->results(0).solver_id(), x, w, "");
  ASSERT_TRUE(y.ok()) << y.status();
  HostTensors t{x.data(), w.data(), nullptr};
  EXPECT_TRUE(CheckOutput(p, t, y->data(), 0, rng).ok());
  status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices(1).state(), "in use");
  EXPECT_NE(status->devices(0).state(), "in use");

  ClientOptions on_seven;
  on_seven.device_ordinal = 7;
  auto absent = Client::Connect(daemon_.address(), on_seven);
  ASSERT_TRUE(absent.ok()) << absent.status();
  y = (*absent)->Execute(p, found->results(0).solver_id(), x, w, "");
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(y.status().message()), HasSubstr("no device 7 here"));
  EXPECT_EQ(daemon_.Stop(), absl::OkStatus()) << daemon_.Log();
}

}  // namespace
}  // namespace convtune
