#include "client/cli/db_merge.h"

#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/export_file.h"

namespace convtune::cli {
namespace {

// storage/FORMAT.md: the client cannot link storage/.
constexpr char kFindDbFamily[] = "find_db";

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// True when `incoming` should replace `kept`, both find_db values. A value
// that does not parse never wins, and one that parses always beats one that
// does not.
bool NewerFindRecord(const std::string& kept, const std::string& incoming) {
  v1::FindRecord a, b;
  const bool a_ok = a.ParseFromString(kept);
  const bool b_ok = b.ParseFromString(incoming);
  if (!b_ok) return false;
  if (!a_ok) return true;
  return b.created_unix_ms() > a.created_unix_ms();
}

absl::Status CheckHeader(const MergeInput& in, const v1::ExportFile& file,
                         const MergeInput* first,
                         const v1::ExportFile* first_file) {
  if (first == nullptr) return absl::OkStatus();
  if (file.schema_version() != first_file->schema_version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        in.name, ": schema_version ", file.schema_version(), " differs from ",
        first->name, "'s ", first_file->schema_version()));
  }
  if (file.device_key() == first_file->device_key()) return absl::OkStatus();
  if (file.device_key().empty() || first_file->device_key().empty()) {
    const MergeInput& system = file.device_key().empty() ? *first : in;
    const MergeInput& full = file.device_key().empty() ? in : *first;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mix the system FindDb ", system.name,
                     " with the full export ", full.name));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot merge system FindDbs of different devices: ", first->name,
      " is for ", first_file->device_key(), ", ", in.name, " for ",
      file.device_key()));
}

}  // namespace

absl::StatusOr<v1::ExportFile> MergeExportFiles(
    const std::vector<MergeInput>& inputs, MergeStats* stats) {
  *stats = MergeStats();
  if (inputs.empty()) return absl::InvalidArgumentError("no input file");
  std::vector<v1::ExportFile> files(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A damaged input is refused before anything is merged.
    absl::StatusOr<v1::ExportFile> file =
        ParseExportFile(inputs[i].bytes, inputs[i].name);
    if (!file.ok()) return file.status();
    files[i] = *std::move(file);
    absl::Status s = CheckHeader(inputs[i], files[i], i ? &inputs[0] : nullptr,
                                 i ? &files[0] : nullptr);
    if (!s.ok()) return s;
  }
  // Ordered like an export: family, then key.
  std::map<std::pair<std::string, std::string>, std::string> merged;
  for (v1::ExportFile& file : files) {
    ++stats->files;
    for (v1::ExportEntry& e : *file.mutable_entries()) {
      ++stats->entries_in;
      auto [it, added] = merged.try_emplace({e.column_family(), e.key()},
                                            std::move(*e.mutable_value()));
      if (added) continue;
      const std::string& incoming = e.value();  // not moved: not added
      if (it->second == incoming) {
        ++stats->identical;
      } else if (e.column_family() != kFindDbFamily) {
        ++stats->conflicts;
      } else if (NewerFindRecord(it->second, incoming)) {
        it->second = incoming;
        ++stats->find_replaced;
      } else {
        ++stats->find_kept;
      }
    }
  }
  v1::ExportFile out;
  out.set_magic(std::string(kExportMagic));
  out.set_schema_version(files[0].schema_version());
  out.set_created_unix_ms(NowUnixMs());
  out.set_device_key(files[0].device_key());
  for (auto& [key, value] : merged) {
    v1::ExportEntry* e = out.add_entries();
    e->set_column_family(key.first);
    e->set_key(key.second);
    e->set_value(std::move(value));
  }
  stats->entries_out = out.entries_size();
  SealExportFile(&out);
  return out;
}

}  // namespace convtune::cli
