// Find modes, numbered and named as in the specification (4 is reserved).
// Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_FIND_MODE_H_
#define CONVTUNE_SERVER_FIND_MODE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convtune {

enum class FindMode : int {
  kNormal = 1,           // time every applicable solver; ignore the FindDb
  kFast = 2,             // FindDb, else the immediate-mode fallback (no timing)
  kHybrid = 3,           // FindDb, else a full find
  kDynamicHybrid = 5,    // FindDb, else a find over dynamic solvers only
  kTrustVerify = 6,      // user FindDb; system FindDb re-timed; else bounded tuning
  kTrustVerifyFull = 7,  // as kTrustVerify, tuning unbounded
};

inline constexpr FindMode kDefaultFindMode = FindMode::kDynamicHybrid;

absl::string_view FindModeName(FindMode mode);  // "NORMAL", ...

// Accepts a name (any case) or a number. InvalidArgument naming `field` for
// 4 (reserved), 0 and anything unknown.
absl::StatusOr<FindMode> ParseFindMode(absl::string_view text, absl::string_view field);
// The same for a number from the wire.
absl::StatusOr<FindMode> FindModeFromNumber(int number, absl::string_view field);

// The daemon's default: $CONVTUNE_FIND_MODE if set (an error if it is bad),
// else kDefaultFindMode.
absl::StatusOr<FindMode> FindModeFromEnvironment();

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_MODE_H_
