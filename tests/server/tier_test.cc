// The cluster tier with a real redis-server and real convtuned processes on
// separate databases: a find on one node is a hit on another, with no
// timing; a CI reader cannot write; forged records are misses; the tier
// going away and coming back empty costs no errors and gets the records
// published again; a generation bump disowns what came before.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/records.pb.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/gpu/sha256.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "storage/redis.h"
#include "tests/server/daemon_process.h"
#include "tests/server/redis_process.h"

namespace convtune {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::RedisProcess;

ConvProblem Problem(int channels) {
  ConvProblem p;
  p.n = 1;
  p.c = channels;
  p.k = 16;
  p.in = {1, 10, 10};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

// The daemon binary ($CONVTUNED, else this build's) and its backend
// ($CONVTUNE_TIER_TEST_BACKEND, else cpu): on the GPU machine the same
// tests run with CUDA daemons.
std::string Convtuned() {
  const char* env = std::getenv("CONVTUNED");
  return env != nullptr && *env != '\0' ? env : CONVTUNED_PATH;
}
std::string Backend() {
  const char* env = std::getenv("CONVTUNE_TIER_TEST_BACKEND");
  return env != nullptr && *env != '\0' ? env : "cpu";
}

class TierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::RedisServerPath().empty()) {
      GTEST_SKIP() << "no redis-server in this build (deploy/install-deps.sh "
                      "installs it): the cluster tier is not tested";
    }
    dir_ = testing::MakeTempDir("convtune-tier");
    ASSERT_FALSE(dir_.empty());
    ASSERT_TRUE(redis_.Start(dir_)) << redis_.log();
    std::ofstream(dir_ + "/writer.pw") << RedisProcess::kWriterPassword << "\n";
  }
  void TearDown() override {
    nodes_.clear();
    redis_.Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  struct Node {
    std::string name, socket;
    std::unique_ptr<DaemonProcess> process;
    std::unique_ptr<v1::ConvTune::Stub> stub;
  };

  Node& StartNode(const std::string& name,
                  std::vector<std::string> extra = {}) {
    Node& n = nodes_[name];
    n.name = name;
    n.socket = dir_ + "/" + name + ".sock";
    n.process = std::make_unique<DaemonProcess>();
    std::vector<std::string> args = {"--socket",
                                     n.socket,
                                     "--db",
                                     dir_ + "/" + name + "-db",
                                     "--backend",
                                     Backend(),
                                     "--log-rpcs",
                                     "off",
                                     "--tier",
                                     redis_.address(),
                                     "--tier-password-file",
                                     dir_ + "/writer.pw",
                                     "--tier-node",
                                     name};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_TRUE(
        n.process->Start(Convtuned(), args, dir_ + "/" + name + ".log"));
    EXPECT_TRUE(n.process->WaitServing(n.socket)) << n.process->log();
    n.stub = v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(n.socket), grpc::InsecureChannelCredentials()));
    // It has read the tier's generation.
    for (int i = 0; i < 200 && redis_.running() &&
                    Status(n).tier().find("answering") == std::string::npos;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return n;
  }

  v1::FindResponse Find(Node& n, const ConvProblem& p) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(120));
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    v1::FindResponse resp;
    grpc::Status s = n.stub->Find(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << n.name << ": " << s.error_message() << "\n"
                        << n.process->log();
    return resp;
  }

  v1::GetStatusResponse Status(Node& n) {
    grpc::ClientContext ctx;
    v1::GetStatusResponse resp;
    EXPECT_TRUE(n.stub->GetStatus(&ctx, v1::GetStatusRequest(), &resp).ok());
    return resp;
  }
  int64_t Counter(Node& n, const std::string& name) {
    auto counters = Status(n).counters();
    auto it = counters.find(name);
    return it == counters.end() ? -1 : it->second;
  }
  // Waits up to 20 s for counter `name` of n to reach `at_least`.
  bool WaitCounter(Node& n, const std::string& name, int64_t at_least) {
    for (int i = 0; i < 400; ++i) {
      if (Counter(n, name) >= at_least) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The tier's key of p's record for node n (as the daemon computes it).
  // The tier's key prefix of node n, as its status says ("keys P:*").
  std::string Prefix(Node& n) {
    const std::string tier = Status(n).tier();
    const size_t at = tier.find("keys ");
    const size_t end = tier.find(":*", at);
    if (at == std::string::npos || end == std::string::npos) return "";
    return tier.substr(at + 5, end - at - 5);
  }
  std::string RecordKey(Node& n, const ConvProblem& p, int generation = 0) {
    return absl::StrCat(Prefix(n), ":g", generation,
                        ":find:", Sha256Hex(ProblemKey(p)));
  }
  // Whether p's lease (node n's prefix) appears within the polls: a node
  // takes it as it starts to tune.
  bool WaitLeased(Node& n, const ConvProblem& p) {
    const std::string key =
        absl::StrCat(Prefix(n), ":g0:lease:", Sha256Hex(ProblemKey(p)));
    for (int i = 0; i < 20000; ++i) {
      absl::StatusOr<storage::RedisReply> r = redis_.Admin({"EXISTS", key});
      if (r.ok() && r->integer == 1) return true;
    }
    return false;
  }
  // The job stream's state as node n reads it.
  v1::ClusterJobs Jobs(Node& n) {
    grpc::ClientContext ctx;
    v1::GetStatusRequest req;
    req.set_cluster(true);
    v1::GetStatusResponse s;
    EXPECT_TRUE(n.stub->GetStatus(&ctx, req, &s).ok());
    // The one key's entry, which the tests below read.
    EXPECT_EQ(s.keys_size(), 1);
    if (s.keys_size() != 1) return s.cluster_jobs();
    EXPECT_EQ(s.keys(0).device_key(), s.device_key());
    EXPECT_EQ(s.keys(0).tier(), s.tier());
    EXPECT_FALSE(s.keys(0).tier().empty());
    return s.keys(0).cluster_jobs();
  }
  int CountFindKeys() {
    absl::StatusOr<storage::RedisReply> keys =
        redis_.Admin({"KEYS", "convtune:v1:*:find:*"});
    return keys.ok() ? static_cast<int>(keys->elements.size()) : -1;
  }

  std::string dir_;
  RedisProcess redis_;
  std::map<std::string, Node> nodes_;
};

TEST_F(TierTest, AFindOnOneNodeIsATierHitOnAnotherWithNoTiming) {
  Node& a = StartNode("node-a");
  Node& b = StartNode("node-b");
  const ConvProblem p = Problem(16);
  v1::FindResponse first = Find(a, p);
  EXPECT_EQ(first.source(), "tuned");
  ASSERT_TRUE(WaitCounter(a, "tier_published", 1)) << a.process->log();

  v1::FindResponse there = Find(b, p);
  EXPECT_EQ(there.source(), "tier") << b.process->log();
  ASSERT_GT(there.results_size(), 0);
  EXPECT_EQ(there.results(0).solver_id(), first.results(0).solver_id());
  EXPECT_EQ(there.results(0).time_ms(), first.results(0).time_ms());
  EXPECT_EQ(Counter(b, "tier_hits"), 1);
  EXPECT_EQ(Counter(b, "plans_timed"), 0);
  // Stored on b: the next find is a local hit.
  EXPECT_EQ(Find(b, p).source(), "user_db");
  EXPECT_EQ(Counter(b, "tier_hits"), 1);

  // What the tier holds names who measured it.
  absl::StatusOr<storage::RedisReply> held =
      redis_.Admin({"GET", RecordKey(a, p)});
  ASSERT_TRUE(held.ok()) << held.status();
  v1::FindRecord record;
  ASSERT_TRUE(record.ParseFromString(held->str));
  EXPECT_EQ(record.origin().node(), "node-a");
  EXPECT_EQ(record.origin().daemon_version(), CONVTUNE_VERSION);
  EXPECT_GT(record.origin().published_unix_ms(), 0);
  EXPECT_THAT(Status(b).tier(), HasSubstr("answering"));
  // The prefix is the fleet and a hash of the device's key (with the BLAS's
  // version on a GPU).
  EXPECT_THAT(Prefix(b),
              ::testing::MatchesRegex("convtune:v1:default:[0-9a-f]{24}"));
}

TEST_F(TierTest, OnlyTheWriterWritesACiReaderOnlyReads) {
  const std::string key = "convtune:v1:default:0123:g0:find:00";
  ASSERT_TRUE(redis_.Admin({"SET", key, "x"}).ok());
  auto reader =
      redis_.Connect(RedisProcess::kReader, RedisProcess::kReaderPassword);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<storage::RedisReply> got = (*reader)->Command({"GET", key});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->str, "x");
  absl::StatusOr<storage::RedisReply> set =
      (*reader)->Command({"SET", key, "forged"});
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->is_error());
  EXPECT_THAT(set->str, HasSubstr("NOPERM"));
  // The writer cannot disown generations or touch other keys.
  auto writer =
      redis_.Connect(RedisProcess::kWriter, RedisProcess::kWriterPassword);
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::StatusOr<storage::RedisReply> incr =
      (*writer)->Command({"INCR", "convtune:v1:default:0123:generation"});
  ASSERT_TRUE(incr.ok());
  EXPECT_TRUE(incr->is_error());
  absl::StatusOr<storage::RedisReply> other =
      (*writer)->Command({"SET", "elsewhere", "x"});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->is_error());
  // Without credentials: nothing.
  storage::RedisConnection::Options anonymous;
  anonymous.endpoint.unix_path = dir_ + "/redis.sock";
  anonymous.deadline = absl::Seconds(2);
  auto anon = storage::RedisConnection::Connect(anonymous);
  ASSERT_TRUE(anon.ok());
  absl::StatusOr<storage::RedisReply> peek = (*anon)->Command({"GET", key});
  ASSERT_TRUE(peek.ok());
  EXPECT_TRUE(peek->is_error());
  // A wrong password is refused at connect.
  EXPECT_EQ(redis_.Connect(RedisProcess::kWriter, "guess").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(TierTest, ForgedRecordsAreMissesNotErrors) {
  Node& b = StartNode("node-b");
  // A genuine record to forge from.
  const ConvProblem genuine = Problem(16);
  ASSERT_EQ(Find(b, genuine).source(), "tuned");
  ASSERT_TRUE(WaitCounter(b, "tier_published", 1));
  absl::StatusOr<storage::RedisReply> held =
      redis_.Admin({"GET", RecordKey(b, genuine)});
  ASSERT_TRUE(held.ok());
  v1::FindRecord base;
  ASSERT_TRUE(base.ParseFromString(held->str));
  ASSERT_GT(base.results_size(), 0);
  // A solver of the genuine record that takes workspace, to under-claim it.
  v1::FindRecord needs_workspace = base;
  needs_workspace.clear_results();
  for (const v1::PerfResult& r : base.results()) {
    if (r.workspace_bytes() > 0 && needs_workspace.results_size() == 0) {
      *needs_workspace.add_results() = r;
    }
  }
  base.mutable_results()->DeleteSubrange(1, base.results_size() - 1);
  // Rewritten for other problems below: enough workspace for any of them
  // (a record may claim more than its plan takes, never less).
  base.mutable_results(0)->set_workspace_bytes(int64_t{1} << 30);

  // The control: the same record rewritten for another problem is taken.
  const ConvProblem control = Problem(24);
  v1::FindRecord copy = base;
  copy.set_problem_key(ProblemKey(control));
  ASSERT_TRUE(
      redis_.Admin({"SET", RecordKey(b, control), copy.SerializeAsString()})
          .ok());
  EXPECT_EQ(Find(b, control).source(), "tier");

  struct Forgery {
    const char* what;
    std::function<void(v1::FindRecord*)> change;
    std::string raw;  // bytes instead of a record, when set
  };
  const std::vector<Forgery> forgeries = {
      {"an unknown solver",
       [](v1::FindRecord* r) { r->mutable_results(0)->set_solver_id(99999); }},
      {"a solver under another name",
       [](v1::FindRecord* r) {
         r->mutable_results(0)->set_solver_name("fastest_ever");
       }},
      {"another device",
       [](v1::FindRecord* r) { r->set_device_key("cuda-sm_90-cu132-x"); }},
      {"a negative time",
       [](v1::FindRecord* r) { r->mutable_results(0)->set_time_ms(-1); }},
      {"a config the solver does not have",
       [](v1::FindRecord* r) {
         r->mutable_results(0)->clear_perf_config();
         for (int i = 0; i < 9; ++i) r->mutable_results(0)->add_perf_config(-7);
       }},
      {"another schema", [](v1::FindRecord* r) { r->set_schema_version(99); }},
      {"bytes that are no record", nullptr, "\xff\xff not a record"},
  };
  int channels = 32;
  for (const Forgery& f : forgeries) {
    const ConvProblem p = Problem(channels);
    channels += 8;
    std::string bytes = f.raw;
    if (bytes.empty()) {
      v1::FindRecord forged = base;
      forged.set_problem_key(ProblemKey(p));
      f.change(&forged);
      bytes = forged.SerializeAsString();
    }
    ASSERT_TRUE(redis_.Admin({"SET", RecordKey(b, p), bytes}).ok());
    v1::FindResponse r = Find(b, p);
    EXPECT_EQ(r.source(), "tuned") << f.what;
  }
  int64_t rejected = static_cast<int64_t>(forgeries.size());
  // Less workspace than the plan takes: tenants would get plans that do
  // not fit what they offer.
  if (needs_workspace.results_size() > 0) {
    const ConvProblem p = Problem(channels);
    v1::FindRecord forged = needs_workspace;
    forged.set_problem_key(ProblemKey(p));
    forged.mutable_results(0)->set_workspace_bytes(0);
    ASSERT_TRUE(
        redis_.Admin({"SET", RecordKey(b, p), forged.SerializeAsString()})
            .ok());
    EXPECT_EQ(Find(b, p).source(), "tuned") << "workspace under-claimed";
    ++rejected;
  }
  EXPECT_EQ(Counter(b, "tier_rejected"), rejected);
  EXPECT_EQ(Counter(b, "tier_hits"), 1);
  EXPECT_THAT(b.process->log(), HasSubstr("refused the tier's record"));
}

TEST_F(TierTest,
       TheTierGoneCostsNoErrorsAndComingBackEmptyGetsEverythingAgain) {
  Node& a = StartNode("node-a");
  ASSERT_EQ(Find(a, Problem(16)).source(), "tuned");
  ASSERT_TRUE(WaitCounter(a, "tier_published", 1));
  redis_.Stop(SIGKILL);
  // Finds go on, tuned locally.
  for (int c : {24, 32, 40}) {
    EXPECT_EQ(Find(a, Problem(c)).source(), "tuned") << c;
  }
  EXPECT_GT(Counter(a, "tier_errors") + Counter(a, "tier_skipped"), 0);
  EXPECT_THAT(Status(a).tier(), HasSubstr("not answering"));
  // An empty tier where the old one was.
  ASSERT_TRUE(redis_.Start(dir_)) << redis_.log();
  for (int i = 0; i < 400 && CountFindKeys() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountFindKeys(), 4);
  // A new node finds all four there.
  Node& b = StartNode("node-b");
  for (int c : {16, 24, 32, 40}) {
    EXPECT_EQ(Find(b, Problem(c)).source(), "tier") << c;
  }
  EXPECT_EQ(Counter(b, "plans_timed"), 0);
  EXPECT_EQ(Counter(b, "tier_hits"), 4);
  // Flushed under running daemons: published again.
  ASSERT_TRUE(redis_.Admin({"FLUSHALL"}).ok());
  for (int i = 0; i < 400 && CountFindKeys() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountFindKeys(), 4);
}

// A loopback TCP proxy to Redis that holds each chunk for a settable delay.
class DelayProxy {
 public:
  explicit DelayProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listen_fd_, 16);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] { Accept(); });
  }
  ~DelayProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    accept_.join();
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    for (std::thread& t : pipes_) t.join();
    for (int fd : fds_) close(fd);
  }
  int port() const { return port_; }
  void set_delay_ms(int ms) { delay_ms_ = ms; }

 private:
  void Accept() {
    while (!stop_) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(target_port_);
      if (connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(client);
        close(server);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      pipes_.emplace_back([this, client, server] { Pipe(client, server); });
      pipes_.emplace_back([this, client, server] { Pipe(server, client); });
    }
  }
  void Pipe(int from, int to) {
    char buf[16384];
    while (true) {
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
      // The daemon closes a connection it gave up on: no SIGPIPE for that.
      if (send(to, buf, n, MSG_NOSIGNAL) != n) break;
    }
    shutdown(to, SHUT_WR);
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> delay_ms_{0};
  std::atomic<bool> stop_{false};
  std::thread accept_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pipes_;
};

TEST_F(TierTest, ASlowTierCostsNoErrorsAndIsUsedAgainOnceFast) {
  DelayProxy proxy(redis_.port());
  Node& a =
      StartNode("node-a", {"--tier", absl::StrCat("127.0.0.1:", proxy.port())});
  ASSERT_THAT(Status(a).tier(), HasSubstr("answering"));
  // Slower than the 25 ms deadline: every lookup and write fails in time.
  proxy.set_delay_ms(200);
  for (int c : {16, 24, 32, 40}) {
    EXPECT_EQ(Find(a, Problem(c)).source(), "tuned") << c;
  }
  EXPECT_GT(Counter(a, "tier_errors") + Counter(a, "tier_skipped"), 0);
  // Fast again: the queued records go out.
  proxy.set_delay_ms(0);
  for (int i = 0; i < 400 && CountFindKeys() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountFindKeys(), 4);
  EXPECT_THAT(Status(a).tier(), HasSubstr("answering"));
}

TEST_F(TierTest, ATierRefusingWritesCostsNoErrorsAndNoBusyRetrying) {
  Node& a = StartNode("node-a");
  // Out of memory for writes: every SET is refused (OOM), reads still work.
  ASSERT_TRUE(redis_.Admin({"CONFIG", "SET", "maxmemory", "1"}).ok());
  ASSERT_TRUE(
      redis_.Admin({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  for (int c : {16, 24}) {
    EXPECT_EQ(Find(a, Problem(c)).source(), "tuned") << c;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const int64_t errors = Counter(a, "tier_errors");
  EXPECT_GT(errors, 0);
  // Retried about once a second, not in a loop.
  EXPECT_LT(errors, 30);
  EXPECT_EQ(CountFindKeys(), 0);
  // Memory again: the queued records go out.
  ASSERT_TRUE(redis_.Admin({"CONFIG", "SET", "maxmemory", "0"}).ok());
  for (int i = 0; i < 200 && CountFindKeys() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountFindKeys(), 2);
}

TEST_F(TierTest, AGenerationBumpDisownsEarlierRecords) {
  Node& a = StartNode("node-a");
  ASSERT_EQ(Find(a, Problem(16)).source(), "tuned");
  ASSERT_TRUE(WaitCounter(a, "tier_published", 1));
  const std::string prefix =
      RecordKey(a, Problem(16))
          .substr(0, RecordKey(a, Problem(16)).find(":g0:"));
  ASSERT_TRUE(redis_.Admin({"INCR", prefix + ":generation"}).ok());
  // Within a poll (2 s) both nodes read generation 1; a's record of
  // generation 0 is not published again.
  Node& b = StartNode("node-b");
  for (int i = 0;
       i < 100 && Status(a).tier().find("generation 1") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(Status(a).tier(), HasSubstr("generation 1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a poll
  absl::StatusOr<storage::RedisReply> g1 =
      redis_.Admin({"KEYS", prefix + ":g1:find:*"});
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(g1->elements.size(), 0u);
  EXPECT_EQ(Find(b, Problem(16)).source(), "tuned");
  EXPECT_EQ(Counter(b, "tier_hits"), 0);
  // What b tunes now is generation 1's, and a takes it.
  ASSERT_EQ(Find(b, Problem(24)).source(), "tuned");
  ASSERT_TRUE(WaitCounter(b, "tier_published", 1));
  EXPECT_EQ(Find(a, Problem(24)).source(), "tier");
}

// A problem that takes a while to tune on the CPU.
ConvProblem SlowProblem() {
  ConvProblem p = Problem(64);
  p.k = 64;
  p.in = {1, 28, 28};
  return p;
}

TEST_F(TierTest, TwoNodesGivenTheSameColdProblemTuneItOnce) {
  Node& a = StartNode("node-a");
  Node& b = StartNode("node-b");
  const ConvProblem p = SlowProblem();
  v1::FindResponse ra, rb;
  std::thread ta([&] { ra = Find(a, p); });
  std::thread tb([&] { rb = Find(b, p); });
  ta.join();
  tb.join();
  const int64_t timed_a = Counter(a, "plans_timed");
  const int64_t timed_b = Counter(b, "plans_timed");
  EXPECT_TRUE((timed_a > 0) != (timed_b > 0))
      << "plans timed: a " << timed_a << ", b " << timed_b;
  // The one that did not tune answered from the tier.
  std::set<std::string> sources = {ra.source(), rb.source()};
  EXPECT_EQ(sources, (std::set<std::string>{"tuned", "tier"}));
  ASSERT_GT(ra.results_size(), 0);
  ASSERT_GT(rb.results_size(), 0);
  EXPECT_EQ(ra.results(0).solver_id(), rb.results(0).solver_id());
  EXPECT_EQ(CountFindKeys(), 1);
}

TEST_F(TierTest, ATunerPausedPastItsLeaseIsTakenOverAndOneRecordRemains) {
  std::ofstream(dir_ + "/lease.toml") << "[tier]\nlease_ms = 1000\n";
  Node& a = StartNode("node-a", {"--config", dir_ + "/lease.toml"});
  Node& b = StartNode("node-b", {"--config", dir_ + "/lease.toml"});
  const ConvProblem p = SlowProblem();
  const std::string record_key = RecordKey(a, p);
  v1::FindResponse ra;
  std::thread ta([&] { ra = Find(a, p); });
  // a takes the lease as it starts to tune; it stops there.
  ASSERT_TRUE(WaitLeased(a, p));
  ASSERT_TRUE(testing::PauseProcess(a.process->pid()));
  v1::FindResponse rb = Find(b, p);  // waits out the lease, then tunes
  EXPECT_EQ(rb.source(), "tuned");
  EXPECT_GE(Counter(b, "tier_waits"), 1);
  ASSERT_TRUE(WaitCounter(b, "tier_published", 1));
  ASSERT_EQ(kill(a.process->pid(), SIGCONT), 0);
  ta.join();
  EXPECT_EQ(ra.source(), "tuned");
  // a's record came second: b's stays, the only one.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(CountFindKeys(), 1);
  absl::StatusOr<storage::RedisReply> held = redis_.Admin({"GET", record_key});
  ASSERT_TRUE(held.ok());
  v1::FindRecord record;
  ASSERT_TRUE(record.ParseFromString(held->str));
  EXPECT_EQ(record.origin().node(), "node-b");
}

TEST_F(TierTest, ADaemonStoppedWhileWaitingOnALeaseExitsCleanly) {
  Node& a = StartNode("node-a");
  Node& b = StartNode("node-b");
  const ConvProblem p = SlowProblem();
  std::thread ta([&] { Find(a, p); });
  ASSERT_TRUE(WaitLeased(a, p));
  ASSERT_TRUE(testing::PauseProcess(a.process->pid()));
  grpc::Status waited;
  std::thread tb([&] {
    grpc::ClientContext ctx;
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    v1::FindResponse resp;
    waited = b.stub->Find(&ctx, req, &resp);
  });
  ASSERT_TRUE(WaitCounter(b, "tier_waits", 1));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(b.process->Stop(SIGTERM), 0) << b.process->log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  tb.join();
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE)
      << waited.error_message();
  ASSERT_EQ(kill(a.process->pid(), SIGCONT), 0);
  ta.join();
}

// Problems for a job list: small, each distinct.
std::vector<ConvProblem> JobList(int n) {
  std::vector<ConvProblem> out;
  for (int i = 0; i < n; ++i) {
    ConvProblem p = Problem(4 + 4 * (i % 10));
    p.k = 4 + 4 * (i / 10);
    p.in = {1, 8, 8};
    out.push_back(p);
  }
  return out;
}

TEST_F(TierTest, ThreeNodesDrainASixtyProblemListTuningEachOnce) {
  Node& a = StartNode("node-a");
  Node& b = StartNode("node-b");
  Node& c = StartNode("node-c");
  const std::vector<ConvProblem> list = JobList(60);
  v1::PrefillRequest req;
  for (const ConvProblem& p : list) ProblemToProto(p, req.add_problems());
  req.set_cluster(true);
  {
    grpc::ClientContext ctx;
    v1::PrefillResponse resp;
    grpc::Status s = a.stub->Prefill(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.queued(), 60);
  }
  v1::ClusterJobs jobs;
  for (int i = 0; i < 1200; ++i) {
    jobs = Jobs(b);
    if (jobs.done() == 60 && jobs.waiting() == 0 && jobs.running() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(jobs.done(), 60) << jobs.DebugString();
  EXPECT_EQ(jobs.dead(), 0);
  EXPECT_EQ(jobs.nodes_size(), 3);
  // Each problem was measured on one node: records stored minus those read
  // from the tier, over the three nodes.
  int64_t measured = 0, done = 0, nodes_with_jobs = 0;
  for (Node* n : {&a, &b, &c}) {
    measured += Counter(*n, "records_stored") - Counter(*n, "tier_hits");
    const int64_t mine = Counter(*n, "tier_jobs_done");
    done += mine;
    if (mine > 0) ++nodes_with_jobs;
  }
  EXPECT_EQ(measured, 60);
  EXPECT_EQ(done, 60);
  EXPECT_GE(nodes_with_jobs, 2);
  for (int i = 0; i < 200 && CountFindKeys() < 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CountFindKeys(), 60);
  // A tenant's daemon without a tier is told so; the CLI shows the stream.
  EXPECT_THAT(Status(a).tier(), HasSubstr("answering"));
}

TEST_F(TierTest, AJobOfAKilledNodeIsTakenOverByAnother) {
  std::ofstream(dir_ + "/jobs.toml")
      << "[tier]\nlease_ms = 1000\njob_claim_ms = 1000\n";
  Node& a = StartNode("node-a", {"--config", dir_ + "/jobs.toml"});
  v1::PrefillRequest req;
  ProblemToProto(SlowProblem(), req.add_problems());
  req.set_cluster(true);
  {
    grpc::ClientContext ctx;
    v1::PrefillResponse resp;
    ASSERT_TRUE(a.stub->Prefill(&ctx, req, &resp).ok());
  }
  // a takes it, and dies at it.
  bool taken = false;
  for (int i = 0; i < 2000 && !taken; ++i) {
    taken = Jobs(a).running() == 1;
  }
  ASSERT_TRUE(taken);
  a.process->Stop(SIGKILL);
  Node& b = StartNode("node-b", {"--config", dir_ + "/jobs.toml"});
  v1::ClusterJobs jobs;
  for (int i = 0; i < 600; ++i) {
    jobs = Jobs(b);
    if (jobs.done() == 1 && jobs.running() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(jobs.done(), 1) << jobs.DebugString();
  EXPECT_EQ(Counter(b, "tier_jobs_claimed"), 1);
  EXPECT_EQ(Counter(b, "tier_jobs_done"), 1);
  EXPECT_GT(Counter(b, "plans_timed"), 0);
}

TEST_F(TierTest, AJobThatFailsThreeTimesIsSetAside) {
  Node& a = StartNode("node-a");
  // A job no daemon can run, put there by hand.
  const std::string record = RecordKey(a, Problem(16));
  const std::string jobs_key =
      record.substr(0, record.find(":find:")) + ":jobs";
  ASSERT_TRUE(redis_
                  .Admin({"XADD", jobs_key, "*", "problem", "not-a-problem",
                          "ws", "-1", "attempts", "0"})
                  .ok());
  v1::ClusterJobs jobs;
  for (int i = 0; i < 300; ++i) {
    jobs = Jobs(a);
    if (jobs.dead() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(jobs.dead(), 1) << jobs.DebugString();
  EXPECT_EQ(Counter(a, "tier_jobs_failed"), 2);
  EXPECT_EQ(Counter(a, "tier_jobs_dead"), 1);
  absl::StatusOr<storage::RedisReply> dead =
      redis_.Admin({"XRANGE", jobs_key + ":dead", "-", "+"});
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->elements.size(), 1u);
  const auto& fields = dead->elements[0].elements[1].elements;
  std::map<std::string, std::string> f;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    f[fields[i].str] = fields[i + 1].str;
  }
  EXPECT_EQ(f["problem"], "not-a-problem");
  EXPECT_EQ(f["attempts"], "3");
  EXPECT_FALSE(f["error"].empty());
}

TEST_F(TierTest, BadTierSettingsNameTheField) {
  DaemonProcess d;
  ASSERT_TRUE(d.Start(Convtuned(),
                      {"--socket", dir_ + "/x.sock", "--db", dir_ + "/x-db",
                       "--backend", "cpu", "--tier", "no-port-here"},
                      dir_ + "/x.log"));
  EXPECT_NE(d.WaitExit(20000), 0);
  EXPECT_THAT(d.log(), HasSubstr("tier.address"));
  DaemonProcess e;
  ASSERT_TRUE(e.Start(
      Convtuned(),
      {"--socket", dir_ + "/y.sock", "--db", dir_ + "/y-db", "--backend", "cpu",
       "--tier", redis_.address(), "--tier-fleet", "a fleet with spaces"},
      dir_ + "/y.log"));
  EXPECT_NE(e.WaitExit(20000), 0);
  EXPECT_THAT(e.log(), HasSubstr("tier.fleet"));
}

}  // namespace
}  // namespace convtune
