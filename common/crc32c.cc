#include "common/crc32c.h"

#include <array>

namespace convtune {
namespace {

// The reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82f63b78u;

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) {
      c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    }
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  uint32_t c = ~crc;
  for (unsigned char byte : data) c = kTable[(c ^ byte) & 0xff] ^ (c >> 8);
  return ~c;
}

}  // namespace convtune
