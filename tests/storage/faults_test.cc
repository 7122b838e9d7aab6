// The RocksDB store under injected storage faults: a full disk, I/O errors
// and failing fsyncs, injected through a RocksDB FileSystem wrapper. A failed
// write is never reported as stored, the store never aborts, reads go on,
// writes resume once the fault is gone, and every acknowledged record is
// there after a reopen.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::testing::HasSubstr;
using testing::RandomRecords;
using testing::TempDir;

enum class Fault { kNone, kNoSpace, kIoError, kSyncFails };

rocksdb::IOStatus WriteFault(Fault f) {
  switch (f) {
    case Fault::kNoSpace:
      return rocksdb::IOStatus::NoSpace("injected: No space left on device");
    case Fault::kIoError:
      return rocksdb::IOStatus::IOError("injected: Input/output error");
    default:
      return rocksdb::IOStatus::OK();
  }
}

rocksdb::IOStatus SyncFault(Fault f) {
  if (f == Fault::kNone) return rocksdb::IOStatus::OK();
  if (f == Fault::kNoSpace) return WriteFault(f);
  return rocksdb::IOStatus::IOError("injected: fsync failed");
}

// A file whose writes and syncs fail while its file system says so.
class FaultyFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyFile(std::unique_ptr<rocksdb::FSWritableFile> file,
             const std::atomic<Fault>* fault)
      : FSWritableFileOwnerWrapper(std::move(file)), fault_(fault) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (auto s = WriteFault(*fault_); !s.ok()) return s;
    return target()->Append(data, options, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (auto s = WriteFault(*fault_); !s.ok()) return s;
    return target()->Append(data, options, info, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto s = WriteFault(*fault_); !s.ok()) return s;
    return target()->PositionedAppend(data, offset, options, dbg);
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto s = WriteFault(*fault_); !s.ok()) return s;
    return target()->PositionedAppend(data, offset, options, info, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (auto s = SyncFault(*fault_); !s.ok()) return s;
    return target()->Sync(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto s = SyncFault(*fault_); !s.ok()) return s;
    return target()->Fsync(options, dbg);
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (auto s = SyncFault(*fault_); !s.ok()) return s;
    return target()->RangeSync(offset, nbytes, options, dbg);
  }

 private:
  const std::atomic<Fault>* const fault_;
};

// The default file system, with faults switched on and off by the test.
class FaultyFs final : public rocksdb::FileSystemWrapper {
 public:
  FaultyFs() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "FaultyFs"; }

  rocksdb::IOStatus NewWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override {
    if (fault == Fault::kIoError) return WriteFault(fault);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, &file, dbg);
    if (s.ok()) *result = std::make_unique<FaultyFile>(std::move(file), &fault);
    return s;
  }
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& name, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override {
    if (fault == Fault::kIoError) return WriteFault(fault);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOStatus s =
        target()->ReopenWritableFile(name, options, &file, dbg);
    if (s.ok()) *result = std::make_unique<FaultyFile>(std::move(file), &fault);
    return s;
  }

  std::atomic<Fault> fault{Fault::kNone};
};

class StoreFaultsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> Open(const StoreOptions& options) {
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenRocksDbStore(tmp_.db(), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Puts a fresh record; remembers it only when the store says it is stored.
  absl::Status PutOne(Store& store, bool sync) {
    const std::string key =
        absl::StrCat("dev/", next_++, "/", rnd_.Int(0, 1e9));
    const std::string value = rnd_.Bytes(200);
    absl::Status s = store.Put(Column::kFindDb, key, value, {.sync = sync});
    if (s.ok()) acked_[key] = value;
    return s;
  }

  absl::Status PutTwo(Store& store) {
    std::vector<Store::Pair> pairs;
    for (int i = 0; i < 2; ++i) {
      pairs.push_back(
          {Column::kPerfDb, absl::StrCat("batch/", next_++), rnd_.Bytes(100)});
    }
    absl::Status s = store.PutAll(pairs);
    if (s.ok()) {
      for (const auto& p : pairs) acked_[p.key] = p.value;
    }
    return s;
  }

  // Every acknowledged record reads back as it was written.
  void ExpectAcknowledged(Store& store) {
    for (const auto& [key, value] : acked_) {
      const Column c =
          key.rfind("batch/", 0) == 0 ? Column::kPerfDb : Column::kFindDb;
      absl::StatusOr<std::string> got = store.Get(c, key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status();
      ASSERT_EQ(*got, value) << key;
    }
  }

  std::shared_ptr<FaultyFs> fs_ = std::make_shared<FaultyFs>();
  std::unique_ptr<rocksdb::Env> env_ = rocksdb::NewCompositeEnv(fs_);
  TempDir tmp_;
  RandomRecords rnd_;
  int64_t next_ = 0;
  std::map<std::string, std::string> acked_;
};

TEST_F(StoreFaultsTest, FaultsStopWritesUntilRecoveredAndLoseNothing) {
  std::unique_ptr<Store> store = Open({.env = env_.get()});
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(PutOne(*store, true), absl::OkStatus());

  const Fault faults[] = {Fault::kNoSpace, Fault::kIoError, Fault::kSyncFails};
  constexpr int kCycles = 30;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const Fault fault = faults[cycle % 3];
    SCOPED_TRACE(
        absl::StrCat("cycle ", cycle, " fault ", static_cast<int>(fault)));
    fs_->fault = fault;
    // The first synced write meets the fault; every write after it is
    // refused until the store recovers.
    const absl::Status first = PutOne(*store, /*sync=*/true);
    EXPECT_FALSE(first.ok());
    if (fault == Fault::kNoSpace) {
      EXPECT_EQ(first.code(), absl::StatusCode::kResourceExhausted) << first;
    }
    EXPECT_THAT(std::string(first.message()), HasSubstr("injected"));
    for (int j = 0; j < 4; ++j) {
      const absl::Status later =
          j % 2 == 0 ? PutOne(*store, j == 0) : PutTwo(*store);
      EXPECT_EQ(later.code(), absl::StatusCode::kUnavailable) << later;
      EXPECT_THAT(std::string(later.message()), HasSubstr("takes no writes"));
    }
    const StoreHealth sick = store->Health();
    EXPECT_FALSE(sick.writable);
    EXPECT_THAT(sick.error, HasSubstr("injected"));
    ASSERT_NO_FATAL_FAILURE(ExpectAcknowledged(*store));

    // Reopening with the fault still there fails; reads go on regardless.
    EXPECT_FALSE(store->Recover().ok());
    EXPECT_FALSE(store->Health().writable);
    ASSERT_NO_FATAL_FAILURE(ExpectAcknowledged(*store));

    fs_->fault = Fault::kNone;
    ASSERT_EQ(store->Recover(), absl::OkStatus());
    EXPECT_TRUE(store->Health().writable);
    ASSERT_EQ(PutOne(*store, true), absl::OkStatus());
    ASSERT_EQ(PutOne(*store, false), absl::OkStatus());
    ASSERT_EQ(PutTwo(*store), absl::OkStatus());
  }
  const StoreHealth health = store->Health();
  EXPECT_TRUE(health.writable);
  EXPECT_EQ(health.error, "");
  EXPECT_EQ(health.recoveries, kCycles);
  EXPECT_EQ(health.failed_writes, kCycles * 5);
  ASSERT_EQ(store->Sync(), absl::OkStatus());
  store.reset();

  // Opened again, without the wrapper: everything acknowledged is there.
  std::unique_ptr<Store> again = Open({.create_if_missing = false});
  ASSERT_NE(again, nullptr);
  ExpectAcknowledged(*again);
  std::cout << kCycles
            << " injected faults (ENOSPC, EIO, fsync): " << acked_.size()
            << " acknowledged records, " << health.failed_writes
            << " writes refused, " << health.recoveries
            << " recoveries; all acknowledged records "
            << (HasFailure() ? "NOT " : "") << "read back after a reopen\n";
}

TEST_F(StoreFaultsTest, AStoreThatCannotReopenKeepsServingReads) {
  std::unique_ptr<Store> store = Open({.env = env_.get()});
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(PutOne(*store, true), absl::OkStatus());
  fs_->fault = Fault::kIoError;
  EXPECT_FALSE(PutOne(*store, true).ok());
  // Several failed reopens in a row, each leaving a read-only database.
  for (int i = 0; i < 5; ++i) {
    const absl::Status recovered = store->Recover();
    EXPECT_FALSE(recovered.ok());
    ASSERT_NO_FATAL_FAILURE(ExpectAcknowledged(*store));
    EXPECT_THAT(store->Health().error, HasSubstr("reopen failed"));
  }
  fs_->fault = Fault::kNone;
  ASSERT_EQ(store->Recover(), absl::OkStatus());
  ASSERT_EQ(PutOne(*store, true), absl::OkStatus());
  ExpectAcknowledged(*store);
}

TEST_F(StoreFaultsTest, FreeSpaceFloorRefusesWritesNamingTheFlag) {
  {
    std::unique_ptr<Store> store = Open({});
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(PutOne(*store, true), absl::OkStatus());
  }
  std::unique_ptr<Store> store =
      Open({.min_free_bytes = std::numeric_limits<int64_t>::max() / 2});
  ASSERT_NE(store, nullptr);
  const absl::Status put = PutOne(*store, true);
  EXPECT_EQ(put.code(), absl::StatusCode::kResourceExhausted) << put;
  EXPECT_THAT(std::string(put.message()), HasSubstr("--db-min-free-mb"));
  EXPECT_THAT(std::string(put.message()), HasSubstr(tmp_.db()));
  EXPECT_EQ(PutTwo(*store).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store->Delete(Column::kFindDb, "dev/0").code(),
            absl::StatusCode::kResourceExhausted);
  const StoreHealth health = store->Health();
  EXPECT_FALSE(health.writable);
  EXPECT_THAT(health.error, HasSubstr("below the floor"));
  EXPECT_EQ(health.failed_writes, 3);
  EXPECT_EQ(store->Recover().code(), absl::StatusCode::kResourceExhausted);
  ExpectAcknowledged(*store);
}

// The database's write-ahead logs, largest first.
std::vector<std::filesystem::path> Logs(const std::string& dir) {
  std::vector<std::filesystem::path> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".log") logs.push_back(e.path());
  }
  std::sort(logs.begin(), logs.end(), [](const auto& a, const auto& b) {
    return std::filesystem::file_size(a) > std::filesystem::file_size(b);
  });
  return logs;
}

class StoreDamageTest : public StoreFaultsTest {
 protected:
  // Ten synced records, left in the write-ahead log by a clean close.
  void WriteTen() {
    std::unique_ptr<Store> store = Open({});
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(store->Put(Column::kFindDb, absl::StrCat("k", i),
                           absl::StrCat("value ", i, rnd_.Bytes(100))),
                absl::OkStatus());
      acked_[absl::StrCat("k", i)] = "";
    }
  }

  // Records k0.. read back in order until the first missing one; none may
  // be altered.
  int Readable(Store& store) {
    int n = 0;
    for (; n < 10; ++n) {
      absl::StatusOr<std::string> v =
          store.Get(Column::kFindDb, absl::StrCat("k", n));
      if (!v.ok()) break;
      EXPECT_THAT(*v, ::testing::StartsWith(absl::StrCat("value ", n)));
    }
    for (int i = n; i < 10; ++i) {
      EXPECT_FALSE(store.Get(Column::kFindDb, absl::StrCat("k", i)).ok())
          << "k" << i << " after a gap";
    }
    return n;
  }

  // Refused with a message naming `file`, and nothing changed; then opened
  // with what can be read, the logs copied aside and the damage noted.
  void RefusedThenContinued(const std::string& file, int* readable) {
    const auto before = std::filesystem::file_size(file);
    absl::StatusOr<std::unique_ptr<Store>> refused =
        OpenRocksDbStore(tmp_.db(), {.refuse_damaged = true});
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kDataLoss)
        << refused.status();
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr(std::filesystem::path(file).filename().string()));
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("--db-recovery continue"));
    ASSERT_TRUE(std::filesystem::exists(file));
    EXPECT_EQ(std::filesystem::file_size(file), before);

    std::unique_ptr<Store> store = Open({});
    ASSERT_NE(store, nullptr);
    const std::string note = store->Health().opened_damaged;
    EXPECT_THAT(note,
                HasSubstr(std::filesystem::path(file).filename().string()));
    EXPECT_THAT(note, HasSubstr(tmp_.db() + "/lost/"));
    const std::string copies = note.substr(note.rfind(tmp_.db() + "/lost/"));
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(copies) /
                                        std::filesystem::path(file).filename()))
        << copies;
    *readable = Readable(*store);
    EXPECT_TRUE(store->Health().writable);
    ASSERT_EQ(PutOne(*store, true), absl::OkStatus());
    store.reset();
    // Mended for good: the next open is clean.
    std::unique_ptr<Store> again = Open({});
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again->Health().opened_damaged, "");
    EXPECT_EQ(Readable(*again), *readable);
  }
};

TEST_F(StoreDamageTest, AFlippedBitInTheLogIsRefusedOrReplayedUpToIt) {
  ASSERT_NO_FATAL_FAILURE(WriteTen());
  const std::vector<std::filesystem::path> logs = Logs(tmp_.db());
  ASSERT_FALSE(logs.empty());
  const std::string log = logs.front().string();
  {
    std::fstream f(log, std::ios::in | std::ios::out | std::ios::binary);
    const auto at =
        static_cast<std::streamoff>(std::filesystem::file_size(log) * 6 / 10);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x10));
  }
  int readable = -1;
  ASSERT_NO_FATAL_FAILURE(RefusedThenContinued(log, &readable));
  EXPECT_GE(readable, 1);
  EXPECT_LT(readable, 10);
}

TEST_F(StoreDamageTest, ACutOffLogIsRefusedOrReplayedUpToTheCut) {
  ASSERT_NO_FATAL_FAILURE(WriteTen());
  const std::vector<std::filesystem::path> logs = Logs(tmp_.db());
  ASSERT_FALSE(logs.empty());
  const std::string log = logs.front().string();
  // Into the last record (each is over 100 bytes). A cut on a record's
  // boundary looks like a clean end: the log alone cannot tell.
  std::filesystem::resize_file(log, std::filesystem::file_size(log) - 20);
  int readable = -1;
  ASSERT_NO_FATAL_FAILURE(RefusedThenContinued(log, &readable));
  EXPECT_GE(readable, 1);
  EXPECT_LT(readable, 10);
}

TEST_F(StoreDamageTest, AMissingCurrentIsRefusedOrPointedAtTheNewestManifest) {
  ASSERT_NO_FATAL_FAILURE(WriteTen());
  std::filesystem::remove(tmp_.db() + "/CURRENT");
  absl::StatusOr<std::unique_ptr<Store>> refused =
      OpenRocksDbStore(tmp_.db(), {.refuse_damaged = true});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kDataLoss)
      << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("no CURRENT file, yet holds MANIFEST-"));
  EXPECT_FALSE(std::filesystem::exists(tmp_.db() + "/CURRENT"));

  std::unique_ptr<Store> store = Open({});
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Health().opened_damaged,
              HasSubstr("CURRENT was missing: pointed it at MANIFEST-"));
  EXPECT_EQ(Readable(*store), 10);
}

TEST_F(StoreDamageTest, ACleanReopenReportsNothing) {
  ASSERT_NO_FATAL_FAILURE(WriteTen());
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<Store> store = Open({});
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->Health().opened_damaged, "");
    EXPECT_EQ(Readable(*store), 10);
  }
}

}  // namespace
}  // namespace convtune::storage
