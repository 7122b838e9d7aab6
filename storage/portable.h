// Moving a database between machines: export every record to one portable
// file (a serialized v1::ExportFile, see storage/FORMAT.md) and import it into
// another store without silently losing what is already there (the file
// helpers are in common/file_util.h). Stateless; thread-safe as the Store is.
#ifndef CONVTUNE_STORAGE_PORTABLE_H_
#define CONVTUNE_STORAGE_PORTABLE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/export_file.h"
#include "storage/store.h"

namespace convtune::storage {

using ::convtune::kExportMagic;

struct ExportOptions {
  // Also export meta pairs ("created_by", ...). Default: false, since they
  // describe the source database rather than tuning results.
  bool include_meta = false;
  // When set, a system database file: only this device's find_db and perf_db
  // records, with ExportFile.device_key set. Default: everything.
  std::string system_device_key;
};

// The file name of a system FindDb for `device_key`: "<device_key>.ctsys".
std::string SystemDbFileName(absl::string_view device_key);

// Every pair of find_db, perf_db and kernel_cache (and meta if asked), bytes
// as stored, in column then key order; *entries (if given) gets their count.
// Errors are the Store's.
absl::StatusOr<std::string> ExportStore(Store& store,
                                        const ExportOptions& options = {},
                                        int64_t* entries = nullptr);

struct ImportOptions {
  // Replace an existing record whose value differs. Default: false, so an
  // import never destroys a stored result.
  bool overwrite = false;
  // Import meta pairs too. Default: false (they stay `ignored`).
  bool import_meta = false;
  // When set, every entry that is a valid record is also passed here before
  // it is written; a non-OK status refuses it (counted in `refused`, the first
  // reason kept). Default: none.
  std::function<absl::Status(Column column, absl::string_view key,
                             absl::string_view value)>
      check;
};

struct ImportStats {
  int64_t imported =
      0;  // written: absent before, or replacing an unreadable record
  int64_t unchanged = 0;    // already stored with the same bytes
  int64_t conflicting = 0;  // stored with different bytes and left as they were
  int64_t overwritten =
      0;                // stored with different bytes and replaced (overwrite)
  int64_t invalid = 0;  // entries that are not valid records: skipped
  int64_t ignored = 0;  // meta entries without import_meta
  int64_t refused = 0;  // valid records that ImportOptions::check refused
  std::string first_refusal;  // why the first of them was refused
};

// Imports an ExportStore file. InvalidArgument, and nothing written, if the
// bytes are not a whole export file (ParseExportFile: one damaged byte is
// enough, and the error names the entry), or the schema_version is not
// kSchemaVersion. Every entry is checked before anything is written: invalid
// entries (unknown column family, empty key, a value that
// ValidateStoredPair rejects) are skipped and counted, as are those
// ImportOptions::check refuses; the rest is written in one synced batch, all
// of it or none.
absl::StatusOr<ImportStats> ImportStore(Store& store,
                                        absl::string_view file_bytes,
                                        const ImportOptions& options = {});

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_PORTABLE_H_
