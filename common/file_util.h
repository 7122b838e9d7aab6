// Whole-file reads and crash-safe whole-file writes. Stateless; thread-safe
// (two writers of one path race, and the last rename wins).
#ifndef CONVTUNE_COMMON_FILE_UTIL_H_
#define CONVTUNE_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convtune {

// Writes `bytes` to `path` so a reader sees the old file or the new one,
// never a part: a temporary file next to it, fsync, rename, fsync the folder.
// Errors carry the errno's code and name the path.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view bytes);

// The whole file. NotFound if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_FILE_UTIL_H_
