// A GPU as a Device: buffers, code objects, launches and event timing over a
// backend's GpuDriver (kernels/gpu/gpu_driver.h). CudaDevice::Open and
// HipDevice::Open make one. Thread-safe: one mutex guards the context, and
// every entry makes the context current on the calling thread. Buffers must
// not outlive the device.
#ifndef CONVTUNE_KERNELS_GPU_DEVICE_H_
#define CONVTUNE_KERNELS_GPU_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "kernels/conv_library.h"
#include "kernels/device.h"
#include "kernels/gpu/gpu_driver.h"

namespace convtune {

class GpuDevice final : public Device {
 public:
  // Creates the driver's context, then its conv libraries. The context's
  // error (naming the vendor call) when it cannot be created.
  static absl::StatusOr<std::unique_ptr<GpuDevice>> Create(
      DeviceInfo info, std::unique_ptr<gpu::GpuDriver> driver);
  ~GpuDevice() override;

  const DeviceInfo& info() const override { return info_; }
  // ResourceExhausted when the device is out of memory.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) override;
  // Copies and fills: OutOfRange past the end of the buffer. Copies wait for
  // the work launched before them.
  absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                            int64_t bytes) override;
  absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                              int64_t bytes) override;
  absl::Status CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                int64_t offset, int64_t bytes) override;
  absl::Status Fill(DeviceBuffer* dst, uint32_t pattern, int element_bytes,
                    int64_t count) override;
  // NotFound when the step's code object is not loaded or lacks the entry,
  // or for a library step without its library (the BLAS, cuDNN);
  // InvalidArgument for bad geometry or GEMM arguments; Internal (naming the
  // backend's error) when the kernel faults, after which every call fails
  // until Reset().
  absl::Status Launch(const v1::KernelStep& step,
                      const std::vector<void*>& buffers) override;
  absl::Status Synchronize() override;
  absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) override;
  // InvalidArgument when the driver rejects the binary.
  absl::Status LoadCodeObject(const std::string& hash,
                              const std::string& binary) override;
  bool HasCodeObject(const std::string& hash) const override;
  // Destroys the context, resets the device and creates the context again.
  // Buffers allocated before become invalid (freeing them is safe); loaded
  // code objects are kept as binaries and re-loaded on their next launch;
  // the vendor libraries' handles are re-created on their next use.
  absl::Status Reset() override;

  // The driver's conv libraries (cuDNN on CUDA, when it was found at Open).
  std::vector<ConvLibrary*> conv_libraries() override;
  absl::Status UseStream(void* stream) override;

  // For the conv libraries: runs `fn` under the lock with the context
  // current, as every entry point does; the entry points' errors (a faulted
  // context) without running it.
  absl::Status RunInContext(const std::function<absl::Status()>& fn);

 private:
  class Buffer;

  GpuDevice(DeviceInfo info, std::unique_ptr<gpu::GpuDriver> driver);

  absl::Status CreateContext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every entry point: refuses a faulted context, then makes it current.
  absl::Status Enter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of `r` as a Status, `what` failing.
  absl::Status ToStatus(const gpu::GpuResult& r, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ToStatus(const gpu::GpuResult& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ToStatus(r, r.call);
  }
  // ToStatus that also marks the context faulted on a sticky error.
  absl::Status Check(const gpu::GpuResult& r, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Check(const gpu::GpuResult& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Check(r, r.call);
  }
  // The entry `entry` of code object `hash`, loading the module if a Reset
  // dropped it.
  absl::StatusOr<gpu::GpuFunction> Function(const std::string& hash,
                                            const std::string& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees a buffer of context `generation`.
  void Release(void* ptr, uint64_t generation);

  const DeviceInfo info_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<gpu::GpuDriver> driver_ ABSL_PT_GUARDED_BY(mu_);
  // Whether the context was created and not destroyed since.
  bool live_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped per context, so buffers of a dead context are never freed in a
  // new one (their addresses may have been handed out again).
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The sticky error that faulted the context; empty when none did.
  std::string fault_ ABSL_GUARDED_BY(mu_);
  // Code objects by hash, kept across Reset so modules can be re-loaded.
  absl::flat_hash_map<std::string, std::string> binaries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, gpu::GpuModule> modules_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, gpu::GpuFunction> functions_
      ABSL_GUARDED_BY(mu_);
  // Set once by Create; destroyed before the driver, which they call.
  std::vector<std::unique_ptr<ConvLibrary>> libraries_;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_GPU_DEVICE_H_
