// A daemon shared by tenants, through real connections to a real convtuned:
// TLS clients known by their certificates (and refused without a good one),
// per-tenant limits on tuning with retry hints, prefill at background
// priority followed through status, a find's progress streamed as it is
// tuned, each tenant's usage shown to it alone, and tenants taking turns on
// the device.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"
#include "tests/server/test_pki.h"

namespace convtune {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::ReadText;

// A forward problem whose size grows with `i`; `heavy` ones take the CPU
// backend a few tenths of a second to tune.
v1::ConvProblem Problem(int i, bool heavy = false) {
  ConvProblem p;
  p.n = heavy ? 4 : 1;
  p.c = (heavy ? 16 : 8) + i;
  p.k = heavy ? 32 : 16;
  p.in = {1, heavy ? 28 : 12, heavy ? 28 : 12};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

std::unique_ptr<grpc::ClientContext> Context(int seconds = 120) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(seconds));
  return ctx;
}

grpc::Status Find(v1::ConvTune::Stub& stub, const v1::ConvProblem& p,
                  v1::FindResponse* resp = nullptr,
                  std::string* retry_after = nullptr) {
  v1::FindRequest req;
  *req.mutable_problem() = p;
  v1::FindResponse ignored;
  auto ctx = Context();
  grpc::Status s = stub.Find(ctx.get(), req, resp ? resp : &ignored);
  if (retry_after != nullptr) {
    const auto& trailers = ctx->GetServerTrailingMetadata();
    auto it = trailers.find("convtune-retry-after-ms");
    *retry_after = it == trailers.end()
                       ? ""
                       : std::string(it->second.data(), it->second.size());
  }
  return s;
}

v1::GetStatusResponse Status(v1::ConvTune::Stub& stub,
                             grpc::Status* result = nullptr) {
  v1::GetStatusRequest req;
  v1::GetStatusResponse resp;
  auto ctx = Context(10);
  grpc::Status s = stub.GetStatus(ctx.get(), req, &resp);
  if (result != nullptr) *result = s;
  return resp;
}

const v1::TenantUsage* UsageOf(const v1::GetStatusResponse& s,
                               const std::string& tenant) {
  for (const v1::TenantUsage& t : s.tenants()) {
    if (t.tenant() == tenant) return &t;
  }
  return nullptr;
}

class TenantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-tenants");
    ASSERT_FALSE(dir_.empty());
    socket_ = dir_ + "/d.sock";
    std::string error;
    ASSERT_TRUE(testing::MakeTestPki(
        dir_, {"ci-runner", "ops-console", "stranger", "flood"}, &pki_, &error))
        << error;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts a daemon on the CPU with `config` and a TLS listener.
  void Start(DaemonProcess& d, const std::string& config,
             std::vector<std::string> extra = {}) {
    const std::string path = dir_ + "/convtuned.toml";
    std::ofstream(path) << config;
    std::vector<std::string> args = {"--socket",
                                     socket_,
                                     "--db",
                                     dir_ + "/db",
                                     "--backend",
                                     "cpu",
                                     "--config",
                                     path,
                                     "--background-tune",
                                     "off",
                                     "--listen-tls",
                                     "127.0.0.1:0",
                                     "--tls-cert",
                                     pki_.server_cert(),
                                     "--tls-key",
                                     pki_.server_key(),
                                     "--tls-client-ca",
                                     pki_.ca()};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, args, dir_ + "/d.log"));
    ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
    const std::string log = d.log();
    const size_t at = log.find("tls port ");
    ASSERT_NE(at, std::string::npos) << log;
    tls_port_ = std::atoi(log.c_str() + at + 9);
  }
  std::unique_ptr<v1::ConvTune::Stub> Local() {
    return v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket_), grpc::InsecureChannelCredentials()));
  }
  // A TLS client presenting `name`'s certificate ("" for none), trusting
  // `ca` for the daemon's.
  std::unique_ptr<v1::ConvTune::Stub> Tls(const std::string& name,
                                          const std::string& ca = "") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadText(ca.empty() ? pki_.ca() : ca);
    if (!name.empty()) {
      o.pem_cert_chain = ReadText(pki_.client_cert(name));
      o.pem_private_key = ReadText(pki_.client_key(name));
    }
    // The address is an IP literal (a bare machine may not resolve
    // "localhost"); the daemon's certificate names localhost.
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return v1::ConvTune::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", tls_port_), grpc::SslCredentials(o), args));
  }

  std::string dir_, socket_;
  testing::TestPki pki_;
  int tls_port_ = 0;
};

constexpr char kTenants[] = R"(
[access]
unlisted_users = "refuse"

[[tenant]]
name = "ci"
cert_names = ["ci-runner"]

[[tenant]]
name = "ops"
cert_names = ["ops-console"]
admin = true

[[tenant]]
name = "flood"
cert_names = ["flood"]

[[tenant]]
name = "local"
uids = [0]
admin = true
)";

TEST_F(TenantsTest, TlsClientsAreKnownByTheirCertificates) {
  DaemonProcess d;
  Start(d, kTenants);
  auto ci = Tls("ci-runner");
  grpc::Status s;
  v1::GetStatusResponse status = Status(*ci, &s);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << d.log();
  EXPECT_EQ(status.tenant(), "ci");
  EXPECT_EQ(status.role(), "tenant");
  EXPECT_TRUE(Find(*ci, Problem(1)).ok());
  v1::DbStatsRequest stats;
  v1::DbStatsResponse stats_resp;
  auto c1 = Context();
  s = ci->DbStats(c1.get(), stats, &stats_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("'ci' is a tenant"));

  auto ops = Tls("ops-console");
  EXPECT_EQ(Status(*ops).role(), "admin");
  auto c2 = Context();
  s = ops->DbStats(c2.get(), stats, &stats_resp);
  EXPECT_TRUE(s.ok()) << s.error_message();

  // Signed by the client CA, but no tenant of this daemon's.
  auto stranger = Tls("stranger");
  Status(*stranger, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("'stranger' is not a tenant"));
  EXPECT_EQ(Find(*stranger, Problem(2)).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // A certificate of another CA, no certificate, or no TLS at all: the
  // handshake fails and nothing is served.
  for (auto* stub : {Tls("rogue").release(), Tls("").release()}) {
    std::unique_ptr<v1::ConvTune::Stub> owned(stub);
    Status(*owned, &s);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE)
        << s.error_message();
  }
  auto plaintext = v1::ConvTune::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", tls_port_),
                          grpc::InsecureChannelCredentials()));
  Status(*plaintext, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);

  // Every served call is attributed to its tenant; nothing from the refused
  // handshakes reached a handler.
  EXPECT_EQ(d.Stop(SIGTERM), 0);
  const std::string log = d.log();
  EXPECT_THAT(log, HasSubstr("rpc=Find tenant=ci role=tenant code=OK"));
  EXPECT_THAT(log, HasSubstr("rpc=DbStats tenant=ops role=admin code=OK"));
  EXPECT_THAT(log,
              HasSubstr("rpc=GetStatus tenant=cert:stranger role=refused"));
  EXPECT_EQ(log.find("rogue"), std::string::npos);
}

// Runs the convtune CLI with `args`; its exit status, stdout and stderr
// (together) in *out.
int RunCli(const std::string& args, std::string* out) {
  FILE* f =
      popen(absl::StrCat(CONVTUNE_CLI_PATH, " ", args, " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  out->clear();
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out->append(buf, n);
  const int status = pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(TenantsTest, TheCliSpeaksTls) {
  DaemonProcess d;
  Start(d, kTenants);
  const std::string address = absl::StrCat("127.0.0.1:", tls_port_);
  auto tls_flags = [&](const std::string& name) {
    return absl::StrCat("--address ", address,
                        " --tls-server-name localhost --tls-ca ", pki_.ca(),
                        " --tls-cert ", pki_.client_cert(name), " --tls-key ",
                        pki_.client_key(name));
  };
  std::string out;
  EXPECT_EQ(RunCli(tls_flags("ci-runner") + " status", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("you:        ci (tenant)"));
  EXPECT_EQ(RunCli(tls_flags("ci-runner") +
                       " find conv -n 1 -c 8 -H 12 -W 12 -k 8 -y 3 -x 3 -p 1 "
                       "-q 1 -F 1",
                   &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("1 tuned, 0 failed"));
  // A certificate the daemon's client CA did not sign: no connection.
  EXPECT_EQ(RunCli(tls_flags("rogue") + " status", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("is convtuned serving --listen-tls " + address));
}

TEST_F(TenantsTest, TlsListenerRefusesToStartWithoutItsFiles) {
  for (const auto& [args, named] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--tls-cert", pki_.server_cert(), "--tls-client-ca", pki_.ca()},
            "tls_key: needed with listen_tls (--tls-key FILE)"},
           {{"--tls-cert", pki_.server_cert(), "--tls-key", pki_.ca(),
             "--tls-client-ca", pki_.ca()},
            "holds no PEM private key"},
           {{"--tls-cert", dir_ + "/absent.pem", "--tls-key", pki_.server_key(),
             "--tls-client-ca", pki_.ca()},
            "tls_cert: cannot read"}}) {
    std::vector<std::string> all = {"--socket",     socket_,      "--db",
                                    dir_ + "/db",   "--backend",  "cpu",
                                    "--listen-tls", "127.0.0.1:0"};
    all.insert(all.end(), args.begin(), args.end());
    DaemonProcess d;
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, all, dir_ + "/bad.log"));
    EXPECT_EQ(d.WaitExit(20000), 1);
    EXPECT_THAT(d.log(), HasSubstr(named));
  }
}

TEST_F(TenantsTest, FindStreamReportsProgressThenTheAnswer) {
  DaemonProcess d;
  Start(d, kTenants);
  auto local = Local();
  std::vector<v1::FindEvent> events;
  auto stream = [&](const v1::ConvProblem& p) {
    events.clear();
    v1::FindRequest req;
    *req.mutable_problem() = p;
    auto ctx = Context();
    auto reader = local->FindStream(ctx.get(), req);
    v1::FindEvent e;
    while (reader->Read(&e)) events.push_back(e);
    return reader->Finish();
  };
  grpc::Status s = stream(Problem(3, /*heavy=*/true));
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(events.back().has_result());
  EXPECT_FALSE(events.back().result().from_db());
  EXPECT_GT(events.back().result().results_size(), 1);
  int timed_before = -1;
  bool saw_timing = false, saw_best = false;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_TRUE(events[i].has_progress());
    const v1::FindProgress& p = events[i].progress();
    EXPECT_EQ(p.problem_key(), events.back().result().problem_key());
    EXPECT_GT(p.solvers(), 1);
    EXPECT_LE(p.timed(), p.solvers());
    // Events arrive in order: what was timed never goes back.
    EXPECT_GE(p.timed(), timed_before);
    timed_before = p.timed();
    saw_timing |= p.stage() == "timing";
    if (!p.best_solver().empty()) {
      saw_best = true;
      EXPECT_GT(p.best_ms(), 0);
    }
  }
  EXPECT_TRUE(saw_timing);
  EXPECT_TRUE(saw_best);
  // A FindDb hit is the answer alone.
  s = stream(Problem(3, /*heavy=*/true));
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].result().from_db());
  // A bad request is refused as by Find.
  v1::ConvProblem bad = Problem(3);
  bad.set_c(0);
  s = stream(bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(events.empty());
}

TEST_F(TenantsTest, ATenantOverItsFindsInFlightIsRefusedWithARetryHint) {
  DaemonProcess d;
  Start(d, absl::StrCat(kTenants, R"(
[limits]
tenant_tunings_in_flight = 2
)"));
  auto ci = Tls("ci-runner");
  ASSERT_TRUE(Find(*ci, Problem(1)).ok());
  // Five heavy finds at once: at most two wait on tuning, the others are
  // refused at once with a hint.
  std::mutex mu;
  std::vector<std::pair<grpc::Status, std::string>> answers;
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      std::string retry;
      grpc::Status s =
          Find(*ci, Problem(10 + i, /*heavy=*/true), nullptr, &retry);
      std::lock_guard<std::mutex> lock(mu);
      answers.emplace_back(s, retry);
    });
  }
  // Meanwhile the FindDb answers the same tenant at once.
  EXPECT_TRUE(Find(*ci, Problem(1)).ok());
  for (std::thread& t : threads) t.join();
  int ok = 0, refused = 0;
  for (const auto& [s, retry] : answers) {
    if (s.ok()) {
      ++ok;
      continue;
    }
    ++refused;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(),
                HasSubstr("(limits.tenant_tunings_in_flight)"));
    EXPECT_THAT(s.error_message(), HasSubstr("tenant 'ci'"));
    int64_t ms = 0;
    EXPECT_TRUE(absl::SimpleAtoi(retry, &ms) && ms > 0) << retry;
  }
  EXPECT_GE(ok, 2);
  EXPECT_GE(refused, 1);
  // Another tenant is not held to ci's count.
  auto flood = Tls("flood");
  EXPECT_TRUE(Find(*flood, Problem(30)).ok());
}

TEST_F(TenantsTest, AFindsSlotIsFreeOnceItIsAnsweredOrItsCallerLeft) {
  DaemonProcess d;
  Start(d, absl::StrCat(kTenants, R"(
[limits]
tenant_tunings_in_flight = 1
)"));
  auto ci = Tls("ci-runner");
  // One at a time, each find fits as soon as the one before is answered.
  for (int i = 0; i < 5; ++i) {
    grpc::Status s = Find(*ci, Problem(70 + i));
    EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
  }
  // ci joins another tenant's long run and leaves it: its slot is free
  // again while the run goes on for the other tenant.
  auto flood = Tls("flood");
  const v1::ConvProblem big = Problem(80, /*heavy=*/true);
  v1::ConvProblem bigger = big;
  bigger.set_n(16);
  std::thread other([&] { EXPECT_TRUE(Find(*flood, bigger).ok()); });
  auto local = Local();
  for (int i = 0; i < 300 && Status(*local).tunings_in_flight() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    v1::FindRequest req;
    *req.mutable_problem() = bigger;
    v1::FindResponse resp;
    auto ctx = Context();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(100));
    EXPECT_EQ(ci->Find(ctx.get(), req, &resp).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // The daemon sees the caller gone on its next look, which a loaded
  // machine can put past half a second: ci asks again while it is refused
  // for its limit, each time with the other tenant's run still going.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  grpc::Status s;
  int in_flight = 0;
  for (int i = 0; i < 50; ++i) {
    in_flight = Status(*local).tunings_in_flight();
    s = Find(*ci, Problem(90));
    if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(in_flight, 1) << "the other tenant's run ended too soon to tell";
  other.join();
}

TEST_F(TenantsTest, ATenantOverItsDeviceSecondsWaitsForTheMinuteToPass) {
  DaemonProcess d;
  Start(d, absl::StrCat(kTenants, R"(
[limits]
tenant_benchmark_seconds_per_minute = 0.01
)"));
  auto ci = Tls("ci-runner");
  ASSERT_TRUE(Find(*ci, Problem(1, /*heavy=*/true)).ok());
  const v1::TenantUsage* used = nullptr;
  v1::GetStatusResponse status = Status(*ci);
  used = UsageOf(status, "ci");
  ASSERT_NE(used, nullptr) << status.DebugString();
  ASSERT_GE(used->device_seconds_last_minute(), 0.01) << status.DebugString();
  EXPECT_EQ(used->limit_device_seconds_per_minute(), 0.01);

  std::string retry;
  grpc::Status s = Find(*ci, Problem(2, /*heavy=*/true), nullptr, &retry);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(),
              HasSubstr("(limits.tenant_benchmark_seconds_per_minute)"));
  int64_t ms = 0;
  ASSERT_TRUE(absl::SimpleAtoi(retry, &ms)) << retry;
  EXPECT_GT(ms, 0);
  EXPECT_LE(ms, 60000);
  // What is stored is still answered, and other tenants still tune.
  EXPECT_TRUE(Find(*ci, Problem(1, /*heavy=*/true)).ok());
  EXPECT_TRUE(Find(*Tls("flood"), Problem(2)).ok());

  // Background jobs run when no interactive find waits, and do not count
  // against the budget: a tenant that only prefilled still tunes.
  auto flood = Tls("flood");
  v1::PrefillRequest req;
  *req.add_problems() = Problem(3, /*heavy=*/true);
  v1::PrefillResponse resp;
  auto ctx = Context();
  ASSERT_TRUE(flood->Prefill(ctx.get(), req, &resp).ok());
  ASSERT_EQ(resp.queued(), 1);
  for (int i = 0; i < 600; ++i) {
    const v1::TenantUsage* u = UsageOf(Status(*flood), "flood");
    if (u != nullptr && u->prefill_done() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  status = Status(*flood);
  used = UsageOf(status, "flood");
  ASSERT_NE(used, nullptr);
  ASSERT_EQ(used->prefill_done(), 1) << status.DebugString();
  EXPECT_GT(used->device_seconds_total(), used->device_seconds_last_minute())
      << status.DebugString();
}

TEST_F(TenantsTest, PrefillQueuesUpToTheLimitBehindInteractiveFinds) {
  DaemonProcess d;
  Start(d, absl::StrCat(kTenants, R"(
[limits]
tenant_tunings_queued = 3
)"));
  auto ci = Tls("ci-runner");
  ASSERT_TRUE(Find(*ci, Problem(40, /*heavy=*/true)).ok());
  v1::PrefillRequest req;
  for (int i = 40; i < 46; ++i) {
    *req.add_problems() = Problem(i, /*heavy=*/true);
  }
  v1::PrefillResponse resp;
  auto ctx = Context();
  grpc::Status s = ci->Prefill(ctx.get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.already_tuned(), 1);
  EXPECT_EQ(resp.queued(), 3);
  EXPECT_EQ(resp.taken(), 4);
  EXPECT_THAT(resp.refusal(), HasSubstr("(limits.tenant_tunings_queued)"));

  // Full: another list is refused whole, with a hint.
  v1::PrefillRequest rest;
  *rest.add_problems() = Problem(44, /*heavy=*/true);
  auto ctx2 = Context();
  s = ci->Prefill(ctx2.get(), rest, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("tenant_tunings_queued"));
  EXPECT_TRUE(
      ctx2->GetServerTrailingMetadata().count("convtune-retry-after-ms"));

  // An interactive find goes ahead of the queued prefill.
  ASSERT_TRUE(Find(*ci, Problem(50, /*heavy=*/true)).ok());
  v1::GetStatusResponse status = Status(*ci);
  const v1::TenantUsage* used = UsageOf(status, "ci");
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(used->prefill_queued(), 3);
  EXPECT_LE(used->prefill_done(), 1) << status.DebugString();

  // Status follows it to the end; then the rest fits.
  for (int i = 0; i < 600; ++i) {
    status = Status(*ci);
    used = UsageOf(status, "ci");
    if (used != nullptr && used->background_jobs() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(used->background_jobs(), 0) << status.DebugString();
  EXPECT_EQ(used->prefill_failed(), 0);
  EXPECT_EQ(used->prefill_done(), used->prefill_queued());
  v1::PrefillRequest last;
  for (int i = 44; i < 46; ++i) {
    *last.add_problems() = Problem(i, /*heavy=*/true);
  }
  auto ctx3 = Context();
  s = ci->Prefill(ctx3.get(), last, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.taken(), 2);
  EXPECT_EQ(resp.refusal(), "");
  // What the prefill tuned is answered from the FindDb.
  for (int i = 0; i < 600; ++i) {
    status = Status(*ci);
    used = UsageOf(status, "ci");
    if (used == nullptr || used->background_jobs() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(used->background_jobs(), 0) << status.DebugString();
  v1::FindResponse found;
  ASSERT_TRUE(Find(*ci, Problem(42, /*heavy=*/true), &found).ok());
  EXPECT_TRUE(found.from_db());
  ASSERT_TRUE(Find(*ci, Problem(45, /*heavy=*/true), &found).ok());
  EXPECT_TRUE(found.from_db());

  // Anonymous callers may not prefill.
  v1::PrefillRequest one;
  *one.add_problems() = Problem(60);
  auto ctx4 = Context();
  s = Tls("stranger")->Prefill(ctx4.get(), one, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(TenantsTest, ATenantSeesItsOwnUsageAndAnAdminEveryones) {
  DaemonProcess d;
  Start(d, kTenants);
  auto ci = Tls("ci-runner");
  auto flood = Tls("flood");
  ASSERT_TRUE(Find(*ci, Problem(1)).ok());
  ASSERT_TRUE(Find(*flood, Problem(2)).ok());
  v1::GetStatusResponse mine = Status(*ci);
  ASSERT_EQ(mine.tenants_size(), 1) << mine.DebugString();
  EXPECT_EQ(mine.tenants(0).tenant(), "ci");
  EXPECT_GT(mine.tenants(0).device_seconds_total(), 0);
  EXPECT_EQ(mine.tenants(0).limit_finds_waiting(), 32);
  EXPECT_EQ(mine.db_bytes(), 0);
  v1::GetStatusResponse all = Status(*Tls("ops-console"));
  EXPECT_GT(all.db_bytes(), 0);
  EXPECT_NE(UsageOf(all, "ci"), nullptr) << all.DebugString();
  EXPECT_NE(UsageOf(all, "flood"), nullptr) << all.DebugString();
}

TEST_F(TenantsTest, TenantsTakeTurnsOnTheDevice) {
  DaemonProcess d;
  Start(d, kTenants);
  auto flood = Tls("flood");
  auto ci = Tls("ci-runner");
  // One tenant queues ten heavy finds; another then asks for one.
  constexpr int kFlood = 10;
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kFlood; ++i) {
    threads.emplace_back([&, i] {
      grpc::Status s = Find(*flood, Problem(100 + i, /*heavy=*/true));
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(s.ok() ? "flood" : "flood failed");
    });
  }
  auto local = Local();
  for (int i = 0; i < 300; ++i) {
    if (Status(*local).tunings_in_flight() >= kFlood) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(Status(*local).tunings_in_flight(), kFlood);
  grpc::Status s = Find(*ci, Problem(200, /*heavy=*/true));
  ASSERT_TRUE(s.ok()) << s.error_message();
  int flood_done_before;
  {
    std::lock_guard<std::mutex> lock(mu);
    flood_done_before = static_cast<int>(order.size());
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::count(order.begin(), order.end(), "flood"), kFlood);
  // First in, first served would have timed all ten first; taking turns,
  // the other tenant waits for the runs ahead of it, a few at most.
  EXPECT_LE(flood_done_before, kFlood / 2) << d.log();
}

}  // namespace
}  // namespace convtune
