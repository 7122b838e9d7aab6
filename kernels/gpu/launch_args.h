// Launch geometry and kernel parameters of a GPU plan step, shared by the
// cuda and hip backends. GPU kernels take the step's buffers as pointers,
// then its scalars as 64-bit integers, in order. Value types; not shared.
#ifndef CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_
#define CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

// The parameter array for cuLaunchKernel / hipModuleLaunchKernel: each entry
// points at one 8-byte value (a device address or an int64 scalar).
class KernelParams {
 public:
  KernelParams(const v1::KernelStep& step, const std::vector<void*>& buffers) {
    values_.reserve(buffers.size() + step.scalars_size());
    for (void* b : buffers) values_.push_back(reinterpret_cast<uintptr_t>(b));
    for (int64_t s : step.scalars())
      values_.push_back(static_cast<uint64_t>(s));
    for (uint64_t& v : values_) pointers_.push_back(&v);
  }
  KernelParams(const KernelParams&) = delete;
  KernelParams& operator=(const KernelParams&) = delete;

  void** data() { return pointers_.empty() ? nullptr : pointers_.data(); }

 private:
  std::vector<uint64_t> values_;
  std::vector<void*> pointers_;
};

}  // namespace convtune::gpu

#endif  // CONVTUNE_KERNELS_GPU_LAUNCH_ARGS_H_
