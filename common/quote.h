// Quoting what a user or a file gave in an error message: at most a short
// prefix, so that a long value cannot crowd out the error (or overrun a
// client's metadata limit). Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_QUOTE_H_
#define CONVTUNE_COMMON_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convtune {

// `s` itself when it has at most `max` characters, else its first `max`
// followed by "...".
inline std::string QuotePrefix(absl::string_view s, size_t max = 40) {
  return s.size() <= max ? std::string(s)
                         : absl::StrCat(s.substr(0, max), "...");
}

}  // namespace convtune

#endif  // CONVTUNE_COMMON_QUOTE_H_
