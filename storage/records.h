// Typed access to the records convtune keeps in a Store: find records and
// perf-db entries scoped by device key, the kernel cache, and meta strings.
// Keys, value schemas and versioning rules are in storage/FORMAT.md. These
// classes hold no state besides the Store pointer; they are as thread-safe as
// the Store (RocksDbStore is), and the Store must outlive them.
#ifndef CONVTUNE_STORAGE_RECORDS_H_
#define CONVTUNE_STORAGE_RECORDS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/records.pb.h"
#include "storage/keys.h"
#include "storage/store.h"

namespace convtune::storage {

// The schema version every record is written with. A reader drops (deletes)
// a record whose version differs and answers DataLoss, so the caller re-tunes.
inline constexpr uint32_t kSchemaVersion = 1;

// OK if `value` is a valid record of `column` stored under `key`: it parses,
// carries kSchemaVersion, and agrees with its key. DataLoss naming what is
// wrong otherwise. Used by readers and by import.
absl::Status ValidateStoredPair(Column column, absl::string_view key,
                                absl::string_view value);

// Find records (the ranked solver list of one problem) of one device.
class FindDb {
 public:
  // REQUIRES: device_key is non-empty and has no '/' (Put/Get then fail).
  FindDb(Store* store, std::string device_key);

  // NotFound when absent. DataLoss when the stored record is unreadable, of
  // another schema version, or disagrees with its key: it is deleted first,
  // so the caller re-tunes and the next Get answers NotFound.
  absl::StatusOr<v1::FindRecord> Get(absl::string_view problem_key);
  // Writes synced. The record's device_key must be this one's (or empty: it is
  // filled in) and schema_version kSchemaVersion or 0 (stamped).
  // InvalidArgument for empty keys, keys containing '/', or results not sorted
  // fastest first.
  absl::Status Put(const v1::FindRecord& record);
  // OK if absent.
  absl::Status Delete(absl::string_view problem_key);
  // Records of this device.
  absl::StatusOr<int64_t> Count();
  // Problem keys of this device, in key order.
  absl::StatusOr<std::vector<std::string>> ProblemKeys();

  const std::string& device_key() const { return device_key_; }

 private:
  Store* store_;
  std::string device_key_;
};

// Tuned performance configs: one record per (problem, solver) of one device.
class PerfDb {
 public:
  PerfDb(Store* store, std::string device_key);

  // Same NotFound / DataLoss (and delete) rules as FindDb::Get.
  absl::StatusOr<v1::PerfDbRecord> Get(absl::string_view problem_key,
                                       uint32_t solver_id);
  // Writes synced under the record's solver_id. InvalidArgument for a bad
  // problem key or a negative or non-finite time_ms.
  absl::Status Put(absl::string_view problem_key,
                   const v1::PerfDbRecord& record);
  absl::Status Delete(absl::string_view problem_key, uint32_t solver_id);
  // Every valid record of one problem, by solver id; invalid ones are dropped.
  absl::StatusOr<std::vector<v1::PerfDbRecord>> GetAll(
      absl::string_view problem_key);
  absl::StatusOr<int64_t> Count();

 private:
  Store* store_;
  std::string device_key_;
};

// Compiled kernels by content hash (the hash covers source, options, arch).
class KernelCache {
 public:
  explicit KernelCache(Store* store) : store_(store) {}

  // Same NotFound / DataLoss (and delete) rules as FindDb::Get.
  absl::StatusOr<v1::KernelCacheRecord> Get(absl::string_view hash);
  // Not synced: a lost entry is only recompiled. InvalidArgument for an
  // empty hash or code object.
  absl::Status Put(absl::string_view hash, const v1::KernelCacheRecord& record);
  absl::Status Delete(absl::string_view hash);
  absl::StatusOr<int64_t> Count();

 private:
  Store* store_;
};

// Small named strings about the database ("created_by", "schema_version").
class Meta {
 public:
  explicit Meta(Store* store) : store_(store) {}

  // NotFound when absent; DataLoss (after deleting it) when unreadable.
  absl::StatusOr<std::string> Get(absl::string_view name);
  absl::Status Put(absl::string_view name, absl::string_view value);

 private:
  Store* store_;
};

// Solvers that left the device unusable on a problem, per device key: meta
// records named QuarantineName(), whose value is the solver ids in decimal,
// comma-separated, in the order they were quarantined.
class QuarantineRecords {
 public:
  QuarantineRecords(Store* store, std::string device_key);

  // Every quarantined problem of this device with its solver ids. A record
  // that does not read is skipped (a Meta::Get drops it); store errors as
  // the store reports them.
  absl::StatusOr<std::map<std::string, std::vector<uint32_t>>> LoadAll();
  // Replaces the problem's list; written synced.
  absl::Status Put(absl::string_view problem_key,
                   const std::vector<uint32_t>& ids);

 private:
  Store* store_;
  std::string device_key_;
};

// Writes meta "schema_version" and "created_by" when the database has none.
// FailedPrecondition if the database says it was written with a newer schema.
absl::Status StampMeta(Store* store, absl::string_view created_by);

struct StoreStats {
  // Pairs per column family (every device).
  std::map<Column, int64_t> per_column;
  // find_db and perf_db pairs per device key.
  std::map<std::string, int64_t> find_per_device;
  std::map<std::string, int64_t> perf_per_device;
};

// Counts every pair, by column family and by device key. Does not validate.
absl::StatusOr<StoreStats> ComputeStats(Store* store);

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_RECORDS_H_
