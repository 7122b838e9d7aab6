// The device runtime boundary: buffers, kernel launches and timing on one
// compute device. Backends: cpu (always), cuda and hip (when built and
// present). Implementations are thread-safe unless they say otherwise; timing
// callers serialize per device (the daemon's timing queue does).
#ifndef CONVTUNE_KERNELS_DEVICE_H_
#define CONVTUNE_KERNELS_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/vocabulary.h"
#include "convtune/v1/plan.pb.h"

namespace convtune {

class ConvLibrary;

struct DeviceInfo {
  v1::Backend backend = v1::BACKEND_UNSPECIFIED;  // CPU, CUDA or HIP
  std::string arch;       // "x86-64-v4", "sm_90", "gfx90a"
  int compute_units = 0;  // hardware threads, SMs or CUs
  int64_t memory_bytes = 0;
  std::string driver_version;  // empty on the CPU
  std::string
      compiler_version;  // the kernel compiler / BLAS the timings depend on
  // The vendor BLAS that runs library steps ("blas.gemm") on a GPU:
  // "cublas13.1.0", "rocblas2.45.0". Empty when none was found (and on the
  // CPU): the device then runs no library step. Not part of Key().
  std::string blas;
  // The vendor convolution libraries the device runs as solvers, as their
  // versions ("onednn2.6.3", "cudnn9.19.0"), "+"-joined; empty when none.
  // Part of Key(): their engines' timings depend on them.
  std::string libraries;
  // Nominal fp32 peak and memory bandwidth, for estimates only.
  double peak_gflops = 0;
  double memory_gbps = 0;

  // Scopes every stored record: "cpu-x86-64-v4-cu2-openblas0.3.21".
  std::string Key() const;
};

// A block of device memory. Owned by the caller of Device::Allocate.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual void* data() = 0;
  virtual int64_t size() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceInfo& info() const = 0;

  // ResourceExhausted when the memory is not available.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) = 0;
  virtual absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                                    int64_t bytes) = 0;
  virtual absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                                      int64_t bytes) = 0;
  // Copies `bytes` starting `offset` bytes into `src` (a few elements of a
  // large tensor). OutOfRange past its end. Default: through a host copy of
  // the whole range before it.
  virtual absl::Status CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                        int64_t offset, int64_t bytes);
  // Sets the first `count` elements of `element_bytes` (2 or 4) bytes each to
  // `pattern` (a NaN, to poison an output). Ordered before later launches.
  // Default: a host pattern copied over.
  virtual absl::Status Fill(DeviceBuffer* dst, uint32_t pattern,
                            int element_bytes, int64_t count);

  // Runs one plan step. `buffers[i]` is the resolved address of
  // step.buffers(i) (role base + offset). NotFound for an unknown kernel,
  // Internal if the kernel fails.
  virtual absl::Status Launch(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) = 0;

  // Waits for all launched work.
  virtual absl::Status Synchronize() = 0;

  // Milliseconds that `work` (which launches) takes on the device, measured
  // with device events on GPUs and a steady clock on the CPU.
  virtual absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) = 0;

  // GPU backends: makes a compiled code object available to Launch under its
  // hash. Loading a hash twice is a no-op. The CPU has no code objects.
  virtual absl::Status LoadCodeObject(const std::string& hash,
                                      const std::string& binary) {
    return absl::UnimplementedError(absl::StrCat(
        BackendName(info().backend), " devices run built-in kernels only"));
  }
  virtual bool HasCodeObject(const std::string& hash) const { return false; }

  // GPU backends: tears down and re-creates the device context after a
  // kernel fault left it unusable. Buffers allocated before are invalid
  // afterwards. The CPU has nothing to reset.
  virtual absl::Status Reset() { return absl::OkStatus(); }

  // The vendor convolution libraries whose steps Launch runs (oneDNN on the
  // CPU, cuDNN on CUDA), owned by the device; empty when none was found.
  virtual std::vector<ConvLibrary*> conv_libraries() { return {}; }

  // GPU backends: later launches, fills, timings, library steps and
  // Synchronize go on `stream` (a CUstream / hipStream_t of the device's
  // context, which the caller keeps alive), until called again; null: the
  // device's own stream. Unimplemented for a non-null stream on the CPU.
  virtual absl::Status UseStream(void* stream) {
    if (stream == nullptr) return absl::OkStatus();
    return absl::UnimplementedError(
        absl::StrCat(BackendName(info().backend), " devices have no streams"));
  }
};

// A Device that forwards every call to another, so that a test overrides only
// what it injects (a fault, a different DeviceInfo). As thread-safe as the
// target, which must outlive the wrapper.
class DeviceWrapper : public Device {
 public:
  explicit DeviceWrapper(Device* target) : target_(target) {}

  Device* target() const { return target_; }

  const DeviceInfo& info() const override { return target_->info(); }
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) override {
    return target_->Allocate(bytes);
  }
  absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                            int64_t bytes) override {
    return target_->CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                              int64_t bytes) override {
    return target_->CopyFromDevice(dst, src, bytes);
  }
  absl::Status CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                int64_t offset, int64_t bytes) override {
    return target_->CopyFromDeviceAt(dst, src, offset, bytes);
  }
  absl::Status Fill(DeviceBuffer* dst, uint32_t pattern, int element_bytes,
                    int64_t count) override {
    return target_->Fill(dst, pattern, element_bytes, count);
  }
  absl::Status Launch(const v1::KernelStep& step,
                      const std::vector<void*>& buffers) override {
    return target_->Launch(step, buffers);
  }
  absl::Status Synchronize() override { return target_->Synchronize(); }
  absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) override {
    return target_->TimeMs(work);
  }
  absl::Status LoadCodeObject(const std::string& hash,
                              const std::string& binary) override {
    return target_->LoadCodeObject(hash, binary);
  }
  bool HasCodeObject(const std::string& hash) const override {
    return target_->HasCodeObject(hash);
  }
  absl::Status Reset() override { return target_->Reset(); }
  std::vector<ConvLibrary*> conv_libraries() override {
    return target_->conv_libraries();
  }
  absl::Status UseStream(void* stream) override {
    return target_->UseStream(stream);
  }

 private:
  Device* const target_;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_DEVICE_H_
