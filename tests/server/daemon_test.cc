// convtuned as a real process: find over the Unix socket, restart, hit; one
// database per daemon; malformed requests; clean shutdown on signals.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::Not;

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

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-daemon");
    ASSERT_FALSE(dir_.empty());
    socket_ = dir_ + "/d.sock";
    db_ = dir_ + "/db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void StartDaemon(DaemonProcess& d, const std::string& socket,
                   const std::string& db, const std::string& log) {
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, {"--socket", socket, "--db", db},
                        dir_ + "/" + log));
    ASSERT_TRUE(d.WaitServing(socket)) << d.log();
  }

  std::unique_ptr<v1::ConvTune::Stub> Stub(const std::string& socket) {
    return v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Find(v1::ConvTune::Stub& stub, const v1::ConvProblem& problem,
                    v1::FindResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(120));
    v1::FindRequest req;
    *req.mutable_problem() = problem;
    // No workspace_limit: unlimited, so solvers with a workspace are timed too.
    return stub.Find(&ctx, req, resp);
  }

  std::string dir_, socket_, db_;
};

TEST_F(DaemonTest, FindRestartHit) {
  v1::FindResponse first;
  {
    DaemonProcess d;
    StartDaemon(d, socket_, db_, "1.log");
    struct stat st;
    ASSERT_EQ(stat(socket_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660);
    auto stub = Stub(socket_);
    grpc::Status s = Find(*stub, Problem(), &first);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(first.from_db());
    ASSERT_GE(first.results_size(), 3);
    EXPECT_TRUE(std::any_of(
        first.results().begin(), first.results().end(),
        [](const v1::PerfResult& r) { return r.workspace_bytes() > 0; }));
    EXPECT_FALSE(first.device_key().empty());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(5));
    EXPECT_THAT(d.log(), HasSubstr("stopped"));
  }
  EXPECT_FALSE(std::filesystem::exists(socket_));
  DaemonProcess d;
  StartDaemon(d, socket_, db_, "2.log");
  auto stub = Stub(socket_);
  v1::FindResponse second;
  grpc::Status s = Find(*stub, Problem(), &second);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(second.from_db());
  ASSERT_EQ(second.results_size(), first.results_size());
  for (int i = 0; i < first.results_size(); ++i) {
    EXPECT_EQ(second.results(i).solver_id(), first.results(i).solver_id());
    EXPECT_EQ(second.results(i).time_ms(), first.results(i).time_ms());
  }
  EXPECT_EQ(d.Stop(SIGINT), 0) << d.log();
}

TEST_F(DaemonTest, SigtermAnswersWhoWaitsAndExitsWithinTwoSeconds) {
  // A find whose naive solver alone runs for seconds.
  ConvProblem big;
  big.n = 16;
  big.c = 64;
  big.k = 64;
  big.in = {1, 56, 56};
  big.filter = {1, 3, 3};
  big.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(big, &wire);
  grpc::Status found;
  {
    DaemonProcess d;
    StartDaemon(d, socket_, db_, "1.log");
    auto stub = Stub(socket_);
    std::thread finder([&] {
      v1::FindResponse resp;
      found = Find(*stub, wire, &resp);
    });
    // Timing has begun when a plan was timed.
    for (int i = 0; i < 600; ++i) {
      grpc::ClientContext ctx;
      v1::GetStatusRequest req;
      v1::GetStatusResponse status;
      ASSERT_TRUE(stub->GetStatus(&ctx, req, &status).ok());
      if (status.counters().at("plans_timed") > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto signalled = std::chrono::steady_clock::now();
    ASSERT_EQ(kill(d.pid(), SIGTERM), 0);
    EXPECT_EQ(d.WaitExit(10000), 0) << d.log();
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - signalled)
                               .count();
    EXPECT_LT(seconds, 2.5) << d.log();
    finder.join();
    EXPECT_EQ(found.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(found.error_message(), HasSubstr("convtuned is shutting down"));
  }
  // What the cut-off find measured was not stored as its answer.
  DaemonProcess d;
  StartDaemon(d, socket_, db_, "2.log");
  auto stub = Stub(socket_);
  grpc::ClientContext ctx;
  v1::DbStatsRequest req;
  v1::DbStatsResponse stats;
  ASSERT_TRUE(stub->DbStats(&ctx, req, &stats).ok());
  EXPECT_EQ(
      stats.records().count("find_db") ? stats.records().at("find_db") : 0, 0);
  EXPECT_EQ(d.Stop(SIGTERM), 0);
}

TEST_F(DaemonTest, SecondDaemonOnTheSameDatabaseFailsFast) {
  DaemonProcess first;
  StartDaemon(first, socket_, db_, "1.log");
  DaemonProcess second;
  ASSERT_TRUE(second.Start(CONVTUNED_PATH,
                           {"--socket", dir_ + "/other.sock", "--db", db_},
                           dir_ + "/2.log"));
  EXPECT_EQ(second.WaitExit(10000), 1);
  EXPECT_THAT(second.log(), HasSubstr(db_));
  EXPECT_THAT(second.log(), HasSubstr("in use"));
  // The first one is unharmed.
  v1::FindResponse resp;
  auto stub = Stub(socket_);
  EXPECT_TRUE(Find(*stub, Problem(), &resp).ok());
}

TEST_F(DaemonTest, SecondDaemonOnTheSameSocketFailsAndLeavesItAlone) {
  DaemonProcess first;
  StartDaemon(first, socket_, db_, "1.log");
  DaemonProcess second;
  ASSERT_TRUE(second.Start(CONVTUNED_PATH,
                           {"--socket", socket_, "--db", dir_ + "/db2"},
                           dir_ + "/2.log"));
  EXPECT_EQ(second.WaitExit(10000), 1);
  EXPECT_THAT(second.log(), HasSubstr("in use"));
  EXPECT_TRUE(std::filesystem::exists(socket_));
  EXPECT_TRUE(first.WaitServing(socket_, 2000));
}

TEST_F(DaemonTest, MalformedRequestsNameTheField) {
  DaemonProcess d;
  StartDaemon(d, socket_, db_, "1.log");
  auto stub = Stub(socket_);
  struct Case {
    std::function<void(v1::ConvProblem*)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::ConvProblem* p) { p->clear_data_type(); }, "problem.data_type"},
      {[](v1::ConvProblem* p) { p->set_c(0); }, "problem.c"},
      {[](v1::ConvProblem* p) { p->set_groups(5); }, "problem.groups"},
      {[](v1::ConvProblem* p) { p->set_pad(0, -1); }, "problem.pad_h"},
      {[](v1::ConvProblem* p) { p->clear_filter_size(); },
       "problem.filter_size"},
      {[](v1::ConvProblem* p) { p->set_layout(static_cast<v1::Layout>(9)); },
       "problem.layout"},
      {[](v1::ConvProblem* p) { p->set_n(int64_t{1} << 62); }, "problem.x"},
  };
  for (const Case& c : cases) {
    v1::ConvProblem p = Problem();
    c.mutate(&p);
    v1::FindResponse resp;
    grpc::Status s = Find(*stub, p, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(s.error_message(), HasSubstr(c.field));
  }
  // Unknown solver, and Execute with tensors of the wrong size.
  grpc::ClientContext ctx;
  v1::GetPlanRequest plan_req;
  *plan_req.mutable_problem() = Problem();
  plan_req.set_solver_id(12345);
  v1::GetPlanResponse plan_resp;
  EXPECT_EQ(stub->GetPlan(&ctx, plan_req, &plan_resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx2;
  v1::ExecuteRequest exec;
  *exec.mutable_problem() = Problem();
  exec.set_solver_id(1);
  exec.set_x(std::string(10, 'a'));
  v1::ExecuteResponse exec_resp;
  grpc::Status s = stub->Execute(&ctx2, exec, &exec_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("x: expected"));
  // A long field is named and quoted by at most a short prefix, so that the
  // client sees the real error rather than a metadata-size one.
  for (size_t length : {size_t{100}, size_t{9000}}) {
    grpc::ClientContext ctx3;
    v1::GetCodeObjectRequest code_req;
    code_req.set_hash(std::string(length, 'f'));
    v1::GetCodeObjectResponse code_resp;
    s = stub->GetCodeObject(&ctx3, code_req, &code_resp);
    EXPECT_EQ(s.error_code(), length > 128 ? grpc::StatusCode::INVALID_ARGUMENT
                                           : grpc::StatusCode::NOT_FOUND)
        << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("hash"));
    EXPECT_LT(s.error_message().size(), 200u) << s.error_message();
  }
}

TEST_F(DaemonTest, ExecuteRunsInlineAndEnforcesTheSizeLimit) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(
      CONVTUNED_PATH,
      {"--socket", socket_, "--db", db_, "--max-execute-bytes", "100000"},
      dir_ + "/1.log"));
  ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
  auto stub = Stub(socket_);
  // 1x1 convolution, c=2 -> k=1, weights (1, 1): y = x0 + x1.
  ConvProblem p;
  p.c = 2;
  p.k = 1;
  p.in = {1, 2, 2};
  v1::ExecuteRequest req;
  ProblemToProto(p, req.mutable_problem());
  req.set_solver_id(1);
  const float x[8] = {1, 2, 3, 4, 10, 20, 30, 40};
  const float w[2] = {1, 1};
  req.set_x(std::string(reinterpret_cast<const char*>(x), sizeof(x)));
  req.set_w(std::string(reinterpret_cast<const char*>(w), sizeof(w)));
  grpc::ClientContext ctx;
  v1::ExecuteResponse resp;
  grpc::Status s = stub->Execute(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.output().size(), 4 * sizeof(float));
  const float* y = reinterpret_cast<const float*>(resp.output().data());
  EXPECT_EQ(y[0], 11);
  EXPECT_EQ(y[3], 44);

  ConvProblem big = p;
  big.c = 64;
  big.in = {1, 64, 64};
  ProblemToProto(big, req.mutable_problem());
  grpc::ClientContext ctx2;
  s = stub->Execute(&ctx2, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("--max-execute-bytes"));
}

TEST_F(DaemonTest, ServesOnTcpToo) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(
      CONVTUNED_PATH,
      {"--socket", socket_, "--db", db_, "--listen-plaintext", "127.0.0.1:0"},
      dir_ + "/1.log"));
  ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
  const std::string log = d.log();
  const size_t at = log.find("tcp port ");
  ASSERT_NE(at, std::string::npos) << log;
  const int port = std::atoi(log.c_str() + at + 9);
  ASSERT_GT(port, 0) << log;
  auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  // Plaintext TCP callers are anonymous: immediate answers, no tuning.
  grpc::ClientContext ctx;
  v1::GetSolutionsRequest req;
  *req.mutable_problem() = Problem();
  v1::GetSolutionsResponse resp;
  grpc::Status s = stub->GetSolutions(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(resp.solutions_size(), 3);
  EXPECT_THAT(log, HasSubstr("plaintext tcp port"));
}

TEST_F(DaemonTest, UnbindableTcpAddressFailsAtStart) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(
      CONVTUNED_PATH,
      {"--socket", socket_, "--db", db_, "--listen-plaintext", "203.0.113.1:1"},
      dir_ + "/1.log"));
  EXPECT_EQ(d.WaitExit(15000), 1);
  EXPECT_THAT(d.log(), HasSubstr("cannot listen"));
  EXPECT_FALSE(std::filesystem::exists(socket_));
}

TEST_F(DaemonTest, BadFlagsAreUsageErrors) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(CONVTUNED_PATH,
                      {"--backend", "tpu", "--socket", socket_, "--db", db_},
                      dir_ + "/1.log"));
  EXPECT_EQ(d.WaitExit(10000), 1);
  EXPECT_THAT(d.log(), HasSubstr("backend"));
  DaemonProcess e;
  ASSERT_TRUE(e.Start(CONVTUNED_PATH, {"--frobnicate", "1"}, dir_ + "/2.log"));
  EXPECT_EQ(e.WaitExit(10000), 2);
  EXPECT_THAT(e.log(), HasSubstr("unknown flag '--frobnicate'"));
  // Alone, an unknown flag is still named as unknown, not as missing a
  // value; a long one is quoted by a prefix.
  DaemonProcess f;
  ASSERT_TRUE(f.Start(CONVTUNED_PATH, {"--bogus"}, dir_ + "/3.log"));
  EXPECT_EQ(f.WaitExit(10000), 2);
  EXPECT_THAT(f.log(), HasSubstr("unknown flag '--bogus'"));
  EXPECT_THAT(f.log(), Not(HasSubstr("missing value")));
  DaemonProcess g;
  ASSERT_TRUE(g.Start(CONVTUNED_PATH, {"--" + std::string(5000, 'x')},
                      dir_ + "/4.log"));
  EXPECT_EQ(g.WaitExit(10000), 2);
  EXPECT_THAT(g.log(), HasSubstr("..."));
  EXPECT_LT(g.log().size(), 400u);
}

TEST_F(DaemonTest, VersionPrintsAndExits) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(CONVTUNED_PATH, {"--version"}, dir_ + "/v.log"));
  EXPECT_EQ(d.WaitExit(10000), 0);
  EXPECT_THAT(d.log(), HasSubstr(absl::StrCat("convtuned ", CONVTUNE_VERSION)));
}

}  // namespace
}  // namespace convtune
