#include "tests/server/worker_fault_scenario.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune::testing {
namespace {

using ::testing::HasSubstr;

grpc::Status Find(v1::ConvTune::Stub& stub, const ConvProblem& p,
                  v1::FindMode mode, v1::FindResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(300));
  v1::FindRequest req;
  ProblemToProto(p, req.mutable_problem());
  req.set_mode(mode);
  return stub.Find(&ctx, req, resp);
}

std::map<std::string, int64_t> Counters(v1::ConvTune::Stub& stub) {
  grpc::ClientContext ctx;
  v1::GetStatusResponse status;
  EXPECT_TRUE(stub.GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
  return {status.counters().begin(), status.counters().end()};
}

}  // namespace

FaultEnv::FaultEnv(const std::string& fault) {
  setenv("CONVTUNE_FAULT_SOLVER", fault.c_str(), 1);
}

FaultEnv::~FaultEnv() { unsetenv("CONVTUNE_FAULT_SOLVER"); }

void RunWorkerFaultScenario(const WorkerFaultScenario& sc) {
  const std::string dir = MakeTempDir("convtune-workerfault");
  ASSERT_FALSE(dir.empty());
  const std::string socket = dir + "/d.sock";
  DaemonProcess d;
  {
    FaultEnv env(sc.fault);
    ASSERT_TRUE(
        d.Start(sc.convtuned,
                {"--socket", socket, "--db", dir + "/db", "--backend",
                 sc.backend, "--measure-bound-ms", absl::StrCat(sc.bound_ms)},
                dir + "/d.log"));
  }
  ASSERT_TRUE(d.WaitServing(socket, sc.start_timeout_ms)) << d.log();
  auto client = [&] {
    return v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket), grpc::InsecureChannelCredentials()));
  };
  auto tuner = client();
  // The first find: the faulting solver is timed first, its worker dies or
  // is killed, and the find goes on with the others.
  v1::FindResponse first;
  grpc::Status s = Find(*tuner, sc.problem(0), v1::HYBRID, &first);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << d.log();
  ASSERT_GE(first.results_size(), 2);
  for (const v1::PerfResult& r : first.results()) {
    EXPECT_NE(r.solver_name(), "fault_injection");
  }
  EXPECT_EQ(first.source(), "tuned");

  // Another client reads that record over and over while a second cold
  // find meets the fault again.
  std::atomic<bool> done{false};
  std::atomic<int> hits{0}, failures{0};
  std::atomic<int64_t> slowest_us{0};
  std::thread reader([&] {
    auto stub = client();
    while (!done) {
      const auto t0 = std::chrono::steady_clock::now();
      v1::FindResponse hit;
      const grpc::Status got = Find(*stub, sc.problem(0), v1::HYBRID, &hit);
      const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
      ++(got.ok() && hit.from_db() ? hits : failures);
      int64_t seen = slowest_us.load();
      while (us > seen && !slowest_us.compare_exchange_weak(seen, us)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  v1::FindResponse second;
  s = Find(*tuner, sc.problem(1), v1::HYBRID, &second);
  done = true;
  reader.join();
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << d.log();
  EXPECT_GE(second.results_size(), 2);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(hits.load(), 10);
  // No hit waited for the fault (a hang alone lasts bound_ms).
  EXPECT_LT(slowest_us.load(), 500000) << slowest_us.load() << " us";
  std::cout << "[ worker fault ] " << sc.backend << " " << sc.fault << ": "
            << hits.load() << " FindDb hits during the second find, the "
            << "slowest " << slowest_us.load() / 1e3 << " ms, 0 failed\n";

  std::map<std::string, int64_t> counters = Counters(*tuner);
  EXPECT_EQ(counters["solvers_quarantined"], 2);
  EXPECT_EQ(
      counters[sc.fault == "crash" ? "measure_faults" : "measure_timeouts"], 2);
  // Quarantined: a NORMAL find (which tunes whatever the FindDb holds) of
  // the same problem does not run it again.
  v1::FindResponse again;
  s = Find(*tuner, sc.problem(1), v1::NORMAL, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(again.results_size(), 2);
  counters = Counters(*tuner);
  EXPECT_EQ(counters["solvers_quarantined"], 2);
  EXPECT_EQ(counters["measure_faults"] + counters["measure_timeouts"], 2);
  EXPECT_THAT(d.log(), HasSubstr("quarantined"));
  // The daemon itself never stopped.
  const int exit_status = d.Stop(SIGTERM, 20000);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
      << exit_status << "\n"
      << d.log();
  std::filesystem::remove_all(dir);
}

}  // namespace convtune::testing
