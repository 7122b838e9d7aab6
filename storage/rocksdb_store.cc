// The RocksDB implementation of Store: the only file that includes RocksDB.
// One DB per folder, one column family per Column, all handles opened up
// front; rocksdb::DB is itself thread-safe, so this wrapper holds no locks.
#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "storage/store.h"

namespace convtune::storage {
namespace {

// Enough to keep the hot find records and index blocks of a tuning database
// (thousands of small records) in memory; the daemon is not a database server.
constexpr size_t kBlockCacheBytes = 32 << 20;

rocksdb::Slice ToSlice(absl::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}
absl::string_view ToView(const rocksdb::Slice& s) {
  return absl::string_view(s.data(), s.size());
}

// One mapping from rocksdb::Status to absl codes, by what the caller should do.
absl::Status FromRocksDb(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(context, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  if (s.IsNoSpace() || s.IsMemoryLimit())
    return absl::ResourceExhaustedError(msg);
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut())
    return absl::UnavailableError(msg);
  if (s.IsNotSupported()) return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

// RocksDB reports a held LOCK file as an IOError naming it: from another
// process "While lock file: <dir>/LOCK: Resource temporarily unavailable",
// from this one "lock hold by current process, ...: <dir>/LOCK: ...".
bool IsLockHeld(const rocksdb::Status& s) {
  return s.IsIOError() && absl::StrContains(s.ToString(), "/LOCK");
}

// What to open: every family the database has (RocksDB insists a writer opens
// them all), the default one, and for a writer ours, which it creates.
std::vector<rocksdb::ColumnFamilyDescriptor> Descriptors(
    const std::vector<std::string>& existing, bool read_only,
    const rocksdb::ColumnFamilyOptions& cf_options) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  auto add = [&](absl::string_view name) {
    for (const auto& d : descriptors) {
      if (d.name == name) return;
    }
    descriptors.emplace_back(std::string(name), cf_options);
  };
  for (const std::string& name : existing) add(name);
  add(rocksdb::kDefaultColumnFamilyName);
  if (!read_only) {
    for (Column c : kAllColumns) add(ColumnName(c));
  }
  return descriptors;
}

// The smallest string greater than every string starting with `prefix`, or
// "" when there is none (the prefix is all 0xff bytes).
std::string PrefixSuccessor(absl::string_view prefix) {
  std::string s(prefix);
  while (!s.empty()) {
    unsigned char last = static_cast<unsigned char>(s.back());
    if (last != 0xff) {
      s.back() = static_cast<char>(last + 1);
      return s;
    }
    s.pop_back();
  }
  return s;
}

class RocksDbStore final : public Store {
 public:
  RocksDbStore(std::string dir, bool read_only)
      : dir_(std::move(dir)), read_only_(read_only) {}

  ~RocksDbStore() override {
    if (db_ == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : all_handles_)
      db_->DestroyColumnFamilyHandle(h);
    db_->Close().PermitUncheckedError();
  }

  absl::Status Open(const StoreOptions& options);

  absl::StatusOr<std::string> Get(Column column,
                                  absl::string_view key) override {
    rocksdb::ColumnFamilyHandle* h = handles_[Index(column)];
    if (h == nullptr) return NotFound(column, key);
    std::string value;
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), h, ToSlice(key), &value);
    if (s.IsNotFound()) return NotFound(column, key);
    if (!s.ok()) return Context(s, "get", column);
    return value;
  }

  absl::Status Put(Column column, absl::string_view key,
                   absl::string_view value,
                   const WriteOptions& options) override {
    RETURN_IF_ERROR(Writable(column, "put"));
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return Context(db_->Put(wo, Handle(column), ToSlice(key), ToSlice(value)),
                   "put", column);
  }

  absl::Status PutAll(const std::vector<Pair>& pairs,
                      const WriteOptions& options) override {
    rocksdb::WriteBatch batch;
    for (const Pair& p : pairs) {
      RETURN_IF_ERROR(Writable(p.column, "put"));
      rocksdb::Status s =
          batch.Put(Handle(p.column), ToSlice(p.key), ToSlice(p.value));
      if (!s.ok()) return Context(s, "batch put", p.column);
    }
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return FromRocksDb(
        db_->Write(wo, &batch),
        absl::StrCat("write of ", pairs.size(), " pairs to ", dir_));
  }

  absl::Status Delete(Column column, absl::string_view key,
                      const WriteOptions& options) override {
    RETURN_IF_ERROR(Writable(column, "delete"));
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return Context(db_->Delete(wo, Handle(column), ToSlice(key)), "delete",
                   column);
  }

  absl::Status Scan(Column column, absl::string_view prefix,
                    const std::function<bool(absl::string_view,
                                             absl::string_view)>& fn) override;

  absl::Status Sync() override {
    if (read_only_) return absl::OkStatus();
    rocksdb::WriteOptions wo;
    wo.sync = true;
    // An empty synced batch syncs every earlier unsynced write in the WAL.
    rocksdb::WriteBatch empty;
    return FromRocksDb(db_->Write(wo, &empty),
                       absl::StrCat("sync WAL of ", dir_));
  }

  std::string path() const override { return dir_; }

 private:
  static size_t Index(Column c) { return static_cast<size_t>(c); }

  absl::Status NotFound(Column column, absl::string_view key) const {
    return absl::NotFoundError(absl::StrCat(ColumnName(column), ": no key '",
                                            QuotePrefix(key, 80), "'"));
  }

  absl::Status Context(const rocksdb::Status& s, absl::string_view op,
                       Column column) const {
    return FromRocksDb(
        s, absl::StrCat(op, " in ", ColumnName(column), " of ", dir_));
  }

  rocksdb::ColumnFamilyHandle* Handle(Column column) const {
    return handles_[Index(column)];
  }

  absl::Status Writable(Column column, absl::string_view op) const {
    if (!read_only_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(op, " in ", ColumnName(column), ": database ", dir_,
                     " is open read-only"));
  }

  const std::string dir_;
  const bool read_only_;
  std::unique_ptr<rocksdb::DB> db_;
  // Indexed by Column; null only for a family missing from a read-only open.
  std::array<rocksdb::ColumnFamilyHandle*, std::size(kAllColumns)> handles_{};
  // Every handle RocksDB gave out (default and unknown families too), to
  // destroy.
  std::vector<rocksdb::ColumnFamilyHandle*> all_handles_;
};

absl::Status RocksDbStore::Scan(
    Column column, absl::string_view prefix,
    const std::function<bool(absl::string_view, absl::string_view)>& fn) {
  rocksdb::ColumnFamilyHandle* h = handles_[Index(column)];
  if (h == nullptr) return absl::OkStatus();
  rocksdb::ReadOptions ro;
  std::string upper = PrefixSuccessor(prefix);
  rocksdb::Slice upper_slice(upper);
  if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, h));
  for (it->Seek(ToSlice(prefix)); it->Valid(); it->Next()) {
    absl::string_view key = ToView(it->key());
    if (!absl::StartsWith(key, prefix)) break;
    if (!fn(key, ToView(it->value()))) break;
  }
  return Context(it->status(), "scan", column);
}

absl::Status RocksDbStore::Open(const StoreOptions& options) {
  std::error_code ec;
  bool exists =
      std::filesystem::exists(std::filesystem::path(dir_) / "CURRENT", ec);
  if (!exists && (options.read_only || !options.create_if_missing)) {
    return absl::NotFoundError(absl::StrCat("no database in ", dir_));
  }
  if (!exists && !std::filesystem::create_directories(dir_, ec) && ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create database folder ", dir_, ": ", ec.message()));
  }

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = true;
  db_options.keep_log_file_num = 4;
  rocksdb::ColumnFamilyOptions cf_options;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  std::vector<std::string> existing;
  if (exists) {
    rocksdb::Status s =
        rocksdb::DB::ListColumnFamilies(db_options, dir_, &existing);
    if (s.IsCorruption())
      return FromRocksDb(s, absl::StrCat("open database ", dir_));
    // Otherwise DB::Open below reports whatever is wrong, with more detail.
    if (!s.ok()) existing.clear();
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors =
      Descriptors(existing, options.read_only, cf_options);

  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      options.read_only ? rocksdb::DB::OpenForReadOnly(
                              db_options, dir_, descriptors, &all_handles_, &db)
                        : rocksdb::DB::Open(db_options, dir_, descriptors,
                                            &all_handles_, &db);
  if (!s.ok()) {
    if (IsLockHeld(s)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database ", dir_,
          " is in use by another convtuned (its LOCK is held): stop that "
          "daemon or pass another --db (",
          s.ToString(), ")"));
    }
    return FromRocksDb(s, absl::StrCat("open database ", dir_));
  }
  db_.reset(db);
  for (size_t i = 0; i < descriptors.size(); ++i) {
    absl::StatusOr<Column> c = ColumnFromName(descriptors[i].name);
    if (c.ok()) handles_[Index(*c)] = all_handles_[i];
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const std::string& dir, const StoreOptions& options) {
  if (dir.empty())
    return absl::InvalidArgumentError("database folder: empty path");
  auto store = std::make_unique<RocksDbStore>(dir, options.read_only);
  absl::Status s = store->Open(options);
  if (!s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace convtune::storage
