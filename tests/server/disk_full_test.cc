// A full disk under a real convtuned. Finds go on answering, each one whose
// record could not be stored says so, the "convtune.storage" health name is
// NOT_SERVING meanwhile, the daemon never aborts, writes resume without a
// restart once space returns, and every find acknowledged as stored is
// there after a restart.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::HealthCheck;

constexpr char kStorage[] = "convtune.storage";
constexpr int kServing = 1, kNotServing = 2;

// A small problem, distinct for each `i`.
v1::ConvProblem Problem(int i) {
  ConvProblem p;
  p.n = 1;
  p.c = 4 + i;
  p.k = 8;
  p.in = {1, 8, 8};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-diskfull");
    ASSERT_FALSE(dir_.empty());
    socket_ = dir_ + "/d.sock";
  }
  void TearDown() override {
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir_);
  }

  void StartDaemon(DaemonProcess& d, const std::string& db,
                   const std::string& floor_mb, const std::string& log) {
    ASSERT_TRUE(d.Start(CONVTUNED_PATH,
                        {"--socket", socket_, "--db", db, "--db-min-free-mb",
                         floor_mb, "--backend", "cpu"},
                        dir_ + "/" + log));
    ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
    channel_ = grpc::CreateChannel(UnixTarget(socket_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::ConvTune::NewStub(channel_);
  }

  v1::FindResponse Find(int i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(120));
    v1::FindRequest req;
    *req.mutable_problem() = Problem(i);
    req.set_mode(v1::HYBRID);  // reads the FindDb, tunes on a miss
    v1::FindResponse resp;
    grpc::Status s = stub_->Find(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
    return resp;
  }

  int Storage() {
    grpc::StatusCode code;
    return HealthCheck(channel_, kStorage, 2000, &code);
  }

  // Polls the storage health name until it says `want`, up to 10 s.
  bool WaitStorage(int want) {
    for (int i = 0; i < 100; ++i) {
      if (Storage() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  v1::GetStatusResponse Status() {
    grpc::ClientContext ctx;
    v1::GetStatusResponse resp;
    grpc::Status s = stub_->GetStatus(&ctx, v1::GetStatusRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  std::string dir_, socket_, mount_;
  bool mounted_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ConvTune::Stub> stub_;
};

TEST_F(DiskFullTest, BelowTheFloorFindsAnswerAndSayTheyWereNotStored) {
  DaemonProcess d;
  // More free space than any disk has: every write is refused.
  StartDaemon(d, dir_ + "/db", "1073741824", "floor.log");
  const v1::FindResponse first = Find(0);
  ASSERT_GE(first.results_size(), 1);
  EXPECT_EQ(first.source(), "tuned");
  EXPECT_THAT(first.not_stored(), HasSubstr("--db-min-free-mb"));
  EXPECT_THAT(first.not_stored(), HasSubstr("below the floor"));
  // Not stored, so asked again it is tuned again.
  const v1::FindResponse again = Find(0);
  EXPECT_FALSE(again.from_db());
  EXPECT_FALSE(again.not_stored().empty());

  grpc::StatusCode code;
  EXPECT_EQ(HealthCheck(channel_, "", 2000, &code), kServing);
  EXPECT_EQ(
      HealthCheck(channel_, v1::ConvTune::service_full_name(), 2000, &code),
      kServing);
  EXPECT_EQ(Storage(), kNotServing);
  const v1::GetStatusResponse status = Status();
  EXPECT_FALSE(status.db_writable());
  EXPECT_THAT(status.db_error(), HasSubstr("below the floor"));
  EXPECT_EQ(status.counters().at("records_not_stored"), 2);
  EXPECT_EQ(status.counters().at("records_stored"), 0);
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

// Writes `path` until the filesystem has no room left.
void Fill(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << std::strerror(errno);
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string chunk(64 << 10, 'x');
  size_t n = chunk.size();
  while (n > 0) {
    if (std::fwrite(chunk.data(), 1, n, f) != n) {
      ASSERT_EQ(errno, ENOSPC) << std::strerror(errno);
      n /= 2;
      clearerr(f);
    }
  }
  std::fclose(f);
}

TEST_F(DiskFullTest, AFullTmpfsStopsStoringAndWritesResumeWhenFreed) {
  mount_ = dir_ + "/small";
  std::filesystem::create_directories(mount_);
  if (mount("convtune-test", mount_.c_str(), "tmpfs", 0, "size=24m") != 0) {
    GTEST_SKIP() << "cannot mount a 24 MiB tmpfs here (" << std::strerror(errno)
                 << "): needs root with CAP_SYS_ADMIN; the free-space floor "
                    "test covers the daemon's side";
  }
  mounted_ = true;
  const std::string db = mount_ + "/db", filler = mount_ + "/filler";
  std::set<int> stored;
  int next = 0, not_stored = 0;
  {
    DaemonProcess d;
    StartDaemon(d, db, "0", "tmpfs.log");
    for (int cycle = 0; cycle < 3; ++cycle) {
      SCOPED_TRACE(absl::StrCat("cycle ", cycle));
      const v1::FindResponse ok = Find(next);
      ASSERT_EQ(ok.not_stored(), "");
      stored.insert(next++);
      EXPECT_EQ(Storage(), kServing);

      ASSERT_NO_FATAL_FAILURE(Fill(filler));
      // Finds keep answering; the first whose write meets the full disk
      // says so, and so does every later one until space returns.
      int refused = 0;
      for (int i = 0; i < 20 && refused < 3; ++i) {
        const v1::FindResponse r = Find(next);
        ASSERT_GE(r.results_size(), 1) << d.log();
        if (r.not_stored().empty()) {
          ASSERT_EQ(refused, 0) << "stored after a refusal";
          stored.insert(next);
        } else {
          ++refused;
          ++not_stored;
        }
        ++next;
      }
      ASSERT_EQ(refused, 3) << d.log();
      EXPECT_TRUE(WaitStorage(kNotServing));
      EXPECT_FALSE(Status().db_writable());

      std::filesystem::remove(filler);
      ASSERT_TRUE(WaitStorage(kServing)) << d.log();
      const v1::FindResponse resumed = Find(next);
      EXPECT_EQ(resumed.not_stored(), "");
      stored.insert(next++);
    }
    const v1::GetStatusResponse status = Status();
    EXPECT_TRUE(status.db_writable());
    EXPECT_GE(status.counters().at("records_not_stored"), 9);
    EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
    EXPECT_THAT(d.log(), HasSubstr("takes writes again"));
  }
  DaemonProcess d;
  StartDaemon(d, db, "0", "restart.log");
  int back = 0;
  for (int i : stored) {
    const v1::FindResponse r = Find(i);
    EXPECT_TRUE(r.from_db())
        << "problem " << i << " was acknowledged as stored";
    back += r.from_db() ? 1 : 0;
  }
  std::cout << "3 fills of a 24 MiB tmpfs: " << next << " finds answered, "
            << stored.size() << " acknowledged as stored, " << not_stored
            << " said not stored; after a restart " << back << " of "
            << stored.size() << " from the FindDb\n";
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

}  // namespace
}  // namespace convtune
