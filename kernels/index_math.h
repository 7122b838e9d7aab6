// Integer index arithmetic shared by the CPU kernels and the GPU solvers'
// launch geometry. Header-only constexpr; thread-safe.
#ifndef CONVTUNE_KERNELS_INDEX_MATH_H_
#define CONVTUNE_KERNELS_INDEX_MATH_H_

#include <cstdint>
#include <limits>

namespace convtune {

// The largest element index a kernel compiled with 32-bit indices reaches.
inline constexpr int64_t kMaxIndex32 = std::numeric_limits<int32_t>::max();

// ceil(a / b) for b > 0 and a of either sign: (a + b - 1) / b is the ceiling
// only for a >= 0; below 0, division truncating toward zero already is.
constexpr int64_t CeilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_INDEX_MATH_H_
