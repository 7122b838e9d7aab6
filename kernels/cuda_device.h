// The cuda backend: NVIDIA GPUs through the CUDA driver API, which is loaded
// with dlopen (libcuda.so.1) so that binaries run on machines without it.
// Library steps ("blas.gemm") run on cuBLAS (libcublas.so.13), also loaded
// with dlopen when present; info().blas says whether it was found. cuDNN 9,
// when found, is the device's conv library (solver "cudnn"). The device is a
// GpuDevice (kernels/gpu_device.h), thread-safe as that says; its Reset()
// resets the device's primary context, which other users of it in this
// process share.
#ifndef CONVTUNE_KERNELS_CUDA_DEVICE_H_
#define CONVTUNE_KERNELS_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/gpu_device.h"

namespace convtune {

class CudaDevice {
 public:
  // Unavailable, saying why, when the driver library is missing, cuInit
  // fails, there is no device `ordinal` or its context cannot be created.
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Open(int ordinal);

  CudaDevice() = delete;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_CUDA_DEVICE_H_
