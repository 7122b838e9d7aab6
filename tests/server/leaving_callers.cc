#include "tests/server/leaving_callers.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
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

// How many of the process's threads have each name.
std::map<std::string, int> ThreadNames(pid_t pid) {
  std::map<std::string, int> names;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "comm");
    std::string name;
    std::getline(in, name);
    ++names[name];
  }
  return names;
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
  // All the callers are one tenant: its limit on finds waiting is raised so
  // that every one of them reaches the tuner and leaves it.
  const std::string config = dir + "/convtuned.toml";
  std::ofstream(config) << "[limits]\ntenant_tunings_in_flight = "
                        << c.callers + 16 << "\n";
  DaemonProcess d;
  std::vector<std::string> args = {
      "--socket", socket,       "--db", dir + "/db", "--background-tune",
      "off",      "--log-rpcs", "off",  "--config",  config};
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
  struct Sample {
    int64_t threads, rss_kb, device;
    std::map<std::string, int> names;
  };
  auto sample = [&] {
    return Sample{ProcStatus(d.pid(), "Threads"), ProcStatus(d.pid(), "VmRSS"),
                  c.device_used_bytes ? c.device_used_bytes() : 0,
                  ThreadNames(d.pid())};
  };
  std::vector<Sample> samples = {sample()};
  v1::GetStatusResponse status;
  int answered = 0;
  for (int burst = 0; burst < c.bursts; ++burst) {
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0, deadline_exceeded = 0;
    std::map<std::string, int> codes;  // other answers, by code and message
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
            if (!s.ok() &&
                s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
              ++codes[std::to_string(s.error_code()) + " " +
                      s.error_message().substr(0, 80)];
            }
            cv.notify_one();
          });
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return finished == c.callers; });
    }
    EXPECT_GT(deadline_exceeded, c.callers * 9 / 10);
    for (const auto& [what, count] : codes) {
      ADD_FAILURE() << count << " caller(s) answered " << what;
    }
    // The daemon gets back to idle: every run stopped or finished, nothing
    // queued.
    status = WaitIdle(*stub);
    ASSERT_TRUE(Idle(status)) << status.DebugString();
    samples.push_back(sample());
  }
  const auto& n = status.counters();
  // Every run either stopped, storing nothing, or had reached its last
  // solver and stored a whole record (the warm-up's is one). Calls whose
  // deadline passed before they reached the daemon started no run.
  EXPECT_EQ(n.at("tunings_abandoned") + n.at("records_stored"), n.at("tunings"))
      << status.DebugString();
  EXPECT_GT(n.at("tunings_abandoned"), c.callers / 20) << status.DebugString();
  // No thread or memory of theirs is left. Bursts may grow gRPC's own
  // pools (within the slack, and only the first), and the bounded caches of
  // what was compiled and planned for the shapes they saw; one leaked
  // thread or benchmark session per run would be hundreds of threads, or
  // gigabytes.
  const Sample& before = samples.front();
  const Sample& first = samples[1];
  const Sample& last = samples.back();
  EXPECT_LE(first.threads, before.threads + c.thread_slack)
      << before.threads << " threads before";
  EXPECT_LE(last.threads, first.threads + 8);
  EXPECT_LT(last.rss_kb - before.rss_kb, c.rss_slack_kb)
      << before.rss_kb << " KiB before, " << last.rss_kb << " after";
  for (const Sample& after : samples) {
    EXPECT_LT(after.device - before.device, c.device_slack_bytes)
        << before.device << " bytes of device memory in use before, "
        << after.device << " after";
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
  std::cout << "after warm-up, then after each burst of " << c.callers
            << " callers:";
  for (const Sample& x : samples) {
    std::cout << " [threads " << x.threads << ", rss " << x.rss_kb / 1024
              << " MiB"
              << (c.device_used_bytes
                      ? ", device memory in use " +
                            std::to_string(x.device >> 20) + " MiB"
                      : std::string())
              << "]";
  }
  std::cout << "; " << n.at("tunings") << " tunings, "
            << n.at("tunings_abandoned") << " abandoned, " << answered
            << " answered in time\nthreads that came:";
  for (const auto& [name, count] : last.names) {
    auto it = before.names.find(name);
    const int was = it == before.names.end() ? 0 : it->second;
    if (count != was) std::cout << " " << name << " " << was << "->" << count;
  }
  std::cout << "\n";
  EXPECT_EQ(d.Stop(SIGTERM), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace convtune::testing
