// SHA-256 (FIPS 180-4), for content-addressed kernel cache keys. Stateless;
// thread-safe.
#ifndef CONVTUNE_KERNELS_GPU_SHA256_H_
#define CONVTUNE_KERNELS_GPU_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace convtune {

// The digest of `data` as 64 lower-case hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_GPU_SHA256_H_
