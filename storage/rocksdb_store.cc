// The RocksDB implementation of Store: the only file that includes RocksDB.
// One DB per folder, one column family per Column, all handles opened up
// front. rocksdb::DB is itself thread-safe; the wrapper's lock is taken
// exclusively only to reopen the database after a failed write.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
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

// RocksDB's LOG. RocksDB's own logger aborts on its next line once a write
// to LOG has failed (a full disk); this one writes each line with one
// write(2) and loses only the lines that fail. It also collects RocksDB's
// reports of log records it could not replay ("<file>: dropping N bytes;
// <why>").
class InfoLog final : public rocksdb::Logger {
 public:
  // Appends to `path`, moved to `path`.old first once past 4 MiB; an empty
  // path writes nothing.
  explicit InfoLog(const std::string& path)
      : Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {
    if (path.empty()) return;
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) > (4u << 20) && !ec) {
      std::filesystem::rename(path, path + ".old", ec);
    }
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  ~InfoLog() override {
    if (fd_ >= 0) close(fd_);
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    const std::string stamp = absl::FormatTime(
        "%Y/%m/%d-%H:%M:%E6S ", absl::Now(), absl::UTCTimeZone());
    const size_t at = std::min(stamp.size(), sizeof line - 2);
    std::memcpy(line, stamp.data(), at);
    const int n = std::vsnprintf(line + at, sizeof line - at - 1, format, ap);
    size_t len = at + (n < 0 ? 0 : std::min<size_t>(n, sizeof line - at - 2));
    if (std::strstr(line + at, ": dropping ") != nullptr) {
      // "[WARN] [source:line] " comes first; the file's path follows.
      const char* path = std::strstr(line + at, "] /");
      absl::MutexLock lock(&mu_);
      drops_.push_back(path == nullptr
                           ? std::string(line + at, len - at)
                           : std::string(path + 2, line + len - path - 2));
    }
    if (fd_ < 0) return;
    line[len++] = '\n';
    ssize_t ignored = write(fd_, line, len);
    (void)ignored;
  }

  std::vector<std::string> TakeDrops() {
    absl::MutexLock lock(&mu_);
    return std::exchange(drops_, {});
  }

 private:
  int fd_ = -1;
  absl::Mutex mu_;
  std::vector<std::string> drops_ ABSL_GUARDED_BY(mu_);
};

class RocksDbStore;

// Tells the store of RocksDB's background errors (a failed flush,
// compaction or WAL write), and keeps RocksDB from resuming on its own:
// this RocksDB reuses a WAL writer that saw an error after such a resume
// and aborts on its next write. The store reopens the database instead.
class ErrorListener final : public rocksdb::EventListener {
 public:
  explicit ErrorListener(RocksDbStore* store) : store_(store) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                         rocksdb::Status* error) override;
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                            rocksdb::Status error,
                            bool* auto_recovery) override {
    error.PermitUncheckedError();
    *auto_recovery = false;
  }

 private:
  RocksDbStore* const store_;
};

class RocksDbStore final : public Store {
 public:
  RocksDbStore(std::string dir, const StoreOptions& options)
      : dir_(std::move(dir)), options_(options) {}

  ~RocksDbStore() override {
    std::unique_lock lock(db_mu_);
    CloseDb();
  }

  // The first open: checks the folder, then opens as the options say.
  absl::Status Open();

  absl::StatusOr<std::string> Get(Column column,
                                  absl::string_view key) override {
    std::shared_lock lock(db_mu_);
    RETURN_IF_ERROR(Readable());
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
    std::shared_lock lock(db_mu_);
    RETURN_IF_ERROR(Writable(column, "put"));
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return Written(db_->Put(wo, Handle(column), ToSlice(key), ToSlice(value)),
                   absl::StrCat("put in ", ColumnName(column), " of ", dir_));
  }

  absl::Status PutAll(const std::vector<Pair>& pairs,
                      const WriteOptions& options) override {
    std::shared_lock lock(db_mu_);
    if (!pairs.empty()) {
      RETURN_IF_ERROR(Writable(pairs.front().column, "put"));
    }
    rocksdb::WriteBatch batch;
    for (const Pair& p : pairs) {
      rocksdb::Status s =
          batch.Put(Handle(p.column), ToSlice(p.key), ToSlice(p.value));
      if (!s.ok()) return Context(s, "batch put", p.column);
    }
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return Written(db_->Write(wo, &batch),
                   absl::StrCat("write of ", pairs.size(), " pairs to ", dir_));
  }

  absl::Status Delete(Column column, absl::string_view key,
                      const WriteOptions& options) override {
    std::shared_lock lock(db_mu_);
    RETURN_IF_ERROR(Writable(column, "delete"));
    rocksdb::WriteOptions wo;
    wo.sync = options.sync;
    return Written(
        db_->Delete(wo, Handle(column), ToSlice(key)),
        absl::StrCat("delete in ", ColumnName(column), " of ", dir_));
  }

  absl::Status Scan(Column column, absl::string_view prefix,
                    const std::function<bool(absl::string_view,
                                             absl::string_view)>& fn) override;

  absl::Status Sync() override {
    if (options_.read_only) return absl::OkStatus();
    std::shared_lock lock(db_mu_);
    RETURN_IF_ERROR(Writable(Column::kMeta, "sync", /*check_space=*/false));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    // An empty synced batch syncs every earlier unsynced write in the WAL.
    rocksdb::WriteBatch empty;
    return Written(db_->Write(wo, &empty), absl::StrCat("sync WAL of ", dir_));
  }

  std::string path() const override { return dir_; }

  StoreHealth Health() override {
    StoreHealth h;
    {
      absl::MutexLock lock(&health_mu_);
      h.writable = !failed_ && !options_.read_only;
      h.error = failed_ ? error_ : "";
      h.failed_writes = failed_writes_;
      h.recoveries = recoveries_;
      h.opened_damaged = opened_damaged_;
    }
    if (h.writable) {
      if (absl::Status room = CheckRoom(); !room.ok()) {
        h.writable = false;
        h.error = std::string(room.message());
      }
    }
    if (options_.read_only) h.error = "open read-only";
    return h;
  }

  absl::Status Recover() override;

  // A background error: writes stop until Recover.
  void Fail(const std::string& why) {
    absl::MutexLock lock(&health_mu_);
    FailLocked(why);
  }

 private:
  static size_t Index(Column c) { return static_cast<size_t>(c); }

  // Writes stop until Recover; the first cause is the one kept.
  void FailLocked(const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(health_mu_) {
    if (failed_) return;
    failed_ = true;
    error_ = why;
  }

  // Opens the database writable or read-only; needs db_mu_ exclusively (or
  // no other thread yet).
  absl::Status OpenDb(const rocksdb::DBOptions& db_options, bool read_only);
  absl::Status OpenDb(bool read_only) {
    return OpenDb(DbOptions(read_only), read_only);
  }
  rocksdb::DBOptions DbOptions(bool read_only) const;
  rocksdb::ColumnFamilyOptions CfOptions() const;
  // Without CURRENT: false for a folder with no database, true once CURRENT
  // points at the newest manifest again (noted), or DataLoss.
  absl::StatusOr<bool> MendCurrent(std::vector<std::string>* notes);
  // The first writable open of an existing database: every write-ahead log
  // record replayed whole, or (unless damage is refused) the logs copied
  // aside and replayed up to the damage, noted. Needs db_mu_ exclusively.
  absl::Status OpenChecked(std::vector<std::string>* notes);
  void CloseDb();

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

  absl::Status Readable() const {
    if (db_ != nullptr) return absl::OkStatus();
    absl::MutexLock lock(&health_mu_);
    return absl::UnavailableError(
        absl::StrCat("database ", dir_, " could not be reopened: ", error_));
  }

  // Free space on the database's filesystem against a floor.
  absl::Status CheckRoom(int64_t floor) const;
  absl::Status CheckRoom() const { return CheckRoom(options_.min_free_bytes); }

  // Whether a write may go to RocksDB now; counts a refusal.
  absl::Status Writable(Column column, absl::string_view op,
                        bool check_space = true);

  // The outcome of a write RocksDB took: a failure stops writes.
  absl::Status Written(const rocksdb::Status& s, const std::string& context);

  const std::string dir_;
  const StoreOptions options_;
  std::shared_ptr<ErrorListener> listener_ =
      std::make_shared<ErrorListener>(this);
  // Made by Open once the folder exists. A read-only store writes nothing
  // to the folder, not even a LOG.
  std::shared_ptr<InfoLog> info_log_;

  // Shared by every read and write, exclusive while Recover reopens.
  std::shared_mutex db_mu_;
  std::unique_ptr<rocksdb::DB> db_;
  // Indexed by Column; null only for a family missing from a read-only open.
  std::array<rocksdb::ColumnFamilyHandle*, std::size(kAllColumns)> handles_{};
  // Every handle RocksDB gave out (default and unknown families too), to
  // destroy.
  std::vector<rocksdb::ColumnFamilyHandle*> all_handles_;

  mutable absl::Mutex health_mu_;
  bool failed_ ABSL_GUARDED_BY(health_mu_) = false;
  std::string error_ ABSL_GUARDED_BY(health_mu_);
  int64_t failed_writes_ ABSL_GUARDED_BY(health_mu_) = 0;
  int64_t recoveries_ ABSL_GUARDED_BY(health_mu_) = 0;
  std::string opened_damaged_ ABSL_GUARDED_BY(health_mu_);
};

void ErrorListener::OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                                      rocksdb::Status* error) {
  const char* what =
      reason == rocksdb::BackgroundErrorReason::kFlush        ? "flush"
      : reason == rocksdb::BackgroundErrorReason::kCompaction ? "compaction"
      : reason == rocksdb::BackgroundErrorReason::kMemTable   ? "memtable"
                                                              : "write";
  store_->Fail(
      absl::StrCat("background ", what, " error: ", error->ToString()));
}

absl::Status RocksDbStore::CheckRoom(int64_t floor) const {
  if (floor <= 0) return absl::OkStatus();
  struct statvfs fs;
  if (statvfs(dir_.c_str(), &fs) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "database ", dir_,
        ": cannot read its filesystem's free space: ", std::strerror(errno)));
  }
  const int64_t free_bytes =
      static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  if (free_bytes >= floor) return absl::OkStatus();
  constexpr double kMiB = 1 << 20;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "database %s: %.1f MiB free on its filesystem, below the floor of "
      "%.1f MiB kept free (convtuned --db-min-free-mb); writes resume when "
      "space returns",
      dir_, free_bytes / kMiB, floor / kMiB));
}

absl::Status RocksDbStore::Writable(Column column, absl::string_view op,
                                    bool check_space) {
  if (options_.read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, " in ", ColumnName(column), ": database ", dir_,
                     " is open read-only"));
  }
  absl::Status refused;
  {
    absl::MutexLock lock(&health_mu_);
    if (failed_) {
      ++failed_writes_;
      return absl::UnavailableError(
          absl::StrCat(op, " in ", ColumnName(column), ": database ", dir_,
                       " takes no writes since ", error_,
                       "; they resume when it can be reopened"));
    }
  }
  if (check_space) refused = CheckRoom();
  if (!refused.ok()) {
    absl::MutexLock lock(&health_mu_);
    ++failed_writes_;
  }
  return refused;
}

absl::Status RocksDbStore::Written(const rocksdb::Status& s,
                                   const std::string& context) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out = FromRocksDb(s, context);
  absl::MutexLock lock(&health_mu_);
  ++failed_writes_;
  // A bad argument leaves the database as it was; anything else (a full
  // disk, an I/O error) may have left RocksDB's write-ahead log unusable.
  if (!s.IsInvalidArgument()) FailLocked(std::string(out.message()));
  return out;
}

absl::Status RocksDbStore::Recover() {
  {
    absl::MutexLock lock(&health_mu_);
    if (!failed_) return CheckRoom();
  }
  // Reopening writes a manifest, replays the log and may flush it: not on
  // a disk that is still full.
  constexpr int64_t kReopenRoom = 1 << 20;
  RETURN_IF_ERROR(CheckRoom(std::max(options_.min_free_bytes, kReopenRoom)));
  std::unique_lock lock(db_mu_);
  CloseDb();
  absl::Status opened = OpenDb(/*read_only=*/false);
  if (!opened.ok()) {
    // Reads go on from a read-only open until a later try succeeds.
    CloseDb();
    absl::Status read_only = OpenDb(/*read_only=*/true);
    if (!read_only.ok()) CloseDb();
    absl::MutexLock health(&health_mu_);
    error_ = absl::StrCat("reopen failed: ", opened.message());
    return opened;
  }
  absl::MutexLock health(&health_mu_);
  failed_ = false;
  error_.clear();
  ++recoveries_;
  return absl::OkStatus();
}

void RocksDbStore::CloseDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : all_handles_)
    db_->DestroyColumnFamilyHandle(h);
  all_handles_.clear();
  handles_ = {};
  db_->Close().PermitUncheckedError();
  db_.reset();
}

absl::Status RocksDbStore::Scan(
    Column column, absl::string_view prefix,
    const std::function<bool(absl::string_view, absl::string_view)>& fn) {
  std::shared_lock lock(db_mu_);
  RETURN_IF_ERROR(Readable());
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

absl::Status RocksDbStore::Open() {
  std::error_code ec;
  bool exists =
      std::filesystem::exists(std::filesystem::path(dir_) / "CURRENT", ec);
  std::vector<std::string> mended;
  if (!exists) {
    // Creating a database over a damaged one would lose it.
    ASSIGN_OR_RETURN(exists, MendCurrent(&mended));
  }
  if (!exists && (options_.read_only || !options_.create_if_missing)) {
    return absl::NotFoundError(absl::StrCat("no database in ", dir_));
  }
  if (!exists && !std::filesystem::create_directories(dir_, ec) && ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create database folder ", dir_, ": ", ec.message()));
  }
  info_log_ =
      std::make_shared<InfoLog>(options_.read_only ? "" : dir_ + "/LOG");
  std::unique_lock lock(db_mu_);
  if (exists && !options_.read_only) {
    RETURN_IF_ERROR(OpenChecked(&mended));
  } else {
    RETURN_IF_ERROR(OpenDb(DbOptions(options_.read_only), options_.read_only));
  }
  absl::MutexLock health(&health_mu_);
  opened_damaged_ = absl::StrJoin(mended, "; ");
  return absl::OkStatus();
}

absl::StatusOr<bool> RocksDbStore::MendCurrent(
    std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string newest;
  uint64_t newest_number = 0;
  int others = 0;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    uint64_t number = 0;
    if (absl::StartsWith(name, "MANIFEST-") &&
        absl::SimpleAtoi(name.substr(9), &number)) {
      if (newest.empty() || number > newest_number) {
        newest = name;
        newest_number = number;
      }
    } else if (absl::EndsWith(name, ".sst") || absl::EndsWith(name, ".log")) {
      ++others;
    }
  }
  if (newest.empty()) {
    if (others == 0) return false;  // no database here (yet)
    return absl::DataLossError(
        absl::StrCat("database ", dir_,
                     " has no CURRENT and no MANIFEST file, yet holds ", others,
                     " table or log files: it cannot be opened; move them away "
                     "or pass another --db"));
  }
  const std::string what = absl::StrCat(
      "database ", dir_, " has no CURRENT file, yet holds ", newest,
      others > 0 ? absl::StrCat(" and ", others, " table or log files") : "");
  if (options_.refuse_damaged) {
    return absl::DataLossError(absl::StrCat(
        what,
        ": it is damaged. Start with --db-recovery continue to point "
        "CURRENT at ",
        newest, ", the newest manifest"));
  }
  if (options_.read_only) {
    return absl::DataLossError(absl::StrCat(what, ": it is damaged"));
  }
  const fs::path current = fs::path(dir_) / "CURRENT";
  const fs::path temp = fs::path(dir_) / "CURRENT.mending";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << newest << "\n";
    out.flush();
    if (!out) {
      return absl::DataLossError(
          absl::StrCat(what, ": cannot write ", temp.string()));
    }
  }
  fs::rename(temp, current, ec);
  if (ec) {
    return absl::DataLossError(absl::StrCat(
        what, ": cannot write ", current.string(), ": ", ec.message()));
  }
  notes->push_back(absl::StrCat("CURRENT was missing: pointed it at ", newest,
                                ", the newest manifest"));
  return true;
}

absl::Status RocksDbStore::OpenChecked(std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  rocksdb::DBOptions options = DbOptions(/*read_only=*/false);
  // Every log record whole, or the open fails and says where.
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kAbsoluteConsistency;
  info_log_->TakeDrops();
  const absl::Status whole = OpenDb(options, /*read_only=*/false);
  const std::vector<std::string> drops = info_log_->TakeDrops();
  if (whole.ok() || drops.empty()) return whole;
  const std::string damage = QuotePrefix(absl::StrJoin(drops, "; "), 400);
  if (options_.refuse_damaged) {
    return absl::DataLossError(absl::StrCat(
        "database ", dir_, ": its write-ahead log is damaged (", damage,
        "). Start with --db-recovery continue to keep every record before "
        "the damage (the logs are copied to ",
        dir_, "/lost/ first)"));
  }
  // Nothing is dropped without a copy of it.
  const fs::path lost =
      fs::path(dir_) / "lost" /
      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone());
  std::error_code ec;
  fs::create_directories(lost, ec);
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (ec || !absl::EndsWith(entry.path().filename().string(), ".log")) {
      continue;
    }
    fs::copy_file(entry.path(), lost / entry.path().filename(),
                  fs::copy_options::overwrite_existing, ec);
    if (ec) break;
  }
  if (ec) {
    return absl::DataLossError(
        absl::StrCat("database ", dir_, ": its write-ahead log is damaged (",
                     damage, ") and could not be copied to ", lost.string(),
                     " before replaying what is readable: ", ec.message()));
  }
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  RETURN_IF_ERROR(OpenDb(options, /*read_only=*/false));
  notes->push_back(absl::StrCat(
      "write-ahead log damaged: ", damage,
      "; replayed every record before the damage and dropped the rest; "
      "copies of the logs are in ",
      lost.string()));
  return absl::OkStatus();
}

rocksdb::ColumnFamilyOptions RocksDbStore::CfOptions() const {
  rocksdb::ColumnFamilyOptions cf_options;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf_options;
}

rocksdb::DBOptions RocksDbStore::DbOptions(bool read_only) const {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = options_.create_if_missing && !read_only;
  db_options.create_missing_column_families = true;
  if (options_.env != nullptr) db_options.env = options_.env;
  db_options.info_log = info_log_;
  // Writes stop at the first error and resume only through Recover.
  db_options.max_bgerror_resume_count = 0;
  db_options.listeners.push_back(listener_);
  // Every write is in the log: closing need not flush (which could fail on
  // a full disk), reopening replays it.
  db_options.avoid_flush_during_shutdown = true;
  return db_options;
}

absl::Status RocksDbStore::OpenDb(const rocksdb::DBOptions& db_options,
                                  bool read_only) {
  const rocksdb::ColumnFamilyOptions cf_options = CfOptions();
  std::vector<std::string> existing;
  rocksdb::Status listed =
      rocksdb::DB::ListColumnFamilies(db_options, dir_, &existing);
  if (listed.IsCorruption())
    return FromRocksDb(listed, absl::StrCat("open database ", dir_));
  // Otherwise DB::Open below reports whatever is wrong, with more detail.
  if (!listed.ok()) existing.clear();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors =
      Descriptors(existing, read_only, cf_options);

  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      read_only ? rocksdb::DB::OpenForReadOnly(db_options, dir_, descriptors,
                                               &all_handles_, &db)
                : rocksdb::DB::Open(db_options, dir_, descriptors,
                                    &all_handles_, &db);
  if (!s.ok()) {
    all_handles_.clear();
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
  auto store = std::make_unique<RocksDbStore>(dir, options);
  absl::Status s = store->Open();
  if (!s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace convtune::storage
