// The system FindDb: a read-only set of find records shipped for one device
// key, as a file "<device_key>.ctsys" (a system export, see storage/FORMAT.md)
// in a configured folder. Loaded once; immutable after; thread-safe.
#ifndef CONVTUNE_SERVER_SYSTEM_DB_H_
#define CONVTUNE_SERVER_SYSTEM_DB_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/records.pb.h"

namespace convtune {

class SystemFindDb {
 public:
  // Loads the file for `device_key` from `dir`; if there is none, the file of
  // the same device key but for the nearest compute-unit count ("-cuN").
  // NotFound if neither exists; DataLoss / InvalidArgument if the file is not
  // a system export. Records that fail validation are skipped.
  static absl::StatusOr<std::unique_ptr<SystemFindDb>> Open(
      const std::string& dir, const std::string& device_key);

  // NotFound if absent.
  absl::StatusOr<v1::FindRecord> Get(absl::string_view problem_key) const;

  // The device whose records these are, and whether it is exactly ours.
  const std::string& source_device_key() const { return source_device_key_; }
  bool exact() const { return exact_; }
  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  // Every record, by problem key.
  const absl::flat_hash_map<std::string, v1::FindRecord>& records() const {
    return records_;
  }

 private:
  std::string source_device_key_;
  bool exact_ = false;
  std::string path_;
  absl::flat_hash_map<std::string, v1::FindRecord> records_;
};

// The compute-unit count in a device key ("cpu-x86-64-v4-cu16-..." -> 16) and
// the key with it removed; -1 and the whole key if it has none.
std::pair<int, std::string> SplitComputeUnits(absl::string_view device_key);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SYSTEM_DB_H_
