// The CPU backend: host buffers and the built-in CPU kernels. Always present.
// Thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_DEVICE_H_
#define CONVTUNE_KERNELS_CPU_DEVICE_H_

#include <memory>
#include <vector>

#include "kernels/device.h"

namespace convtune {

class CpuDevice final : public Device {
 public:
  CpuDevice();

  const DeviceInfo& info() const override { return info_; }
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
  absl::Status Launch(const v1::KernelStep& step,
                      const std::vector<void*>& buffers) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) override;
  // oneDNN, when convtune was built with it.
  std::vector<ConvLibrary*> conv_libraries() override { return libraries_; }

 private:
  DeviceInfo info_;
  std::vector<ConvLibrary*> libraries_;
};

// The x86-64 micro-architecture level of this CPU ("x86-64-v4", ...).
std::string CpuIsaLevel();

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_CPU_DEVICE_H_
