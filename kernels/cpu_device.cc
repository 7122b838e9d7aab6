#include "kernels/cpu_device.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn_library.h"
#include "kernels/cpu/parallel.h"

extern "C" char* openblas_get_config(void);

namespace convtune {
namespace {

class HostBuffer final : public DeviceBuffer {
 public:
  HostBuffer(void* data, int64_t size) : data_(data), size_(size) {}
  ~HostBuffer() override { std::free(data_); }
  void* data() override { return data_; }
  int64_t size() const override { return size_; }

 private:
  void* data_;
  int64_t size_;
};

std::string OpenBlasVersion() {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "openblas0.3.21"
  const char* config = openblas_get_config();
  std::string s = config ? config : "openblas";
  const size_t sp = s.find(' ');
  std::string version = sp == std::string::npos
                            ? ""
                            : s.substr(sp + 1, s.find(' ', sp + 1) - sp - 1);
  return absl::StrCat("openblas", version);
}

}  // namespace

std::string CpuIsaLevel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return "x86-64-v4";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "x86-64-v3";
  if (__builtin_cpu_supports("sse4.2")) return "x86-64-v2";
  return "x86-64";
}

std::string DeviceInfo::Key() const {
  std::string key =
      absl::StrCat(BackendName(backend), "-", arch, "-cu", compute_units);
  if (!driver_version.empty()) absl::StrAppend(&key, "-drv", driver_version);
  if (!compiler_version.empty()) absl::StrAppend(&key, "-", compiler_version);
  if (!libraries.empty()) absl::StrAppend(&key, "-", libraries);
  return key;
}

CpuDevice::CpuDevice() {
  info_.backend = v1::CPU;
  info_.arch = CpuIsaLevel();
  info_.compute_units = cpu::NumThreads();
  info_.memory_bytes =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  info_.compiler_version = OpenBlasVersion();
  if (ConvLibrary* onednn = cpu::Onednn(); onednn != nullptr) {
    libraries_.push_back(onednn);
    info_.libraries = onednn->version();
  }
  // Nominal figures for estimates: two FMA pipes of the widest vector at an
  // assumed 2.5 GHz, and a few GB/s of DRAM bandwidth per core.
  const int lanes = info_.arch == "x86-64-v4"   ? 16
                    : info_.arch == "x86-64-v3" ? 8
                                                : 4;
  info_.peak_gflops = info_.compute_units * 2.0 * 2 * lanes * 2.5;
  info_.memory_gbps = std::min(8.0 * info_.compute_units, 100.0);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> CpuDevice::Allocate(
    int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  // 64-byte alignment suits AVX-512 loads; aligned_alloc needs a multiple.
  const int64_t rounded = ((bytes + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " host bytes"));
  }
  return std::make_unique<HostBuffer>(p, bytes);
}

absl::Status CpuDevice::CopyToDevice(DeviceBuffer* dst, const void* src,
                                     int64_t bytes) {
  if (bytes > dst->size())
    return absl::OutOfRangeError("copy larger than the buffer");
  std::memcpy(dst->data(), src, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyFromDevice(void* dst, const DeviceBuffer& src,
                                       int64_t bytes) {
  if (bytes > src.size())
    return absl::OutOfRangeError("copy larger than the buffer");
  std::memcpy(dst, const_cast<DeviceBuffer&>(src).data(), bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                         int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > src.size()) {
    return absl::OutOfRangeError("copy past the end of the buffer");
  }
  std::memcpy(
      dst,
      static_cast<const char*>(const_cast<DeviceBuffer&>(src).data()) + offset,
      bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::Fill(DeviceBuffer* dst, uint32_t pattern,
                             int element_bytes, int64_t count) {
  if ((element_bytes != 2 && element_bytes != 4) || count < 0 ||
      count * element_bytes > dst->size()) {
    return absl::OutOfRangeError("fill past the end of the buffer");
  }
  if (element_bytes == 4) {
    std::fill_n(static_cast<uint32_t*>(dst->data()), count, pattern);
  } else {
    std::fill_n(static_cast<uint16_t*>(dst->data()), count,
                static_cast<uint16_t>(pattern));
  }
  return absl::OkStatus();
}

absl::Status CpuDevice::Launch(const v1::KernelStep& step,
                               const std::vector<void*>& buffers) {
  cpu::CpuKernelFn fn = cpu::FindCpuKernel(step.kernel());
  if (fn == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no CPU kernel named '", step.kernel(), "'"));
  }
  return fn(step, buffers);
}

absl::StatusOr<double> CpuDevice::TimeMs(
    const std::function<absl::Status()>& work) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = work();
  const auto end = std::chrono::steady_clock::now();
  if (!s.ok()) return s;
  return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace convtune
