// Who may do what, through real connections to a real convtuned: Unix users
// told apart by their socket credentials (a probe process that drops to
// another uid; needs root), tenants and admins from the config file, plaintext
// TCP read-only, imports checked against the registry, a private database
// folder, health answers for the service name and during shutdown, and
// server reflection.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/defaults.h"
#include "common/export_file.h"
#include "convtune/v1/records.pb.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "storage/keys.h"
#include "storage/portable.h"
#include "storage/records.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using testing::Bytes;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::Not;

ConvProblem Conv(int64_t c) {
  ConvProblem p;
  p.n = 1;
  p.c = c;
  p.k = 16;
  p.in = {1, 12, 12};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

v1::ConvProblem Wire(const ConvProblem& p) {
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::seconds(60));
  return ctx;
}

struct Answer {
  std::string code;
  std::string message;
};

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-access");
    ASSERT_FALSE(dir_.empty());
    // Other users reach the socket through this folder.
    chmod(dir_.c_str(), 0755);
    socket_ = dir_ + "/d.sock";
    db_ = dir_ + "/db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Start(DaemonProcess& d, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--socket", socket_,     "--db",
                                     db_,        "--backend", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, args, dir_ + "/d.log"));
    ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
  }
  std::string Config(const std::string& text) {
    const std::string path = dir_ + "/convtuned.toml";
    std::ofstream(path) << text;
    return path;
  }
  std::unique_ptr<v1::ConvTune::Stub> Stub(const std::string& target) {
    return v1::ConvTune::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }
  // Runs the probe as `uid`:`gid` and returns its answers by RPC.
  std::map<std::string, Answer> Probe(int uid, int gid, const std::string& rpcs,
                                      const std::string& import = "") {
    std::string cmd = absl::StrCat(ACCESS_PROBE_PATH, " --socket ", socket_,
                                   " --uid ", uid, " --gid ", gid);
    if (!import.empty()) absl::StrAppend(&cmd, " --import ", import);
    absl::StrAppend(&cmd, " ", rpcs, " 2>&1");
    std::map<std::string, Answer> out;
    FILE* f = popen(cmd.c_str(), "r");
    if (f == nullptr) return out;
    char line[1024];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      std::vector<std::string> parts = absl::StrSplit(
          absl::StripTrailingAsciiWhitespace(line), absl::MaxSplits(' ', 2));
      if (parts.size() >= 2) {
        out[parts[0]] = {parts[1], parts.size() > 2 ? parts[2] : ""};
      }
    }
    pclose(f);
    return out;
  }
  int64_t FindRecords(v1::ConvTune::Stub& admin) {
    v1::DbStatsRequest req;
    v1::DbStatsResponse resp;
    auto ctx = Context();
    grpc::Status s = admin.DbStats(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.records().count("find_db") ? resp.records().at("find_db") : 0;
  }
  // A find record of `p` for `device_key` naming one solver.
  static v1::ExportEntry FindEntry(const std::string& device_key,
                                   const ConvProblem& p, uint32_t id,
                                   const std::string& name) {
    v1::FindRecord r;
    r.set_schema_version(storage::kSchemaVersion);
    r.set_device_key(device_key);
    r.set_problem_key(ProblemKey(p));
    r.set_workspace_limit(-1);
    v1::PerfResult* best = r.add_results();
    best->set_solver_id(id);
    best->set_solver_name(name);
    best->set_algorithm("direct");
    best->set_time_ms(0.001);
    best->set_measured(true);
    v1::ExportEntry e;
    e.set_column_family("find_db");
    e.set_key(storage::FindDbKey(device_key, r.problem_key()));
    e.set_value(r.SerializeAsString());
    return e;
  }
  static std::string ExportFile(const std::vector<v1::ExportEntry>& entries) {
    v1::ExportFile file;
    file.set_magic(std::string(storage::kExportMagic));
    file.set_schema_version(storage::kSchemaVersion);
    for (const v1::ExportEntry& e : entries) *file.add_entries() = e;
    SealExportFile(&file);
    return file.SerializeAsString();
  }

  std::string dir_, socket_, db_;
};

bool IsRoot() { return geteuid() == 0; }

TEST_F(AccessTest, UsersOnTheSocketAreTenantsAdminsOrRefusedByTheConfig) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to call as other uids";
  const std::string config = Config(R"(
[access]
unlisted_users = "refuse"

[[tenant]]
name = "ci"
uids = [4242]

[[tenant]]
name = "ops"
gids = [4343]
admin = true
)");
  DaemonProcess d;
  Start(d, {"--config", config, "--socket-mode", "0666"});
  auto admin = Stub(UnixTarget(socket_));

  // A record the tenant tries to plant, for a problem nobody tuned.
  const std::string forged = dir_ + "/forged.ctdb";
  {
    v1::ListSolversRequest req;
    *req.mutable_problem() = Wire(Conv(24));
    v1::ListSolversResponse resp;
    auto ctx = Context();
    ASSERT_TRUE(admin->ListSolvers(ctx.get(), req, &resp).ok());
    const v1::SolverInfo& s = resp.solvers(0);
    std::ofstream(forged, std::ios::binary) << ExportFile(
        {FindEntry(resp.device_key(), Conv(24), s.id(), s.name())});
  }

  std::map<std::string, Answer> tenant =
      Probe(4242, 4242,
            "Find GetSolutions DbImport DbExport DbStats TrainHeuristic "
            "PrefillCluster",
            forged);
  EXPECT_EQ(tenant["Find"].code, "OK") << tenant["Find"].message;
  EXPECT_EQ(tenant["GetSolutions"].code, "OK");
  for (const char* rpc : {"DbImport", "DbExport", "DbStats", "TrainHeuristic",
                          "PrefillCluster"}) {
    EXPECT_EQ(tenant[rpc].code, "PERMISSION_DENIED") << rpc;
    EXPECT_THAT(tenant[rpc].message, HasSubstr("an admin call")) << rpc;
    EXPECT_THAT(tenant[rpc].message, HasSubstr("'ci'")) << rpc;
  }
  // The tenant's find stored one record; its import wrote nothing.
  EXPECT_EQ(FindRecords(*admin), 1);

  // An admin by group may import; a user the config does not name may do
  // nothing at all.
  std::map<std::string, Answer> ops =
      Probe(4343, 4343, "DbStats PrefillCluster");
  EXPECT_EQ(ops["DbStats"].code, "OK") << ops["DbStats"].message;
  // Past the check, a daemon without a tier says so.
  EXPECT_EQ(ops["PrefillCluster"].code, "FAILED_PRECONDITION");
  EXPECT_THAT(ops["PrefillCluster"].message, HasSubstr("no cluster tier"));
  std::map<std::string, Answer> stranger =
      Probe(4444, 4444, "GetSolutions Find");
  EXPECT_EQ(stranger["GetSolutions"].code, "PERMISSION_DENIED");
  EXPECT_THAT(stranger["Find"].message, HasSubstr("uid 4444"));
  EXPECT_THAT(stranger["Find"].message, HasSubstr("not a tenant"));

  // Every call is attributed in the log.
  d.Stop(SIGTERM);
  EXPECT_THAT(d.log(), HasSubstr("rpc=Find tenant=ci role=tenant code=OK"));
  EXPECT_THAT(d.log(), HasSubstr("rpc=DbImport tenant=ci role=tenant "
                                 "code=PERMISSION_DENIED"));
  EXPECT_THAT(d.log(), HasSubstr("rpc=DbStats tenant=ops role=admin code=OK"));
  EXPECT_THAT(d.log(), HasSubstr("tenant=uid:4444 role=refused "
                                 "code=PERMISSION_DENIED"));
}

TEST_F(AccessTest, WithoutAConfigOtherUsersAreTenants) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to call as other uids";
  DaemonProcess d;
  Start(d, {"--socket-mode", "0666"});
  std::map<std::string, Answer> other =
      Probe(4545, 4545, "Find DbExport TrainHeuristic");
  EXPECT_EQ(other["Find"].code, "OK") << other["Find"].message;
  EXPECT_EQ(other["DbExport"].code, "PERMISSION_DENIED");
  EXPECT_EQ(other["TrainHeuristic"].code, "PERMISSION_DENIED");
  EXPECT_THAT(other["DbExport"].message, HasSubstr("'uid:4545' is a tenant"));
  // The daemon's own user administers.
  std::map<std::string, Answer> owner = Probe(0, 0, "DbExport");
  EXPECT_EQ(owner["DbExport"].code, "OK") << owner["DbExport"].message;
}

TEST_F(AccessTest, TheSocketModeKeepsOtherUsersOut) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to call as other uids";
  DaemonProcess d;
  Start(d);  // 0660, the daemon's group
  struct stat st;
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  std::map<std::string, Answer> other = Probe(4646, 4646, "GetSolutions");
  EXPECT_EQ(other["GetSolutions"].code, "UNAVAILABLE");
}

TEST_F(AccessTest, PlaintextTcpAnswersOnlyReadOnlyQueries) {
  DaemonProcess d;
  Start(d, {"--listen-plaintext", "127.0.0.1:0"});
  const std::string log = d.log();
  const size_t at = log.find("tcp port ");
  ASSERT_NE(at, std::string::npos) << log;
  auto tcp =
      Stub("127.0.0.1:" + std::to_string(std::atoi(log.c_str() + at + 9)));

  v1::GetSolutionsRequest sol;
  *sol.mutable_problem() = Wire(Conv(16));
  v1::GetSolutionsResponse sol_resp;
  auto c1 = Context();
  grpc::Status s = tcp->GetSolutions(c1.get(), sol, &sol_resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(sol_resp.solutions_size(), 0);

  v1::FindRequest find;
  *find.mutable_problem() = Wire(Conv(16));
  v1::FindResponse find_resp;
  auto c2 = Context();
  s = tcp->Find(c2.get(), find, &find_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("anonymous"));

  v1::DbImportRequest imp;
  imp.set_file(ExportFile({}));
  v1::DbImportResponse imp_resp;
  auto c3 = Context();
  EXPECT_EQ(tcp->DbImport(c3.get(), imp, &imp_resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::ExecuteRequest exec;
  *exec.mutable_problem() = Wire(Conv(16));
  v1::ExecuteResponse exec_resp;
  auto c4 = Context();
  EXPECT_EQ(tcp->Execute(c4.get(), exec, &exec_resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The anonymous GetSolutions queued no background tuning: nothing stored.
  auto admin = Stub(UnixTarget(socket_));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(FindRecords(*admin), 0);
}

TEST_F(AccessTest, ImportsNamingUnknownOrInapplicableSolversAreRefused) {
  DaemonProcess d;
  Start(d);
  auto admin = Stub(UnixTarget(socket_));
  v1::ListSolversRequest req;
  *req.mutable_problem() = Wire(Conv(16));
  v1::ListSolversResponse solvers;
  auto c1 = Context();
  ASSERT_TRUE(admin->ListSolvers(c1.get(), req, &solvers).ok());
  const v1::SolverInfo* fits = nullptr;
  const v1::SolverInfo* misfit = nullptr;
  for (const v1::SolverInfo& s : solvers.solvers()) {
    if (s.backend() != v1::CPU) continue;
    if (s.applicable() && fits == nullptr) fits = &s;
    if (!s.applicable() && misfit == nullptr) misfit = &s;
  }
  ASSERT_NE(fits, nullptr);
  ASSERT_NE(misfit, nullptr) << "every CPU solver applies to a 3x3 problem";
  const std::string dev = solvers.device_key();
  v1::ExportEntry kernel;
  kernel.set_column_family("kernel_cache");
  kernel.set_key("0123456789abcdef");
  v1::KernelCacheRecord code;
  code.set_schema_version(storage::kSchemaVersion);
  code.set_backend("cuda");
  code.set_arch("sm_90");
  code.set_code_object("not a kernel");
  kernel.set_value(code.SerializeAsString());
  const std::string file = ExportFile({
      FindEntry(dev, Conv(16), 999, "fastest"),
      FindEntry(dev, Conv(24), fits->id(), "someone_elses_name"),
      FindEntry(dev, Conv(32), misfit->id(), misfit->name()),
      kernel,
      FindEntry(dev, Conv(40), fits->id(), fits->name()),
  });

  v1::DbImportRequest imp;
  imp.set_file(file);
  imp.set_overwrite(true);
  v1::DbImportResponse resp;
  auto c2 = Context();
  grpc::Status s = admin->DbImport(c2.get(), imp, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.imported(), 1);
  EXPECT_EQ(resp.refused(), 4);
  EXPECT_THAT(resp.first_refusal(), HasSubstr("solver id 999"));
  EXPECT_EQ(FindRecords(*admin), 1);

  // The refused record is not served: the problem is still unmeasured.
  v1::GetSolutionsRequest sol;
  *sol.mutable_problem() = Wire(Conv(16));
  sol.set_background_tune(false);
  v1::GetSolutionsResponse sol_resp;
  auto c3 = Context();
  ASSERT_TRUE(admin->GetSolutions(c3.get(), sol, &sol_resp).ok());
  for (const v1::Solution& x : sol_resp.solutions()) {
    EXPECT_NE(x.solution_id(), 999u);
    EXPECT_NE(x.provenance(), v1::MEASURED);
  }

  // Bytes that are not an export file are a bad argument, not lost data.
  imp.set_file(std::string(64, '\xff'));
  auto c4 = Context();
  s = admin->DbImport(c4.get(), imp, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("file"));
}

TEST_F(AccessTest, TheDatabaseIsPrivateToTheDaemonsUser) {
  DaemonProcess d;
  Start(d);
  auto admin = Stub(UnixTarget(socket_));
  v1::FindRequest find;
  *find.mutable_problem() = Wire(Conv(16));
  v1::FindResponse resp;
  auto ctx = Context();
  ASSERT_TRUE(admin->Find(ctx.get(), find, &resp).ok());
  struct stat st;
  ASSERT_EQ(stat(db_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(db_)) {
    if (!e.is_regular_file()) continue;
    ASSERT_EQ(stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0077, 0u) << e.path();
    ++files;
  }
  EXPECT_GT(files, 2);
}

TEST_F(AccessTest, HealthAnswersForTheServiceAndSaysNotServingOnShutdown) {
  DaemonProcess d;
  Start(d);
  auto channel = grpc::CreateChannel(UnixTarget(socket_),
                                     grpc::InsecureChannelCredentials());
  grpc::StatusCode code;
  constexpr int kServing = 1, kNotServing = 2;
  EXPECT_EQ(testing::HealthCheck(channel, "", 5000, &code), kServing);
  EXPECT_EQ(testing::HealthCheck(channel, "convtune.v1.ConvTune", 5000, &code),
            kServing);
  EXPECT_EQ(testing::HealthCheck(channel, "no.such.Service", 5000, &code), -1);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);

  // A long find keeps a call in flight while the daemon shuts down: health
  // says NOT_SERVING meanwhile.
  ConvProblem big;
  big.n = 16;
  big.c = 128;
  big.k = 128;
  big.in = {1, 56, 56};
  big.filter = {1, 3, 3};
  big.pad = {0, 1, 1};
  std::thread finder([&] {
    auto stub = Stub(UnixTarget(socket_));
    v1::FindRequest find;
    *find.mutable_problem() = Wire(big);
    v1::FindResponse resp;
    auto ctx = Context();
    stub->Find(ctx.get(), find, &resp);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(kill(d.pid(), SIGTERM), 0);
  bool saw_not_serving = false;
  for (int i = 0; i < 200 && !saw_not_serving; ++i) {
    const int h =
        testing::HealthCheck(channel, "convtune.v1.ConvTune", 5000, &code);
    if (h == kNotServing) saw_not_serving = true;
    if (h == -1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  finder.join();
  EXPECT_TRUE(saw_not_serving) << d.log();
  EXPECT_EQ(d.WaitExit(15000), 0);
}

TEST_F(AccessTest, ReflectionListsTheService) {
  DaemonProcess d;
  Start(d);
  auto channel = grpc::CreateChannel(UnixTarget(socket_),
                                     grpc::InsecureChannelCredentials());
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&](intptr_t want) {
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), want);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  step(1);
  ASSERT_TRUE(ok);
  // ServerReflectionRequest{list_services: ""}: field 7, length-delimited.
  grpc::Slice request(std::string("\x3a\x00", 2));
  call->Write(grpc::ByteBuffer(&request, 1), reinterpret_cast<void*>(2));
  step(2);
  ASSERT_TRUE(ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  step(3);
  ASSERT_TRUE(ok);
  const std::string bytes = Bytes(response);
  EXPECT_THAT(bytes, HasSubstr("convtune.v1.ConvTune"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  call->WritesDone(reinterpret_cast<void*>(4));
  step(4);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// The body of GET http://127.0.0.1:port/metrics, or "" on failure.
std::string HttpGetMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) close(fd);
    return "";
  }
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
    response.append(buf, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// Empty if `text` is Prometheus text exposition format (version 0.0.4),
// else the first line that is not.
std::string FirstBadLine(const std::string& text) {
  static const std::regex kHelp(R"(# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*)");
  static const std::regex kType(
      R"(# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))");
  static const std::regex kSample(
      R"([a-zA-Z_:][a-zA-Z0-9_:]*)"
      R"((\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*,?\})?)"
      R"( ([-+]?[0-9.eE+-]+|[-+]?[Ii]nf|[Nn]a[Nn])( -?[0-9]+)?)");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty()) continue;
    const std::string l(line);
    if (absl::StartsWith(l, "# HELP ")) {
      if (!std::regex_match(l, kHelp)) return l;
    } else if (absl::StartsWith(l, "# TYPE ")) {
      if (!std::regex_match(l, kType)) return l;
    } else if (l[0] == '#') {
      continue;
    } else if (!std::regex_match(l, kSample)) {
      return l;
    }
  }
  return "";
}

TEST_F(AccessTest, MetricsParseAsPrometheusTextAndCountByTenant) {
  DaemonProcess d;
  Start(d, {"--metrics", "127.0.0.1:0", "--listen-plaintext", "127.0.0.1:0"});
  const std::string log = d.log();
  const size_t at = log.find("metrics on port ");
  ASSERT_NE(at, std::string::npos) << log;
  const int port = std::atoi(log.c_str() + at + 16);
  const size_t tcp_at = log.find("tcp port ");
  ASSERT_NE(tcp_at, std::string::npos) << log;
  auto admin = Stub(UnixTarget(socket_));
  auto anonymous =
      Stub("127.0.0.1:" + std::to_string(std::atoi(log.c_str() + tcp_at + 9)));
  for (int i = 0; i < 2; ++i) {
    v1::FindRequest find;
    *find.mutable_problem() = Wire(Conv(16));
    v1::FindResponse resp;
    auto ctx = Context();
    ASSERT_TRUE(admin->Find(ctx.get(), find, &resp).ok());
  }
  v1::FindRequest find;
  *find.mutable_problem() = Wire(Conv(16));
  v1::FindResponse resp;
  auto ctx = Context();
  EXPECT_FALSE(anonymous->Find(ctx.get(), find, &resp).ok());

  // A finished call is counted once its interceptor is done: poll briefly.
  std::string text;
  const std::string denied =
      "convtune_rpcs_total{code=\"PERMISSION_DENIED\",rpc=\"Find\","
      "tenant=\"tcp:127.0.0.1\"} 1";
  for (int i = 0; i < 50 && text.find(denied) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = HttpGetMetrics(port);
  }
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(FirstBadLine(text), "");
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "convtune_rpcs_total{code=\"OK\",rpc=\"Find\",tenant="
                        "\"uid:",
                        geteuid(), "\"} 2")));
  EXPECT_THAT(text, HasSubstr(denied));
  EXPECT_THAT(text, HasSubstr("convtune_finds_total 2"));
  EXPECT_THAT(text, HasSubstr("convtune_db_hits_total 1"));
  EXPECT_THAT(text, HasSubstr("convtune_tunings_total 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE convtune_rpc_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("convtune_rpc_seconds_count{rpc=\"Find\"} 3"));
  EXPECT_THAT(
      text,
      HasSubstr("convtune_queue_waiting{priority=\"low\",queue=\"timing\"} 0"));
  EXPECT_THAT(text, HasSubstr("convtune_tunings_in_flight 0"));
  EXPECT_THAT(text, HasSubstr("convtune_device_tunings_total{device=\"0\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("convtune_device_tunings_waiting{device=\"0\"} 0"));
  // The checker itself refuses what is not the format.
  EXPECT_NE(FirstBadLine("convtune_x{a=b} 1\n"), "");
  EXPECT_NE(FirstBadLine("# TYPE convtune_x countr\n"), "");
}

TEST_F(AccessTest, ATenantOverItsExecuteLimitIsToldToRetry) {
  const std::string config = Config(R"(
[limits]
tenant_executes_in_flight = 1
)");
  DaemonProcess d;
  Start(d, {"--config", config});
  auto stub = Stub(UnixTarget(socket_));
  // Long enough on the naive solver that the second call comes while the
  // first runs.
  // (Its output stays under the client's 4 MiB message default.)
  ConvProblem big;
  big.n = 4;
  big.c = 64;
  big.k = 64;
  big.in = {1, 56, 56};
  big.filter = {1, 3, 3};
  big.pad = {0, 1, 1};
  v1::ListSolversRequest list;
  *list.mutable_problem() = Wire(big);
  v1::ListSolversResponse solvers;
  auto c0 = Context();
  ASSERT_TRUE(stub->ListSolvers(c0.get(), list, &solvers).ok());
  uint32_t naive = 0;
  for (const v1::SolverInfo& s : solvers.solvers()) {
    if (s.name() == "cpu_direct_naive") naive = s.id();
  }
  ASSERT_NE(naive, 0u);
  v1::ExecuteRequest exec;
  *exec.mutable_problem() = Wire(big);
  exec.set_solver_id(naive);
  exec.set_x(std::string(big.x_bytes(), '\x01'));
  exec.set_w(std::string(big.w_bytes(), '\x01'));

  std::mutex mu;
  std::condition_variable cv;
  bool first_done = false;
  grpc::Status first;
  v1::ExecuteResponse first_resp;
  auto c1 = Context();
  stub->async()->Execute(c1.get(), &exec, &first_resp, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    first = s;
    first_done = true;
    cv.notify_one();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  grpc::ClientContext c2;
  v1::ExecuteResponse second_resp;
  grpc::Status second = stub->Execute(&c2, exec, &second_resp);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return first_done; });
  }
  ASSERT_TRUE(first.ok()) << first.error_message();
  ASSERT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "the first Execute finished before the second came: "
      << second.error_message();
  EXPECT_THAT(second.error_message(),
              HasSubstr("limits.tenant_executes_in_flight"));
  const auto& trailing = c2.GetServerTrailingMetadata();
  auto hint = trailing.find("convtune-retry-after-ms");
  ASSERT_NE(hint, trailing.end());
  EXPECT_EQ(std::string(hint->second.data(), hint->second.size()), "250");
  // Once the first is done, the tenant may run again.
  auto c3 = Context();
  v1::ExecuteResponse third_resp;
  grpc::Status third = stub->Execute(c3.get(), exec, &third_resp);
  EXPECT_TRUE(third.ok()) << third.error_message();
}

}  // namespace
}  // namespace convtune
