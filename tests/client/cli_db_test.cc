// The `convtune` binary's find modes, immediate, heuristic and system FindDb
// commands against real convtuned processes, and the offline db merge.
#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/export_file.h"
#include "common/file_util.h"
#include "convtune/v1/records.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/cli_util.h"
#include "tests/client/process_util.h"

namespace convtune {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessResult;

std::vector<std::string> With(std::vector<std::string> head,
                              const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

TEST(CliModeUsageTest, ReservedAndUnknownModesAreUsageErrors) {
  std::mt19937 rng{std::random_device{}()};
  std::string key;
  const std::vector<std::string> line = RandomDriverArgs(rng, &key);
  for (const char* mode : {"4", "bogus", "0", "9"}) {
    ProcessResult r = Cli(With({"find", "--mode", mode}, line));
    EXPECT_EQ(r.exit_code, 2) << mode;
    EXPECT_THAT(r.err, HasSubstr("--mode")) << mode;
  }
  EXPECT_THAT(Cli(With({"find", "--mode", "4"}, line)).err,
              HasSubstr("reserved"));
  EXPECT_EQ(Cli({"find", "conv", "-n", "1", "--mode"}).exit_code, 2);
  EXPECT_EQ(Cli({"immediate"}).exit_code, 2);
  EXPECT_EQ(Cli({"heuristic"}).exit_code, 2);
  EXPECT_EQ(Cli({"heuristic", "forget"}).exit_code, 2);
  EXPECT_EQ(Cli({"db", "merge", "out"}).exit_code, 2);
}

TEST(CliModeUsageTest, HelpDescribesTheNewCommands) {
  ProcessResult r = Cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word :
       {"immediate", "heuristic train", "db merge", "--system", "--mode"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
  r = Cli({"find", "--help"});
  for (const char* word : {"--mode", "TRUST_VERIFY_FULL", "reserved"})
    EXPECT_THAT(r.out, HasSubstr(word));
  r = Cli({"immediate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word :
       {"--json", "--workspace-limit", "--count", "estimated", "Examples"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
  r = Cli({"db", "--help"});
  for (const char* word : {"export --system DIR", "merge OUT", ".ctsys"})
    EXPECT_THAT(r.out, HasSubstr(word));
  EXPECT_EQ(Cli({"heuristic", "--help"}).exit_code, 0);
}

class CliFindDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::ConvtunedPath().empty())
      GTEST_SKIP() << "convtuned is not part of this build";
    absl::Status s = a_.Start(dir_a_.path(), dir_a_.path() + "/db");
    ASSERT_TRUE(s.ok()) << s;
  }

  ProcessResult RunOn(const testing::Daemon& d, std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", d.socket_path()});
    return Cli(args);
  }
  // `find --json` of `line` on `d`; fails the test unless it exits 0.
  std::string FindJson(const testing::Daemon& d,
                       const std::vector<std::string>& line,
                       std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"find", "--json"});
    ProcessResult r = RunOn(d, With(flags, line));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  v1::ExportFile ReadExport(const std::string& path) {
    v1::ExportFile file;
    absl::StatusOr<std::string> bytes = ReadFile(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(bytes.ok() && file.ParseFromString(*bytes)) << path;
    return file;
  }

  testing::TempDir dir_a_, dir_b_;
  testing::Daemon a_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(CliFindDbTest, FastFallsBackThenNormalTunes) {
  std::string key;
  const std::vector<std::string> line = RandomDriverArgs(rng_, &key);
  ProcessResult fast = RunOn(a_, With({"find", "--mode", "FAST"}, line));
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_THAT(fast.out, HasSubstr("fallback ranking, not timed"));
  EXPECT_THAT(fast.out, HasSubstr("source fallback, mode FAST"));
  EXPECT_THAT(fast.out, HasSubstr("1 fallback (not timed)"));
  std::string json = FindJson(a_, line, {"--mode", "2"});
  EXPECT_THAT(json, HasSubstr("\"source\": \"fallback\""));
  EXPECT_THAT(json, HasSubstr("\"measured\": false"));
  EXPECT_THAT(json, Not(HasSubstr("\"measured\": true")));

  ProcessResult normal = RunOn(a_, With({"find", "--mode", "normal"}, line));
  ASSERT_EQ(normal.exit_code, 0) << normal.err;
  EXPECT_THAT(normal.out, HasSubstr("tuned in"));
  EXPECT_THAT(normal.out, HasSubstr("source tuned, mode NORMAL"));
  ProcessResult plain = RunOn(a_, With({"find"}, line));
  EXPECT_THAT(plain.out, HasSubstr("(from FindDb; source user_db"));
}

TEST_F(CliFindDbTest, ImmediateTableAndJson) {
  std::string key;
  const std::vector<std::string> line = RandomDriverArgs(rng_, &key);
  ProcessResult table =
      RunOn(a_, With({"immediate", "--no-background-tune"}, line));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, Not(HasSubstr("queued in the background")));
  EXPECT_THAT(table.out, HasSubstr("problem " + key));
  EXPECT_THAT(table.out, AnyOf(HasSubstr("(source estimate)"),
                               HasSubstr("(source heuristic)")));
  EXPECT_THAT(table.out,
              AnyOf(HasSubstr("estimated  0.00"), HasSubstr("learned    0.")));
  EXPECT_THAT(table.out, HasSubstr("time is"));
  EXPECT_THAT(table.out, HasSubstr("confidence"));

  ProcessResult json = RunOn(a_, With({"immediate", "--json"}, line));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  ASSERT_FALSE(json.out.empty());
  EXPECT_EQ(json.out.front(), '[');
  EXPECT_THAT(json.out, HasSubstr("\"measured\": false"));
  EXPECT_THAT(json.out, AnyOf(HasSubstr("\"provenance\": \"estimated\""),
                              HasSubstr("\"provenance\": \"learned\"")));
  EXPECT_THAT(json.out, HasSubstr("\"confidence\": "));
  // Still a miss: this call queued a find (the daemon's default).
  EXPECT_THAT(json.out, HasSubstr("\"tuning_queued\": true"));
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '{'),
            std::count(json.out.begin(), json.out.end(), '}'));

  FindJson(a_, line);
  json = RunOn(a_, With({"immediate", "--json", "--count", "1"}, line));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"source\": \"user_db\""));
  EXPECT_THAT(json.out, HasSubstr("\"measured\": true"));
  EXPECT_THAT(json.out, HasSubstr("\"provenance\": \"measured\", "
                                  "\"confidence\": 1.000"));
  EXPECT_EQ(std::count(json.out.begin(), json.out.end(), '{'), 2);
  table = RunOn(a_, With({"immediate"}, line));
  EXPECT_THAT(table.out, HasSubstr("(source user_db)"));
  EXPECT_THAT(table.out, HasSubstr("measured   1.00"));
  EXPECT_THAT(table.out, Not(HasSubstr("estimated  0")));
  EXPECT_THAT(table.out, HasSubstr("1 from a FindDb, 0 learned, 0 estimated"));
}

TEST_F(CliFindDbTest, HeuristicTrainSaysWhyItCannotThenTrains) {
  std::string key;
  FindJson(a_, RandomDriverArgs(rng_, &key));
  FindJson(a_, RandomDriverArgs(rng_, &key));
  ProcessResult few = RunOn(a_, {"heuristic", "train"});
  EXPECT_EQ(few.exit_code, 1);
  EXPECT_THAT(few.err, HasSubstr("records"));
  for (int i = 0; i < 8; ++i) FindJson(a_, RandomDriverArgs(rng_, &key));
  ProcessResult r = RunOn(a_, {"heuristic", "train"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("trained the heuristic"));
  EXPECT_THAT(r.out, HasSubstr("train accuracy"));
  EXPECT_THAT(r.out, Not(HasSubstr(" on 0 FindDb")));
}

TEST_F(CliFindDbTest, SystemFindDbRoundTrip) {
  std::string key1, key2;
  const std::vector<std::string> p1 = RandomDriverArgs(rng_, &key1);
  const std::vector<std::string> p2 = RandomDriverArgs(rng_, &key2);
  FindJson(a_, p1);
  FindJson(a_, p2);
  const std::string system_dir = dir_a_.path() + "/system";
  ProcessResult exported = RunOn(a_, {"db", "export", "--system", system_dir});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto client = Client::Connect(a_.address());
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::DbStatsResponse> stats = (*client)->DbStats();
  ASSERT_TRUE(stats.ok());
  const std::string path = system_dir + "/" + stats->device_key() + ".ctsys";
  EXPECT_THAT(exported.out, HasSubstr("to " + path));
  const v1::ExportFile file = ReadExport(path);
  EXPECT_EQ(file.device_key(), stats->device_key());
  for (const v1::ExportEntry& e : file.entries())
    EXPECT_THAT(e.column_family(), AnyOf("find_db", "perf_db"));

  testing::Daemon b;
  absl::Status started = b.Start(dir_b_.path(), dir_b_.path() + "/db",
                                 {"--system-db", system_dir});
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_THAT(b.Log(), HasSubstr("convtuned: system FindDb: "));
  EXPECT_THAT(b.Log(), HasSubstr(".ctsys"));
  // Both databases in the stats: a has no system FindDb, b has a's records.
  EXPECT_THAT(RunOn(a_, {"db", "stats"}).out, HasSubstr("system FindDb: none"));
  ProcessResult b_stats = RunOn(b, {"db", "stats"});
  ASSERT_EQ(b_stats.exit_code, 0) << b_stats.err;
  EXPECT_THAT(b_stats.out, HasSubstr("system FindDb: " + path));
  EXPECT_THAT(b_stats.out, HasSubstr(absl::StrCat(
                               "find_db", std::string(10, ' '),
                               stats->records().at("find_db"), " record(s)")));
  EXPECT_THAT(FindJson(b, p1), HasSubstr("\"source\": \"system_db\""));
  // A plain hit of the system FindDb is not copied to the user FindDb.
  EXPECT_THAT(FindJson(b, p1), HasSubstr("\"source\": \"system_db\""));
  ProcessResult immediate = RunOn(b, With({"immediate", "--json"}, p1));
  EXPECT_THAT(immediate.out, HasSubstr("\"source\": \"system_db\""));
  EXPECT_THAT(immediate.out, HasSubstr("\"measured\": true"));

  // TRUST_VERIFY re-times the system answer (keeping it, or tuning when it
  // is slower here), and the user FindDb answers next.
  const std::string verified = FindJson(b, p2, {"--mode", "TRUST_VERIFY"});
  EXPECT_THAT(verified, AnyOf(HasSubstr("\"source\": \"system_db\""),
                              HasSubstr("\"source\": \"tuned\"")));
  EXPECT_THAT(verified, HasSubstr("\"mode\": \"TRUST_VERIFY\""));
  EXPECT_THAT(FindJson(b, p2), HasSubstr("\"source\": \"user_db\""));
  absl::Status stopped = b.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

TEST_F(CliFindDbTest, MergeKeepsTheNewerFindRecord) {
  std::string key1, key2;
  const std::vector<std::string> p1 = RandomDriverArgs(rng_, &key1);
  const std::vector<std::string> p2 = RandomDriverArgs(rng_, &key2);
  FindJson(a_, p1);
  const std::string file_a = dir_a_.path() + "/a.ctdb";
  ASSERT_EQ(RunOn(a_, {"db", "export", file_a}).exit_code, 0);
  // A second daemon tunes the same problem later, and one more.
  testing::Daemon b;
  ASSERT_TRUE(b.Start(dir_b_.path(), dir_b_.path() + "/db").ok());
  FindJson(b, p1);
  FindJson(b, p2);
  const std::string file_b = dir_b_.path() + "/b.ctdb";
  ASSERT_EQ(RunOn(b, {"db", "export", file_b}).exit_code, 0);
  ASSERT_TRUE(b.Stop().ok());

  const v1::ExportFile a = ReadExport(file_a), bf = ReadExport(file_b);
  std::set<std::pair<std::string, std::string>> keys;
  std::string p1_key, newer_value;
  for (const v1::ExportEntry& e : bf.entries()) {
    keys.insert({e.column_family(), e.key()});
    if (e.column_family() == "find_db" && absl::EndsWith(e.key(), "/" + key1)) {
      p1_key = e.key();
      newer_value = e.value();
    }
  }
  for (const v1::ExportEntry& e : a.entries())
    keys.insert({e.column_family(), e.key()});
  ASSERT_FALSE(p1_key.empty());
  const int64_t in = a.entries_size() + bf.entries_size();

  for (const bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "a then b" : "b then a");
    const std::string out = dir_a_.path() + (a_first ? "/ab.ctdb" : "/ba.ctdb");
    ProcessResult r = Cli({"db", "merge", out, a_first ? file_a : file_b,
                           a_first ? file_b : file_a});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(
        r.out, HasSubstr(absl::StrCat("merged 2 file(s): ", in, " entries in, ",
                                      keys.size(), " out")));
    EXPECT_THAT(r.out,
                HasSubstr(a_first ? "1 find record(s) replaced by a newer"
                                  : "1 older find record(s) dropped"));
    const v1::ExportFile merged = ReadExport(out);
    EXPECT_EQ(merged.entries_size(), static_cast<int>(keys.size()));
    EXPECT_TRUE(merged.device_key().empty());
    int found = 0;
    for (const v1::ExportEntry& e : merged.entries()) {
      if (e.column_family() != "find_db" || e.key() != p1_key) continue;
      ++found;
      EXPECT_EQ(e.value(), newer_value);
    }
    EXPECT_EQ(found, 1);
  }
  // The merged file imports like an export.
  ProcessResult imported =
      RunOn(a_, {"db", "import", dir_a_.path() + "/ab.ctdb"});
  EXPECT_EQ(imported.exit_code, 0) << imported.err;
}

TEST_F(CliFindDbTest, MergeRefusesMixedDevicesAndForeignFiles) {
  std::string key;
  FindJson(a_, RandomDriverArgs(rng_, &key));
  const std::string system_dir = dir_a_.path() + "/system";
  ASSERT_EQ(RunOn(a_, {"db", "export", "--system", system_dir}).exit_code, 0);
  std::string system_file;
  for (const auto& e : std::filesystem::directory_iterator(system_dir))
    system_file = e.path().string();
  ASSERT_FALSE(system_file.empty());
  v1::ExportFile other = ReadExport(system_file);
  other.set_device_key(other.device_key() + "-other");
  SealExportFile(&other);
  const std::string other_file = dir_a_.path() + "/other.ctsys";
  ASSERT_TRUE(WriteFileAtomically(other_file, other.SerializeAsString()).ok());

  const std::string out = dir_a_.path() + "/out.ctsys";
  ProcessResult r = Cli({"db", "merge", out, system_file, other_file});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("different devices"));
  EXPECT_FALSE(std::filesystem::exists(out));

  const std::string full = dir_a_.path() + "/full.ctdb";
  ASSERT_EQ(RunOn(a_, {"db", "export", full}).exit_code, 0);
  r = Cli({"db", "merge", out, system_file, full});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot mix the system FindDb"));

  const std::string junk = dir_a_.path() + "/junk";
  ASSERT_TRUE(WriteFileAtomically(junk, "not a protobuf \xff\xff\xff").ok());
  r = Cli({"db", "merge", out, system_file, junk});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(junk));
  EXPECT_FALSE(std::filesystem::exists(out));

  // Same device: the system file merged with itself is itself.
  r = Cli({"db", "merge", out, system_file, system_file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("system FindDb of"));
  const v1::ExportFile merged = ReadExport(out);
  EXPECT_EQ(merged.device_key(), ReadExport(system_file).device_key());
  EXPECT_EQ(merged.entries_size(), ReadExport(system_file).entries_size());
}

}  // namespace
}  // namespace convtune
