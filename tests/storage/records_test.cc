#include "storage/records.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using testing::RandomRecords;
using testing::TempDir;

class RecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(tmp_.db());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    device_ = rnd_.DeviceKey();
  }

  TempDir tmp_;
  RandomRecords rnd_;
  std::unique_ptr<Store> store_;
  std::string device_;
};

TEST_F(RecordsTest, FindRecordPutGetDeleteCount) {
  FindDb db(store_.get(), device_);
  std::vector<v1::FindRecord> records;
  for (int i = 0; i < 5; ++i) {
    records.push_back(rnd_.Find(i % 2 ? device_ : "", rnd_.ProblemKey()));
    ASSERT_TRUE(db.Put(records.back()).ok());
  }
  EXPECT_EQ(*db.Count(), 5);
  for (v1::FindRecord expected : records) {
    absl::StatusOr<v1::FindRecord> got = db.Get(expected.problem_key());
    ASSERT_TRUE(got.ok()) << got.status();
    expected.set_schema_version(kSchemaVersion);
    expected.set_device_key(device_);
    EXPECT_TRUE(MessageDifferencer::Equals(*got, expected))
        << got->DebugString();
  }
  // The raw value is a FindRecord under the documented key.
  absl::StatusOr<std::string> raw = store_->Get(
      Column::kFindDb, absl::StrCat(device_, "/", records[0].problem_key()));
  ASSERT_TRUE(raw.ok()) << raw.status();
  v1::FindRecord parsed;
  ASSERT_TRUE(parsed.ParseFromString(*raw));
  EXPECT_EQ(parsed.schema_version(), kSchemaVersion);

  ASSERT_TRUE(db.Delete(records[0].problem_key()).ok());
  EXPECT_EQ(db.Get(records[0].problem_key()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*db.Count(), 4);
  absl::StatusOr<std::vector<std::string>> keys = db.ProblemKeys();
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u);
}

TEST_F(RecordsTest, PutRejectsInvalidRecords) {
  FindDb db(store_.get(), device_);
  v1::FindRecord unsorted = rnd_.Find(device_, rnd_.ProblemKey());
  v1::PerfResult* slow = unsorted.add_results();
  slow->set_time_ms(unsorted.results(0).time_ms() + rnd_.Real(1, 10));
  unsorted.mutable_results()->SwapElements(0, unsorted.results_size() - 1);
  EXPECT_EQ(db.Put(unsorted).code(), absl::StatusCode::kInvalidArgument);

  v1::FindRecord nan_time = rnd_.Find(device_, rnd_.ProblemKey());
  nan_time.mutable_results(0)->set_time_ms(std::nan(""));
  EXPECT_EQ(db.Put(nan_time).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(db.Put(rnd_.Find(device_, "")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db.Put(rnd_.Find(device_, "a/b")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db.Put(rnd_.Find("other-device", rnd_.ProblemKey())).code(),
            absl::StatusCode::kInvalidArgument);
  v1::FindRecord newer = rnd_.Find(device_, rnd_.ProblemKey());
  newer.set_schema_version(kSchemaVersion + 1);
  EXPECT_EQ(db.Put(newer).code(), absl::StatusCode::kInvalidArgument);

  FindDb no_device(store_.get(), "");
  EXPECT_EQ(no_device.Put(rnd_.Find("", rnd_.ProblemKey())).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*db.Count(), 0);
}

TEST_F(RecordsTest, GarbageFindRecordIsDataLossAndDeleted) {
  FindDb db(store_.get(), device_);
  std::string problem = rnd_.ProblemKey();
  // 0xff bytes start an invalid wire-format tag, so this never parses.
  std::string garbage = std::string(4, '\xff') + rnd_.Bytes(60);
  ASSERT_TRUE(
      store_->Put(Column::kFindDb, FindDbKey(device_, problem), garbage).ok());
  absl::StatusOr<v1::FindRecord> got = db.Get(problem);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("find_db"));
  EXPECT_EQ(db.Get(problem).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      store_->Get(Column::kFindDb, FindDbKey(device_, problem)).status().code(),
      absl::StatusCode::kNotFound);
}

TEST_F(RecordsTest, NewerOrMissingSchemaVersionIsDataLoss) {
  FindDb db(store_.get(), device_);
  for (uint32_t version : {kSchemaVersion + 1, kSchemaVersion + 7, 0u}) {
    SCOPED_TRACE(version);
    v1::FindRecord r = rnd_.Find(device_, rnd_.ProblemKey());
    r.set_schema_version(version);
    ASSERT_TRUE(store_
                    ->Put(Column::kFindDb, FindDbKey(device_, r.problem_key()),
                          r.SerializeAsString())
                    .ok());
    absl::StatusOr<v1::FindRecord> got = db.Get(r.problem_key());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr("schema_version"));
    EXPECT_EQ(db.Get(r.problem_key()).status().code(),
              absl::StatusCode::kNotFound);
  }
}

TEST_F(RecordsTest, RecordUnderAnotherKeyIsDataLoss) {
  FindDb db(store_.get(), device_);
  v1::FindRecord r = rnd_.Find(device_, rnd_.ProblemKey());
  r.set_schema_version(kSchemaVersion);
  std::string other_problem = rnd_.ProblemKey();
  ASSERT_TRUE(store_
                  ->Put(Column::kFindDb, FindDbKey(device_, other_problem),
                        r.SerializeAsString())
                  .ok());
  EXPECT_EQ(db.Get(other_problem).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(db.Get(other_problem).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RecordsTest, DeviceKeysScopeRecords) {
  std::string other_device = device_ + "-other";
  FindDb a(store_.get(), device_);
  FindDb b(store_.get(), other_device);
  std::string problem = rnd_.ProblemKey();
  v1::FindRecord ra = rnd_.Find(device_, problem);
  v1::FindRecord rb = rnd_.Find(other_device, problem);
  ASSERT_TRUE(a.Put(ra).ok());
  EXPECT_EQ(b.Get(problem).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(b.Put(rb).ok());
  EXPECT_DOUBLE_EQ(a.Get(problem)->results(0).time_ms(),
                   ra.results(0).time_ms());
  EXPECT_DOUBLE_EQ(b.Get(problem)->results(0).time_ms(),
                   rb.results(0).time_ms());
  ASSERT_TRUE(a.Delete(problem).ok());
  EXPECT_EQ(a.Get(problem).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(b.Get(problem).ok());
  EXPECT_EQ(*a.Count(), 0);
  EXPECT_EQ(*b.Count(), 1);
}

TEST_F(RecordsTest, PerfDbByProblemAndSolver) {
  PerfDb db(store_.get(), device_);
  std::string problem = rnd_.ProblemKey();
  std::vector<v1::PerfDbRecord> records;
  for (int i = 0; i < 4; ++i) {
    v1::PerfDbRecord r = rnd_.Perf();
    r.set_solver_id(
        static_cast<uint32_t>(i == 0 ? 9 : 10 * i + rnd_.Int(0, 9)));
    records.push_back(r);
    ASSERT_TRUE(db.Put(problem, r).ok());
  }
  ASSERT_TRUE(db.Put(rnd_.ProblemKey(), rnd_.Perf()).ok());
  for (v1::PerfDbRecord expected : records) {
    absl::StatusOr<v1::PerfDbRecord> got =
        db.Get(problem, expected.solver_id());
    ASSERT_TRUE(got.ok()) << got.status();
    expected.set_schema_version(kSchemaVersion);
    EXPECT_TRUE(MessageDifferencer::Equals(*got, expected));
  }
  EXPECT_TRUE(
      store_->Get(Column::kPerfDb, PerfDbKey(device_, problem, 9)).ok());
  absl::StatusOr<std::vector<v1::PerfDbRecord>> all = db.GetAll(problem);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  for (size_t i = 1; i < all->size(); ++i) {
    EXPECT_LT((*all)[i - 1].solver_id(), (*all)[i].solver_id());
  }
  EXPECT_EQ(*db.Count(), 5);
  v1::PerfDbRecord negative = rnd_.Perf();
  negative.set_time_ms(-rnd_.Real(0.1, 5));
  EXPECT_EQ(db.Put(problem, negative).code(),
            absl::StatusCode::kInvalidArgument);

  // A record stored under another solver's key is dropped.
  v1::PerfDbRecord moved = records[1];
  moved.set_schema_version(kSchemaVersion);
  ASSERT_TRUE(store_
                  ->Put(Column::kPerfDb, PerfDbKey(device_, problem, 77777),
                        moved.SerializeAsString())
                  .ok());
  EXPECT_EQ(db.Get(problem, 77777).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(db.Get(problem, 77777).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(db.Delete(problem, 9).ok());
  EXPECT_EQ(db.Get(problem, 9).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RecordsTest, PerfDbGetAllDropsCorruptEntries) {
  PerfDb db(store_.get(), device_);
  std::string problem = rnd_.ProblemKey();
  v1::PerfDbRecord good = rnd_.Perf();
  ASSERT_TRUE(db.Put(problem, good).ok());
  std::string bad_key = PerfDbKey(device_, problem, good.solver_id() + 1);
  ASSERT_TRUE(
      store_->Put(Column::kPerfDb, bad_key, std::string(3, '\xff')).ok());
  absl::StatusOr<std::vector<v1::PerfDbRecord>> all = db.GetAll(problem);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].solver_id(), good.solver_id());
  EXPECT_EQ(store_->Get(Column::kPerfDb, bad_key).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RecordsTest, KernelCachePutGetCount) {
  KernelCache cache(store_.get());
  std::vector<std::pair<std::string, v1::KernelCacheRecord>> entries;
  for (int i = 0; i < 3; ++i) {
    entries.emplace_back(absl::StrCat(rnd_.Int(1, int64_t{1} << 60)),
                         rnd_.Kernel());
    ASSERT_TRUE(cache.Put(entries.back().first, entries.back().second).ok());
  }
  EXPECT_EQ(*cache.Count(), 3);
  for (auto& [hash, expected] : entries) {
    absl::StatusOr<v1::KernelCacheRecord> got = cache.Get(hash);
    ASSERT_TRUE(got.ok()) << got.status();
    expected.set_schema_version(kSchemaVersion);
    EXPECT_TRUE(MessageDifferencer::Equals(*got, expected));
  }
  EXPECT_EQ(cache.Get("absent").status().code(), absl::StatusCode::kNotFound);
  v1::KernelCacheRecord empty = rnd_.Kernel();
  empty.clear_code_object();
  EXPECT_EQ(cache.Put("h", empty).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Put("", rnd_.Kernel()).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_
                  ->Put(Column::kKernelCache, "bad",
                        rnd_.Bytes(1) + std::string(3, '\xff'))
                  .ok());
  EXPECT_EQ(cache.Get("bad").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cache.Get("bad").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RecordsTest, MetaAndStamp) {
  Meta meta(store_.get());
  EXPECT_EQ(meta.Get("created_by").status().code(),
            absl::StatusCode::kNotFound);
  std::string creator = absl::StrCat("convtuned ", rnd_.Int(1, 1000));
  ASSERT_TRUE(StampMeta(store_.get(), creator).ok());
  EXPECT_EQ(*meta.Get("created_by"), creator);
  EXPECT_EQ(*meta.Get("schema_version"), absl::StrCat(kSchemaVersion));
  // A second stamp keeps the original creator.
  ASSERT_TRUE(StampMeta(store_.get(), "someone else").ok());
  EXPECT_EQ(*meta.Get("created_by"), creator);
  ASSERT_TRUE(
      meta.Put("schema_version", absl::StrCat(kSchemaVersion + 1)).ok());
  EXPECT_EQ(StampMeta(store_.get(), creator).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecordsTest, StatsCountPerColumnAndDevice) {
  std::string other = device_ + "-2";
  FindDb a(store_.get(), device_), b(store_.get(), other);
  PerfDb pa(store_.get(), device_);
  int64_t na = rnd_.Int(1, 6), nb = rnd_.Int(1, 6), np = rnd_.Int(1, 6);
  for (int64_t i = 0; i < na; ++i)
    ASSERT_TRUE(a.Put(rnd_.Find(device_, absl::StrCat("p", i))).ok());
  for (int64_t i = 0; i < nb; ++i)
    ASSERT_TRUE(b.Put(rnd_.Find(other, absl::StrCat("p", i))).ok());
  for (int64_t i = 0; i < np; ++i) {
    v1::PerfDbRecord r = rnd_.Perf();
    r.set_solver_id(static_cast<uint32_t>(i + 1));
    ASSERT_TRUE(pa.Put(absl::StrCat("p", i), r).ok());
  }
  ASSERT_TRUE(KernelCache(store_.get()).Put("h1", rnd_.Kernel()).ok());
  absl::StatusOr<StoreStats> stats = ComputeStats(store_.get());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->per_column[Column::kFindDb], na + nb);
  EXPECT_EQ(stats->per_column[Column::kPerfDb], np);
  EXPECT_EQ(stats->per_column[Column::kKernelCache], 1);
  EXPECT_EQ(stats->per_column[Column::kMeta], 0);
  EXPECT_EQ(stats->find_per_device[device_], na);
  EXPECT_EQ(stats->find_per_device[other], nb);
  EXPECT_EQ(stats->perf_per_device[device_], np);
}

TEST_F(RecordsTest, ConcurrentWritersAndReadersOnOneStore) {
  constexpr int kThreads = 4, kPerThread = 40;
  std::vector<std::vector<v1::FindRecord>> records(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      records[t].push_back(
          rnd_.Find(device_, absl::StrCat(rnd_.ProblemKey(), "-", t, "-", i)));
    }
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      FindDb db(store_.get(), device_);
      for (const v1::FindRecord& r : records[t]) {
        if (!db.Put(r).ok()) ++failures;
        absl::StatusOr<v1::FindRecord> got = db.Get(r.problem_key());
        if (!got.ok() || got->results(0).time_ms() != r.results(0).time_ms())
          ++failures;
        if (!db.Count().ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*FindDb(store_.get(), device_).Count(), kThreads * kPerThread);
}

}  // namespace
}  // namespace convtune::storage
