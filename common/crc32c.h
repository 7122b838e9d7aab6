// CRC-32C (Castagnoli), the checksum of export files. Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_CRC32C_H_
#define CONVTUNE_COMMON_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace convtune {

// The CRC-32C of `data` continued from `crc` (the CRC of what came before;
// 0 to start), so that Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_CRC32C_H_
