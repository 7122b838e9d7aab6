// The Store contract, run against every implementation: whatever a caller may
// rely on through store.h must hold for the RocksDB store and the in-memory
// one alike, so code tested on the memory store behaves the same in convtuned.
#include "storage/store.h"

#include <latch>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing::RandomRecords;
using testing::ScanAll;
using testing::TempDir;

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The pairs under `prefix` in the order Scan hands them out.
Pairs ScanInOrder(Store& store, Column c, absl::string_view prefix) {
  Pairs out;
  absl::Status s =
      store.Scan(c, prefix, [&](absl::string_view k, absl::string_view v) {
        out.emplace_back(std::string(k), std::string(v));
        return true;
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "rocksdb") {
      absl::StatusOr<std::unique_ptr<Store>> store =
          OpenRocksDbStore(tmp_.db());
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
    } else {
      ASSERT_EQ(GetParam(), "memory");
      store_ = NewMemoryStore();
    }
    ASSERT_NE(store_, nullptr);
  }

  std::string ExpectedPath() const {
    return GetParam() == "rocksdb" ? tmp_.db() : "";
  }

  TempDir tmp_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest,
                         ::testing::Values("rocksdb", "memory"),
                         [](const auto& info) { return info.param; });

TEST_P(StoreTest, PutGetDeleteScanInEveryColumn) {
  RandomRecords rnd;
  Store& store = *store_;
  EXPECT_EQ(store.path(), ExpectedPath());
  std::map<Column, std::map<std::string, std::string>> written;
  for (Column c : kAllColumns) {
    for (int i = 0; i < 20; ++i) {
      std::string key =
          absl::StrCat(i % 2 ? "a/" : "b/", rnd.Int(0, 1'000'000'000));
      std::string value = rnd.Bytes(static_cast<size_t>(rnd.Int(1, 300)));
      ASSERT_TRUE(store.Put(c, key, value, {.sync = i % 3 == 0}).ok());
      written[c][key] = value;
    }
  }
  for (Column c : kAllColumns) {
    SCOPED_TRACE(ColumnName(c));
    for (const auto& [key, value] : written[c]) {
      absl::StatusOr<std::string> got = store.Get(c, key);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, value);
    }
    // Columns are independent, and a prefix scan sees exactly its keys in
    // order.
    EXPECT_EQ(ScanAll(store, c, ""), written[c]);
    Pairs in_order(written[c].begin(), written[c].end());
    EXPECT_EQ(ScanInOrder(store, c, ""), in_order);
    std::map<std::string, std::string> only_a;
    for (const auto& [k, v] : written[c]) {
      if (k[0] == 'a') only_a.emplace(k, v);
    }
    EXPECT_EQ(ScanAll(store, c, "a/"), only_a);
    const std::string victim = written[c].begin()->first;
    ASSERT_TRUE(store.Delete(c, victim).ok());
    EXPECT_EQ(store.Get(c, victim).status().code(),
              absl::StatusCode::kNotFound);
    EXPECT_TRUE(store.Delete(c, victim).ok());
  }
}

TEST_P(StoreTest, GetOfAnAbsentKeyIsNotFoundNamingColumnAndKey) {
  ASSERT_TRUE(store_->Put(Column::kFindDb, "dev/p", "v").ok());
  // The same key in another column is a different key.
  absl::Status s = store_->Get(Column::kPerfDb, "dev/p").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("perf_db"));
  EXPECT_THAT(s.message(), HasSubstr("dev/p"));
  EXPECT_EQ(store_->Get(Column::kFindDb, "dev/").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Get(Column::kFindDb, "dev/pq").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->Delete(Column::kMeta, "never-written").ok());
  EXPECT_TRUE(ScanAll(*store_, Column::kMeta, "").empty());
}

TEST_P(StoreTest, PutOverwritesAndAnEmptyValueIsNotAbsence) {
  ASSERT_TRUE(store_->Put(Column::kMeta, "k", "first, longer value").ok());
  ASSERT_TRUE(store_->Put(Column::kMeta, "k", "second").ok());
  absl::StatusOr<std::string> got = store_->Get(Column::kMeta, "k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "second");
  ASSERT_TRUE(store_->Put(Column::kMeta, "empty", "").ok());
  got = store_->Get(Column::kMeta, "empty");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
  EXPECT_THAT(ScanInOrder(*store_, Column::kMeta, ""),
              ElementsAre(Pair("empty", ""), Pair("k", "second")));
}

TEST_P(StoreTest, KeysAndValuesAreBytesInByteWiseOrder) {
  const std::string nul_key("a\0b", 3);
  const std::string nul_value("x\0y\xff", 4);
  for (const std::string& key :
       {std::string("\x80"), std::string("a"), std::string("ab"),
        std::string("B"), std::string("\x01"), nul_key}) {
    ASSERT_TRUE(store_->Put(Column::kKernelCache, key, nul_value).ok());
  }
  std::vector<std::string> keys;
  for (const auto& [k, v] : ScanInOrder(*store_, Column::kKernelCache, "")) {
    EXPECT_EQ(v, nul_value);
    keys.push_back(k);
  }
  // Unsigned bytes: 0x80 sorts after every ASCII key, "a\0b" before "ab".
  EXPECT_THAT(keys, ElementsAre("\x01", "B", "a", nul_key, "ab", "\x80"));
  EXPECT_THAT(ScanInOrder(*store_, Column::kKernelCache, std::string("a\0", 2)),
              ElementsAre(Pair(nul_key, nul_value)));
}

TEST_P(StoreTest, ScanStopsWhenTheCallbackSaysSo) {
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store_->Put(Column::kMeta, absl::StrCat("k", i), "v").ok());
  }
  int seen = 0;
  ASSERT_TRUE(store_
                  ->Scan(Column::kMeta, "k",
                         [&](absl::string_view, absl::string_view) {
                           return ++seen < 3;
                         })
                  .ok());
  EXPECT_EQ(seen, 3);
  // It stops on the very pair fn refused, having handed out the first ones.
  std::vector<std::string> keys;
  ASSERT_TRUE(store_
                  ->Scan(Column::kMeta, "k",
                         [&](absl::string_view k, absl::string_view) {
                           keys.emplace_back(k);
                           return k != "k4";
                         })
                  .ok());
  EXPECT_THAT(keys, ElementsAre("k0", "k1", "k2", "k3", "k4"));
  keys.clear();
  ASSERT_TRUE(store_
                  ->Scan(Column::kMeta, "",
                         [&](absl::string_view k, absl::string_view) {
                           keys.emplace_back(k);
                           return false;
                         })
                  .ok());
  EXPECT_THAT(keys, ElementsAre("k0"));
}

TEST_P(StoreTest, PrefixOfHighBytesScansOnlyItsKeys) {
  const std::string high("\xff\xff", 2);
  ASSERT_TRUE(store_->Put(Column::kFindDb, high + "x", "1").ok());
  ASSERT_TRUE(store_->Put(Column::kFindDb, "\xfe", "2").ok());
  ASSERT_TRUE(
      store_->Put(Column::kFindDb, std::string("\xff\x00", 2), "3").ok());
  EXPECT_EQ(ScanAll(*store_, Column::kFindDb, high).size(), 1u);
  EXPECT_EQ(ScanAll(*store_, Column::kFindDb, "\xff").size(), 2u);
}

// A scan sees the store as it was when the scan began, and fn may use the
// store meanwhile: a cache that refreshes records while walking them must
// neither deadlock nor see its own writes.
TEST_P(StoreTest, ScanSeesASnapshotWhileTheCallbackWritesTheStore) {
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(
        store_->Put(Column::kPerfDb, absl::StrCat("d/", i), "old").ok());
  }
  ASSERT_TRUE(store_->Put(Column::kPerfDb, "e/1", "other").ok());
  Pairs seen;
  absl::Status s = store_->Scan(
      Column::kPerfDb, "d/", [&](absl::string_view k, absl::string_view v) {
        seen.emplace_back(std::string(k), std::string(v));
        if (k == "d/1") {
          EXPECT_TRUE(store_->Put(Column::kPerfDb, "d/2", "new").ok());
          EXPECT_TRUE(store_->Delete(Column::kPerfDb, "d/3").ok());
          EXPECT_TRUE(store_->Put(Column::kPerfDb, "d/5", "new").ok());
          absl::StatusOr<std::string> got = store_->Get(Column::kPerfDb, "d/2");
          EXPECT_TRUE(got.ok()) << got.status();
          EXPECT_EQ(got.value_or(""), "new");
          // A nested scan starts later, so it sees those writes.
          EXPECT_THAT(ScanAll(*store_, Column::kPerfDb, "d/"),
                      ElementsAre(Pair("d/1", "old"), Pair("d/2", "new"),
                                  Pair("d/4", "old"), Pair("d/5", "new")));
        }
        return true;
      });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen, ElementsAre(Pair("d/1", "old"), Pair("d/2", "old"),
                                Pair("d/3", "old"), Pair("d/4", "old")));
  EXPECT_THAT(
      ScanAll(*store_, Column::kPerfDb, ""),
      ElementsAre(Pair("d/1", "old"), Pair("d/2", "new"), Pair("d/4", "old"),
                  Pair("d/5", "new"), Pair("e/1", "other")));
}

TEST_P(StoreTest, UnsyncedWritesAreReadableAndSyncIsOk) {
  ASSERT_TRUE(
      store_->Put(Column::kKernelCache, "h", "code", {.sync = false}).ok());
  ASSERT_TRUE(
      store_->Delete(Column::kKernelCache, "gone", {.sync = false}).ok());
  absl::StatusOr<std::string> got = store_->Get(Column::kKernelCache, "h");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "code");
  absl::Status s = store_->Sync();
  EXPECT_TRUE(s.ok()) << s;
  got = store_->Get(Column::kKernelCache, "h");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "code");
}

// The daemon's handler threads share one store. The threads' keys interleave
// so that their writes land side by side in the same structures.
TEST_P(StoreTest, ConcurrentPutGetDeleteAndScanAreSafe) {
  constexpr int kThreads = 4;
  constexpr int kKeys = 5000;
  auto key = [](int t, int i) { return absl::StrCat(i, "/t", t); };
  // Longer than any small-string buffer, so a torn copy shows.
  auto value = [](absl::string_view k) {
    return absl::StrCat("value of ", k, " padded to leave the SSO buffer");
  };
  // Started together, or the first thread may finish before the last starts.
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store& store = *store_;
      start.arrive_and_wait();
      for (int i = 0; i < kKeys; ++i) {
        const std::string k = key(t, i);
        EXPECT_TRUE(
            store.Put(Column::kFindDb, k, value(k), {.sync = false}).ok());
        absl::StatusOr<std::string> got = store.Get(Column::kFindDb, k);
        EXPECT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got.value_or(""), value(k));
        // Odd keys are deleted again while the other threads read them.
        if (i % 2 == 1) {
          EXPECT_TRUE(store.Delete(Column::kFindDb, k, {.sync = false}).ok());
          EXPECT_EQ(store.Get(Column::kFindDb, k).status().code(),
                    absl::StatusCode::kNotFound);
        }
        // Another thread's key is either absent or whole.
        const std::string other = key((t + 1) % kThreads, i);
        got = store.Get(Column::kFindDb, other);
        if (got.ok()) {
          EXPECT_EQ(*got, value(other));
        } else {
          EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
        }
        if (i % 500 == 0) {
          for (const auto& [sk, sv] : ScanAll(store, Column::kFindDb, "")) {
            EXPECT_EQ(sv, value(sk));
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::map<std::string, std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kKeys; i += 2) expected[key(t, i)] = value(key(t, i));
  }
  EXPECT_EQ(ScanAll(*store_, Column::kFindDb, ""), expected);
  EXPECT_TRUE(store_->Sync().ok());
}

TEST(MemoryStoreTest, StoresAreIndependentAndHaveNoFolder) {
  std::unique_ptr<Store> a = NewMemoryStore();
  std::unique_ptr<Store> b = NewMemoryStore();
  ASSERT_TRUE(a->Put(Column::kFindDb, "dev/p", "v").ok());
  EXPECT_EQ(b->Get(Column::kFindDb, "dev/p").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(a->path(), "");
  EXPECT_EQ(b->path(), "");
}

}  // namespace
}  // namespace convtune::storage
