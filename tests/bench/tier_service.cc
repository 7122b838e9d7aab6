// The cluster tier's read path, with a real redis-server and real daemons
// (CPU backend): node A tunes every layer of a list cold and publishes it;
// then, round after round, a node B on a fresh database finds every layer
// (each a tier hit: read, checked, stored locally), and then finds them
// again (local FindDb hits). Prints the latency of both kinds of find, as
// the client sees them over the Unix socket, in Markdown.
//
// With --prefill-nodes N, instead: the wall time of a cluster prefill of the
// list (the tier's job stream) drained by one node, against N nodes of one
// fleet, on fresh databases and an empty tier.
//
// usage: bench_tier [--file FILE] [--rounds N] [--local-repeats N]
//                   [--prefill-nodes N]
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/driver_line.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"
#include "tests/server/redis_process.h"

namespace convtune {
namespace {

using Clock = std::chrono::steady_clock;

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

struct Node {
  testing::DaemonProcess process;
  std::unique_ptr<v1::ConvTune::Stub> stub;
};

bool StartNode(Node& n, const std::string& dir, const std::string& name,
               const std::string& tier, const std::string& fleet = "default") {
  const std::string socket = dir + "/" + name + ".sock";
  if (!n.process.Start(
          CONVTUNED_PATH,
          {"--socket", socket, "--db", dir + "/" + name + "-db", "--backend",
           "cpu", "--log-rpcs", "off", "--tier", tier, "--tier-password-file",
           dir + "/writer.pw", "--tier-node", name, "--tier-fleet", fleet},
          dir + "/" + name + ".log") ||
      !n.process.WaitServing(socket)) {
    std::cerr << n.process.log();
    return false;
  }
  n.stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      UnixTarget(socket), grpc::InsecureChannelCredentials()));
  // Until it has read the tier's generation.
  for (int i = 0; i < 400; ++i) {
    grpc::ClientContext ctx;
    v1::GetStatusResponse s;
    if (n.stub->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok() &&
        s.tier().find("answering") != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::cerr << name << ": the tier does not answer\n";
  return false;
}

// The find's latency in microseconds; its source in *source.
double Find(Node& n, const ConvProblem& p, std::string* source) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  v1::FindRequest req;
  ProblemToProto(p, req.mutable_problem());
  v1::FindResponse resp;
  const Clock::time_point t0 = Clock::now();
  grpc::Status s = n.stub->Find(&ctx, req, &resp);
  const double us =
      std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  *source = s.ok() ? resp.source() : "error: " + s.error_message();
  return us;
}

int64_t Counter(Node& n, const std::string& name) {
  grpc::ClientContext ctx;
  v1::GetStatusResponse s;
  if (!n.stub->GetStatus(&ctx, v1::GetStatusRequest(), &s).ok()) return -1;
  auto it = s.counters().find(name);
  return it == s.counters().end() ? -1 : it->second;
}

// Prefills `problems` through the tier's job stream (convtune prefill
// --cluster) with `nodes` fresh daemons of one fleet taking the jobs; the
// seconds until the stream has every job done, the plans timed over all
// nodes in *timed, and the jobs each node did in *per_node.
double Prefill(const std::string& dir, const std::string& tier,
               const std::string& fleet, int nodes,
               const std::vector<ConvProblem>& problems, int64_t* timed,
               std::vector<int64_t>* per_node) {
  std::vector<std::unique_ptr<Node>> ns;
  for (int i = 0; i < nodes; ++i) {
    ns.push_back(std::make_unique<Node>());
    if (!StartNode(*ns.back(), dir, absl::StrCat(fleet, "-", i), tier, fleet)) {
      return -1;
    }
  }
  v1::PrefillRequest req;
  for (const ConvProblem& p : problems) ProblemToProto(p, req.add_problems());
  req.set_cluster(true);
  const Clock::time_point t0 = Clock::now();
  {
    grpc::ClientContext ctx;
    v1::PrefillResponse resp;
    grpc::Status s = ns[0]->stub->Prefill(&ctx, req, &resp);
    if (!s.ok()) {
      std::cerr << s.error_message() << "\n";
      return -1;
    }
  }
  const int64_t want = static_cast<int64_t>(problems.size());
  while (true) {
    grpc::ClientContext ctx;
    v1::GetStatusRequest sreq;
    sreq.set_cluster(true);
    v1::GetStatusResponse s;
    if (!ns[0]->stub->GetStatus(&ctx, sreq, &s).ok()) return -1;
    const v1::ClusterJobs& jobs = s.cluster_jobs();
    if (jobs.done() >= want && jobs.waiting() == 0 && jobs.running() == 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double seconds =
      std::chrono::duration<double>(Clock::now() - t0).count();
  *timed = 0;
  per_node->clear();
  for (auto& n : ns) {
    *timed += Counter(*n, "plans_timed");
    per_node->push_back(Counter(*n, "tier_jobs_done"));
    n->process.Stop(SIGTERM);
  }
  return seconds;
}

int Main(int argc, char** argv) {
  std::string file =
      std::string(CONVTUNE_SOURCE_DIR) + "/deploy/problems/resnet50_b1.txt";
  int rounds = 5, local_repeats = 20, prefill_nodes = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--file") {
      file = argv[i + 1];
    } else if (flag == "--rounds") {
      rounds = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--local-repeats") {
      local_repeats = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--prefill-nodes") {
      prefill_nodes = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::cerr << "usage: bench_tier [--file FILE] [--rounds N] "
                   "[--local-repeats N] [--prefill-nodes N]\n";
      return 2;
    }
  }
  if (testing::RedisServerPath().empty()) {
    std::cerr << "bench_tier: no redis-server in this build\n";
    return 2;
  }
  const std::vector<ConvProblem> problems = ReadProblems(file);
  if (problems.empty()) {
    std::cerr << "bench_tier: no problems in " << file << "\n";
    return 2;
  }
  const std::string dir = testing::MakeTempDir("convtune-bench-tier");
  std::ofstream(dir + "/writer.pw")
      << testing::RedisProcess::kWriterPassword << "\n";
  testing::RedisProcess redis;
  if (!redis.Start(dir)) {
    std::cerr << redis.log();
    return 1;
  }
  if (prefill_nodes > 0) {
    // The list through the job stream with one node, then with N nodes of
    // another fleet (each fleet starts with an empty tier).
    int64_t timed1 = 0, timedn = 0;
    std::vector<int64_t> jobs1, jobsn;
    const double one =
        Prefill(dir, redis.address(), "solo", 1, problems, &timed1, &jobs1);
    const double many = Prefill(dir, redis.address(), "shared", prefill_nodes,
                                problems, &timedn, &jobsn);
    redis.Stop();
    std::filesystem::remove_all(dir);
    if (one < 0 || many < 0) return 1;
    auto joined = [](const std::vector<int64_t>& v) {
      std::string out;
      for (int64_t x : v) absl::StrAppend(&out, out.empty() ? "" : " / ", x);
      return out;
    };
    std::printf(
        "| prefill --cluster of %zu problems | wall s | plans timed, "
        "all nodes | jobs per node |\n",
        problems.size());
    std::printf("|---|---|---|---|\n");
    std::printf("| 1 node | %.1f | %lld | %s |\n", one,
                static_cast<long long>(timed1), joined(jobs1).c_str());
    std::printf("| %d nodes | %.1f | %lld | %s |\n", prefill_nodes, many,
                static_cast<long long>(timedn), joined(jobsn).c_str());
    return 0;
  }
  Node a;
  if (!StartNode(a, dir, "node-a", redis.address())) return 1;
  std::string source;
  const Clock::time_point cold0 = Clock::now();
  for (const ConvProblem& p : problems) {
    Find(a, p, &source);
    if (source.rfind("error", 0) == 0) {
      std::cerr << source << "\n";
      return 1;
    }
  }
  const double cold_s =
      std::chrono::duration<double>(Clock::now() - cold0).count();
  for (int i = 0; i < 400 && Counter(a, "tier_published") <
                                 static_cast<int64_t>(problems.size());
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<double> tier_us, local_us;
  int64_t tunings = 0, not_tier = 0;
  for (int r = 0; r < rounds; ++r) {
    Node b;
    const std::string name = absl::StrCat("node-b", r);
    if (!StartNode(b, dir, name, redis.address())) return 1;
    for (const ConvProblem& p : problems) {
      tier_us.push_back(Find(b, p, &source));
      if (source != "tier") ++not_tier;
    }
    for (int k = 0; k < local_repeats; ++k) {
      for (const ConvProblem& p : problems) {
        local_us.push_back(Find(b, p, &source));
        if (source != "user_db") ++not_tier;
      }
    }
    tunings += Counter(b, "plans_timed");
    b.process.Stop(SIGTERM);
    std::filesystem::remove_all(dir + "/" + name + "-db");
  }
  a.process.Stop(SIGTERM);
  redis.Stop();
  std::filesystem::remove_all(dir);

  std::printf("%zu problems of %s; node A tuned them cold in %.1f s.\n\n",
              problems.size(), file.c_str(), cold_s);
  std::printf("| find on node B | finds | p50 us | p90 us | p99 us |\n");
  std::printf("|---|---|---|---|---|\n");
  std::printf(
      "| tier hit (fresh database: read, checked, stored) | %zu | "
      "%.0f | %.0f | %.0f |\n",
      tier_us.size(), Percentile(tier_us, 0.5), Percentile(tier_us, 0.9),
      Percentile(tier_us, 0.99));
  std::printf("| local hit (its own FindDb) | %zu | %.0f | %.0f | %.0f |\n",
              local_us.size(), Percentile(local_us, 0.5),
              Percentile(local_us, 0.9), Percentile(local_us, 0.99));
  std::printf(
      "\nnode B plans timed: %lld; answers from elsewhere than expected: "
      "%lld\n",
      static_cast<long long>(tunings), static_cast<long long>(not_tier));
  return tunings == 0 && not_tier == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
