#include "tests/server/leaving_callers.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "tests/server/daemon_process.h"

namespace convtune::testing {
namespace {

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

// Polls until Idle, up to two minutes; the last status.
v1::GetStatusResponse WaitIdle(v1::ConvTune::Stub& stub) {
  v1::GetStatusResponse status;
  for (int i = 0; i < 1200; ++i) {
    status = Status(stub);
    if (Idle(status)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return status;
}

}  // namespace

void CheckLeavingCallersLeaveNothing(const LeavingCallers& c) {
  const std::string dir = MakeTempDir("convtune-cancel");
  ASSERT_FALSE(dir.empty());
  const std::string socket = dir + "/d.sock";
  DaemonProcess d;
  std::vector<std::string> args = {
      "--socket",          socket, "--db",       dir + "/db",
      "--background-tune", "off",  "--log-rpcs", "off"};
  args.insert(args.end(), c.backend.begin(), c.backend.end());
  ASSERT_TRUE(d.Start(c.convtuned, args, dir + "/d.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      UnixTarget(socket), grpc::InsecureChannelCredentials()));
  // Warm up: the first find starts the pools', libraries' and device's
  // threads and contexts.
  {
    grpc::ClientContext ctx;
    v1::FindRequest req;
    *req.mutable_problem() = c.problem(c.callers + 1);
    v1::FindResponse resp;
    grpc::Status s = stub->Find(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_TRUE(Idle(WaitIdle(*stub)));
  const int64_t threads_before = ProcStatus(d.pid(), "Threads");
  const int64_t rss_before_kb = ProcStatus(d.pid(), "VmRSS");
  const int64_t device_before = c.device_used_bytes ? c.device_used_bytes() : 0;

  std::mutex mu;
  std::condition_variable cv;
  int finished = 0, deadline_exceeded = 0, answered = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(c.callers);
  std::vector<v1::FindRequest> requests(c.callers);
  std::vector<v1::FindResponse> responses(c.callers);
  for (int i = 0; i < c.callers; ++i) {
    contexts[i] = std::make_unique<grpc::ClientContext>();
    // Each leaves during its own tuning, or while queued.
    contexts[i]->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(c.min_ms + i % c.spread_ms));
    *requests[i].mutable_problem() = c.problem(i);
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
    cv.wait(lock, [&] { return finished == c.callers; });
  }
  EXPECT_GT(deadline_exceeded, c.callers * 9 / 10);

  // The daemon gets back to idle: every run stopped or finished, nothing
  // queued.
  const v1::GetStatusResponse status = WaitIdle(*stub);
  ASSERT_TRUE(Idle(status)) << status.DebugString();
  const auto& n = status.counters();
  // Every run either stopped, storing nothing, or had reached its last
  // solver and stored a whole record (the warm-up's is one). Calls whose
  // deadline passed before they reached the daemon started no run.
  EXPECT_EQ(n.at("tunings_abandoned") + n.at("records_stored"), n.at("tunings"))
      << status.DebugString();
  EXPECT_GT(n.at("tunings_abandoned"), c.callers / 20) << status.DebugString();
  // No thread or memory of theirs is left (gRPC's own pools may have grown
  // by a few threads under the burst; one leaked benchmark session per run
  // would be over 1 GiB).
  const int64_t threads_after = ProcStatus(d.pid(), "Threads");
  const int64_t rss_after_kb = ProcStatus(d.pid(), "VmRSS");
  EXPECT_LE(threads_after, threads_before + 8)
      << threads_before << " threads before";
  EXPECT_LT(rss_after_kb - rss_before_kb, 128 * 1024)
      << rss_before_kb << " KiB before, " << rss_after_kb << " after";
  const int64_t device_after = c.device_used_bytes ? c.device_used_bytes() : 0;
  if (c.device_used_bytes) {
    EXPECT_LT(device_after - device_before, c.device_slack_bytes)
        << device_before << " bytes of device memory in use before, "
        << device_after << " after";
  }

  // An honest caller's cold find is tuned whole.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(300));
  v1::FindRequest req;
  *req.mutable_problem() = c.problem(1);
  v1::FindResponse resp;
  grpc::Status s = stub->Find(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(resp.results_size(), 3);
  std::cout << "threads " << threads_before << " -> " << threads_after
            << ", rss " << rss_before_kb << " -> " << rss_after_kb << " KiB"
            << (c.device_used_bytes
                    ? ", device memory in use " +
                          std::to_string(device_before >> 20) + " -> " +
                          std::to_string(device_after >> 20) + " MiB"
                    : std::string())
            << "; " << n.at("tunings") << " tunings, "
            << n.at("tunings_abandoned") << " abandoned, " << answered
            << " answered in time\n";
  EXPECT_EQ(d.Stop(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace convtune::testing
