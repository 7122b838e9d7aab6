// Launch geometry and kernel parameters of a GPU plan step, shared by the
// cuda and hip backends. GPU kernels take the step's buffers as pointers,
// then its scalars as 64-bit integers, then its tensor maps by value, in
// order. Value types; not shared.
#ifndef CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_
#define CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"

namespace convtune::gpu {

struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
};

// Missing dimensions are 1. InvalidArgument for more than three dimensions,
// a zero dimension, or a block over 1024 threads.
inline absl::StatusOr<LaunchGeometry> StepGeometry(const v1::KernelStep& step) {
  LaunchGeometry g;
  if (step.grid_size() > 3 || step.block_size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step.kernel(), ": grid and block have at most 3 dimensions"));
  }
  for (int i = 0; i < step.grid_size(); ++i) g.grid[i] = step.grid(i);
  for (int i = 0; i < step.block_size(); ++i) g.block[i] = step.block(i);
  const uint64_t threads = uint64_t{g.block[0]} * g.block[1] * g.block[2];
  for (int i = 0; i < 3; ++i) {
    if (g.grid[i] == 0 || g.block[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step ", step.kernel(), ": a grid or block dimension is 0"));
    }
  }
  if (threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step.kernel(), ": ", threads,
                     " threads per block (at most 1024)"));
  }
  g.shared_bytes = step.shared_bytes();
  return g;
}

// An encoded tensor map: 128 opaque bytes, as the kernel takes it.
struct alignas(64) TensorMapBits {
  uint64_t bits[16] = {};
};

// InvalidArgument naming the step and the field unless tensor map `i` of
// `step` is well formed for `buffers` buffers: rank 3 to 5, its lists as
// long as the mode needs, sizes the tensor memory accelerator takes. The
// driver checks the rest (alignment, ranges) when it encodes the map.
inline absl::Status CheckTensorMap(const v1::KernelStep& step, int i,
                                   size_t buffers) {
  const v1::TensorMap& m = step.tensor_maps(i);
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step.kernel(), ": tensor map ", i, ": ", what));
  };
  const int rank = m.dims_size();
  if (rank < 3 || rank > 5) return bad("dims: 3 to 5 dimensions");
  if (m.buffer() < 0 || static_cast<size_t>(m.buffer()) >= buffers)
    return bad(absl::StrCat("buffer: ", m.buffer(), " is not a step buffer"));
  if (m.element_bytes() != 1 && m.element_bytes() != 2 &&
      m.element_bytes() != 4) {
    return bad("element_bytes: 1, 2 or 4");
  }
  if (m.strides_size() != rank - 1)
    return bad("strides: one per dimension after the first");
  if (m.element_strides_size() != rank)
    return bad("element_strides: one per dimension");
  for (uint32_t s : m.element_strides()) {
    if (s < 1 || s > 8) return bad("element_strides: 1 to 8");
  }
  if (m.swizzle_bytes() != 0 && m.swizzle_bytes() != 32 &&
      m.swizzle_bytes() != 64 && m.swizzle_bytes() != 128) {
    return bad("swizzle_bytes: 0, 32, 64 or 128");
  }
  if (m.mode() == v1::TensorMap::TILED) {
    if (m.box_size() != rank) return bad("box: one per dimension");
    for (uint32_t b : m.box()) {
      if (b < 1 || b > 256) return bad("box: 1 to 256 elements a dimension");
    }
    return absl::OkStatus();
  }
  if (m.mode() != v1::TensorMap::IM2COL) return bad("mode: TILED or IM2COL");
  if (m.lower_corner_size() != rank - 2 || m.upper_corner_size() != rank - 2)
    return bad("lower_corner, upper_corner: one per spatial dimension");
  if (m.channels_per_pixel() < 1 || m.channels_per_pixel() > 256)
    return bad("channels_per_pixel: 1 to 256");
  if (m.pixels_per_column() < 1 || m.pixels_per_column() > 1024)
    return bad("pixels_per_column: 1 to 1024");
  return absl::OkStatus();
}

// The parameter array for cuLaunchKernel / hipModuleLaunchKernel: each entry
// points at one 8-byte value (a device address or an int64 scalar), then at
// each encoded tensor map.
class KernelParams {
 public:
  KernelParams(const v1::KernelStep& step, const std::vector<void*>& buffers,
               std::vector<TensorMapBits> maps = {})
      : maps_(std::move(maps)) {
    values_.reserve(buffers.size() + step.scalars_size());
    for (void* b : buffers) values_.push_back(reinterpret_cast<uintptr_t>(b));
    for (int64_t s : step.scalars())
      values_.push_back(static_cast<uint64_t>(s));
    for (uint64_t& v : values_) pointers_.push_back(&v);
    for (TensorMapBits& m : maps_) pointers_.push_back(&m);
  }
  KernelParams(const KernelParams&) = delete;
  KernelParams& operator=(const KernelParams&) = delete;

  void** data() { return pointers_.empty() ? nullptr : pointers_.data(); }

 private:
  std::vector<uint64_t> values_;
  std::vector<TensorMapBits> maps_;
  std::vector<void*> pointers_;
};

}  // namespace convtune::gpu

#endif  // CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_
