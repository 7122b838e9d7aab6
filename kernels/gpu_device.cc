#include "kernels/gpu_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/launch_args.h"

namespace convtune {
namespace {

void* Address(const DeviceBuffer& b) {
  return const_cast<DeviceBuffer&>(b).data();
}

}  // namespace

class GpuDevice::Buffer final : public DeviceBuffer {
 public:
  Buffer(GpuDevice* device, void* ptr, int64_t size, uint64_t generation)
      : device_(device), ptr_(ptr), size_(size), generation_(generation) {}
  ~Buffer() override { device_->Release(ptr_, generation_); }
  void* data() override { return ptr_; }
  int64_t size() const override { return size_; }

 private:
  GpuDevice* const device_;
  void* const ptr_;
  const int64_t size_;
  const uint64_t generation_;
};

absl::StatusOr<std::unique_ptr<GpuDevice>> GpuDevice::Create(
    DeviceInfo info, std::unique_ptr<gpu::GpuDriver> driver) {
  auto device = std::unique_ptr<GpuDevice>(
      new GpuDevice(std::move(info), std::move(driver)));
  absl::MutexLock lock(&device->mu_);
  RETURN_IF_ERROR(device->CreateContext());
  device->libraries_ = device->driver_->MakeConvLibraries(device.get());
  return device;
}

GpuDevice::GpuDevice(DeviceInfo info, std::unique_ptr<gpu::GpuDriver> driver)
    : info_(std::move(info)), driver_(std::move(driver)) {}

GpuDevice::~GpuDevice() {
  libraries_.clear();
  absl::MutexLock lock(&mu_);
  live_ = false;
  driver_->DestroyContext(/*faulted=*/!fault_.empty(), /*reset=*/false);
}

absl::Status GpuDevice::CreateContext() {
  RETURN_IF_ERROR(ToStatus(driver_->CreateContext()));
  ++generation_;
  fault_.clear();
  live_ = true;
  return absl::OkStatus();
}

absl::Status GpuDevice::Enter() {
  if (!fault_.empty()) {
    return absl::InternalError(absl::StrCat(driver_->context_name(), " of ",
                                            info_.Key(), " faulted (", fault_,
                                            "); Reset() the device"));
  }
  if (!live_) {
    return absl::InternalError(
        absl::StrCat(driver_->context_name(), " is gone; Reset() the device"));
  }
  return ToStatus(driver_->MakeCurrent());
}

absl::Status GpuDevice::ToStatus(const gpu::GpuResult& r,
                                 absl::string_view what) const {
  if (r.ok()) return absl::OkStatus();
  const gpu::GpuError e = driver_->DescribeError(r.code);
  return absl::Status(e.status_code, absl::StrCat(what, ": ", e.name));
}

absl::Status GpuDevice::Check(const gpu::GpuResult& r, absl::string_view what) {
  if (r.ok()) return absl::OkStatus();
  const gpu::GpuError e = driver_->DescribeError(r.code);
  if (!e.sticky) {
    return absl::Status(e.status_code, absl::StrCat(what, ": ", e.name));
  }
  fault_ = e.name;
  return absl::InternalError(
      absl::StrCat(what, ": ", fault_, " (kernel fault; the ",
                   driver_->context_name(), " must be Reset)"));
}

void GpuDevice::Release(void* ptr, uint64_t generation) {
  absl::MutexLock lock(&mu_);
  // A buffer of an earlier context went with it.
  if (generation != generation_ || !live_) return;
  driver_->MakeCurrent();
  driver_->Free(ptr);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> GpuDevice::Allocate(
    int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  void* ptr = nullptr;
  // A zero-byte request still gets a distinct address.
  const gpu::GpuResult r =
      driver_->Alloc(bytes == 0 ? 1 : static_cast<size_t>(bytes), &ptr);
  if (!r.ok()) {
    return Check(
        r, absl::StrCat(r.call, "(", bytes, " bytes on ", info_.Key(), ")"));
  }
  return std::make_unique<Buffer>(this, ptr, bytes, generation_);
}

absl::Status GpuDevice::CopyToDevice(DeviceBuffer* dst, const void* src,
                                     int64_t bytes) {
  if (bytes < 0 || bytes > dst->size())
    return absl::OutOfRangeError("copy larger than the buffer");
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  // Orders the copy after the kernels already launched on the stream.
  RETURN_IF_ERROR(Check(driver_->Synchronize(), "kernel execution"));
  return Check(driver_->CopyHtoD(dst->data(), src, bytes));
}

absl::Status GpuDevice::CopyFromDevice(void* dst, const DeviceBuffer& src,
                                       int64_t bytes) {
  if (bytes < 0 || bytes > src.size())
    return absl::OutOfRangeError("copy larger than the buffer");
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  RETURN_IF_ERROR(Check(driver_->Synchronize(), "kernel execution"));
  return Check(driver_->CopyDtoH(dst, Address(src), bytes));
}

absl::Status GpuDevice::CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                         int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > src.size()) {
    return absl::OutOfRangeError("copy past the end of the buffer");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  RETURN_IF_ERROR(Check(driver_->Synchronize(), "kernel execution"));
  return Check(driver_->CopyDtoH(
      dst, static_cast<const char*>(Address(src)) + offset, bytes));
}

absl::Status GpuDevice::Fill(DeviceBuffer* dst, uint32_t pattern,
                             int element_bytes, int64_t count) {
  if ((element_bytes != 2 && element_bytes != 4) || count < 0 ||
      count * element_bytes > dst->size()) {
    return absl::OutOfRangeError("fill past the end of the buffer");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  return Check(driver_->Memset(dst->data(), pattern, element_bytes, count));
}

absl::StatusOr<gpu::GpuFunction> GpuDevice::Function(const std::string& hash,
                                                     const std::string& entry) {
  const std::string key = absl::StrCat(hash, "/", entry);
  if (auto it = functions_.find(key); it != functions_.end()) return it->second;
  auto mod = modules_.find(hash);
  if (mod == modules_.end()) {
    auto bin = binaries_.find(hash);
    if (bin == binaries_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "step ", entry, ": code object ", hash.empty() ? "(none)" : hash,
          " is not loaded on ", info_.Key()));
    }
    gpu::GpuModule m = nullptr;
    RETURN_IF_ERROR(Check(driver_->LoadModule(bin->second, &m)));
    mod = modules_.emplace(hash, m).first;
  }
  gpu::GpuFunction fn = nullptr;
  const gpu::GpuResult r = driver_->GetFunction(mod->second, entry, &fn);
  if (!r.ok()) return Check(r, absl::StrCat(r.call, "(", entry, ")"));
  functions_.emplace(key, fn);
  return fn;
}

absl::Status GpuDevice::Launch(const v1::KernelStep& step,
                               const std::vector<void*>& buffers) {
  if (gpu::IsLibraryStep(step)) {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(Enter());
    return driver_->RunLibraryStep(step, buffers);
  }
  ASSIGN_OR_RETURN(gpu::LaunchGeometry g, gpu::StepGeometry(step));
  for (int i = 0; i < step.tensor_maps_size(); ++i)
    RETURN_IF_ERROR(gpu::CheckTensorMap(step, i, buffers.size()));
  std::vector<gpu::TensorMapBits> maps(step.tensor_maps_size());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  for (int i = 0; i < step.tensor_maps_size(); ++i) {
    const v1::TensorMap& m = step.tensor_maps(i);
    absl::Status s = driver_->EncodeTensorMap(m, buffers[m.buffer()], &maps[i]);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("step ", step.kernel(), ": tensor map ", i,
                                 ": ", s.message()));
    }
  }
  gpu::KernelParams params(step, buffers, std::move(maps));
  ASSIGN_OR_RETURN(gpu::GpuFunction fn,
                   Function(step.code_object_hash(), step.kernel()));
  const gpu::GpuResult r = driver_->Launch(fn, g, params.data());
  if (r.ok()) return absl::OkStatus();
  // The shared memory is named: a launch may fail for asking too much.
  std::string what = absl::StrCat(r.call, "(", step.kernel());
  if (g.shared_bytes > 0) {
    absl::StrAppend(&what, ", ", g.shared_bytes, " bytes of shared memory");
  }
  absl::StrAppend(&what, ")");
  return Check(r, what);
}

absl::Status GpuDevice::Synchronize() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  return Check(driver_->Synchronize(), "kernel execution");
}

absl::StatusOr<double> GpuDevice::TimeMs(
    const std::function<absl::Status()>& work) {
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(Enter());
    RETURN_IF_ERROR(Check(driver_->RecordEvent(gpu::TimingEvent::kStart)));
  }
  // `work` launches through this device, which takes the lock itself.
  absl::Status s = work();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  RETURN_IF_ERROR(Check(driver_->RecordEvent(gpu::TimingEvent::kStop)));
  RETURN_IF_ERROR(Check(driver_->SynchronizeStop(), "kernel execution"));
  if (!s.ok()) return s;
  float ms = 0;
  RETURN_IF_ERROR(Check(driver_->ElapsedMs(&ms)));
  return static_cast<double>(ms);
}

absl::Status GpuDevice::LoadCodeObject(const std::string& hash,
                                       const std::string& binary) {
  if (hash.empty() || binary.empty()) {
    return absl::InvalidArgumentError(
        "LoadCodeObject: empty hash or code object");
  }
  absl::MutexLock lock(&mu_);
  if (binaries_.contains(hash)) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  // Loaded now, not lazily, so a bad binary is reported to the builder.
  gpu::GpuModule m = nullptr;
  const gpu::GpuResult r = driver_->LoadModule(binary, &m);
  if (!r.ok()) return Check(r, absl::StrCat(r.call, "(", hash, ")"));
  modules_.emplace(hash, m);
  binaries_.emplace(hash, binary);
  return absl::OkStatus();
}

bool GpuDevice::HasCodeObject(const std::string& hash) const {
  absl::MutexLock lock(&mu_);
  return binaries_.contains(hash);
}

absl::Status GpuDevice::Reset() {
  absl::MutexLock lock(&mu_);
  live_ = false;
  // Modules and functions die with the context; binaries_ re-loads them.
  modules_.clear();
  functions_.clear();
  RETURN_IF_ERROR(ToStatus(
      driver_->DestroyContext(/*faulted=*/!fault_.empty(), /*reset=*/true)));
  return CreateContext();
}

absl::Status GpuDevice::UseStream(void* stream) {
  absl::MutexLock lock(&mu_);
  driver_->SetStream(stream);
  return absl::OkStatus();
}

std::vector<ConvLibrary*> GpuDevice::conv_libraries() {
  std::vector<ConvLibrary*> out;
  for (const std::unique_ptr<ConvLibrary>& library : libraries_) {
    out.push_back(library.get());
  }
  return out;
}

absl::Status GpuDevice::RunInContext(const std::function<absl::Status()>& fn) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Enter());
  return fn();
}

}  // namespace convtune
