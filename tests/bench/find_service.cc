// Service-level benchmark of a real convtuned process over its Unix socket:
//   1. cold find time per layer of a problem list (fresh database);
//   2. warm find (FindDb hit) latency with one client: p50, p99, p99.9;
//   3. warm find throughput with N concurrent clients (own channels);
//   4. warm find latency of one client while another floods the daemon with
//      cold finds (--flood N at once, each a problem never tuned), beside
//      the idle latency of (2). The flooding clients are another tenant
//      (TLS clients with their own certificate) unless --flood-tenant same
//      (the measuring client's own Unix user).
// Prints Markdown.
//
// usage: bench_find_service [--file FILE] [--requests N] [--clients N]
// [--seconds S] [--flood N] [--flood-tenant other|same] [--log-rpcs on|off]
// [--backend auto|cpu|cuda] [--measure-in-worker on|off] [--cold-only]
// --cold-only stops after (1), with no TLS listener.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "kernels/driver_line.h"
#include "tests/server/daemon_process.h"
#include "tests/server/test_pki.h"

namespace convtune {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::vector<ConvProblem> ReadProblems(const std::string& file) {
  std::vector<ConvProblem> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto ps = ParseDriverLine(line);
    if (ps.ok()) out.insert(out.end(), ps->begin(), ps->end());
  }
  return out;
}

int Main(int argc, char** argv) {
  std::string file =
      std::string(CONVTUNE_SOURCE_DIR) + "/deploy/problems/resnet50_b1.txt";
  int requests = 20000, clients = 8, flood = 16;
  std::string log_rpcs = "on";
  std::string flood_tenant = "other";
  double seconds = 5;
  std::string backend = "auto", in_worker = "on";
  bool cold_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold-only") cold_only = true;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--cold-only") {
      --i;
      continue;
    }
    if (a == "--backend") backend = argv[i + 1];
    if (a == "--measure-in-worker") in_worker = argv[i + 1];
    if (a == "--file") file = argv[i + 1];
    if (a == "--requests") requests = std::atoi(argv[i + 1]);
    if (a == "--clients") clients = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    if (a == "--flood") flood = std::atoi(argv[i + 1]);
    if (a == "--log-rpcs") log_rpcs = argv[i + 1];
    if (a == "--flood-tenant") flood_tenant = argv[i + 1];
  }
  if (flood_tenant != "other" && flood_tenant != "same") {
    std::cerr << "--flood-tenant: expected other or same\n";
    return 2;
  }
  const std::vector<ConvProblem> problems = ReadProblems(file);
  if (problems.empty()) {
    std::cerr << "no problems in " << file << "\n";
    return 1;
  }
  const std::string dir = testing::MakeTempDir("convtune-bench");
  const std::string socket = dir + "/d.sock";
  // The flooding tenant comes over TLS with a certificate of its own.
  testing::TestPki pki;
  std::vector<std::string> args = {
      "--socket", socket,      "--db",  dir + "/db",           "--log-rpcs",
      log_rpcs,   "--backend", backend, "--measure-in-worker", in_worker};
  if (!cold_only) {
    std::string error;
    if (!testing::MakeTestPki(dir, {"flood"}, &pki, &error)) {
      std::cerr << error << "\n";
      return 1;
    }
    std::ofstream(dir + "/convtuned.toml")
        << "[[tenant]]\nname = \"flood\"\ncert_names = [\"flood\"]\n";
    for (const std::string& a :
         {std::string("--config"), dir + "/convtuned.toml",
          std::string("--listen-tls"), std::string("127.0.0.1:0"),
          std::string("--tls-cert"), pki.server_cert(),
          std::string("--tls-key"), pki.server_key(),
          std::string("--tls-client-ca"), pki.ca()}) {
      args.push_back(a);
    }
  }
  testing::DaemonProcess daemon;
  // $CONVTUNED (a bundled copy) wins over the build tree's binary.
  const char* bundled = std::getenv("CONVTUNED");
  if (!daemon.Start(
          bundled != nullptr && *bundled != '\0' ? bundled : CONVTUNED_PATH,
          args, dir + "/log") ||
      !daemon.WaitServing(socket, 120000)) {
    std::cerr << "convtuned did not start: " << daemon.log() << "\n";
    return 1;
  }
  std::string flood_address = socket;
  ClientOptions flood_options;
  if (flood_tenant == "other" && !cold_only) {
    const std::string log = daemon.log();
    const size_t at = log.find("tls port ");
    if (at == std::string::npos) {
      std::cerr << "no TLS port in: " << log << "\n";
      return 1;
    }
    // An IP literal: a bare machine may not resolve "localhost".
    flood_address = absl::StrCat("127.0.0.1:", std::atoi(log.c_str() + at + 9));
    flood_options.tls =
        TlsOptions{testing::ReadText(pki.ca()),
                   testing::ReadText(pki.client_cert("flood")),
                   testing::ReadText(pki.client_key("flood")), "localhost"};
  }
  auto client = Client::Connect(socket);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }

  std::printf(
      "## Cold find per layer (%s)\n\n| layer | solvers | best | best ms | "
      "find s |\n"
      "|---|---|---|---|---|\n",
      std::filesystem::path(file).filename().c_str());
  double cold_total = 0;
  for (const ConvProblem& p : problems) {
    const auto t0 = Clock::now();
    auto r = (*client)->Find(p);
    const double s = Us(Clock::now() - t0) / 1e6;
    if (!r.ok() || r->from_db()) {
      std::cerr << "cold find failed: " << r.status() << "\n";
      return 1;
    }
    cold_total += s;
    std::printf("| %s | %d | %s | %.3f | %.2f |\n", r->problem_key().c_str(),
                r->results_size(), r->results(0).solver_name().c_str(),
                r->results(0).time_ms(), s);
    std::fflush(stdout);
  }
  std::printf("| **total** | | | | %.1f |\n\n", cold_total);
  if (cold_only) {
    daemon.Stop(SIGTERM);
    std::filesystem::remove_all(dir);
    return 0;
  }

  // Warm: one client, sequential, cycling through the layers.
  std::vector<double> lat;
  lat.reserve(requests);
  for (int i = 0; i < requests; ++i) {
    const auto t0 = Clock::now();
    auto r = (*client)->Find(problems[i % problems.size()]);
    lat.push_back(Us(Clock::now() - t0));
    if (!r.ok() || !r->from_db()) {
      std::cerr << "warm find missed: " << r.status() << "\n";
      return 1;
    }
  }
  std::printf(
      "## Warm find (FindDb hit), one client, %d requests\n\n"
      "| p50 us | p99 us | p99.9 us | mean us |\n|---|---|---|---|\n"
      "| %.1f | %.1f | %.1f | %.1f |\n\n",
      requests, Percentile(lat, 0.5), Percentile(lat, 0.99),
      Percentile(lat, 0.999),
      std::accumulate(lat.begin(), lat.end(), 0.0) / lat.size());

  // Throughput: each client its own channel (a separate connection).
  std::atomic<int64_t> done{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto own = Client::Connect(socket);
      if (!own.ok()) {
        ++failed;
        return;
      }
      for (size_t i = c; !stop; ++i) {
        auto r = (*own)->Find(problems[i % problems.size()]);
        (r.ok() && r->from_db() ? done : failed)++;
      }
    });
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(500));  // connect, warm up
  const int64_t start_count = done;
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t count = done - start_count;
  const double elapsed = Us(Clock::now() - t0) / 1e6;
  stop = true;
  for (auto& t : threads) t.join();
  std::printf(
      "## Warm find throughput, %d concurrent clients, %.0f s\n\n"
      "| requests/s | failed |\n|---|---|\n| %.0f | %lld |\n",
      clients, seconds, count / elapsed, static_cast<long long>(failed.load()));

  // Flood: `flood` clients each send cold finds of problems never seen (the
  // layers with their channel counts shifted), while one client measures
  // FindDb hits as in (2).
  std::atomic<bool> stop_flood{false};
  std::atomic<int64_t> cold_done{0};
  std::vector<std::thread> flooders;
  for (int f = 0; f < flood; ++f) {
    flooders.emplace_back([&, f] {
      auto own = Client::Connect(flood_address, flood_options);
      if (!own.ok()) return;
      for (int64_t i = 0; !stop_flood; ++i) {
        ConvProblem p = problems[(f + i) % problems.size()];
        p.c += 1 + f + flood * (i / problems.size());
        if ((*own)->Find(p).ok()) ++cold_done;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<double> flooded;
  const int flood_requests = requests;
  flooded.reserve(flood_requests);
  for (int i = 0; i < flood_requests; ++i) {
    const auto t0 = Clock::now();
    auto r = (*client)->Find(problems[i % problems.size()]);
    flooded.push_back(Us(Clock::now() - t0));
    if (!r.ok() || !r->from_db()) ++failed;
  }
  stop_flood = true;
  for (auto& t : flooders) t.join();
  std::printf(
      "\n## Warm find (FindDb hit) during a flood of cold finds, %d flooding "
      "clients (%s tenant), %d requests\n\n"
      "| | p50 us | p99 us | p99.9 us | cold finds done "
      "|\n|---|---|---|---|---|\n"
      "| idle (2) | %.1f | %.1f | %.1f | |\n"
      "| flooded | %.1f | %.1f | %.1f | %lld |\n"
      "| flooded / idle | %.2f | %.2f | %.2f | |\n",
      flood, flood_tenant.c_str(), flood_requests, Percentile(lat, 0.5),
      Percentile(lat, 0.99), Percentile(lat, 0.999), Percentile(flooded, 0.5),
      Percentile(flooded, 0.99), Percentile(flooded, 0.999),
      static_cast<long long>(cold_done.load()),
      Percentile(flooded, 0.5) / Percentile(lat, 0.5),
      Percentile(flooded, 0.99) / Percentile(lat, 0.99),
      Percentile(flooded, 0.999) / Percentile(lat, 0.999));
  daemon.Stop(SIGTERM);
  std::filesystem::remove_all(dir);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
