// Candidates measured in a worker process. Against the real convtuned binary
// as the worker: a plan that kills its worker with SIGSEGV, and one that
// never returns, cost that worker only; a fresh one measures the next plan.
// Against a real daemon with the fault-injection solver: the find completes
// with the other solvers, the faulting one is quarantined, and FindDb hits
// from another client meanwhile neither fail nor stall.
#include "server/measure_worker.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "server/counters.h"
#include "server/solver_registry.h"
#include "server/solvers/cpu_solvers.h"
#include "server/solvers/fault_injection.h"
#include "tests/server/daemon_process.h"
#include "tests/server/worker_fault_scenario.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem SmallProblem(int c) {
  ConvProblem p;
  p.n = 1;
  p.c = c;
  p.k = 8;
  p.in = {1, 8, 8};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

WorkerOptions CpuWorker() {
  WorkerOptions o;
  o.exe = CONVTUNED_PATH;
  o.backend = "cpu";
  o.threads = 1;
  o.start_bound_ms = 20000;
  return o;
}

v1::ExecutionPlan PlanOf(uint32_t solver_id, const ConvProblem& p) {
  const Solver* s = SolverRegistry::Default().Find(solver_id);
  EXPECT_NE(s, nullptr);
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, s->DefaultConfig(p));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

v1::ExecutionPlan FaultPlan(const ConvProblem& p) {
  absl::StatusOr<std::vector<std::unique_ptr<Solver>>> solvers =
      MakeFaultInjectionSolvers(v1::CPU);
  EXPECT_TRUE(solvers.ok() && solvers->size() == 1);
  absl::StatusOr<v1::ExecutionPlan> plan =
      (*solvers)[0]->MakePlan(p, (*solvers)[0]->DefaultConfig(p));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// Running, and not a zombie waiting for its parent.
bool Alive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ||
         line[paren + 2] != 'Z';
}

TEST(MeasureWorkerTest, MeasuresAPlanAndChecksItAgainstTheReference) {
  WorkerMeasurer worker(CpuWorker());
  ASSERT_TRUE(worker.Start().ok());
  const ConvProblem p = SmallProblem(4);
  ASSERT_TRUE(worker.Open(p, 0, 7).ok());
  absl::StatusOr<Measurement> m = worker.Measure(
      PlanOf(kCpuDirectNaiveId, p), TimingOptions(), 0, true, 10000);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->median_ms, 0);
  EXPECT_GE(m->repeats, 1);
  EXPECT_TRUE(worker.Healthy().ok());
  // A plan whose output is wrong fails its check in the worker, and the
  // worker goes on.
  v1::ExecutionPlan wrong = PlanOf(kCpuDirectNaiveId, p);
  wrong.mutable_steps(0)->mutable_buffers(2)->set_role(v1::BUFFER_X);
  absl::StatusOr<Measurement> bad =
      worker.Measure(wrong, TimingOptions(), 0, true, 10000);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(worker.Healthy().ok()) << worker.Healthy();
  EXPECT_EQ(worker.stats().starts, 1);
}

TEST(MeasureWorkerTest, ACrashingPlanCostsItsWorkerOnly) {
  testing::FaultEnv env("crash");
  WorkerMeasurer worker(CpuWorker());
  ASSERT_TRUE(worker.Start().ok());
  const pid_t first = worker.pid();
  const ConvProblem p = SmallProblem(4);
  ASSERT_TRUE(worker.Open(p, 0, 7).ok());
  absl::StatusOr<Measurement> crashed =
      worker.Measure(FaultPlan(p), TimingOptions(), 0, true, 10000);
  ASSERT_FALSE(crashed.ok());
  EXPECT_THAT(crashed.status().message(), HasSubstr("died during the call"));
  EXPECT_THAT(crashed.status().message(), HasSubstr("signal 11"));
  EXPECT_FALSE(worker.Healthy().ok());
  EXPECT_FALSE(Alive(first));
  EXPECT_EQ(worker.stats().crashes, 1);
  // A new session starts a fresh worker, which measures the next plan.
  ASSERT_TRUE(worker.Open(p, 0, 7).ok());
  EXPECT_NE(worker.pid(), first);
  absl::StatusOr<Measurement> m = worker.Measure(
      PlanOf(kCpuDirectNaiveId, p), TimingOptions(), 0, true, 10000);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(worker.stats().starts, 2);
}

TEST(MeasureWorkerTest, AHangingPlanIsKilledAtItsBound) {
  testing::FaultEnv env("hang");
  WorkerMeasurer worker(CpuWorker());
  ASSERT_TRUE(worker.Start().ok());
  const pid_t first = worker.pid();
  const ConvProblem p = SmallProblem(4);
  ASSERT_TRUE(worker.Open(p, 0, 7).ok());
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<Measurement> hung =
      worker.Measure(FaultPlan(p), TimingOptions(), 0, true, 700);
  const double waited = MsSince(started);
  ASSERT_FALSE(hung.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(hung.status())) << hung.status();
  EXPECT_THAT(hung.status().message(), HasSubstr("was killed"));
  EXPECT_GE(waited, 650);
  EXPECT_LT(waited, 5000);
  EXPECT_FALSE(Alive(first));
  EXPECT_EQ(worker.stats().killed, 1);
  ASSERT_TRUE(worker.Reset().ok());
  ASSERT_TRUE(worker.Open(p, 0, 7).ok());
  EXPECT_TRUE(worker
                  .Measure(PlanOf(kCpuDirectNaiveId, p), TimingOptions(), 0,
                           true, 10000)
                  .ok());
}

TEST(MeasureWorkerTest, AWorkerOnAnotherDeviceOrMissingIsRefused) {
  WorkerOptions other = CpuWorker();
  other.device_key = "cuda-sm_90-cu132-not-this-one";
  WorkerMeasurer worker(other);
  absl::Status s = worker.Start();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("not convtuned's"));
  EXPECT_EQ(worker.pid(), -1);

  WorkerOptions missing = CpuWorker();
  missing.exe = "/nonexistent/convtuned";
  WorkerMeasurer none(missing);
  s = none.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot start /nonexistent/convtuned"));
}

// A real daemon whose fault-injection solver crashes or hangs its worker.
class WorkerFaultDaemonTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WorkerFaultDaemonTest, FindCompletesAndOtherClientsAreServed) {
  testing::RunWorkerFaultScenario(
      {.convtuned = CONVTUNED_PATH,
       .backend = "cpu",
       .fault = GetParam(),
       .bound_ms = 1500,
       .problem = [](int i) { return SmallProblem(4 + i); }});
}

// The pids of `pid`'s children, from every thread's children list.
std::vector<pid_t> Children(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) out.push_back(child);
  }
  return out;
}

TEST(WorkerShutdownTest, SigtermWhileAWorkerHangsExitsInTimeAndTakesTheWorker) {
  const std::string dir = testing::MakeTempDir("convtune-workerterm");
  ASSERT_FALSE(dir.empty());
  const std::string socket = dir + "/d.sock";
  testing::DaemonProcess d;
  {
    testing::FaultEnv env("hang");
    ASSERT_TRUE(d.Start(CONVTUNED_PATH,
                        {"--socket", socket, "--db", dir + "/db", "--backend",
                         "cpu", "--measure-bound-ms", "600000"},
                        dir + "/d.log"));
  }
  ASSERT_TRUE(d.WaitServing(socket)) << d.log();
  const std::vector<pid_t> workers = Children(d.pid());
  ASSERT_EQ(workers.size(), 1u) << d.log();
  // A find whose first candidate hangs for as long as its bound allows.
  std::thread find([&] {
    auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::FindRequest req;
    ProblemToProto(SmallProblem(4), req.mutable_problem());
    v1::FindResponse resp;
    const grpc::Status s = stub->Find(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
        << s.error_message();
  });
  // The plans of a small problem build in well under a second; the hanging
  // candidate is timed first.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto t0 = std::chrono::steady_clock::now();
  const int status = d.Stop(SIGTERM, 10000);
  const double ms = MsSince(t0);
  find.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_LT(ms, 2500) << d.log();
  // The worker died with its daemon.
  bool gone = false;
  for (int i = 0; i < 40 && !gone; ++i) {
    gone = !Alive(workers[0]);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone) << "worker " << workers[0] << " outlived convtuned";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Faults, WorkerFaultDaemonTest,
                         ::testing::Values("crash", "hang"));

}  // namespace
}  // namespace convtune
