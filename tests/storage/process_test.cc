// Guarantees that need a second process: a synced write survives the writer's
// death, and two processes never open one database for writing.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/records.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::testing::HasSubstr;
using testing::RandomRecords;
using testing::TempDir;

// The helper binary, started by fork + exec so the child shares no RocksDB
// state (its in-process lock table, background threads) with this process.
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    int out[2], in[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(in[0], STDIN_FILENO);
      std::vector<char*> argv;
      std::string helper = STORAGE_DB_HELPER;
      argv.push_back(helper.data());
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(helper.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    close(in[0]);
    stdout_ = out[0];
    stdin_ = in[1];
  }

  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(stdout_);
    if (stdin_ >= 0) close(stdin_);
  }

  // The next line the child printed ("" at end of output).
  std::string ReadLine() {
    std::string line;
    char c;
    while (true) {
      ssize_t n = read(stdout_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || c == '\n') return line;
      line.push_back(c);
    }
  }

  void CloseStdin() {
    close(stdin_);
    stdin_ = -1;
  }

  // The raw wait status.
  int Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  int stdin_ = -1;
  bool reaped_ = false;
};

std::unique_ptr<Store> MustOpen(const std::string& dir,
                                const StoreOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// Round-trips through SimpleAtod exactly.
std::string ExactText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void ExpectRecord(const std::string& db, const std::string& device,
                  const std::string& problem, double time_ms) {
  std::unique_ptr<Store> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<v1::FindRecord> got = FindDb(store.get(), device).Get(problem);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->results_size(), 1);
  EXPECT_DOUBLE_EQ(got->results(0).time_ms(), time_ms);
}

TEST(ProcessTest, SyncedFindRecordSurvivesExitWithoutClose) {
  TempDir tmp;
  RandomRecords rnd;
  std::string device = rnd.DeviceKey(), problem = rnd.ProblemKey();
  double time_ms = rnd.Real(0.01, 100);
  Child child({"put_and_exit", tmp.db(), device, problem, ExactText(time_ms)});
  EXPECT_EQ(child.ReadLine(), "written");
  int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ExpectRecord(tmp.db(), device, problem, time_ms);
}

TEST(ProcessTest, SyncedFindRecordSurvivesKill9WhileOpen) {
  TempDir tmp;
  RandomRecords rnd;
  std::string device = rnd.DeviceKey(), problem = rnd.ProblemKey();
  double time_ms = rnd.Real(0.01, 100);
  Child child({"put_and_hang", tmp.db(), device, problem, ExactText(time_ms)});
  ASSERT_EQ(child.ReadLine(), "written");
  // Still holding the database: the lock shows it.
  EXPECT_EQ(OpenRocksDbStore(tmp.db()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(kill(child.pid(), SIGKILL), 0);
  int status = child.Wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  // The dead process's lock is gone with it, and the record is there.
  ExpectRecord(tmp.db(), device, problem, time_ms);
}

TEST(ProcessTest, SecondProcessCannotOpenForWriting) {
  TempDir tmp;
  std::unique_ptr<Store> store = MustOpen(tmp.db());
  ASSERT_NE(store, nullptr);
  Child child({"try_open", tmp.db()});
  std::string message = child.ReadLine();
  int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status),
            static_cast<int>(absl::StatusCode::kFailedPrecondition))
      << message;
  EXPECT_THAT(message, HasSubstr(tmp.db()));
  EXPECT_THAT(message, HasSubstr("in use by another convtuned"));
  // Once this process lets go, another process may open it.
  store.reset();
  Child again({"try_open", tmp.db()});
  EXPECT_EQ(again.ReadLine(), "ok");
  EXPECT_EQ(WEXITSTATUS(again.Wait()), 0);
}

TEST(ProcessTest, OtherProcessHoldingTheDatabaseRefusesThisOne) {
  TempDir tmp;
  RandomRecords rnd;
  std::string value = rnd.Bytes(40);
  {
    std::unique_ptr<Store> store = MustOpen(tmp.db());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Put(Column::kMeta, "k", value).ok());
  }
  Child holder({"hold", tmp.db()});
  ASSERT_EQ(holder.ReadLine(), "open");
  absl::StatusOr<std::unique_ptr<Store>> second = OpenRocksDbStore(tmp.db());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
      << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(tmp.db()));
  // Read-only inspection takes no lock.
  std::unique_ptr<Store> reader = MustOpen(tmp.db(), {.read_only = true});
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(*reader->Get(Column::kMeta, "k"), value);
  holder.CloseStdin();
  int status = holder.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(MustOpen(tmp.db()), nullptr);
}

}  // namespace
}  // namespace convtune::storage
