// Callers who leave: a real convtuned given a thousand finds whose deadlines
// pass mid-tuning stops their runs, and is left with no run, queued task,
// thread or memory of theirs; the next honest find is tuned as usual.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using testing::DaemonProcess;

v1::ConvProblem Problem(int i) {
  ConvProblem p;
  p.n = 4;
  p.c = 8 + i % 40;
  p.k = 8 + (i / 40) % 25;
  p.in = {1, 28, 28};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

// A field of /proc/PID/status ("Threads", "VmRSS"), as a number.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::vector<std::string> parts =
        absl::StrSplit(line.substr(field.size() + 1), absl::ByAnyChar(" \t"),
                       absl::SkipEmpty());
    int64_t v = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &v)) return v;
  }
  return -1;
}

v1::GetStatusResponse Status(v1::ConvTune::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetStatusRequest req;
  v1::GetStatusResponse resp;
  grpc::Status s = stub.GetStatus(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

bool Idle(const v1::GetStatusResponse& s) {
  if (s.tunings_in_flight() != 0) return false;
  for (const v1::QueueStatus& q : s.queues()) {
    if (q.queued() != 0) return false;
  }
  // This GetStatus itself is the one call in flight.
  return s.calls_in_flight() <= 1;
}

// Polls until Idle, up to a minute; the last status.
v1::GetStatusResponse WaitIdle(v1::ConvTune::Stub& stub) {
  v1::GetStatusResponse status;
  for (int i = 0; i < 600; ++i) {
    status = Status(stub);
    if (Idle(status)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return status;
}

TEST(CancelTest, AThousandCallersWhoLeaveMidTuningLeaveNothingBehind) {
  const std::string dir = testing::MakeTempDir("convtune-cancel");
  ASSERT_FALSE(dir.empty());
  const std::string socket = dir + "/d.sock";
  DaemonProcess d;
  ASSERT_TRUE(d.Start(CONVTUNED_PATH,
                      {"--socket", socket, "--db", dir + "/db", "--backend",
                       "cpu", "--background-tune", "off", "--log-rpcs", "off"},
                      dir + "/d.log"));
  ASSERT_TRUE(d.WaitServing(socket)) << d.log();
  auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      UnixTarget(socket), grpc::InsecureChannelCredentials()));
  // Warm up: the first find starts the pools' and libraries' threads.
  {
    grpc::ClientContext ctx;
    v1::FindRequest req;
    *req.mutable_problem() = Problem(999);
    v1::FindResponse resp;
    ASSERT_TRUE(stub->Find(&ctx, req, &resp).ok());
  }
  ASSERT_TRUE(Idle(WaitIdle(*stub)));
  const int64_t threads_before = ProcStatus(d.pid(), "Threads");
  const int64_t rss_before_kb = ProcStatus(d.pid(), "VmRSS");

  constexpr int kCallers = 1000;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0, deadline_exceeded = 0, answered = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(kCallers);
  std::vector<v1::FindRequest> requests(kCallers);
  std::vector<v1::FindResponse> responses(kCallers);
  for (int i = 0; i < kCallers; ++i) {
    contexts[i] = std::make_unique<grpc::ClientContext>();
    // 40 to 100 ms: each leaves during its own tuning, or while queued.
    contexts[i]->set_deadline(std::chrono::system_clock::now() +
                              std::chrono::milliseconds(40 + i % 61));
    *requests[i].mutable_problem() = Problem(i);
    stub->async()->Find(
        contexts[i].get(), &requests[i], &responses[i], [&](grpc::Status s) {
          std::lock_guard<std::mutex> lock(mu);
          ++finished;
          answered += s.ok();
          deadline_exceeded +=
              s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
          cv.notify_one();
        });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == kCallers; });
  }
  EXPECT_GT(deadline_exceeded, kCallers * 9 / 10);

  // The daemon gets back to idle: every run stopped or finished, nothing
  // queued.
  const v1::GetStatusResponse status = WaitIdle(*stub);
  ASSERT_TRUE(Idle(status)) << status.DebugString();
  const auto& c = status.counters();
  // Every run either stopped, storing nothing, or had reached its last
  // solver and stored a whole record (the warm-up's is one). Calls whose
  // deadline passed before they reached the daemon started no run.
  EXPECT_EQ(c.at("tunings_abandoned") + c.at("records_stored"), c.at("tunings"))
      << status.DebugString();
  EXPECT_GT(c.at("tunings_abandoned"), kCallers / 20) << status.DebugString();
  // No thread or memory of theirs is left (gRPC's own pools may have grown
  // by a few threads under the burst; one leaked benchmark session per run
  // would be over 1 GiB).
  const int64_t threads_after = ProcStatus(d.pid(), "Threads");
  const int64_t rss_after_kb = ProcStatus(d.pid(), "VmRSS");
  EXPECT_LE(threads_after, threads_before + 8)
      << threads_before << " threads before";
  EXPECT_LT(rss_after_kb - rss_before_kb, 128 * 1024)
      << rss_before_kb << " KiB before, " << rss_after_kb << " after";

  // An honest caller's cold find is tuned whole.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::FindRequest req;
  *req.mutable_problem() = Problem(1);
  v1::FindResponse resp;
  grpc::Status s = stub->Find(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(resp.results_size(), 3);
  std::cout << "threads " << threads_before << " -> " << threads_after
            << ", rss " << rss_before_kb << " -> " << rss_after_kb << " KiB; "
            << c.at("tunings") << " tunings, " << c.at("tunings_abandoned")
            << " abandoned, " << answered << " answered in time\n";
  EXPECT_EQ(d.Stop(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace convtune
