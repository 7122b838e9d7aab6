// The config file: every key read, errors naming the key, the documented
// example in deploy/ loading as documented; Access's mapping of users.
#include "server/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "server/access.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convtune-config-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  absl::Status Load(const std::string& text, DaemonOptions* o) {
    const std::string path = dir_ + "/c.toml";
    std::ofstream(path) << text;
    return LoadConfig(path, o);
  }
  std::string dir_;
};

TEST_F(ConfigTest, TheDeployExampleLoadsAsDocumented) {
  DaemonOptions o;
  ASSERT_TRUE(
      LoadConfig(std::string(CONVTUNE_SOURCE_DIR) + "/deploy/convtuned.toml",
                 &o)
          .ok());
  EXPECT_EQ(o.socket_path, "/run/convtune/convtuned.sock");
  EXPECT_EQ(o.socket_mode, 0660u);
  EXPECT_EQ(o.db_dir, "/var/lib/convtune/db");
  EXPECT_EQ(o.db_min_free_mb, DaemonOptions().db_min_free_mb);
  EXPECT_EQ(o.db_recovery, DaemonOptions().db_recovery);
  EXPECT_EQ(o.find_mode, "DYNAMIC_HYBRID");
  EXPECT_EQ(o.service.max_execute_bytes, int64_t{64} << 20);
  EXPECT_EQ(o.service.limits.max_tensor_bytes, int64_t{16} << 30);
  ASSERT_EQ(o.access.tenants.size(), 3u);
  EXPECT_EQ(o.access.tenants[0].name, "ops");
  EXPECT_EQ(o.access.tenants[0].role, Role::kAdmin);
  EXPECT_EQ(o.access.tenants[1].gids, std::vector<gid_t>{2000});
  EXPECT_EQ(o.access.tenants[1].role, Role::kTenant);
  EXPECT_EQ(o.access.tenants[2].cert_names,
            std::vector<std::string>{"ci-runner"});
  // The documented limits are the defaults.
  const TuningQuotas::Limits defaults;
  EXPECT_EQ(o.core.quotas.max_in_flight, defaults.max_in_flight);
  EXPECT_EQ(o.core.quotas.max_queued, defaults.max_queued);
  EXPECT_EQ(o.core.quotas.max_benchmark_seconds_per_minute,
            defaults.max_benchmark_seconds_per_minute);
  // No tier unless an address is given; the rest as documented.
  const FindTier::Options tier;
  EXPECT_EQ(o.tier.address, "");
  EXPECT_EQ(o.tier.user, tier.user);
  EXPECT_EQ(o.tier.fleet, tier.fleet);
  EXPECT_EQ(o.tier.deadline, tier.deadline);
  EXPECT_EQ(o.tier.breaker_failures, tier.breaker_failures);
  EXPECT_EQ(o.tier.breaker_open, tier.breaker_open);
  EXPECT_EQ(o.tier.lease, tier.lease);
  EXPECT_EQ(o.tier.max_wait, tier.max_wait);
  EXPECT_EQ(o.tier.job_claim, tier.job_claim);
  EXPECT_EQ(o.tier.job_attempts, tier.job_attempts);
  EXPECT_EQ(o.tier_password_file, "/etc/convtune/tier.password");
  EXPECT_TRUE(o.devices.empty());
  EXPECT_EQ(o.cpu_devices, 1);
  EXPECT_EQ(o.core.device_in_use_ms, Core::Options().device_in_use_ms);
}

TEST_F(ConfigTest, ReadsEveryKey) {
  DaemonOptions o;
  absl::Status s = Load(R"(
[daemon]
socket = "/tmp/s.sock"
socket_mode = "0666"
db = "/tmp/db"
db_min_free_mb = 0
db_recovery = "refuse"
system_db = "/tmp/sys"
backend = "cpu"
device = 3
devices = [2, 5]
cpu_devices = 4
device_in_use_ms = 1500
find_mode = "NORMAL"
background_tune = false
compile_threads = 5
listen_plaintext = "127.0.0.1:7345"
listen_tls = "0.0.0.0:7346"
tls_cert = "/etc/c.pem"
tls_key = "/etc/c.key"
tls_client_ca = "/etc/ca.pem"
log_rpcs = false
metrics = "127.0.0.1:9464"
[limits]
max_tensor_bytes = 1000
max_execute_bytes = 2000
tenant_executes_in_flight = 3
tenant_execute_bytes_in_flight = 4000
tenant_tunings_in_flight = 5
tenant_tunings_queued = 6
tenant_benchmark_seconds_per_minute = 7.5
[access]
unlisted_users = "refuse"
owner_is_admin = false
[tier]
address = "redis.internal:6379"
user = "daemon-7"
password_file = "/etc/pw"
fleet = "h200-east"
node = "node-7"
deadline_ms = 40
breaker_failures = 5
breaker_open_ms = 9000
lease_ms = 3000
max_wait_ms = 60000
job_claim_ms = 5000
job_attempts = 4
[[tenant]]
name = "ci"
cert_names = ["ci-runner", "ci.example.com"]
)",
                        &o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(o.socket_path, "/tmp/s.sock");
  EXPECT_EQ(o.socket_mode, 0666u);
  EXPECT_EQ(o.db_dir, "/tmp/db");
  EXPECT_EQ(o.db_min_free_mb, 0);
  EXPECT_EQ(o.db_recovery, "refuse");
  EXPECT_EQ(o.system_db_dir, "/tmp/sys");
  EXPECT_EQ(o.backend, "cpu");
  EXPECT_EQ(o.device_ordinal, 3);
  EXPECT_EQ(o.devices, (std::vector<int>{2, 5}));
  EXPECT_EQ(o.cpu_devices, 4);
  EXPECT_EQ(o.core.device_in_use_ms, 1500);
  EXPECT_EQ(o.find_mode, "NORMAL");
  EXPECT_FALSE(o.core.background_tuning);
  EXPECT_EQ(o.compile_threads, 5);
  EXPECT_EQ(o.listen_address, "127.0.0.1:7345");
  EXPECT_FALSE(o.log_rpcs);
  EXPECT_EQ(o.metrics_address, "127.0.0.1:9464");
  EXPECT_EQ(o.service.limits.max_tensor_bytes, 1000);
  EXPECT_EQ(o.service.max_execute_bytes, 2000);
  EXPECT_EQ(o.service.tenant_executes.max_executes, 3);
  EXPECT_EQ(o.service.tenant_executes.max_bytes, 4000);
  EXPECT_FALSE(o.access.unlisted_users_are_tenants);
  EXPECT_FALSE(o.access.owner_is_admin);
  EXPECT_EQ(o.tls_address, "0.0.0.0:7346");
  EXPECT_EQ(o.tls.cert_file, "/etc/c.pem");
  EXPECT_EQ(o.tls.key_file, "/etc/c.key");
  EXPECT_EQ(o.tls.client_ca_file, "/etc/ca.pem");
  EXPECT_EQ(o.core.quotas.max_in_flight, 5);
  EXPECT_EQ(o.core.quotas.max_queued, 6);
  EXPECT_EQ(o.core.quotas.max_benchmark_seconds_per_minute, 7.5);
  ASSERT_EQ(o.access.tenants.size(), 1u);
  EXPECT_EQ(o.access.tenants[0].cert_names,
            (std::vector<std::string>{"ci-runner", "ci.example.com"}));
  EXPECT_EQ(o.tier.address, "redis.internal:6379");
  EXPECT_EQ(o.tier.user, "daemon-7");
  EXPECT_EQ(o.tier_password_file, "/etc/pw");
  EXPECT_EQ(o.tier.fleet, "h200-east");
  EXPECT_EQ(o.tier.node, "node-7");
  EXPECT_EQ(o.tier.deadline, absl::Milliseconds(40));
  EXPECT_EQ(o.tier.breaker_failures, 5);
  EXPECT_EQ(o.tier.breaker_open, absl::Milliseconds(9000));
  EXPECT_EQ(o.tier.lease, absl::Milliseconds(3000));
  EXPECT_EQ(o.tier.max_wait, absl::Milliseconds(60000));
  EXPECT_EQ(o.tier.job_claim, absl::Milliseconds(5000));
  EXPECT_EQ(o.tier.job_attempts, 4);
}

TEST_F(ConfigTest, ErrorsNameTheKeyAndQuoteAShortPrefix) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"[daemon]\nsockt = \"x\"\n", "daemon.sockt: unknown key"},
      {"[deamon]\n", "deamon: unknown key"},
      {"[daemon]\ndevice = \"0\"\n", "daemon.device: expected an integer"},
      {"[daemon]\ndevice = 5000\n", "daemon.device: expected 0 to 1024"},
      {"[daemon]\nsocket_mode = \"0777\"\n", "daemon.socket_mode"},
      {"[daemon]\nsocket_mode = 438\n",
       "daemon.socket_mode: expected a string"},
      {"[daemon]\nbackend = \"tpu\"\n", "daemon.backend: unknown 'tpu'"},
      {"[daemon]\nfind_mode = \"SLOW\"\n", "daemon.find_mode"},
      {"[daemon]\nbackground_tune = 1\n",
       "daemon.background_tune: expected true or false"},
      {"[limits]\nmax_execute_bytes = 0\n", "limits.max_execute_bytes"},
      {"[limits]\ntenant_tunings_in_flight = 0\n",
       "limits.tenant_tunings_in_flight: expected 1 to"},
      {"[limits]\ntenant_benchmark_seconds_per_minute = 61\n",
       "limits.tenant_benchmark_seconds_per_minute: expected 0 to 60"},
      {"[limits]\ntenant_benchmark_seconds_per_minute = \"x\"\n",
       "limits.tenant_benchmark_seconds_per_minute: expected a number"},
      {"[[tenant]]\nname = \"a\"\ncert_names = [1]\n",
       "tenant[0].cert_names: expected an array of strings"},
      {"[access]\nunlisted_users = \"maybe\"\n", "access.unlisted_users"},
      {"[[tenant]]\nname = \"a\"\n", "tenant[0].uids: a tenant needs uids"},
      {"[[tenant]]\nname = \"a b\"\nuids = [1]\n", "tenant[0].name"},
      {"[[tenant]]\nname = \"a\"\nuids = [-1]\n", "tenant[0].uids"},
      {"[[tenant]]\nname = \"a\"\nuids = [1]\n[[tenant]]\nname = \"a\"\n"
       "uids = [2]\n",
       "tenant[1].name: 'a' names two tenants"},
      {"[[tenant]]\nname = \"a\"\nuid = [1]\n", "tenant[0].uid: unknown key"},
      {"[daemon\n", "c.toml"},
      {"[tier]\naddress = \"nowhere\"\n", "tier.address: expected host:port"},
      {"[tier]\naddress = \"h:1\"\nfleet = \"a b\"\n", "tier.fleet"},
      {"[tier]\ndeadline_ms = 0\n", "tier.deadline_ms: expected 1 to"},
      {"[tier]\nadress = \"h:1\"\n", "tier.adress: unknown key"},
  };
  for (const Case& c : cases) {
    DaemonOptions o;
    absl::Status s = Load(c.text, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.text;
  }
  DaemonOptions o;
  absl::Status s =
      Load("[daemon]\nbackend = \"" + std::string(5000, 'x') + "\"\n", &o);
  EXPECT_THAT(std::string(s.message()), HasSubstr("..."));
  EXPECT_LT(s.message().size(), 300u);
  EXPECT_EQ(LoadConfig(dir_ + "/absent.toml", &o).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ConfigTest, TheEnvironmentOverridesTheFile) {
  DaemonOptions o;
  ASSERT_TRUE(
      Load("[daemon]\nsocket = \"/a\"\nfind_mode = \"NORMAL\"\n", &o).ok());
  setenv("CONVTUNE_SOCKET", "/b", 1);
  setenv("CONVTUNE_FIND_MODE", "FAST", 1);
  absl::Status s = ApplyEnvironment(&o);
  unsetenv("CONVTUNE_SOCKET");
  unsetenv("CONVTUNE_FIND_MODE");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(o.socket_path, "/b");
  EXPECT_EQ(o.find_mode, "FAST");
  setenv("CONVTUNE_COMPILE_PARALLEL_LEVEL", "many", 1);
  s = ApplyEnvironment(&o);
  unsetenv("CONVTUNE_COMPILE_PARALLEL_LEVEL");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("CONVTUNE_COMPILE_PARALLEL_LEVEL"));
}

TEST(AccessPolicyTest, UidsBeforeGidsOwnerAdminUnlistedByPolicy) {
  AccessPolicy p;
  p.owner_uid = 1000;
  p.tenants.push_back({"by-group", Role::kAdmin, {}, {50}});
  p.tenants.push_back({"by-user", Role::kTenant, {7}, {}});
  Access a(p, nullptr);
  // uid 7 in group 50: its uid's tenant wins.
  Caller c = a.ForUser(7, 50);
  EXPECT_EQ(c.tenant, "by-user");
  EXPECT_EQ(c.role, Role::kTenant);
  c = a.ForUser(8, 50);
  EXPECT_EQ(c.tenant, "by-group");
  EXPECT_EQ(c.role, Role::kAdmin);
  EXPECT_EQ(a.ForUser(1000, 1000).role, Role::kAdmin);
  EXPECT_EQ(a.ForUser(0, 0).role, Role::kAdmin);
  c = a.ForUser(9, 9);
  EXPECT_EQ(c.tenant, "uid:9");
  EXPECT_EQ(c.role, Role::kTenant);
  EXPECT_TRUE(Access::Check(c, Right::kTune, "Find").ok());
  EXPECT_EQ(Access::Check(c, Right::kAdmin, "DbImport").code(),
            absl::StatusCode::kPermissionDenied);

  p.unlisted_users_are_tenants = false;
  p.owner_is_admin = false;
  Access strict(p, nullptr);
  EXPECT_FALSE(strict.ForUser(9, 9).known);
  EXPECT_FALSE(strict.ForUser(1000, 1000).known);
  EXPECT_EQ(
      Access::Check(strict.ForUser(9, 9), Right::kQuery, "ListSolvers").code(),
      absl::StatusCode::kPermissionDenied);

  // Peers: plaintext TCP is anonymous; a descriptor nobody recorded, or a
  // peer with no credentials, is refused.
  Caller tcp = a.Identify("ipv4:127.0.0.1:5555");
  EXPECT_EQ(tcp.tenant, "tcp:127.0.0.1");
  EXPECT_TRUE(Access::Check(tcp, Right::kQuery, "GetSolutions").ok());
  EXPECT_FALSE(Access::Check(tcp, Right::kTune, "Find").ok());
  EXPECT_FALSE(Access::Check(tcp, Right::kExecute, "Execute").ok());
  EXPECT_FALSE(a.Identify("fd:12").known);
  EXPECT_FALSE(a.Identify("unknown").known);
  PeerTable peers;
  peers.Set(12, {1, 7, 7});
  Access with_peers(p, &peers);
  EXPECT_EQ(with_peers.Identify("fd:12").tenant, "by-user");
}

TEST(AccessPolicyTest, TlsClientsByTheNamesOfTheirCertificates) {
  AccessPolicy p;
  Tenant ci{"ci", Role::kTenant, {}, {}, {"ci-runner", "ci.example.com"}};
  Tenant ops{"ops", Role::kAdmin, {}, {}, {"ops"}};
  p.tenants = {ci, ops};
  Access a(p, nullptr);
  // The common name, or any subject alternative name, matches.
  Caller c = a.ForCertificate({"ci-runner"});
  EXPECT_EQ(c.tenant, "ci");
  EXPECT_EQ(c.role, Role::kTenant);
  EXPECT_EQ(a.ForCertificate({"host7", "ci.example.com"}).tenant, "ci");
  EXPECT_EQ(a.ForCertificate({"ops"}).role, Role::kAdmin);
  // Others are tenants of their own, or refused, as unlisted users are.
  c = a.ForCertificate({"someone"});
  EXPECT_EQ(c.tenant, "cert:someone");
  EXPECT_TRUE(Access::Check(c, Right::kTune, "Find").ok());
  EXPECT_FALSE(Access::Check(c, Right::kAdmin, "DbExport").ok());
  EXPECT_FALSE(a.ForCertificate({}).known);
  // Names that would break a log line, or that share a long prefix, stay
  // apart and plain.
  const std::string n1 = std::string(60, 'n') + "1";
  const std::string n2 = std::string(60, 'n') + "2";
  EXPECT_NE(a.ForCertificate({n1}).tenant, a.ForCertificate({n2}).tenant);
  c = a.ForCertificate({"evil\nrpc=Find tenant=ops"});
  EXPECT_EQ(c.tenant.find('\n'), std::string::npos);
  EXPECT_EQ(c.tenant.find(' '), std::string::npos);
  EXPECT_EQ(c.tenant.rfind("cert:evil_rpc_Find_tenant_ops~", 0), 0u)
      << c.tenant;
  p.unlisted_users_are_tenants = false;
  Access strict(p, nullptr);
  c = strict.ForCertificate({std::string(500, 'x')});
  EXPECT_FALSE(c.known);
  EXPECT_LT(c.refusal.size(), 200u);
}

}  // namespace
}  // namespace convtune
