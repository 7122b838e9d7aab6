// The hip backend: AMD GPUs through the HIP runtime API, which is loaded with
// dlopen (libamdhip64.so.5) so that binaries run on machines without it.
// Library steps ("blas.gemm") run on rocBLAS (librocblas.so.0), also loaded
// with dlopen when present; info().blas says whether it was found. The
// device is a GpuDevice (kernels/gpu_device.h), thread-safe as that says;
// its context is the device itself (hipSetDevice), and its Reset() resets
// the device (hipDeviceReset).
#ifndef CONVTUNE_KERNELS_HIP_DEVICE_H_
#define CONVTUNE_KERNELS_HIP_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/gpu_device.h"

namespace convtune {

class HipDevice {
 public:
  // Unavailable, saying why, when the HIP runtime is missing, hipInit fails,
  // there is no device `ordinal` or it cannot be set up.
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Open(int ordinal);

  HipDevice() = delete;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_HIP_DEVICE_H_
