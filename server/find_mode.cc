#include "server/find_mode.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace convtune {
namespace {

constexpr FindMode kModes[] = {FindMode::kNormal,        FindMode::kFast,
                               FindMode::kHybrid,        FindMode::kDynamicHybrid,
                               FindMode::kTrustVerify,   FindMode::kTrustVerifyFull};

absl::Status Bad(absl::string_view field, absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", text,
      "' is not a find mode; use NORMAL (1), FAST (2), HYBRID (3), DYNAMIC_HYBRID (5), "
      "TRUST_VERIFY (6) or TRUST_VERIFY_FULL (7); 4 is reserved"));
}

}  // namespace

absl::string_view FindModeName(FindMode mode) {
  switch (mode) {
    case FindMode::kNormal: return "NORMAL";
    case FindMode::kFast: return "FAST";
    case FindMode::kHybrid: return "HYBRID";
    case FindMode::kDynamicHybrid: return "DYNAMIC_HYBRID";
    case FindMode::kTrustVerify: return "TRUST_VERIFY";
    case FindMode::kTrustVerifyFull: return "TRUST_VERIFY_FULL";
  }
  return "?";
}

absl::StatusOr<FindMode> FindModeFromNumber(int number, absl::string_view field) {
  for (FindMode m : kModes) {
    if (static_cast<int>(m) == number) return m;
  }
  return Bad(field, absl::StrCat(number));
}

absl::StatusOr<FindMode> ParseFindMode(absl::string_view text, absl::string_view field) {
  const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  int number;
  if (absl::SimpleAtoi(upper, &number)) {
    absl::StatusOr<FindMode> m = FindModeFromNumber(number, field);
    if (!m.ok()) return Bad(field, text);
    return m;
  }
  for (FindMode m : kModes) {
    if (FindModeName(m) == upper) return m;
  }
  return Bad(field, text);
}

absl::StatusOr<FindMode> FindModeFromEnvironment() {
  const char* env = std::getenv("CONVTUNE_FIND_MODE");
  if (env == nullptr || *env == '\0') return kDefaultFindMode;
  return ParseFindMode(env, "CONVTUNE_FIND_MODE");
}

}  // namespace convtune
