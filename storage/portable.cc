#include "storage/portable.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/export_file.h"
#include "common/kill_point.h"
#include "common/status_macros.h"
#include "convtune/v1/records.pb.h"
#include "storage/records.h"

namespace convtune::storage {
namespace {

constexpr Column kExportedColumns[] = {Column::kFindDb, Column::kPerfDb,
                                       Column::kKernelCache};

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status CheckSchema(const v1::ExportFile& file) {
  if (file.schema_version() != kSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("export file: schema_version ", file.schema_version(),
                     ", this convtune reads ", kSchemaVersion));
  }
  return absl::OkStatus();
}

// What importing one valid entry does, counted: whether to write it.
absl::StatusOr<bool> Decide(Store& store, Column c, const v1::ExportEntry& e,
                            const ImportOptions& options, ImportStats& stats) {
  absl::StatusOr<std::string> existing = store.Get(c, e.key());
  if (absl::IsNotFound(existing.status())) {
    ++stats.imported;
    return true;
  }
  if (!existing.ok()) return existing.status();
  if (*existing == e.value()) {
    ++stats.unchanged;
    return false;
  }
  // An unreadable stored record would be dropped by its next reader anyway.
  if (!ValidateStoredPair(c, e.key(), *existing).ok()) {
    ++stats.imported;
    return true;
  }
  if (!options.overwrite) {
    ++stats.conflicting;
    return false;
  }
  ++stats.overwritten;
  return true;
}

}  // namespace

std::string SystemDbFileName(absl::string_view device_key) {
  return absl::StrCat(device_key, ".ctsys");
}

absl::StatusOr<std::string> ExportStore(Store& store,
                                        const ExportOptions& options,
                                        int64_t* entries) {
  v1::ExportFile file;
  file.set_magic(std::string(kExportMagic));
  file.set_schema_version(kSchemaVersion);
  file.set_created_unix_ms(NowUnixMs());
  std::vector<Column> columns(std::begin(kExportedColumns),
                              std::end(kExportedColumns));
  std::string prefix;
  if (!options.system_device_key.empty()) {
    file.set_device_key(options.system_device_key);
    columns = {Column::kFindDb, Column::kPerfDb};
    prefix =
        absl::StrCat(options.system_device_key, std::string(1, kKeySeparator));
  } else if (options.include_meta) {
    columns.push_back(Column::kMeta);
  }
  for (Column c : columns) {
    RETURN_IF_ERROR(store.Scan(
        c, prefix, [&](absl::string_view key, absl::string_view value) {
          v1::ExportEntry* e = file.add_entries();
          e->set_column_family(std::string(ColumnName(c)));
          e->set_key(std::string(key));
          e->set_value(std::string(value));
          return true;
        }));
  }
  if (entries != nullptr) *entries = file.entries_size();
  SealExportFile(&file);
  return file.SerializeAsString();
}

absl::StatusOr<ImportStats> ImportStore(Store& store,
                                        absl::string_view file_bytes,
                                        const ImportOptions& options) {
  ASSIGN_OR_RETURN(const v1::ExportFile file,
                   ParseExportFile(file_bytes, "export file"));
  RETURN_IF_ERROR(CheckSchema(file));
  ImportStats stats;
  std::vector<Store::Pair> writes;
  for (const v1::ExportEntry& e : file.entries()) {
    absl::StatusOr<Column> c = ColumnFromName(e.column_family());
    if (!c.ok()) {
      ++stats.invalid;
      continue;
    }
    if (*c == Column::kMeta && !options.import_meta) {
      ++stats.ignored;
      continue;
    }
    if (!ValidateStoredPair(*c, e.key(), e.value()).ok()) {
      ++stats.invalid;
      continue;
    }
    if (options.check) {
      if (absl::Status s = options.check(*c, e.key(), e.value()); !s.ok()) {
        if (stats.refused++ == 0)
          stats.first_refusal = std::string(s.message());
        continue;
      }
    }
    ASSIGN_OR_RETURN(const bool write, Decide(store, *c, e, options, stats));
    if (write) writes.push_back({*c, e.key(), e.value()});
  }
  // All or nothing, synced.
  KillPoint("import.before_write");
  if (!writes.empty()) RETURN_IF_ERROR(store.PutAll(writes));
  KillPoint("import.after_write");
  return stats;
}

}  // namespace convtune::storage
