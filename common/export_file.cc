#include "common/export_file.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/quote.h"

namespace convtune {
namespace {

// `v` as 8 little-endian bytes.
std::string Fixed64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

uint32_t Field(absl::string_view bytes, uint32_t crc) {
  return Crc32c(bytes, Crc32c(Fixed64(bytes.size()), crc));
}

// Everything in the file but its own checksum: the header fields, the
// number of entries and each entry's checksum in order.
uint32_t FileChecksum(const v1::ExportFile& f) {
  uint32_t crc = Field(f.magic(), 0);
  crc = Crc32c(Fixed64(f.schema_version()), crc);
  crc = Crc32c(Fixed64(f.format_version()), crc);
  crc = Crc32c(Fixed64(static_cast<uint64_t>(f.created_unix_ms())), crc);
  crc = Field(f.device_key(), crc);
  crc = Crc32c(Fixed64(static_cast<uint64_t>(f.entries_size())), crc);
  for (const v1::ExportEntry& e : f.entries()) {
    crc = Crc32c(Fixed64(e.crc32c()), crc);
  }
  return crc;
}

}  // namespace

uint32_t ExportEntryChecksum(const v1::ExportEntry& e) {
  return Field(e.value(), Field(e.key(), Field(e.column_family(), 0)));
}

void SealExportFile(v1::ExportFile* file) {
  file->set_format_version(kExportFormatVersion);
  for (v1::ExportEntry& e : *file->mutable_entries()) {
    e.set_crc32c(ExportEntryChecksum(e));
  }
  file->set_crc32c(FileChecksum(*file));
}

absl::StatusOr<v1::ExportFile> ParseExportFile(absl::string_view bytes,
                                               absl::string_view name) {
  v1::ExportFile file;
  if (!file.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", bytes.size(),
                     " bytes that do not parse (truncated or not an export "
                     "file)"));
  }
  if (file.magic() != kExportMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": magic is '", QuotePrefix(file.magic()),
                     "', expected '", kExportMagic, "'"));
  }
  if (file.format_version() < kExportFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": export format ", std::max<uint32_t>(1, file.format_version()),
        " has no checksums; export it again with this convtune"));
  }
  if (file.format_version() > kExportFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": export format ", file.format_version(),
        " is newer than this convtune reads (", kExportFormatVersion, ")"));
  }
  for (int i = 0; i < file.entries_size(); ++i) {
    const v1::ExportEntry& e = file.entries(i);
    if (e.crc32c() != ExportEntryChecksum(e)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": entry ", i, " (", QuotePrefix(e.column_family()), " '",
          QuotePrefix(e.key()),
          "') does not match its checksum: the file is damaged"));
    }
  }
  if (file.crc32c() != FileChecksum(file)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     ": the file's header or entry list does not match its "
                     "checksum: the file is damaged"));
  }
  return file;
}

}  // namespace convtune
