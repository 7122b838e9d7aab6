// A small key-value store with the four column families convtune keeps.
// RocksDB implements it (rocksdb_store.cc; nothing else includes RocksDB), and
// memory_store.h in memory for tests. Implementations are thread-safe. Keys
// and values are opaque bytes here; keys live in keys.h, record formats in
// records.h, both documented in storage/FORMAT.md.
#ifndef CONVTUNE_STORAGE_STORE_H_
#define CONVTUNE_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace convtune::storage {

enum class Column { kFindDb, kPerfDb, kKernelCache, kMeta };
inline constexpr Column kAllColumns[] = {Column::kFindDb, Column::kPerfDb,
                                         Column::kKernelCache, Column::kMeta};

// "find_db", "perf_db", "kernel_cache", "meta".
absl::string_view ColumnName(Column c);
// InvalidArgument for an unknown name.
absl::StatusOr<Column> ColumnFromName(absl::string_view name);

struct WriteOptions {
  // When true the write is in the write-ahead log and synced to disk before
  // Put returns. Find records are written synced.
  bool sync = true;
};

// Whether a store takes writes now, and what has gone wrong.
struct StoreHealth {
  bool writable = true;
  // Why writes are refused now (empty while writable): a failed write, a
  // background error, or free space below the floor.
  std::string error;
  int64_t failed_writes = 0;  // writes refused or failed since open
  int64_t recoveries = 0;     // times writes resumed after stopping
  // What opening the database had to mend, and where copies of what it
  // could not read went (empty after a clean open).
  std::string opened_damaged;
};

class Store {
 public:
  virtual ~Store() = default;

  // NotFound if the key is absent.
  virtual absl::StatusOr<std::string> Get(Column column,
                                          absl::string_view key) = 0;
  virtual absl::Status Put(Column column, absl::string_view key,
                           absl::string_view value,
                           const WriteOptions& options = {}) = 0;
  // OK if the key was absent.
  virtual absl::Status Delete(Column column, absl::string_view key,
                              const WriteOptions& options = {}) = 0;
  // Writes every pair, all of them or (on an error) none: one atomic batch.
  struct Pair {
    Column column;
    std::string key;
    std::string value;
  };
  virtual absl::Status PutAll(const std::vector<Pair>& pairs,
                              const WriteOptions& options = {}) = 0;
  // Calls fn for each pair whose key starts with `prefix`, in key order, until
  // fn returns false.
  virtual absl::Status Scan(
      Column column, absl::string_view prefix,
      const std::function<bool(absl::string_view key, absl::string_view value)>&
          fn) = 0;
  // Makes every earlier write durable, synced or not (one fsync of the WAL),
  // so a bulk load can write unsynced and sync once at the end.
  virtual absl::Status Sync() { return absl::OkStatus(); }
  // The folder this store lives in (empty for none).
  virtual std::string path() const = 0;
  virtual StoreHealth Health() { return {}; }
  // After a write failed (its disk filled up, say), a store refuses writes
  // until Recover succeeds: it reopens the database once the filesystem has
  // room again. OK when the store takes writes (again); otherwise why not.
  // Cheap while writable; callers call it on a timer. Reads go on
  // throughout, waiting only while the database is reopened.
  virtual absl::Status Recover() { return absl::OkStatus(); }
};

struct StoreOptions {
  // Create the database if it does not exist. Default: true.
  bool create_if_missing = true;
  // Open read-only (no lock taken; for system databases and inspection).
  bool read_only = false;
  // Writes are refused (ResourceExhausted) while the database's filesystem
  // has less free space than this, so that the database never fills the
  // disk to its last byte. 0: no floor.
  int64_t min_free_bytes = 0;
  // The environment RocksDB reads and writes files through (tests inject
  // faults with one); null: the default. Must outlive the store.
  rocksdb::Env* env = nullptr;
  // A writable open first checks the write-ahead logs whole. When one is
  // damaged (a flipped bit, a cut-off tail), or CURRENT is missing beside
  // a manifest: refuse (DataLoss naming the file), or continue, keeping
  // what can be read. Continuing copies the damaged logs to <dir>/lost/
  // first, and says so in StoreHealth::opened_damaged. Default: continue.
  bool refuse_damaged = false;
};

// Opens (or creates) the RocksDB database in `dir`. FailedPrecondition with a
// message naming the folder if another process (or another Store in this one)
// holds it open for writing; NotFound if there is no database and the options
// do not allow creating one; DataLoss if it is corrupt; Internal for other
// RocksDB failures. A write that fails (ResourceExhausted for a full disk)
// stops writes until Recover; RocksDB never resumes on its own. Missing column
// families are created (read-only: treated as empty). A read-only store answers
// Put/Delete with FailedPrecondition.
absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const std::string& dir, const StoreOptions& options = {});

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_STORE_H_
