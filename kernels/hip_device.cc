#include "kernels/hip_device.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "kernels/dynamic_library.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/launch_args.h"

#if CONVTUNE_HAVE_HIP_HEADERS
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#endif

namespace convtune {

#if CONVTUNE_HAVE_HIP_HEADERS
namespace {

// clang-format off
#define CT_HIP_FUNCTIONS(X)  \
  X(hipInit)                 \
  X(hipDriverGetVersion)     \
  X(hipGetDeviceCount)       \
  X(hipSetDevice)            \
  X(hipDeviceGetAttribute)   \
  X(hipDeviceTotalMem)       \
  X(hipGetDeviceProperties)  \
  X(hipDeviceReset)          \
  X(hipStreamCreate)         \
  X(hipStreamDestroy)        \
  X(hipStreamSynchronize)    \
  X(hipFree)                 \
  X(hipMemcpyHtoD)           \
  X(hipMemcpyDtoH)           \
  X(hipModuleLoadData)       \
  X(hipModuleGetFunction)    \
  X(hipModuleLaunchKernel)   \
  X(hipEventCreate)          \
  X(hipEventDestroy)         \
  X(hipEventRecord)          \
  X(hipEventSynchronize)     \
  X(hipEventElapsedTime)     \
  X(hipGetErrorName)
// clang-format on

struct HipApi {
#define CT_DECLARE(fn) decltype(&::fn) fn##_ = nullptr;
  CT_HIP_FUNCTIONS(CT_DECLARE)
#undef CT_DECLARE
  // The C++ header adds a template overload of hipMalloc.
  hipError_t (*hipMalloc_)(void**, size_t) = nullptr;
};

constexpr char kHipLibrary[] = "libamdhip64.so.5";

// Loaded once per process and never unloaded.
absl::StatusOr<const HipApi*> LoadRuntime() {
  static const absl::StatusOr<const HipApi*>* const api = []() {
    using Result = absl::StatusOr<const HipApi*>;
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open({kHipLibrary});
    if (!lib.ok()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("no HIP runtime (", kHipLibrary,
                       " not found: ", lib.status().message(), ")")));
    }
    auto* t = new HipApi;
#define CT_LOAD(fn) lib->Require(&t->fn##_, #fn);
    CT_HIP_FUNCTIONS(CT_LOAD)
    CT_LOAD(hipMalloc)
#undef CT_LOAD
    if (!lib->missing().empty()) {
      return new Result(absl::UnavailableError(absl::StrCat(
          "HIP runtime ", kHipLibrary, " lacks ", lib->missing())));
    }
    return new Result(t);
  }();
  return *api;
}

// rocBLAS, for library steps: its C ABI as rocblas-types.h and
// rocblas-functions.h define it, declared here so that its headers are not
// needed to build. rocblas_int is 32-bit (the standard, non-ILP64 build),
// rocblas_stride 64-bit, and the enums are passed as int with these values:
constexpr int kRocblasSuccess = 0;               // rocblas_status_success
constexpr int kRocblasOperationNone = 111;       // rocblas_operation_none
constexpr int kRocblasOperationTranspose = 112;  // rocblas_operation_transpose
constexpr int kRocblasF16 = 150;                 // rocblas_datatype_f16_r
constexpr int kRocblasF32 = 151;                 // rocblas_datatype_f32_r
constexpr int kRocblasBf16 = 168;                // rocblas_datatype_bf16_r
constexpr int kRocblasGemmAlgoStandard = 0;      // rocblas_gemm_algo_standard
using RocblasHandle = struct RocblasHandleOpaque*;

struct RocblasApi {
  int (*create_handle)(RocblasHandle*) = nullptr;
  int (*destroy_handle)(RocblasHandle) = nullptr;
  int (*set_stream)(RocblasHandle, hipStream_t) = nullptr;
  int (*get_version_string)(char*, size_t) = nullptr;
  // D = alpha op(A) op(B) + beta C, column-major; C and D may be one matrix.
  int (*gemm_strided_batched_ex)(
      RocblasHandle handle, int trans_a, int trans_b, int32_t m, int32_t n,
      int32_t k, const void* alpha, const void* a, int a_type, int32_t lda,
      int64_t stride_a, const void* b, int b_type, int32_t ldb,
      int64_t stride_b, const void* beta, const void* c, int c_type,
      int32_t ldc, int64_t stride_c, void* d, int d_type, int32_t ldd,
      int64_t stride_d, int32_t batch_count, int compute_type, int algo,
      int32_t solution_index, uint32_t flags) = nullptr;
  std::string version;  // "rocblas2.45.0.33575"
};

// ROCm 5's library (the HIP runtime loaded above is ROCm 5's), else the
// unversioned name.
constexpr const char* kRocblasLibraries[] = {"librocblas.so.0",
                                             "librocblas.so"};

absl::StatusOr<const RocblasApi*> LoadRocblas() {
  static const absl::StatusOr<const RocblasApi*>* const api = []() {
    using Result = absl::StatusOr<const RocblasApi*>;
    absl::StatusOr<DynamicLibrary> lib =
        DynamicLibrary::Open(kRocblasLibraries);
    if (!lib.ok()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("no rocBLAS: ", lib.status().message())));
    }
    auto* t = new RocblasApi;
    lib->Require(&t->create_handle, "rocblas_create_handle");
    lib->Require(&t->destroy_handle, "rocblas_destroy_handle");
    lib->Require(&t->set_stream, "rocblas_set_stream");
    lib->Require(&t->get_version_string, "rocblas_get_version_string");
    lib->Require(&t->gemm_strided_batched_ex,
                 "rocblas_gemm_strided_batched_ex");
    if (!lib->missing().empty()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("rocBLAS lacks ", lib->missing())));
    }
    char buf[256] = {};
    if (t->get_version_string(buf, sizeof(buf)) != kRocblasSuccess) {
      return new Result(
          absl::UnavailableError("rocBLAS does not report its version"));
    }
    // "2.45.0.33575-a5a7a3d4" -> "rocblas2.45.0.33575"
    const std::string v(buf, strnlen(buf, sizeof(buf)));
    t->version = absl::StrCat("rocblas", v.substr(0, v.find('-')));
    return new Result(t);
  }();
  return *api;
}

// rocblas_status values 1..13 (rocblas-types.h): 5 is a failed allocation;
// 1, 3, 4 and 11 are bad arguments; 2 means not implemented for these types.
absl::Status RocblasStatus(int r, absl::string_view what) {
  if (r == kRocblasSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": rocblas_status ", r);
  switch (r) {
    case 5:
      return absl::ResourceExhaustedError(msg);
    case 1:
    case 2:
    case 3:
    case 4:
    case 11:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

int RocblasType(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return kRocblasF32;
    case DataType::kFp16:
      return kRocblasF16;
    case DataType::kBf16:
      return kRocblasBf16;
  }
  return kRocblasF32;
}

std::string ErrorName(const HipApi& api, hipError_t r) {
  const char* name = api.hipGetErrorName_(r);
  return name != nullptr ? name
                         : absl::StrCat("hipError_t ", static_cast<int>(r));
}

// Errors after which the device is unusable until it is reset.
bool IsSticky(hipError_t r) {
  switch (r) {
    case hipErrorIllegalAddress:
    case hipErrorLaunchTimeOut:
    case hipErrorAssert:
    case hipErrorLaunchFailure:
      return true;
    default:
      return false;
  }
}

absl::Status HipStatus(const HipApi& api, hipError_t r,
                       absl::string_view what) {
  if (r == hipSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", ErrorName(api, r));
  switch (r) {
    case hipErrorOutOfMemory:
      return absl::ResourceExhaustedError(msg);
    case hipErrorNotFound:
      return absl::NotFoundError(msg);
    case hipErrorInvalidImage:
    case hipErrorNoBinaryForGpu:
    case hipErrorInvalidKernelFile:
    case hipErrorSharedObjectInitFailed:
    case hipErrorInvalidValue:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace

class HipDevice::Impl {
 public:
  Impl(const HipApi* api, int ordinal, DeviceInfo info, const RocblasApi* blas,
       std::string no_blas)
      : api_(api),
        ordinal_(ordinal),
        info_(std::move(info)),
        blas_(blas),
        no_blas_(std::move(no_blas)) {}
  ~Impl() {
    absl::MutexLock lock(&mu_);
    DestroyStream();
  }

  absl::Status CreateStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RETURN_IF_ERROR(
        HipStatus(*api_, api_->hipSetDevice_(ordinal_), "hipSetDevice"));
    RETURN_IF_ERROR(
        HipStatus(*api_, api_->hipStreamCreate_(&stream_), "hipStreamCreate"));
    RETURN_IF_ERROR(
        HipStatus(*api_, api_->hipEventCreate_(&start_), "hipEventCreate"));
    RETURN_IF_ERROR(
        HipStatus(*api_, api_->hipEventCreate_(&stop_), "hipEventCreate"));
    ++generation_;
    fault_.clear();
    live_ = true;
    return absl::OkStatus();
  }

  // Errors are ignored: after a fault the objects may already be gone.
  void DestroyStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!live_) return;
    (void)api_->hipSetDevice_(ordinal_);
    if (start_ != nullptr) (void)api_->hipEventDestroy_(start_);
    if (stop_ != nullptr) (void)api_->hipEventDestroy_(stop_);
    // After a fault the handle is dropped rather than destroyed on a broken
    // device; the reset that follows frees its memory.
    if (blas_handle_ != nullptr && fault_.empty())
      (void)blas_->destroy_handle(blas_handle_);
    blas_handle_ = nullptr;
    if (stream_ != nullptr) (void)api_->hipStreamDestroy_(stream_);
    start_ = stop_ = nullptr;
    stream_ = nullptr;
    modules_.clear();
    functions_.clear();
    live_ = false;
  }

  absl::Status Enter() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!fault_.empty()) {
      return absl::InternalError(absl::StrCat("HIP device ", info_.Key(),
                                              " faulted (", fault_,
                                              "); Reset() the device"));
    }
    if (!live_)
      return absl::InternalError(
          "HIP device is not set up; Reset() the device");
    return HipStatus(*api_, api_->hipSetDevice_(ordinal_), "hipSetDevice");
  }

  absl::Status Check(hipError_t r, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (IsSticky(r)) {
      fault_ = ErrorName(*api_, r);
      return absl::InternalError(absl::StrCat(
          what, ": ", fault_, " (kernel fault; the HIP device must be Reset)"));
    }
    return HipStatus(*api_, r, what);
  }

  absl::StatusOr<hipFunction_t> Function(const std::string& hash,
                                         const std::string& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Runs a library step on the stream; the handle is created on first use.
  absl::Status RunBlas(const v1::KernelStep& step,
                       const std::vector<void*>& buffers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  const HipApi* const api_;
  const int ordinal_;
  const DeviceInfo info_;
  const RocblasApi* const blas_;  // null when rocBLAS was not found
  const std::string no_blas_;     // why, then
  RocblasHandle blas_handle_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool live_ ABSL_GUARDED_BY(mu_) = false;
  hipStream_t stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  hipEvent_t start_ ABSL_GUARDED_BY(mu_) = nullptr;
  hipEvent_t stop_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Bumped per reset, so buffers from before are never freed after it.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fault_ ABSL_GUARDED_BY(mu_);
  // Code objects by hash, kept across Reset so modules can be re-loaded.
  absl::flat_hash_map<std::string, std::string> binaries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, hipModule_t> modules_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, hipFunction_t> functions_
      ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<hipFunction_t> HipDevice::Impl::Function(
    const std::string& hash, const std::string& entry) {
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
    hipModule_t m = nullptr;
    RETURN_IF_ERROR(Check(api_->hipModuleLoadData_(&m, bin->second.data()),
                          "hipModuleLoadData"));
    mod = modules_.emplace(hash, m).first;
  }
  hipFunction_t fn = nullptr;
  RETURN_IF_ERROR(
      Check(api_->hipModuleGetFunction_(&fn, mod->second, entry.c_str()),
            absl::StrCat("hipModuleGetFunction(", entry, ")")));
  functions_.emplace(key, fn);
  return fn;
}

absl::Status HipDevice::Impl::RunBlas(const v1::KernelStep& step,
                                      const std::vector<void*>& buffers) {
  if (blas_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("step ", step.kernel(), ": ",
                                            info_.Key(), " has no BLAS (",
                                            no_blas_, ")"));
  }
  if (step.kernel() != gpu::kBlasGemmKernel) {
    return absl::NotFoundError(
        absl::StrCat("no library step named '", step.kernel(), "'"));
  }
  ASSIGN_OR_RETURN(const gpu::BlasGemm g, gpu::DecodeBlasGemm(step));
  if (buffers.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("step ", step.kernel(), ": ",
                                                   buffers.size(),
                                                   " buffers given, 3 needed"));
  }
  if (blas_handle_ == nullptr) {
    RocblasHandle h = nullptr;
    RETURN_IF_ERROR(
        RocblasStatus(blas_->create_handle(&h), "rocblas_create_handle"));
    // The default math mode: fp32 products stay fp32 (no XF32).
    if (absl::Status s =
            RocblasStatus(blas_->set_stream(h, stream_), "rocblas_set_stream");
        !s.ok()) {
      (void)blas_->destroy_handle(h);
      return s;
    }
    blas_handle_ = h;
  }
  const gpu::ColumnMajorGemm c = gpu::ToColumnMajor(g);
  const float alpha = 1.0f, beta = static_cast<float>(g.beta);
  const auto op = [](bool t) {
    return t ? kRocblasOperationTranspose : kRocblasOperationNone;
  };
  const int ab = RocblasType(g.ab_type), ct = RocblasType(g.c_type);
  void* out = buffers[gpu::kBlasC];
  // C and D are the same matrix: the product is written in place.
  return RocblasStatus(
      blas_->gemm_strided_batched_ex(
          blas_handle_, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k,
          &alpha, buffers[c.first_buffer], ab, c.ld_first, c.stride_first,
          buffers[c.second_buffer], ab, c.ld_second, c.stride_second, &beta,
          out, ct, c.ldc, c.stride_c, out, ct, c.ldc, c.stride_c, c.batch,
          kRocblasF32, kRocblasGemmAlgoStandard, 0, 0),
      absl::StrCat("rocblas_gemm_strided_batched_ex(m ", c.m, ", n ", c.n,
                   ", k ", c.k, ", batch ", c.batch, ")"));
}

namespace {

class HipBuffer final : public DeviceBuffer {
 public:
  HipBuffer(HipDevice::Impl* device, void* ptr, int64_t size,
            uint64_t generation)
      : device_(device), ptr_(ptr), size_(size), generation_(generation) {}
  ~HipBuffer() override {
    absl::MutexLock lock(&device_->mu_);
    if (device_->generation_ == generation_ && device_->live_) {
      (void)device_->api_->hipSetDevice_(device_->ordinal_);
      (void)device_->api_->hipFree_(ptr_);
    }
  }
  void* data() override { return ptr_; }
  int64_t size() const override { return size_; }

 private:
  HipDevice::Impl* const device_;
  void* const ptr_;
  const int64_t size_;
  const uint64_t generation_;
};

absl::StatusOr<DeviceInfo> QueryInfo(const HipApi& api, int ordinal) {
  auto attr = [&](hipDeviceAttribute_t a) {
    int v = 0;
    return api.hipDeviceGetAttribute_(&v, a, ordinal) == hipSuccess ? v : 0;
  };
  DeviceInfo info;
  info.backend = v1::HIP;
  // The properties struct grows between releases; give it room to spare.
  alignas(hipDeviceProp_t) char props[2 * sizeof(hipDeviceProp_t)] = {};
  auto* prop = reinterpret_cast<hipDeviceProp_t*>(props);
  RETURN_IF_ERROR(HipStatus(api, api.hipGetDeviceProperties_(prop, ordinal),
                            "hipGetDeviceProperties"));
  // "gfx90a:sramecc+:xnack-" -> "gfx90a": code objects are built for the
  // processor with default features.
  const std::string arch_name(
      prop->gcnArchName, strnlen(prop->gcnArchName, sizeof(prop->gcnArchName)));
  info.arch = arch_name.substr(0, arch_name.find(':'));
  info.compute_units = attr(hipDeviceAttributeMultiprocessorCount);
  size_t bytes = 0;
  RETURN_IF_ERROR(HipStatus(api, api.hipDeviceTotalMem_(&bytes, ordinal),
                            "hipDeviceTotalMem"));
  info.memory_bytes = static_cast<int64_t>(bytes);
  int driver = 0;
  RETURN_IF_ERROR(
      HipStatus(api, api.hipDriverGetVersion_(&driver), "hipDriverGetVersion"));
  info.driver_version = absl::StrCat(driver);
  // Nominal figures for estimates only: 64 FP32 lanes per CU, an FMA each.
  const int clock_khz = attr(hipDeviceAttributeClockRate);
  info.peak_gflops =
      info.compute_units * 64 * 2.0 * (clock_khz > 0 ? clock_khz * 1e-6 : 1.5);
  const int mem_khz = attr(hipDeviceAttributeMemoryClockRate);
  const int bus_bits = attr(hipDeviceAttributeMemoryBusWidth);
  info.memory_gbps = mem_khz > 0 && bus_bits > 0
                         ? 2.0 * mem_khz * 1e3 * (bus_bits / 8) * 1e-9
                         : 1000.0;
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HipDevice>> HipDevice::Open(int ordinal) {
  ASSIGN_OR_RETURN(const HipApi* api, LoadRuntime());
  if (hipError_t r = api->hipInit_(0); r != hipSuccess) {
    return absl::UnavailableError(absl::StrCat(
        "HIP runtime present but hipInit failed: ", ErrorName(*api, r)));
  }
  int count = 0;
  if (hipError_t r = api->hipGetDeviceCount_(&count);
      r != hipSuccess && r != hipErrorNoDevice) {
    return absl::UnavailableError(
        absl::StrCat("hipGetDeviceCount: ", ErrorName(*api, r)));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("no HIP device ", ordinal, " (", count, " present)"));
  }
  absl::StatusOr<DeviceInfo> info = QueryInfo(*api, ordinal);
  if (!info.ok()) return absl::UnavailableError(info.status().message());
  absl::StatusOr<std::unique_ptr<KernelCompiler>> hiprtc = MakeHiprtcCompiler();
  if (!hiprtc.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "HIP device ", ordinal, " found but ", hiprtc.status().message()));
  }
  info->compiler_version = (*hiprtc)->version();
  // Without rocBLAS the device still runs compiled kernels; the solvers that
  // need the BLAS see an empty `blas` and stay away.
  absl::StatusOr<const RocblasApi*> blas = LoadRocblas();
  if (blas.ok()) info->blas = (*blas)->version;
  auto impl = std::make_unique<Impl>(
      api, ordinal, *std::move(info), blas.ok() ? *blas : nullptr,
      blas.ok() ? "" : std::string(blas.status().message()));
  {
    absl::MutexLock lock(&impl->mu_);
    if (absl::Status s = impl->CreateStream(); !s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("HIP device ", ordinal, ": ", s.message()));
    }
  }
  return std::unique_ptr<HipDevice>(new HipDevice(std::move(impl)));
}

HipDevice::HipDevice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HipDevice::~HipDevice() = default;

const DeviceInfo& HipDevice::info() const { return impl_->info_; }

absl::StatusOr<std::unique_ptr<DeviceBuffer>> HipDevice::Allocate(
    int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  void* ptr = nullptr;
  const hipError_t r = impl_->api_->hipMalloc_(
      &ptr, bytes == 0 ? 1 : static_cast<size_t>(bytes));
  if (r != hipSuccess) {
    return impl_->Check(
        r, absl::StrCat("hipMalloc(", bytes, " bytes on ", info().Key(), ")"));
  }
  return std::make_unique<HipBuffer>(impl_.get(), ptr, bytes,
                                     impl_->generation_);
}

absl::Status HipDevice::CopyToDevice(DeviceBuffer* dst, const void* src,
                                     int64_t bytes) {
  if (bytes < 0 || bytes > dst->size())
    return absl::OutOfRangeError("copy larger than the buffer");
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  // Orders the copy after the kernels already launched on the stream.
  RETURN_IF_ERROR(impl_->Check(
      impl_->api_->hipStreamSynchronize_(impl_->stream_), "kernel execution"));
  return impl_->Check(
      impl_->api_->hipMemcpyHtoD_(dst->data(), const_cast<void*>(src), bytes),
      "hipMemcpyHtoD");
}

absl::Status HipDevice::CopyFromDevice(void* dst, const DeviceBuffer& src,
                                       int64_t bytes) {
  if (bytes < 0 || bytes > src.size())
    return absl::OutOfRangeError("copy larger than the buffer");
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  RETURN_IF_ERROR(impl_->Check(
      impl_->api_->hipStreamSynchronize_(impl_->stream_), "kernel execution"));
  return impl_->Check(impl_->api_->hipMemcpyDtoH_(
                          dst, const_cast<DeviceBuffer&>(src).data(), bytes),
                      "hipMemcpyDtoH");
}

absl::Status HipDevice::Launch(const v1::KernelStep& step,
                               const std::vector<void*>& buffers) {
  if (gpu::IsLibraryStep(step)) {
    absl::MutexLock lock(&impl_->mu_);
    RETURN_IF_ERROR(impl_->Enter());
    return impl_->RunBlas(step, buffers);
  }
  ASSIGN_OR_RETURN(gpu::LaunchGeometry g, gpu::StepGeometry(step));
  gpu::KernelParams params(step, buffers);
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  ASSIGN_OR_RETURN(hipFunction_t fn,
                   impl_->Function(step.code_object_hash(), step.kernel()));
  return impl_->Check(
      impl_->api_->hipModuleLaunchKernel_(
          fn, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1],
          g.block[2], g.shared_bytes, impl_->stream_, params.data(), nullptr),
      absl::StrCat("hipModuleLaunchKernel(", step.kernel(), ")"));
}

absl::Status HipDevice::Synchronize() {
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  return impl_->Check(impl_->api_->hipStreamSynchronize_(impl_->stream_),
                      "kernel execution");
}

absl::StatusOr<double> HipDevice::TimeMs(
    const std::function<absl::Status()>& work) {
  {
    absl::MutexLock lock(&impl_->mu_);
    RETURN_IF_ERROR(impl_->Enter());
    RETURN_IF_ERROR(impl_->Check(
        impl_->api_->hipEventRecord_(impl_->start_, impl_->stream_),
        "hipEventRecord"));
  }
  // `work` launches through this device, which takes the lock itself.
  absl::Status s = work();
  absl::MutexLock lock(&impl_->mu_);
  RETURN_IF_ERROR(impl_->Enter());
  RETURN_IF_ERROR(
      impl_->Check(impl_->api_->hipEventRecord_(impl_->stop_, impl_->stream_),
                   "hipEventRecord"));
  RETURN_IF_ERROR(impl_->Check(impl_->api_->hipEventSynchronize_(impl_->stop_),
                               "kernel execution"));
  if (!s.ok()) return s;
  float ms = 0;
  RETURN_IF_ERROR(impl_->Check(
      impl_->api_->hipEventElapsedTime_(&ms, impl_->start_, impl_->stop_),
      "hipEventElapsedTime"));
  return static_cast<double>(ms);
}

absl::Status HipDevice::LoadCodeObject(const std::string& hash,
                                       const std::string& binary) {
  if (hash.empty() || binary.empty()) {
    return absl::InvalidArgumentError(
        "LoadCodeObject: empty hash or code object");
  }
  absl::MutexLock lock(&impl_->mu_);
  if (impl_->binaries_.contains(hash)) return absl::OkStatus();
  RETURN_IF_ERROR(impl_->Enter());
  hipModule_t m = nullptr;
  RETURN_IF_ERROR(
      impl_->Check(impl_->api_->hipModuleLoadData_(&m, binary.data()),
                   absl::StrCat("hipModuleLoadData(", hash, ")")));
  impl_->modules_.emplace(hash, m);
  impl_->binaries_.emplace(hash, binary);
  return absl::OkStatus();
}

bool HipDevice::HasCodeObject(const std::string& hash) const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->binaries_.contains(hash);
}

absl::Status HipDevice::Reset() {
  absl::MutexLock lock(&impl_->mu_);
  impl_->DestroyStream();
  (void)impl_->api_->hipSetDevice_(impl_->ordinal_);
  RETURN_IF_ERROR(HipStatus(*impl_->api_, impl_->api_->hipDeviceReset_(),
                            "hipDeviceReset"));
  return impl_->CreateStream();
}

#else  // !CONVTUNE_HAVE_HIP_HEADERS

class HipDevice::Impl {};

absl::StatusOr<std::unique_ptr<HipDevice>> HipDevice::Open(int ordinal) {
  return absl::UnavailableError(
      "no HIP support: convtune was built without the HIP headers");
}
HipDevice::HipDevice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HipDevice::~HipDevice() = default;
const DeviceInfo& HipDevice::info() const {
  static const DeviceInfo* const none = new DeviceInfo;
  return *none;
}
absl::StatusOr<std::unique_ptr<DeviceBuffer>> HipDevice::Allocate(int64_t) {
  return absl::UnavailableError("no HIP support");
}
absl::Status HipDevice::CopyToDevice(DeviceBuffer*, const void*, int64_t) {
  return absl::UnavailableError("no HIP support");
}
absl::Status HipDevice::CopyFromDevice(void*, const DeviceBuffer&, int64_t) {
  return absl::UnavailableError("no HIP support");
}
absl::Status HipDevice::Launch(const v1::KernelStep&,
                               const std::vector<void*>&) {
  return absl::UnavailableError("no HIP support");
}
absl::Status HipDevice::Synchronize() {
  return absl::UnavailableError("no HIP support");
}
absl::StatusOr<double> HipDevice::TimeMs(const std::function<absl::Status()>&) {
  return absl::UnavailableError("no HIP support");
}
absl::Status HipDevice::LoadCodeObject(const std::string&, const std::string&) {
  return absl::UnavailableError("no HIP support");
}
bool HipDevice::HasCodeObject(const std::string&) const { return false; }
absl::Status HipDevice::Reset() {
  return absl::UnavailableError("no HIP support");
}

#endif

}  // namespace convtune
