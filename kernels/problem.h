// The convolution problem model: 2-D and 3-D problems, validation, element
// strides, and the canonical FindDb key. Plain values; thread-compatible.
#ifndef CONVTUNE_KERNELS_PROBLEM_H_
#define CONVTUNE_KERNELS_PROBLEM_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace convtune {

// Numbering matches convtune.v1 enums.
enum class DataType : int { kFp32 = 1, kFp16 = 2, kBf16 = 3 };
enum class Layout : int { kNCHW = 1, kNHWC = 2 };  // channels first / last
enum class Direction : int {
  kForward = 1,
  kBackwardData = 2,
  kBackwardWeights = 3
};

// The three tensors of a problem, named by their forward roles: x (input),
// w (filter), y (output). Every direction reads two and writes one.
enum class Tensor : int { kX = 0, kW = 1, kY = 2 };
inline constexpr Tensor kAllTensors[] = {Tensor::kX, Tensor::kW, Tensor::kY};
// The tensor a direction writes: y (forward), x (backward data), w
// (backward weights).
Tensor OutputTensor(Direction dir);
absl::string_view TensorName(Tensor t);  // "x", "w", "y"
// One of three things kept per tensor, by tensor: ByTensor(p.output(), x, w,
// y).
template <typename T>
T& ByTensor(Tensor t, T& x, T& w, T& y) {
  return t == Tensor::kX ? x : t == Tensor::kW ? w : y;
}

int64_t ElementBytes(DataType type);
absl::string_view DataTypeName(DataType type);   // "FP32", "FP16", "BF16"
absl::string_view DirectionName(Direction dir);  // "F", "B", "W"
absl::StatusOr<DataType> ParseDataType(absl::string_view s);
absl::StatusOr<Direction> ParseDirection(absl::string_view s);

// Spatial arrays are indexed 0 = D, 1 = H, 2 = W. A 2-D problem keeps D at
// size 1, pad 0, stride 1 and dilation 1.
struct ConvProblem {
  int spatial_dims = 2;
  int64_t n = 1;
  int64_t c = 1;
  int64_t k = 1;
  std::array<int64_t, 3> in = {1, 1, 1};
  std::array<int64_t, 3> filter = {1, 1, 1};
  std::array<int64_t, 3> pad = {0, 0, 0};
  std::array<int64_t, 3> stride = {1, 1, 1};
  std::array<int64_t, 3> dilation = {1, 1, 1};
  int64_t groups = 1;
  Layout layout = Layout::kNCHW;
  DataType type = DataType::kFp32;
  Direction direction = Direction::kForward;

  // Output spatial size along axis i. Meaningful only for a valid problem.
  int64_t out(int i) const {
    return (in[i] + 2 * pad[i] - dilation[i] * (filter[i] - 1) - 1) /
               stride[i] +
           1;
  }
  int64_t c_per_group() const { return c / groups; }
  int64_t k_per_group() const { return k / groups; }
  int64_t in_spatial() const { return in[0] * in[1] * in[2]; }
  int64_t out_spatial() const { return out(0) * out(1) * out(2); }
  int64_t filter_spatial() const { return filter[0] * filter[1] * filter[2]; }
  int64_t x_elements() const { return n * c * in_spatial(); }
  int64_t w_elements() const { return k * c_per_group() * filter_spatial(); }
  int64_t y_elements() const { return n * k * out_spatial(); }
  int64_t x_bytes() const { return x_elements() * ElementBytes(type); }
  int64_t w_bytes() const { return w_elements() * ElementBytes(type); }
  int64_t y_bytes() const { return y_elements() * ElementBytes(type); }
  int64_t elements(Tensor t) const {
    return t == Tensor::kX   ? x_elements()
           : t == Tensor::kW ? w_elements()
                             : y_elements();
  }
  int64_t bytes(Tensor t) const { return elements(t) * ElementBytes(type); }
  // The direction's output tensor, and its size.
  Tensor output() const { return OutputTensor(direction); }
  int64_t output_elements() const { return elements(output()); }
  // Multiply-accumulates of the whole convolution (same in every direction).
  double macs() const {
    return static_cast<double>(n) * k * out_spatial() * c_per_group() *
           filter_spatial();
  }
  bool is_3d() const { return spatial_dims == 3; }

  friend bool operator==(const ConvProblem&, const ConvProblem&) = default;
};

// Element strides of a tensor in canonical order: (N, C, D, H, W) for x and
// y, (K, C/G, D, H, W) for w. Dense, in the problem's layout.
using Strides = std::array<int64_t, 5>;
Strides XStrides(const ConvProblem& p);
Strides WStrides(const ConvProblem& p);
Strides YStrides(const ConvProblem& p);

struct ProblemLimits {
  // Largest tensor (x, w or y) accepted, in bytes. Default: 16 GiB.
  int64_t max_tensor_bytes = int64_t{16} << 30;
};

// InvalidArgument naming the offending field ("pad_h", "groups", ...) for
// non-positive sizes, negative pads, an output size below 1, C or K not
// divisible by groups, int64 overflow, or a tensor over the byte limit.
absl::Status ValidateProblem(const ConvProblem& p,
                             const ProblemLimits& limits = {});

// The canonical key, in MIOpen's FindDb order:
//   C-H-W-FHxFW-K-OH-OW-N-PHxPW-SHxSW-DHxDW-G-LAYOUT-TYPE-DIR
// and for 3-D
//   C-D-H-W-FDxFHxFW-K-OD-OH-OW-N-PDxPHxPW-SDxSHxSW-DDxDHxDW-G-LAYOUT-TYPE-DIR
// REQUIRES: ValidateProblem(p).ok().
std::string ProblemKey(const ConvProblem& p);

// Parses a key back. InvalidArgument if malformed, inconsistent (the output
// sizes in the key disagree with the others) or the problem is invalid.
absl::StatusOr<ConvProblem> ParseProblemKey(absl::string_view key);

// A one-line human description, e.g. "fwd fp32 NCHW n1 c64 56x56 k64 3x3 ...".
std::string DescribeProblem(const ConvProblem& p);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_PROBLEM_H_
