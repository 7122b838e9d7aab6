// The cuda backend: NVIDIA GPUs through the CUDA driver API, which is loaded
// with dlopen (libcuda.so.1) so that binaries run on machines without it.
// Library steps ("blas.gemm") run on cuBLAS (libcublas.so.13), also loaded
// with dlopen when present; info().blas says whether it was found.
// Thread-safe: one mutex guards the context, and every entry makes the
// context current on the calling thread. Buffers must not outlive the device.
#ifndef CONVTUNE_KERNELS_CUDA_DEVICE_H_
#define CONVTUNE_KERNELS_CUDA_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/device.h"

namespace convtune {

class CudaDevice final : public Device {
 public:
  // Unavailable, saying why, when the driver library is missing, cuInit
  // fails or there is no device `ordinal`.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(int ordinal);
  ~CudaDevice() override;

  const DeviceInfo& info() const override;
  // ResourceExhausted when the device is out of memory.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) override;
  absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                            int64_t bytes) override;
  absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                              int64_t bytes) override;
  absl::Status CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                int64_t offset, int64_t bytes) override;
  absl::Status Fill(DeviceBuffer* dst, uint32_t pattern, int element_bytes,
                    int64_t count) override;
  // NotFound when the step's code object is not loaded or lacks the entry,
  // or for a library step without cuBLAS; InvalidArgument for bad geometry
  // or GEMM arguments; Internal (naming the CUDA error) when the kernel
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
  // Destroys and re-creates the context. Buffers allocated before become
  // invalid (freeing them is safe); loaded code objects are kept as binaries
  // and re-loaded on their next launch; the cuBLAS handle is re-created on
  // the next library step.
  absl::Status Reset() override;

  // cuDNN (solver "cudnn"), when libcudnn 9 was found at Open.
  std::vector<ConvLibrary*> conv_libraries() override;

  class Impl;
  class Cudnn;

 private:
  explicit CudaDevice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Cudnn> cudnn_;  // null without cuDNN
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_CUDA_DEVICE_H_
