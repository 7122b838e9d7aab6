#include "kernels/hip_device.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/dynamic_library.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/gpu_driver.h"
#include "kernels/gpu/launch_args.h"
#include "kernels/gpu_device.h"

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
  X(hipMemsetD32Async)       \
  X(hipMemsetD16Async)       \
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

absl::StatusCode StatusCodeOf(hipError_t r) {
  switch (r) {
    case hipErrorOutOfMemory:
      return absl::StatusCode::kResourceExhausted;
    case hipErrorNotFound:
      return absl::StatusCode::kNotFound;
    case hipErrorInvalidImage:
    case hipErrorNoBinaryForGpu:
    case hipErrorInvalidKernelFile:
    case hipErrorSharedObjectInitFailed:
    case hipErrorInvalidValue:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status HipStatus(const HipApi& api, hipError_t r,
                       absl::string_view what) {
  if (r == hipSuccess) return absl::OkStatus();
  return absl::Status(StatusCodeOf(r),
                      absl::StrCat(what, ": ", ErrorName(api, r)));
}

gpu::GpuResult Result(hipError_t r, const char* call) {
  return {static_cast<int>(r), call};
}

// The HIP runtime API on one device, which is its context.
class HipDriver final : public gpu::GpuDriver {
 public:
  HipDriver(const HipApi* api, int ordinal, std::string device_key,
            const RocblasApi* blas, std::string no_blas)
      : api_(api),
        ordinal_(ordinal),
        device_key_(std::move(device_key)),
        blas_(blas),
        no_blas_(std::move(no_blas)) {}

  absl::string_view context_name() const override { return "HIP device"; }
  gpu::GpuError DescribeError(int code) const override {
    const auto r = static_cast<hipError_t>(code);
    return {ErrorName(*api_, r), StatusCodeOf(r), IsSticky(r)};
  }

  gpu::GpuResult CreateContext() override;
  gpu::GpuResult DestroyContext(bool faulted, bool reset) override;
  gpu::GpuResult MakeCurrent() override {
    return Result(api_->hipSetDevice_(ordinal_), "hipSetDevice");
  }

  gpu::GpuResult Alloc(size_t bytes, void** ptr) override {
    return Result(api_->hipMalloc_(ptr, bytes), "hipMalloc");
  }
  gpu::GpuResult Free(void* ptr) override {
    return Result(api_->hipFree_(ptr), "hipFree");
  }
  gpu::GpuResult CopyHtoD(void* dst, const void* src, size_t bytes) override {
    return Result(api_->hipMemcpyHtoD_(dst, const_cast<void*>(src), bytes),
                  "hipMemcpyHtoD");
  }
  gpu::GpuResult CopyDtoH(void* dst, const void* src, size_t bytes) override {
    return Result(api_->hipMemcpyDtoH_(dst, const_cast<void*>(src), bytes),
                  "hipMemcpyDtoH");
  }
  gpu::GpuResult Memset(void* dst, uint32_t pattern, int element_bytes,
                        size_t count) override {
    // On the stream, so ordered with the launches.
    if (element_bytes == 4) {
      return Result(api_->hipMemsetD32Async_(dst, static_cast<int>(pattern),
                                             count, active()),
                    "hipMemsetD32Async");
    }
    return Result(
        api_->hipMemsetD16Async_(dst, static_cast<unsigned short>(pattern),
                                 count, active()),
        "hipMemsetD16Async");
  }

  gpu::GpuResult LoadModule(const std::string& binary,
                            gpu::GpuModule* module) override {
    hipModule_t m = nullptr;
    const hipError_t r = api_->hipModuleLoadData_(&m, binary.data());
    *module = m;
    return Result(r, "hipModuleLoadData");
  }
  gpu::GpuResult GetFunction(gpu::GpuModule module, const std::string& name,
                             gpu::GpuFunction* fn) override {
    hipFunction_t f = nullptr;
    const hipError_t r = api_->hipModuleGetFunction_(
        &f, static_cast<hipModule_t>(module), name.c_str());
    *fn = f;
    return Result(r, "hipModuleGetFunction");
  }
  gpu::GpuResult Launch(gpu::GpuFunction fn, const gpu::LaunchGeometry& g,
                        void** params) override {
    return Result(api_->hipModuleLaunchKernel_(
                      static_cast<hipFunction_t>(fn), g.grid[0], g.grid[1],
                      g.grid[2], g.block[0], g.block[1], g.block[2],
                      g.shared_bytes, active(), params, nullptr),
                  "hipModuleLaunchKernel");
  }
  gpu::GpuResult Synchronize() override {
    return Result(api_->hipStreamSynchronize_(active()),
                  "hipStreamSynchronize");
  }
  void SetStream(void* stream) override {
    caller_stream_ = static_cast<hipStream_t>(stream);
  }

  gpu::GpuResult RecordEvent(gpu::TimingEvent event) override {
    hipEvent_t e = event == gpu::TimingEvent::kStart ? start_ : stop_;
    return Result(api_->hipEventRecord_(e, active()), "hipEventRecord");
  }
  gpu::GpuResult SynchronizeStop() override {
    return Result(api_->hipEventSynchronize_(stop_), "hipEventSynchronize");
  }
  gpu::GpuResult ElapsedMs(float* ms) override {
    return Result(api_->hipEventElapsedTime_(ms, start_, stop_),
                  "hipEventElapsedTime");
  }

  // Runs a "blas.gemm" step on the stream; the handle is created on first
  // use.
  absl::Status RunLibraryStep(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) override;

 private:
  const HipApi* const api_;
  const int ordinal_;
  const std::string device_key_;
  const RocblasApi* const blas_;  // null when rocBLAS was not found
  const std::string no_blas_;     // why, then
  // The stream work goes on: the caller's (SetStream), else the driver's.
  hipStream_t active() const {
    return caller_stream_ != nullptr ? caller_stream_ : stream_;
  }

  RocblasHandle blas_handle_ = nullptr;
  hipStream_t blas_stream_ = nullptr;  // the stream blas_handle_ is bound to
  hipStream_t caller_stream_ = nullptr;
  hipStream_t stream_ = nullptr;
  hipEvent_t start_ = nullptr;
  hipEvent_t stop_ = nullptr;
};

gpu::GpuResult HipDriver::CreateContext() {
  gpu::GpuResult r = Result(api_->hipSetDevice_(ordinal_), "hipSetDevice");
  if (r.ok()) r = Result(api_->hipStreamCreate_(&stream_), "hipStreamCreate");
  if (r.ok()) r = Result(api_->hipEventCreate_(&start_), "hipEventCreate");
  if (r.ok()) r = Result(api_->hipEventCreate_(&stop_), "hipEventCreate");
  return r;
}

// Errors but the reset's are ignored.
gpu::GpuResult HipDriver::DestroyContext(bool faulted, bool reset) {
  (void)api_->hipSetDevice_(ordinal_);
  if (start_ != nullptr) (void)api_->hipEventDestroy_(start_);
  if (stop_ != nullptr) (void)api_->hipEventDestroy_(stop_);
  // After a fault the handle is dropped rather than destroyed on a broken
  // device; the reset that follows frees its memory.
  if (blas_handle_ != nullptr && !faulted)
    (void)blas_->destroy_handle(blas_handle_);
  blas_handle_ = nullptr;
  if (stream_ != nullptr) (void)api_->hipStreamDestroy_(stream_);
  start_ = stop_ = nullptr;
  stream_ = nullptr;
  if (!reset) return {};
  return Result(api_->hipDeviceReset_(), "hipDeviceReset");
}

absl::Status HipDriver::RunLibraryStep(const v1::KernelStep& step,
                                       const std::vector<void*>& buffers) {
  if (blas_ == nullptr) {
    return absl::NotFoundError(absl::StrCat("step ", step.kernel(), ": ",
                                            device_key_, " has no BLAS (",
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
            RocblasStatus(blas_->set_stream(h, active()), "rocblas_set_stream");
        !s.ok()) {
      (void)blas_->destroy_handle(h);
      return s;
    }
    blas_handle_ = h;
    blas_stream_ = active();
  } else if (blas_stream_ != active()) {
    RETURN_IF_ERROR(RocblasStatus(blas_->set_stream(blas_handle_, active()),
                                  "rocblas_set_stream"));
    blas_stream_ = active();
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

absl::StatusOr<std::unique_ptr<GpuDevice>> HipDevice::Open(int ordinal) {
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
  auto driver = std::make_unique<HipDriver>(
      api, ordinal, info->Key(), blas.ok() ? *blas : nullptr,
      blas.ok() ? "" : std::string(blas.status().message()));
  absl::StatusOr<std::unique_ptr<GpuDevice>> device =
      GpuDevice::Create(*std::move(info), std::move(driver));
  if (!device.ok()) {
    return absl::UnavailableError(
        absl::StrCat("HIP device ", ordinal, ": ", device.status().message()));
  }
  return device;
}

#else  // !CONVTUNE_HAVE_HIP_HEADERS

absl::StatusOr<std::unique_ptr<GpuDevice>> HipDevice::Open(int ordinal) {
  return absl::UnavailableError(
      "no HIP support: convtune was built without the HIP headers");
}

#endif

}  // namespace convtune
