#include "server/system_db.h"

#include <cstdlib>
#include <filesystem>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/export_file.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {

std::pair<int, std::string> SplitComputeUnits(absl::string_view key) {
  // Device keys are "<backend>-<arch>-cu<N>[-...]"; the arch may hold '-'.
  size_t at = 0;
  while ((at = key.find("-cu", at)) != absl::string_view::npos) {
    size_t end = at + 3;
    while (end < key.size() && key[end] >= '0' && key[end] <= '9') ++end;
    int units;
    if (end > at + 3 && (end == key.size() || key[end] == '-') &&
        absl::SimpleAtoi(key.substr(at + 3, end - at - 3), &units)) {
      return {units, absl::StrCat(key.substr(0, at), "-cu*", key.substr(end))};
    }
    at = end;
  }
  return {-1, std::string(key)};
}

absl::StatusOr<std::unique_ptr<SystemFindDb>> SystemFindDb::Open(
    const std::string& dir, const std::string& device_key) {
  auto db = std::make_unique<SystemFindDb>();
  std::string path = dir + "/" + storage::SystemDbFileName(device_key);
  db->exact_ = std::filesystem::exists(path);
  if (!db->exact_) {
    const auto [units, pattern] = SplitComputeUnits(device_key);
    int best_distance = std::numeric_limits<int>::max();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      if (!absl::EndsWith(name, ".ctsys")) continue;
      name.resize(name.size() - 6);
      const auto [their_units, their_pattern] = SplitComputeUnits(name);
      if (units < 0 || their_units < 0 || their_pattern != pattern) continue;
      const int distance = std::abs(their_units - units);
      if (distance < best_distance) {
        best_distance = distance;
        path = entry.path().string();
      }
    }
    if (best_distance == std::numeric_limits<int>::max()) {
      return absl::NotFoundError(
          absl::StrCat("no system FindDb for ", device_key, " in ", dir));
    }
  }
  db->path_ = path;
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  // A damaged system FindDb is refused whole, naming the entry.
  ASSIGN_OR_RETURN(const v1::ExportFile file, ParseExportFile(bytes, path));
  if (file.device_key().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a system FindDb (make one with convtune db export --system)"));
  }
  db->source_device_key_ = file.device_key();
  const std::string prefix = db->source_device_key_ + "/";
  for (const v1::ExportEntry& e : file.entries()) {
    if (e.column_family() != "find_db" || !absl::StartsWith(e.key(), prefix))
      continue;
    if (!storage::ValidateStoredPair(storage::Column::kFindDb, e.key(),
                                     e.value())
             .ok())
      continue;
    v1::FindRecord record;
    if (!record.ParseFromString(e.value())) continue;
    db->records_.emplace(record.problem_key(), std::move(record));
  }
  return db;
}

absl::StatusOr<v1::FindRecord> SystemFindDb::Get(
    absl::string_view problem_key) const {
  auto it = records_.find(problem_key);
  if (it == records_.end()) return absl::NotFoundError(problem_key);
  return it->second;
}

}  // namespace convtune
