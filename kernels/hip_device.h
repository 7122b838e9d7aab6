// The hip backend: AMD GPUs through the HIP runtime API, which is loaded with
// dlopen (libamdhip64.so.5) so that binaries run on machines without it.
// Library steps ("blas.gemm") run on rocBLAS (librocblas.so.0), also loaded
// with dlopen when present; info().blas says whether it was found.
// Thread-safe: one mutex guards the device, and every entry makes it current
// on the calling thread (hipSetDevice). Buffers must not outlive the device.
#ifndef CONVTUNE_KERNELS_HIP_DEVICE_H_
#define CONVTUNE_KERNELS_HIP_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/device.h"

namespace convtune {

class HipDevice final : public Device {
 public:
  // Unavailable, saying why, when the HIP runtime is missing, hipInit fails
  // or there is no device `ordinal`.
  static absl::StatusOr<std::unique_ptr<HipDevice>> Open(int ordinal);
  ~HipDevice() override;

  const DeviceInfo& info() const override;
  // ResourceExhausted when the device is out of memory.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) override;
  absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                            int64_t bytes) override;
  absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                              int64_t bytes) override;
  // NotFound when the step's code object is not loaded or lacks the entry,
  // or for a library step without rocBLAS; InvalidArgument for bad geometry
  // or GEMM arguments; Internal (naming the HIP error) when the kernel
  // faults, after which every call fails until Reset().
  absl::Status Launch(const v1::KernelStep& step,
                      const std::vector<void*>& buffers) override;
  absl::Status Synchronize() override;
  absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) override;
  // InvalidArgument when the driver rejects the binary.
  absl::Status LoadCodeObject(const std::string& hash,
                              const std::string& binary) override;
  bool HasCodeObject(const std::string& hash) const override;
  // Resets the device (hipDeviceReset) and re-creates the stream. Buffers
  // allocated before become invalid (freeing them is safe); loaded code objects
  // are kept as binaries and re-loaded on their next launch.
  absl::Status Reset() override;

  class Impl;

 private:
  explicit HipDevice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_HIP_DEVICE_H_
