// What the RocksDB store does beyond the Store contract (store_test.cc runs
// that against every store): folders, locks, reopening, files on disk.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::testing::HasSubstr;
using testing::RandomRecords;
using testing::ScanAll;
using testing::TempDir;

std::unique_ptr<Store> MustOpen(const std::string& dir,
                                const StoreOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(RocksDbStoreTest, RecordsSurviveCloseAndReopen) {
  TempDir tmp;
  RandomRecords rnd;
  std::map<std::string, std::string> written;
  {
    std::unique_ptr<Store> store = MustOpen(tmp.db());
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 50; ++i) {
      std::string key = absl::StrCat("dev/", rnd.Int(0, 1'000'000'000));
      written[key] = rnd.Bytes(64);
      ASSERT_TRUE(
          store->Put(Column::kPerfDb, key, written[key], {.sync = false}).ok());
    }
  }
  std::unique_ptr<Store> store =
      MustOpen(tmp.db(), {.create_if_missing = false});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ScanAll(*store, Column::kPerfDb, ""), written);
}

TEST(RocksDbStoreTest, SecondWriterInOneProcessIsRefusedNamingTheFolder) {
  TempDir tmp;
  std::unique_ptr<Store> first = MustOpen(tmp.db());
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<Store>> second = OpenRocksDbStore(tmp.db());
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
      << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(tmp.db()));
  EXPECT_THAT(second.status().message(), HasSubstr("in use"));
  // Once the first closes, the folder opens again.
  first.reset();
  EXPECT_NE(MustOpen(tmp.db()), nullptr);
}

TEST(RocksDbStoreTest, ReadOnlyOpenWorksWhileTheWriterHoldsIt) {
  TempDir tmp;
  RandomRecords rnd;
  std::unique_ptr<Store> writer = MustOpen(tmp.db());
  ASSERT_NE(writer, nullptr);
  std::string value = rnd.Bytes(100);
  ASSERT_TRUE(writer->Put(Column::kFindDb, "dev/p", value).ok());
  std::unique_ptr<Store> reader = MustOpen(tmp.db(), {.read_only = true});
  ASSERT_NE(reader, nullptr);
  absl::StatusOr<std::string> got = reader->Get(Column::kFindDb, "dev/p");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  absl::Status put = reader->Put(Column::kFindDb, "dev/q", value);
  EXPECT_EQ(put.code(), absl::StatusCode::kFailedPrecondition) << put;
  EXPECT_EQ(reader->Delete(Column::kFindDb, "dev/p").code(),
            absl::StatusCode::kFailedPrecondition);
  // The writer is unaffected.
  EXPECT_TRUE(writer->Put(Column::kFindDb, "dev/q", value).ok());
}

TEST(RocksDbStoreTest, MissingDatabaseIsNotFoundUnlessCreating) {
  TempDir tmp;
  EXPECT_EQ(OpenRocksDbStore(tmp.db(), {.read_only = true}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      OpenRocksDbStore(tmp.db(), {.create_if_missing = false}).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(OpenRocksDbStore("").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Creating makes missing parent folders too.
  EXPECT_NE(MustOpen(tmp.path() + "/a/b/db"), nullptr);
}

std::vector<std::string> FamiliesOf(const std::string& dir) {
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::sort(names.begin(), names.end());
  return names;
}

// A database made by plain RocksDB with only the default family and one
// convtune does not know, as an older or foreign writer would leave it.
void MakePlainDatabase(const std::string& dir, const std::string& value) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle* extra = nullptr;
  ASSERT_TRUE(
      db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "extra", &extra)
          .ok());
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), extra, "k", value).ok());
  ASSERT_TRUE(db->DestroyColumnFamilyHandle(extra).ok());
  ASSERT_TRUE(db->Close().ok());
}

TEST(RocksDbStoreTest, CreatesTheColumnFamilies) {
  TempDir tmp;
  { ASSERT_NE(MustOpen(tmp.db()), nullptr); }
  EXPECT_EQ(FamiliesOf(tmp.db()),
            (std::vector<std::string>{"default", "find_db", "kernel_cache",
                                      "meta", "perf_db"}));
}

TEST(RocksDbStoreTest,
     OpeningADatabaseWithoutTheFamiliesAddsThemAndKeepsOthers) {
  TempDir tmp;
  RandomRecords rnd;
  std::string value = rnd.Bytes(30);
  MakePlainDatabase(tmp.db(), value);
  {
    // Read-only: the missing families read as empty and nothing is created.
    std::unique_ptr<Store> reader = MustOpen(tmp.db(), {.read_only = true});
    ASSERT_NE(reader, nullptr);
    EXPECT_EQ(reader->Get(Column::kFindDb, "d/p").status().code(),
              absl::StatusCode::kNotFound);
    EXPECT_TRUE(ScanAll(*reader, Column::kKernelCache, "").empty());
  }
  EXPECT_EQ(FamiliesOf(tmp.db()),
            (std::vector<std::string>{"default", "extra"}));
  {
    std::unique_ptr<Store> store = MustOpen(tmp.db());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Put(Column::kFindDb, "d/p", value).ok());
  }
  EXPECT_EQ(FamiliesOf(tmp.db()),
            (std::vector<std::string>{"default", "extra", "find_db",
                                      "kernel_cache", "meta", "perf_db"}));
  // The unknown family's data is untouched.
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : FamiliesOf(tmp.db()))
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), tmp.db(),
                                           families, &handles, &raw)
                  .ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string got;
  EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), handles[1], "k", &got).ok());
  EXPECT_EQ(got, value);
  for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
}

TEST(RocksDbStoreTest, CorruptCurrentFileIsDataLoss) {
  TempDir tmp;
  { ASSERT_NE(MustOpen(tmp.db()), nullptr); }
  { std::ofstream(tmp.db() + "/CURRENT", std::ios::trunc) << "MANIFEST-0000"; }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(tmp.db());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss)
      << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(tmp.db()));
}

TEST(RocksDbStoreTest, CorruptManifestIsDataLoss) {
  TempDir tmp;
  RandomRecords rnd;
  {
    std::unique_ptr<Store> store = MustOpen(tmp.db());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Put(Column::kFindDb, "dev/p", rnd.Bytes(50)).ok());
  }
  std::string manifest;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.db())) {
    if (entry.path().filename().string().rfind("MANIFEST-", 0) == 0)
      manifest = entry.path();
  }
  ASSERT_FALSE(manifest.empty());
  auto size = std::filesystem::file_size(manifest);
  ASSERT_GT(size, 40u);
  {
    std::fstream f(manifest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    std::string garbage = rnd.Bytes(16);
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(tmp.db());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss)
      << store.status();
}

}  // namespace
}  // namespace convtune::storage
