// The `convtune` binary: usage errors without a daemon, then every
// sub-command against real convtuned processes.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/driver_line.h"
#include "tests/client/cli_util.h"
#include "tests/client/process_util.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;

TEST(CliUsageTest, HelpDescribesEverySubcommandAndFlag) {
  ProcessResult r = Cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word :
       {"find", "solvers", "db stats", "db export", "db import", "--socket",
        "--address", "--timeout", "Examples"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
  r = Cli({"find", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--file", "--jobs", "--json", "--workspace-limit",
                           "--count", "--exhaustive"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
}

TEST(CliUsageTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"--bogus", "db", "stats"},
           {"find"},
           {"db"},
           {"db", "export"},
           {"--timeout", "-3", "db", "stats"},
           {"--device", "x", "status"},
           {"find", "--tune-on-device", "-1", "conv", "-n", "1"},
           {"find", "conv", "-n", "1", "-c", "0", "-H", "8", "-W", "8", "-k",
            "4", "-y", "3", "-x", "3"},
           {"find", "--count", "0", "conv", "-n", "1"},
           {"find", "--jobs", "0", "conv", "-n", "1"},
           {"find", "--progress", "sometimes", "conv", "-n", "1"},
           {"prefill"},
           {"prefill", "--poll", "0", "x.txt"},
           {"prefill", "--bogus", "x.txt"},
           {"--tls-ca", "/nonexistent/ca.pem", "--address", "h:1", "status"},
           {"--tls-ca", "/etc/hostname", "--address", "h:1", "status"},
           {"--tls-ca", "/etc/hostname", "--tls-cert", "/etc/hostname",
            "--tls-key", "/etc/hostname", "status"}}) {
    ProcessResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ");
    EXPECT_THAT(r.err, HasSubstr("convtune: ")) << absl::StrJoin(args, " ");
  }
  ProcessResult r =
      Cli({"find", "conv", "-n", "1", "-c", "0", "-H", "8", "-W", "8"});
  EXPECT_THAT(r.err, HasSubstr("c: must be positive"));
  // TLS needs all three files, and a TCP address.
  r = Cli({"--tls-ca", "/etc/hostname", "--address", "h:1", "status"});
  EXPECT_THAT(r.err, HasSubstr("TLS needs all of --tls-ca, --tls-cert"));
  r = Cli({"--tls-ca", "/nonexistent/ca.pem", "--address", "h:1", "status"});
  EXPECT_THAT(r.err, HasSubstr("--tls-ca: cannot read '/nonexistent/ca.pem'"));
  r = Cli({"--tls-ca", "/etc/hostname", "--tls-cert", "/etc/hostname",
           "--tls-key", "/etc/hostname", "status"});
  EXPECT_THAT(r.err, HasSubstr("TLS needs --address HOST:PORT"));
  r = Cli({"--device", "x", "status"});
  EXPECT_THAT(r.err, HasSubstr("--device: 'x' is not a device ordinal"));
}

// A daemon of two CPU devices: find --tune-on-device times on the one named
// (the caller on --device 0), status lists both, and a device the daemon
// does not have is refused by name.
TEST(CliDevicesTest, FindTunesOnTheDeviceNamed) {
  if (testing::ConvtunedPath().empty())
    GTEST_SKIP() << "convtuned is not part of this build";
  if (std::thread::hardware_concurrency() < 2)
    GTEST_SKIP() << "two CPU devices need two CPUs";
  testing::TempDir dir;
  testing::Daemon daemon;
  absl::Status started =
      daemon.Start(dir.path(), dir.path() + "/db",
                   {"--cpu-devices", "2", "--background-tune", "off"});
  ASSERT_TRUE(started.ok()) << started;
  std::mt19937 rng{std::random_device{}()};
  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng, &key);
  args.insert(args.begin(), {"--socket", daemon.socket_path(), "--device", "0",
                             "find", "--tune-on-device", "1"});
  ProcessResult found = Cli(args);
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_THAT(found.out, HasSubstr("tuned in"));
  ProcessResult status = Cli({"--socket", daemon.socket_path(), "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out,
              ::testing::ContainsRegex("device 0 +[a-z ]+ 0 tuning job\\(s\\) "
                                       "waiting, 0 done"));
  EXPECT_THAT(status.out,
              ::testing::ContainsRegex("device 1 +idle +0 tuning job\\(s\\) "
                                       "waiting, 1 done"));
  args = RandomDriverArgs(rng, &key);
  args.insert(args.begin(), {"--socket", daemon.socket_path(), "find",
                             "--tune-on-device", "7"});
  ProcessResult refused = Cli(args);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err,
              HasSubstr("tune_on_device: no device 7 here (devices: 0, 1)"));
  absl::Status stopped = daemon.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

TEST(CliUsageTest, VersionPrintsAndExits) {
  ProcessResult r = Cli({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, absl::StrCat("convtune ", CONVTUNE_VERSION, "\n"));
  r = Cli({"--" + std::string(5000, 'x'), "db", "stats"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 400u);
}

TEST(CliUsageTest, DaemonDownSaysHowToStartIt) {
  testing::TempDir dir;
  const std::string socket = dir.path() + "/absent.sock";
  ProcessResult r = Cli({"--socket", socket, "db", "stats"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              HasSubstr("convtune: cannot reach convtuned at unix:" + socket));
  EXPECT_THAT(
      r.err,
      HasSubstr("is it running? (start it with convtuned --socket " + socket));
  EXPECT_EQ(Cli({"--socket", socket, "health"}).exit_code, 1);
}

class CliDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::ConvtunedPath().empty())
      GTEST_SKIP() << "convtuned is not part of this build";
    absl::Status s = daemon_.Start(dir_.path(), dir_.path() + "/db");
    ASSERT_TRUE(s.ok()) << s;
  }
  void TearDown() override {
    absl::Status stopped = daemon_.Stop();
    EXPECT_TRUE(stopped.ok()) << stopped;
  }

  ProcessResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", daemon_.socket_path()});
    return Cli(args);
  }

  testing::TempDir dir_;
  testing::Daemon daemon_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(CliDaemonTest, FindWithFlagsTunesThenAnswersFromDb) {
  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng_, &key);
  args.insert(args.begin(), "find");
  ProcessResult first = Run(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("problem " + key));
  EXPECT_THAT(first.out, HasSubstr("tuned in"));
  EXPECT_THAT(first.out, HasSubstr("; source tuned, mode "));
  EXPECT_THAT(first.out,
              HasSubstr("1 problem(s): 0 from FindDb, 1 tuned, 0 failed"));
  ProcessResult second = Run(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("(from FindDb; source user_db, mode "));
  EXPECT_THAT(second.out,
              HasSubstr("1 problem(s): 1 from FindDb, 0 tuned, 0 failed"));
}

TEST_F(CliDaemonTest, FindFileReportsBadLinesAndRunsTheRest) {
  std::string key1, key2;
  const std::vector<std::string> a1 = RandomDriverArgs(rng_, &key1);
  const std::vector<std::string> a2 = RandomDriverArgs(rng_, &key2);
  const std::string file = dir_.path() + "/problems.txt";
  {
    std::ofstream out(file);
    out << "# a comment\n"
        << absl::StrJoin(a1, " ") << "\n\n"
        << "conv -n 1 -c 4 --bogus 3\n"
        << "  " << absl::StrJoin(a2, " ") << "\n";
  }
  ProcessResult r = Run({"find", "--file", file});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr(file + ":4: "));
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  EXPECT_THAT(r.out, HasSubstr(key1));
  EXPECT_THAT(r.out, HasSubstr(key2));

  ProcessResult json = Run({"find", "--json", "--count", "2", "--file", file});
  EXPECT_NE(json.exit_code, 0);
  ASSERT_FALSE(json.out.empty());
  EXPECT_EQ(json.out.front(), '[');
  EXPECT_THAT(json.out, HasSubstr("\"problem_key\": \"" + key1 + "\""));
  EXPECT_THAT(json.out, HasSubstr("\"from_db\": true"));
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '{'),
            std::count(json.out.begin(), json.out.end(), '}'));
}

TEST_F(CliDaemonTest, FindFileWithJobsTunesConcurrentlyAndPrintsInFileOrder) {
  std::vector<std::string> keys(5);
  const std::string file = dir_.path() + "/jobs.txt";
  {
    std::ofstream out(file);
    for (std::string& key : keys)
      out << absl::StrJoin(RandomDriverArgs(rng_, &key), " ") << "\n";
  }
  ProcessResult r = Run({"find", "--jobs", "3", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t at = 0;
  for (const std::string& key : keys) {
    const size_t found = r.out.find(key, at);
    ASSERT_NE(found, std::string::npos) << key << " missing or out of order";
    at = found + key.size();
  }
  EXPECT_THAT(r.out,
              HasSubstr("5 problem(s): 0 from FindDb, 5 tuned, 0 failed"));
  // A second run answers every problem from the FindDb.
  r = Run({"find", "--jobs", "5", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("5 problem(s): 5 from FindDb, 0 tuned, 0 failed"));
}

// A database that takes no writes: the find still answers, warns on stderr
// that nothing was stored, and status says so.
TEST_F(CliDaemonTest, FindWarnsWhenItsRecordCouldNotBeStored) {
  testing::TempDir dir;
  testing::Daemon full;
  absl::Status started = full.Start(dir.path(), dir.path() + "/db",
                                    {"--db-min-free-mb", "1073741824"});
  ASSERT_TRUE(started.ok()) << started;
  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng_, &key);
  args.insert(args.begin(), {"--socket", full.socket_path(), "find"});
  ProcessResult r = Cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tuned in"));
  EXPECT_THAT(r.err, HasSubstr("convtune: warning: " + key +
                               " was tuned but not stored"));
  EXPECT_THAT(r.err, HasSubstr("--db-min-free-mb"));
  ProcessResult status = Cli({"--socket", full.socket_path(), "status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("TAKES NO WRITES"));
  EXPECT_THAT(status.out, ::testing::ContainsRegex("records_not_stored +1\n"));
  // A database that does take writes says nothing of it.
  ProcessResult fine = Run({"status"});
  EXPECT_THAT(fine.out, Not(HasSubstr("TAKES NO WRITES")));
  // Its health says so within the storage watch's second.
  ProcessResult health;
  for (int i = 0; i < 40; ++i) {
    health = Cli({"--socket", full.socket_path(), "health", "--service",
                  "convtune.storage"});
    if (health.exit_code != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(health.exit_code, 1);
  EXPECT_EQ(health.out, "NOT_SERVING\n");
  EXPECT_EQ(Cli({"--socket", full.socket_path(), "health"}).exit_code, 0);
  EXPECT_TRUE(full.Stop().ok()) << full.Log();
}

TEST_F(CliDaemonTest, StatusSaysWhoYouAreAndWhatTheDaemonDid) {
  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng_, &key);
  args.insert(args.begin(), "find");
  ASSERT_EQ(Run(args).exit_code, 0);
  ProcessResult r = Run({"status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("convtuned ", CONVTUNE_VERSION)));
  // The test runs as the daemon's own user: an admin.
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("uid:", getuid(), " (admin)")));
  EXPECT_THAT(r.out, HasSubstr("queue timing   1 thread(s)"));
  EXPECT_THAT(r.out, HasSubstr("tunings:    0 in flight"));
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("database: +[0-9.]+ MiB on disk"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("tunings +1\n"));
  EXPECT_EQ(Run({"status", "extra"}).exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("tier:       none"));
}

TEST_F(CliDaemonTest, HealthSaysWhetherTheDaemonServes) {
  ProcessResult r = Run({"health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Run({"health", "--service", "convtune.storage"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = Run({"health", "--service", "no.such.service"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Run({"health", "--bogus"}).exit_code, 2);
  EXPECT_EQ(Run({"health", "--help"}).exit_code, 0);
}

TEST_F(CliDaemonTest, FileIsARegularFileOrStdinAndNothingElse) {
  // A device, a folder and an empty file are refused at once, by name.
  const std::string empty = dir_.path() + "/empty.txt";
  std::ofstream(empty).close();
  for (const auto& [file, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "/dev/zero: not a regular file (a character device)"},
           {dir_.path(), "not a regular file (a folder)"},
           {empty, "empty.txt: no problems"},
           {dir_.path() + "/absent.txt", "absent.txt: cannot open"}}) {
    for (const char* command : {"find", "prefill"}) {
      ProcessResult r = command == std::string("find")
                            ? Run({"find", "--file", file})
                            : Run({"prefill", file});
      EXPECT_EQ(r.exit_code, 2) << command << " " << file;
      EXPECT_THAT(r.err, HasSubstr(says)) << command << " " << file;
    }
  }
  // A line longer than any problem's ends the reading.
  const std::string long_line = dir_.path() + "/long.txt";
  std::ofstream(long_line) << std::string(10000, 'x') << "\n";
  ProcessResult r = Run({"find", "--file", long_line});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("long.txt:1: line longer than 4096 bytes"));
  // So does a binary file.
  const std::string binary = dir_.path() + "/binary.txt";
  std::ofstream(binary) << "# list\n" << std::string("conv\0-n", 7) << "\n";
  r = Run({"find", "--file", binary});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("binary.txt:2: a NUL byte"));
  // "-" reads stdin; stdin from a device is cut off by the line limit.
  std::string key;
  const std::string line = absl::StrJoin(RandomDriverArgs(rng_, &key), " ");
  r = testing::RunProcess(
      {"/bin/sh", "-c",
       absl::StrCat("echo '", line, "' | ", CONVTUNE_CLI_PATH, " --socket ",
                    daemon_.socket_path(), " find --progress off --file -")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("problem " + key));
  r = testing::RunProcess(
      {"/bin/sh", "-c",
       absl::StrCat(CONVTUNE_CLI_PATH, " --socket ", daemon_.socket_path(),
                    " find --file - < /dev/zero")},
      60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("stdin:1: line longer than 4096 bytes"));
}

TEST_F(CliDaemonTest, FindShowsProgressAsLinesWhenNotOnATerminal) {
  std::vector<std::string> keys(3);
  const std::string file = dir_.path() + "/progress.txt";
  {
    std::ofstream out(file);
    for (std::string& key : keys)
      out << absl::StrJoin(RandomDriverArgs(rng_, &key), " ") << "\n";
  }
  // stderr is a pipe here: one line per problem as it ends.
  ProcessResult r = Run({"find", "--jobs", "2", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& key : keys) {
    EXPECT_THAT(r.err, HasSubstr(key + ": tuned in")) << r.err;
  }
  EXPECT_THAT(r.err, HasSubstr("find: [3/3] "));
  EXPECT_THAT(r.err, HasSubstr("; best "));
  // The bar is drawn in place with carriage returns, then cleared.
  r = Run({"find", "--progress", "bar", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\rfind ["));
  EXPECT_THAT(r.err, HasSubstr("/3"));
  EXPECT_THAT(r.err, ::testing::EndsWith("\r\x1b[K"));
  EXPECT_EQ(r.err.find('\n'), std::string::npos) << r.err;
  r = Run({"find", "--progress", "off", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliDaemonTest, PrefillQueuesAListAndFollowsItToTheEnd) {
  std::vector<std::string> keys(4);
  const std::string file = dir_.path() + "/prefill.txt";
  {
    std::ofstream out(file);
    for (std::string& key : keys)
      out << absl::StrJoin(RandomDriverArgs(rng_, &key), " ") << "\n";
  }
  ProcessResult r = Run(
      {"prefill", "--follow", "--progress", "lines", "--poll", "0.1", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 problem(s): "));
  EXPECT_THAT(r.out, HasSubstr(" not taken"));
  EXPECT_THAT(r.err, HasSubstr("prefill: 4/4 done"));
  // Everything it queued is in the FindDb now: a second prefill finds it
  // tuned, and find answers from the FindDb.
  r = Run({"prefill", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 problem(s): 0 queued, 4 tuned already"));
  r = Run({"find", "--file", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("4 problem(s): 4 from FindDb, 0 tuned, 0 failed"));
  // Status shows the tenant's prefill.
  r = Run({"status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tenants:"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex(
                         absl::StrCat("uid:", getuid(), " +0/32 +0/1024 +")));
  EXPECT_THAT(r.out, HasSubstr(" 4/0/"));
}

TEST_F(CliDaemonTest, SolversListsWhatTheDaemonHas) {
  auto client = Client::Connect(daemon_.address());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::ListSolversResponse> solvers = (*client)->ListSolvers();
  ASSERT_TRUE(solvers.ok()) << solvers.status();
  ASSERT_GT(solvers->solvers_size(), 0);
  ProcessResult r = Run({"solvers"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const v1::SolverInfo& s : solvers->solvers())
    EXPECT_THAT(r.out, HasSubstr(s.name()));
  EXPECT_THAT(r.out, Not(HasSubstr("applicable")));

  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng_, &key);
  args.insert(args.begin(), "solvers");
  r = Run(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("problem " + key));
  EXPECT_THAT(r.out, HasSubstr("applicable"));
}

TEST_F(CliDaemonTest, DbStatsExportImportIntoAnotherDaemon) {
  std::string key;
  std::vector<std::string> args = RandomDriverArgs(rng_, &key);
  args.insert(args.begin(), "find");
  ASSERT_EQ(Run(args).exit_code, 0);
  ProcessResult stats = Run({"db", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_THAT(stats.out, HasSubstr("device key: "));

  const std::string file = dir_.path() + "/export.ctdb";
  ProcessResult exported = Run({"db", "export", file});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("exported "));
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  EXPECT_GT(static_cast<int64_t>(in.tellg()), 0);

  testing::TempDir other_dir;
  testing::Daemon other;
  ASSERT_TRUE(other.Start(other_dir.path(), other_dir.path() + "/db").ok());
  ProcessResult imported =
      Cli({"--socket", other.socket_path(), "db", "import", file});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_THAT(imported.out, Not(HasSubstr("imported 0 ")));
  std::vector<std::string> again = {"--socket", other.socket_path(), "find",
                                    "--json"};
  again.insert(again.end(), args.begin() + 1, args.end());
  ProcessResult found = Cli(again);
  ASSERT_EQ(found.exit_code, 0) << found.err;
  EXPECT_THAT(found.out, HasSubstr("\"from_db\": true"));
  absl::Status stopped = other.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;

  // The records are already here: nothing new, nothing lost.
  ProcessResult again_here = Run({"db", "import", file});
  ASSERT_EQ(again_here.exit_code, 0) << again_here.err;
  EXPECT_THAT(again_here.out, HasSubstr("imported 0 record(s)"));
  EXPECT_THAT(again_here.out, HasSubstr(" unchanged"));
  EXPECT_EQ(Run({"db", "import", "--overwrite"}).exit_code, 2);

  ProcessResult missing = Run({"db", "import", dir_.path() + "/no-such-file"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no-such-file"));
}

}  // namespace
}  // namespace convtune
