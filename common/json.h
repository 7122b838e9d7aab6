// JSON text for the tools that print it (the CLI's --json, the benchmarks).
// Stateless.
#ifndef CONVTUNE_COMMON_JSON_H_
#define CONVTUNE_COMMON_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace convtune {

// `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_JSON_H_
