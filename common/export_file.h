// The portable export file (v1::ExportFile, storage/FORMAT.md) as every
// reader and writer sees it: sealed with a CRC-32C over each entry and over
// the whole file when written, and checked entry by entry when read, so that
// a damaged file is refused before anything in it is used. Stateless;
// thread-safe.
#ifndef CONVTUNE_COMMON_EXPORT_FILE_H_
#define CONVTUNE_COMMON_EXPORT_FILE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/records.pb.h"

namespace convtune {

inline constexpr absl::string_view kExportMagic = "convtune-export";
// 2: each entry and the file carry a CRC-32C. Files of format 1 (before
// checksums) are refused: export them again.
inline constexpr uint32_t kExportFormatVersion = 2;

// The checksum of one entry: its column family, key and value, each after
// its length.
uint32_t ExportEntryChecksum(const v1::ExportEntry& e);

// Sets the file's format version and every checksum. Call last, after the
// header and entries are final.
void SealExportFile(v1::ExportFile* file);

// The file in `bytes`, checked: InvalidArgument, naming `name` and what is
// wrong (the entry by index, column family and a prefix of its key), for
// bytes that do not parse, a wrong magic, a format without checksums or
// newer than this one, or a checksum that does not match. Records inside
// are not validated here (storage/records.h does).
absl::StatusOr<v1::ExportFile> ParseExportFile(absl::string_view bytes,
                                               absl::string_view name);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_EXPORT_FILE_H_
