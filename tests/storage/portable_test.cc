#include "storage/portable.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/export_file.h"
#include "common/file_util.h"
#include "convtune/v1/records.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "storage/records.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune::storage {
namespace {

using ::testing::HasSubstr;
using testing::RandomRecords;
using testing::TempDir;

using Contents = std::map<std::pair<Column, std::string>, std::string>;

std::unique_ptr<Store> MustOpen(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

Contents Dump(Store& store, bool with_meta) {
  Contents out;
  for (Column c : kAllColumns) {
    if (c == Column::kMeta && !with_meta) continue;
    EXPECT_TRUE(store
                    .Scan(c, "",
                          [&](absl::string_view k, absl::string_view v) {
                            out[{c, std::string(k)}] = std::string(v);
                            return true;
                          })
                    .ok());
  }
  return out;
}

class PortableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = MustOpen(tmp_.path() + "/source");
    target_ = MustOpen(tmp_.path() + "/target");
    ASSERT_NE(source_, nullptr);
    ASSERT_NE(target_, nullptr);
  }

  // Random records in every column of `store`; returns how many.
  int64_t Fill(Store* store) {
    int64_t n = 0;
    for (int d = 0; d < 2; ++d) {
      std::string device = absl::StrCat(rnd_.DeviceKey(), "-", d);
      FindDb find(store, device);
      PerfDb perf(store, device);
      for (int i = 0, count = static_cast<int>(rnd_.Int(2, 8)); i < count;
           ++i, n += 2) {
        std::string problem = absl::StrCat(rnd_.ProblemKey(), "-", i);
        EXPECT_TRUE(find.Put(rnd_.Find(device, problem)).ok());
        EXPECT_TRUE(perf.Put(problem, rnd_.Perf()).ok());
      }
    }
    for (int i = 0, count = static_cast<int>(rnd_.Int(1, 4)); i < count;
         ++i, ++n) {
      EXPECT_TRUE(
          KernelCache(store).Put(absl::StrCat("hash", i), rnd_.Kernel()).ok());
    }
    EXPECT_TRUE(StampMeta(store, "source").ok());
    return n;
  }

  TempDir tmp_;
  RandomRecords rnd_;
  std::unique_ptr<Store> source_;
  std::unique_ptr<Store> target_;
};

TEST_F(PortableTest, ExportImportRoundTrip) {
  int64_t n = Fill(source_.get());
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok()) << file.status();
  v1::ExportFile parsed;
  ASSERT_TRUE(parsed.ParseFromString(*file));
  EXPECT_EQ(parsed.magic(), "convtune-export");
  EXPECT_EQ(parsed.schema_version(), kSchemaVersion);
  EXPECT_EQ(parsed.entries_size(), n);

  absl::StatusOr<ImportStats> stats = ImportStore(*target_, *file);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->imported, n);
  EXPECT_EQ(stats->conflicting + stats->invalid + stats->unchanged +
                stats->overwritten,
            0);
  EXPECT_EQ(Dump(*target_, false), Dump(*source_, false));
  // Meta stays behind unless asked for.
  EXPECT_EQ(Meta(target_.get()).Get("created_by").status().code(),
            absl::StatusCode::kNotFound);

  // Importing again changes nothing.
  stats = ImportStore(*target_, *file);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->unchanged, n);
  EXPECT_EQ(stats->imported, 0);
}

TEST_F(PortableTest, MetaTravelsOnlyWhenAsked) {
  Fill(source_.get());
  absl::StatusOr<std::string> file =
      ExportStore(*source_, {.include_meta = true});
  ASSERT_TRUE(file.ok());
  absl::StatusOr<ImportStats> stats = ImportStore(*target_, *file);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->ignored, 2);
  stats = ImportStore(*target_, *file, {.import_meta = true});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(*Meta(target_.get()).Get("created_by"), "source");
  EXPECT_EQ(Dump(*target_, true), Dump(*source_, true));
}

TEST_F(PortableTest, ImportNeverOverwritesADifferentRecordByDefault) {
  std::string device = rnd_.DeviceKey(), problem = rnd_.ProblemKey();
  v1::FindRecord theirs = rnd_.Find(device, problem);
  v1::FindRecord ours = rnd_.Find(device, problem);
  // Faster than both first results: differs from theirs and keeps ours sorted.
  ours.mutable_results(0)->set_time_ms(
      std::min(theirs.results(0).time_ms(), ours.results(0).time_ms()) / 2);
  ASSERT_TRUE(FindDb(source_.get(), device).Put(theirs).ok());
  ASSERT_TRUE(FindDb(target_.get(), device).Put(ours).ok());
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok());

  absl::StatusOr<ImportStats> stats = ImportStore(*target_, *file);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->conflicting, 1);
  EXPECT_EQ(stats->imported, 0);
  EXPECT_DOUBLE_EQ(
      FindDb(target_.get(), device).Get(problem)->results(0).time_ms(),
      ours.results(0).time_ms());

  stats = ImportStore(*target_, *file, {.overwrite = true});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->overwritten, 1);
  EXPECT_DOUBLE_EQ(
      FindDb(target_.get(), device).Get(problem)->results(0).time_ms(),
      theirs.results(0).time_ms());
}

TEST_F(PortableTest, ImportReplacesAnUnreadableStoredRecord) {
  std::string device = rnd_.DeviceKey(), problem = rnd_.ProblemKey();
  ASSERT_TRUE(
      FindDb(source_.get(), device).Put(rnd_.Find(device, problem)).ok());
  ASSERT_TRUE(target_
                  ->Put(Column::kFindDb, FindDbKey(device, problem),
                        std::string(5, '\xff'))
                  .ok());
  absl::StatusOr<ImportStats> stats =
      ImportStore(*target_, *ExportStore(*source_));
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->imported, 1);
  EXPECT_TRUE(FindDb(target_.get(), device).Get(problem).ok());
}

TEST_F(PortableTest, InvalidEntriesAreSkippedAndCounted) {
  int64_t n = Fill(source_.get());
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok());
  v1::ExportFile parsed;
  ASSERT_TRUE(parsed.ParseFromString(*file));
  v1::ExportEntry* unknown = parsed.add_entries();
  *unknown = parsed.entries(0);
  unknown->set_column_family("not_a_family");
  v1::ExportEntry* garbage = parsed.add_entries();
  garbage->set_column_family("find_db");
  garbage->set_key("dev/p");
  garbage->set_value(std::string(4, '\xff') + rnd_.Bytes(20));
  v1::ExportEntry* newer = parsed.add_entries();
  v1::FindRecord r = rnd_.Find("dev", "q");
  r.set_schema_version(kSchemaVersion + 1);
  newer->set_column_family("find_db");
  newer->set_key("dev/q");
  newer->set_value(r.SerializeAsString());
  SealExportFile(&parsed);
  absl::StatusOr<ImportStats> stats =
      ImportStore(*target_, parsed.SerializeAsString());
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->invalid, 3);
  EXPECT_EQ(stats->imported, n);
  EXPECT_EQ(target_->Get(Column::kFindDb, "dev/p").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(PortableTest, BadFilesAreRefusedWithTheRightCode) {
  Fill(source_.get());
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok());

  absl::StatusOr<ImportStats> garbage =
      ImportStore(*target_, std::string(6, '\xff') + rnd_.Bytes(100));
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument)
      << garbage.status();
  absl::StatusOr<ImportStats> truncated = ImportStore(
      *target_, absl::string_view(*file).substr(0, file->size() - 1));
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument)
      << truncated.status();

  v1::ExportFile parsed;
  ASSERT_TRUE(parsed.ParseFromString(*file));
  parsed.set_magic("sqlite-export");
  absl::StatusOr<ImportStats> magic =
      ImportStore(*target_, parsed.SerializeAsString());
  EXPECT_EQ(magic.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(magic.status().message(), HasSubstr("magic"));
  EXPECT_EQ(ImportStore(*target_, "").status().code(),
            absl::StatusCode::kInvalidArgument);

  parsed.set_magic("convtune-export");
  parsed.set_schema_version(kSchemaVersion + 1);
  SealExportFile(&parsed);
  absl::StatusOr<ImportStats> version =
      ImportStore(*target_, parsed.SerializeAsString());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(version.status().message(), HasSubstr("schema_version"));

  // A file from before checksums is refused, and says what to do.
  parsed.set_schema_version(kSchemaVersion);
  parsed.clear_format_version();
  parsed.clear_crc32c();
  for (v1::ExportEntry& e : *parsed.mutable_entries()) e.clear_crc32c();
  absl::StatusOr<ImportStats> old_format =
      ImportStore(*target_, parsed.SerializeAsString());
  EXPECT_EQ(old_format.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(old_format.status().message(),
              HasSubstr("has no checksums; export it again"));
  // Nothing was written by any refused import.
  EXPECT_TRUE(Dump(*target_, true).empty());
}

// Every single-bit flip of an export file is refused, naming what is
// damaged, or (a flip that protobuf reads as an unknown field) imports
// exactly what the whole file holds; nothing altered is ever written.
TEST_F(PortableTest, EveryBitFlipIsRefusedOrChangesNothing) {
  std::string device = rnd_.DeviceKey();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(FindDb(source_.get(), device)
                    .Put(rnd_.Find(device, rnd_.ProblemKey()))
                    .ok());
  }
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(ImportStore(*target_, *file).ok());
  const auto whole = Dump(*target_, true);
  int refused = 0, same = 0;
  for (size_t bit = 0; bit < file->size() * 8; ++bit) {
    std::string flipped = *file;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    auto store = NewMemoryStore();
    absl::StatusOr<ImportStats> stats = ImportStore(*store, flipped);
    if (!stats.ok()) {
      ++refused;
      EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(Dump(*store, true).empty()) << "bit " << bit;
      continue;
    }
    ++same;
    EXPECT_EQ(Dump(*store, true), whole) << "bit " << bit;
  }
  EXPECT_GT(refused, 0);
  std::cout << file->size() * 8 << " flips: " << refused << " refused, " << same
            << " imported unchanged\n";
}

TEST_F(PortableTest, ADamagedEntryFailsTheWholeImportNamingIt) {
  int64_t n = Fill(source_.get());
  ASSERT_GT(n, 3);
  absl::StatusOr<std::string> file = ExportStore(*source_);
  ASSERT_TRUE(file.ok());
  v1::ExportFile parsed;
  ASSERT_TRUE(parsed.ParseFromString(*file));
  // The last entry's value changed after the file was sealed.
  v1::ExportEntry* last = parsed.mutable_entries(parsed.entries_size() - 1);
  std::string value = last->value();
  value.back() = static_cast<char>(value.back() ^ 1);
  last->set_value(value);
  absl::StatusOr<ImportStats> stats =
      ImportStore(*target_, parsed.SerializeAsString());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stats.status().message(),
              HasSubstr(absl::StrCat("entry ", n - 1, " (")));
  EXPECT_THAT(stats.status().message(), HasSubstr("damaged"));
  // The entries before it were not written either.
  EXPECT_TRUE(Dump(*target_, true).empty());
}

TEST(FileHelpersTest, WriteAtomicallyThenRead) {
  TempDir tmp;
  RandomRecords rnd;
  std::string path = tmp.path() + "/export.bin";
  std::string first = rnd.Bytes(static_cast<size_t>(rnd.Int(1, 200000)));
  ASSERT_TRUE(WriteFileAtomically(path, first).ok());
  EXPECT_EQ(*ReadFile(path), first);
  std::string second = rnd.Bytes(static_cast<size_t>(rnd.Int(1, 1000)));
  ASSERT_TRUE(WriteFileAtomically(path, second).ok());
  EXPECT_EQ(*ReadFile(path), second);
  // No temporary file is left next to it.
  int files = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(tmp.path()))
    ++files;
  EXPECT_EQ(files, 1);
  EXPECT_EQ(ReadFile(tmp.path() + "/absent").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteFileAtomically(tmp.path() + "/no/such/dir/f", "x").code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace convtune::storage
