#include "storage/records.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace convtune::storage {
namespace {

constexpr WriteOptions kSynced{.sync = true};
constexpr WriteOptions kUnsynced{.sync = false};

// InvalidArgument unless `part` can be one component of a key.
absl::Status CheckKeyPart(absl::string_view what, absl::string_view part) {
  if (part.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, ": empty"));
  if (part.find(kKeySeparator) != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", part, "' contains '", std::string(1, kKeySeparator), "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckTime(double time_ms, absl::string_view what) {
  if (!std::isfinite(time_ms) || time_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": time_ms ", time_ms, " is not a finite non-negative time"));
  }
  return absl::OkStatus();
}

// Times finite and non-negative, results fastest first.
absl::Status CheckResults(const v1::FindRecord& r) {
  for (int i = 0; i < r.results_size(); ++i) {
    RETURN_IF_ERROR(
        CheckTime(r.results(i).time_ms(), absl::StrCat("results[", i, "]")));
    if (i > 0 && r.results(i).time_ms() < r.results(i - 1).time_ms()) {
      return absl::InvalidArgumentError(
          absl::StrCat("results: not sorted fastest first at index ", i, " (",
                       r.results(i - 1).time_ms(), " ms before ",
                       r.results(i).time_ms(), " ms)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckVersionForPut(uint32_t version) {
  if (version == 0 || version == kSchemaVersion) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("schema_version: ", version,
                                                 " (this convtune writes ",
                                                 kSchemaVersion, ")"));
}

// Parses a stored value and checks its version; DataLoss says which failed.
template <typename T>
absl::Status ParseStored(absl::string_view value, T* out) {
  if (!out->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(
        absl::StrCat("does not parse as ", out->GetTypeName()));
  }
  if (out->schema_version() != kSchemaVersion) {
    return absl::DataLossError(
        absl::StrCat("schema_version ", out->schema_version(),
                     " (this convtune reads ", kSchemaVersion, ")"));
  }
  return absl::OkStatus();
}

absl::Status Decode(absl::string_view key, absl::string_view value,
                    v1::FindRecord* r) {
  RETURN_IF_ERROR(ParseStored(value, r));
  if (key != FindDbKey(r->device_key(), r->problem_key())) {
    return absl::DataLossError(absl::StrCat("record is for device '",
                                            r->device_key(), "', problem '",
                                            r->problem_key(), "'"));
  }
  absl::Status s = CheckKeyPart("device_key", r->device_key());
  if (s.ok()) s = CheckKeyPart("problem_key", r->problem_key());
  if (s.ok()) s = CheckResults(*r);
  if (!s.ok()) return absl::DataLossError(s.message());
  return absl::OkStatus();
}

absl::Status Decode(absl::string_view key, absl::string_view value,
                    v1::PerfDbRecord* r) {
  RETURN_IF_ERROR(ParseStored(value, r));
  std::vector<absl::string_view> parts = absl::StrSplit(key, kKeySeparator);
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() ||
      key != PerfDbKey(parts[0], parts[1], r->solver_id())) {
    return absl::DataLossError(absl::StrCat(
        "key does not end in the record's solver_id ", r->solver_id()));
  }
  absl::Status s = CheckTime(r->time_ms(), "time_ms");
  if (!s.ok()) return absl::DataLossError(s.message());
  return absl::OkStatus();
}

absl::Status Decode(absl::string_view key, absl::string_view value,
                    v1::KernelCacheRecord* r) {
  RETURN_IF_ERROR(ParseStored(value, r));
  if (r->code_object().empty()) return absl::DataLossError("empty code_object");
  return absl::OkStatus();
}

absl::Status Decode(absl::string_view key, absl::string_view value,
                    v1::MetaRecord* r) {
  return ParseStored(value, r);
}

// Deletes a record that failed Decode and says so, so the caller re-tunes.
absl::Status DropBad(Store* store, Column c, absl::string_view key,
                     const absl::Status& why) {
  std::string what =
      absl::StrCat(ColumnName(c), " '", key, "': ", why.message());
  absl::Status deleted = store->Delete(c, key, kSynced);
  if (!deleted.ok()) {
    return absl::DataLossError(
        absl::StrCat(what, "; deleting it failed: ", deleted.message()));
  }
  return absl::DataLossError(absl::StrCat(what, "; the record was deleted"));
}

template <typename T>
absl::StatusOr<T> Read(Store* store, Column c, absl::string_view key) {
  ASSIGN_OR_RETURN(std::string value, store->Get(c, key));
  T record;
  absl::Status s = Decode(key, value, &record);
  if (!s.ok()) return DropBad(store, c, key, s);
  return record;
}

absl::StatusOr<int64_t> CountPrefix(Store* store, Column c,
                                    absl::string_view prefix) {
  int64_t n = 0;
  RETURN_IF_ERROR(
      store->Scan(c, prefix, [&n](absl::string_view, absl::string_view) {
        ++n;
        return true;
      }));
  return n;
}

std::string DevicePrefix(absl::string_view device_key) {
  return absl::StrCat(device_key, std::string(1, kKeySeparator));
}

}  // namespace

absl::Status ValidateStoredPair(Column column, absl::string_view key,
                                absl::string_view value) {
  absl::Status s;
  switch (column) {
    case Column::kFindDb: {
      v1::FindRecord r;
      s = Decode(key, value, &r);
      break;
    }
    case Column::kPerfDb: {
      v1::PerfDbRecord r;
      s = Decode(key, value, &r);
      break;
    }
    case Column::kKernelCache: {
      v1::KernelCacheRecord r;
      s = Decode(key, value, &r);
      break;
    }
    case Column::kMeta: {
      v1::MetaRecord r;
      s = Decode(key, value, &r);
      break;
    }
  }
  if (s.ok() && key.empty()) s = absl::DataLossError("empty key");
  if (s.ok()) return s;
  return absl::DataLossError(
      absl::StrCat(ColumnName(column), " '", key, "': ", s.message()));
}

// ---- FindDb ----

FindDb::FindDb(Store* store, std::string device_key)
    : store_(store), device_key_(std::move(device_key)) {}

absl::StatusOr<v1::FindRecord> FindDb::Get(absl::string_view problem_key) {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  return Read<v1::FindRecord>(store_, Column::kFindDb,
                              FindDbKey(device_key_, problem_key));
}

absl::Status FindDb::Put(const v1::FindRecord& record) {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  RETURN_IF_ERROR(CheckKeyPart("problem_key", record.problem_key()));
  if (!record.device_key().empty() && record.device_key() != device_key_) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_key: record is for '", record.device_key(),
                     "', this FindDb for '", device_key_, "'"));
  }
  RETURN_IF_ERROR(CheckVersionForPut(record.schema_version()));
  RETURN_IF_ERROR(CheckResults(record));
  v1::FindRecord stamped = record;
  stamped.set_schema_version(kSchemaVersion);
  stamped.set_device_key(device_key_);
  return store_->Put(Column::kFindDb,
                     FindDbKey(device_key_, record.problem_key()),
                     stamped.SerializeAsString(), kSynced);
}

absl::Status FindDb::Delete(absl::string_view problem_key) {
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  return store_->Delete(Column::kFindDb, FindDbKey(device_key_, problem_key),
                        kSynced);
}

absl::StatusOr<int64_t> FindDb::Count() {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  return CountPrefix(store_, Column::kFindDb, DevicePrefix(device_key_));
}

absl::StatusOr<std::vector<std::string>> FindDb::ProblemKeys() {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  std::string prefix = DevicePrefix(device_key_);
  std::vector<std::string> keys;
  RETURN_IF_ERROR(store_->Scan(Column::kFindDb, prefix,
                               [&](absl::string_view key, absl::string_view) {
                                 keys.emplace_back(key.substr(prefix.size()));
                                 return true;
                               }));
  return keys;
}

// ---- PerfDb ----

PerfDb::PerfDb(Store* store, std::string device_key)
    : store_(store), device_key_(std::move(device_key)) {}

absl::StatusOr<v1::PerfDbRecord> PerfDb::Get(absl::string_view problem_key,
                                             uint32_t solver_id) {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  return Read<v1::PerfDbRecord>(store_, Column::kPerfDb,
                                PerfDbKey(device_key_, problem_key, solver_id));
}

absl::Status PerfDb::Put(absl::string_view problem_key,
                         const v1::PerfDbRecord& record) {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  RETURN_IF_ERROR(CheckVersionForPut(record.schema_version()));
  RETURN_IF_ERROR(CheckTime(record.time_ms(), "time_ms"));
  v1::PerfDbRecord stamped = record;
  stamped.set_schema_version(kSchemaVersion);
  return store_->Put(Column::kPerfDb,
                     PerfDbKey(device_key_, problem_key, record.solver_id()),
                     stamped.SerializeAsString(), kSynced);
}

absl::Status PerfDb::Delete(absl::string_view problem_key, uint32_t solver_id) {
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  return store_->Delete(
      Column::kPerfDb, PerfDbKey(device_key_, problem_key, solver_id), kSynced);
}

absl::StatusOr<std::vector<v1::PerfDbRecord>> PerfDb::GetAll(
    absl::string_view problem_key) {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  RETURN_IF_ERROR(CheckKeyPart("problem_key", problem_key));
  std::vector<v1::PerfDbRecord> records;
  std::vector<std::string> bad;
  std::string prefix = DevicePrefix(FindDbKey(device_key_, problem_key));
  RETURN_IF_ERROR(
      store_->Scan(Column::kPerfDb, prefix,
                   [&](absl::string_view key, absl::string_view value) {
                     v1::PerfDbRecord r;
                     if (Decode(key, value, &r).ok()) {
                       records.push_back(std::move(r));
                     } else {
                       bad.emplace_back(key);
                     }
                     return true;
                   }));
  // Keys sort as text ("10" before "9"); callers expect solver order.
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.solver_id() < b.solver_id();
  });
  for (const std::string& key : bad) {
    RETURN_IF_ERROR(store_->Delete(Column::kPerfDb, key, kSynced));
  }
  return records;
}

absl::StatusOr<int64_t> PerfDb::Count() {
  RETURN_IF_ERROR(CheckKeyPart("device_key", device_key_));
  return CountPrefix(store_, Column::kPerfDb, DevicePrefix(device_key_));
}

// ---- KernelCache ----

absl::StatusOr<v1::KernelCacheRecord> KernelCache::Get(absl::string_view hash) {
  RETURN_IF_ERROR(CheckKeyPart("hash", hash));
  return Read<v1::KernelCacheRecord>(store_, Column::kKernelCache, hash);
}

absl::Status KernelCache::Put(absl::string_view hash,
                              const v1::KernelCacheRecord& record) {
  RETURN_IF_ERROR(CheckKeyPart("hash", hash));
  RETURN_IF_ERROR(CheckVersionForPut(record.schema_version()));
  if (record.code_object().empty())
    return absl::InvalidArgumentError("code_object: empty");
  v1::KernelCacheRecord stamped = record;
  stamped.set_schema_version(kSchemaVersion);
  return store_->Put(Column::kKernelCache, hash, stamped.SerializeAsString(),
                     kUnsynced);
}

absl::Status KernelCache::Delete(absl::string_view hash) {
  return store_->Delete(Column::kKernelCache, hash, kUnsynced);
}

absl::StatusOr<int64_t> KernelCache::Count() {
  return CountPrefix(store_, Column::kKernelCache, "");
}

// ---- Meta ----

absl::StatusOr<std::string> Meta::Get(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("meta name: empty");
  ASSIGN_OR_RETURN(v1::MetaRecord r,
                   Read<v1::MetaRecord>(store_, Column::kMeta, name));
  return r.value();
}

absl::Status Meta::Put(absl::string_view name, absl::string_view value) {
  if (name.empty()) return absl::InvalidArgumentError("meta name: empty");
  v1::MetaRecord r;
  r.set_schema_version(kSchemaVersion);
  r.set_value(std::string(value));
  return store_->Put(Column::kMeta, name, r.SerializeAsString(), kSynced);
}

// ---- Quarantine ----

QuarantineRecords::QuarantineRecords(Store* store, std::string device_key)
    : store_(store), device_key_(std::move(device_key)) {}

absl::StatusOr<std::map<std::string, std::vector<uint32_t>>>
QuarantineRecords::LoadAll() {
  const std::string prefix = QuarantineName(device_key_, "");
  std::vector<std::string> names;
  RETURN_IF_ERROR(store_->Scan(Column::kMeta, prefix,
                               [&](absl::string_view key, absl::string_view) {
                                 names.emplace_back(key);
                                 return true;
                               }));
  std::map<std::string, std::vector<uint32_t>> out;
  for (const std::string& name : names) {
    absl::StatusOr<std::string> value = Meta(store_).Get(name);
    if (!value.ok()) continue;
    std::vector<uint32_t>& ids = out[name.substr(prefix.size())];
    for (absl::string_view part :
         absl::StrSplit(*value, ',', absl::SkipEmpty())) {
      uint32_t id = 0;
      if (absl::SimpleAtoi(part, &id)) ids.push_back(id);
    }
  }
  return out;
}

absl::Status QuarantineRecords::Put(absl::string_view problem_key,
                                    const std::vector<uint32_t>& ids) {
  return Meta(store_).Put(QuarantineName(device_key_, problem_key),
                          absl::StrJoin(ids, ","));
}

absl::Status StampMeta(Store* store, absl::string_view created_by) {
  Meta meta(store);
  absl::StatusOr<std::string> version = meta.Get("schema_version");
  uint32_t stored = 0;
  if (version.ok() && absl::SimpleAtoi(*version, &stored) &&
      stored > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", store->path(), " was written with schema version ", stored,
        "; this convtune reads ", kSchemaVersion,
        ": use a newer convtune or another --db"));
  }
  if (!version.ok() && !absl::IsNotFound(version.status()) &&
      !absl::IsDataLoss(version.status())) {
    return version.status();
  }
  if (!version.ok() || stored != kSchemaVersion) {
    RETURN_IF_ERROR(meta.Put("schema_version", absl::StrCat(kSchemaVersion)));
  }
  absl::StatusOr<std::string> creator = meta.Get("created_by");
  if (creator.ok()) return absl::OkStatus();
  if (!absl::IsNotFound(creator.status()) &&
      !absl::IsDataLoss(creator.status())) {
    return creator.status();
  }
  return meta.Put("created_by", created_by);
}

absl::StatusOr<StoreStats> ComputeStats(Store* store) {
  StoreStats stats;
  for (Column c : kAllColumns) {
    int64_t& n = stats.per_column[c];
    std::map<std::string, int64_t>* per_device =
        c == Column::kFindDb   ? &stats.find_per_device
        : c == Column::kPerfDb ? &stats.perf_per_device
                               : nullptr;
    RETURN_IF_ERROR(
        store->Scan(c, "", [&](absl::string_view key, absl::string_view) {
          ++n;
          if (per_device != nullptr) {
            ++(*per_device)[std::string(
                key.substr(0, key.find(kKeySeparator)))];
          }
          return true;
        }));
  }
  return stats;
}

}  // namespace convtune::storage
