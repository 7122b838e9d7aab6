#include "kernels/cuda_device.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/conv_library.h"
#include "kernels/dynamic_library.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/cudnn_graph.h"
#include "kernels/gpu/gpu_driver.h"
#include "kernels/gpu/launch_args.h"
#include "kernels/gpu_device.h"

#if CONVTUNE_HAVE_CUDA_HEADERS
#include <cublas_api.h>
#include <cuda.h>
#endif

namespace convtune {

#if CONVTUNE_HAVE_CUDA_HEADERS
namespace {

#define CT_STR2(x) #x
// Expands the cuda.h macro first: CT_STR(cuMemAlloc) is "cuMemAlloc_v2".
#define CT_STR(x) CT_STR2(x)

// clang-format off
#define CT_CUDA_FUNCTIONS(X)    \
  X(cuInit)                     \
  X(cuDriverGetVersion)         \
  X(cuDeviceGetCount)           \
  X(cuDeviceGet)                \
  X(cuDeviceGetAttribute)       \
  X(cuDeviceTotalMem)           \
  X(cuDevicePrimaryCtxRetain)   \
  X(cuDevicePrimaryCtxRelease)  \
  X(cuDevicePrimaryCtxReset)    \
  X(cuCtxSetCurrent)            \
  X(cuStreamCreate)             \
  X(cuStreamDestroy)            \
  X(cuStreamSynchronize)        \
  X(cuMemAlloc)                 \
  X(cuMemFree)                  \
  X(cuMemcpyHtoD)               \
  X(cuMemcpyDtoH)               \
  X(cuModuleLoadData)           \
  X(cuModuleGetFunction)        \
  X(cuFuncSetAttribute)         \
  X(cuLaunchKernel)             \
  X(cuEventCreate)              \
  X(cuEventDestroy)             \
  X(cuEventRecord)              \
  X(cuEventSynchronize)         \
  X(cuGetErrorName)             \
  X(cuMemsetD32)                \
  X(cuMemsetD16)
// clang-format on

struct CudaApi {
#define CT_DECLARE(fn) decltype(&fn) fn##_ = nullptr;
  CT_CUDA_FUNCTIONS(CT_DECLARE)
  CT_DECLARE(cuEventElapsedTime)  // loaded apart: it has two names
  // Optional (CUDA 12 drivers on): null where the driver lacks them.
  CT_DECLARE(cuTensorMapEncodeTiled)
  CT_DECLARE(cuTensorMapEncodeIm2col)
#undef CT_DECLARE
};

constexpr char kDriverLibrary[] = "libcuda.so.1";

// Loaded once per process and never unloaded.
absl::StatusOr<const CudaApi*> LoadDriver() {
  static const absl::StatusOr<const CudaApi*>* const api = []() {
    using Result = absl::StatusOr<const CudaApi*>;
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open({kDriverLibrary});
    if (!lib.ok()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("no CUDA driver (", kDriverLibrary,
                       " not found: ", lib.status().message(), ")")));
    }
    auto* t = new CudaApi;
#define CT_LOAD(fn) lib->Require(&t->fn##_, CT_STR(fn));
    CT_CUDA_FUNCTIONS(CT_LOAD)
#undef CT_LOAD
    // Drivers before CUDA 12.8 have only the unversioned elapsed-time entry,
    // which has the same signature.
    lib->Require(&t->cuEventElapsedTime_,
                 {CT_STR(cuEventElapsedTime), "cuEventElapsedTime"});
    t->cuTensorMapEncodeTiled_ =
        lib->Find<decltype(t->cuTensorMapEncodeTiled_)>(
            "cuTensorMapEncodeTiled");
    t->cuTensorMapEncodeIm2col_ =
        lib->Find<decltype(t->cuTensorMapEncodeIm2col_)>(
            "cuTensorMapEncodeIm2col");
    if (!lib->missing().empty()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("CUDA driver ", kDriverLibrary, " is too old: it lacks ",
                       lib->missing())));
    }
    return new Result(t);
  }();
  return *api;
}

// cuBLAS, for library steps. Loaded once per process, never unloaded; only
// its header's types are used at build time. Declared by hand rather than
// with decltype: the C++ header overloads some of these names.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*get_property)(libraryPropertyType, int*) = nullptr;
  cublasStatus_t (*gemm_strided_batched)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
      const void*, const void*, cudaDataType, int, long long, const void*,
      cudaDataType, int, long long, const void*, void*, cudaDataType, int,
      long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;  // may be missing
  std::string version;                                   // "cublas13.1.0"
};

// The CUDA 13 library first; an unversioned name where only that is installed.
constexpr const char* kCublasLibraries[] = {"libcublas.so.13", "libcublas.so"};

absl::StatusOr<const CublasApi*> LoadCublas() {
  static const absl::StatusOr<const CublasApi*>* const api = []() {
    using Result = absl::StatusOr<const CublasApi*>;
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open(kCublasLibraries);
    if (!lib.ok()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("no cuBLAS: ", lib.status().message())));
    }
    auto* t = new CublasApi;
    lib->Require(&t->create, "cublasCreate_v2");
    lib->Require(&t->destroy, "cublasDestroy_v2");
    lib->Require(&t->set_stream, "cublasSetStream_v2");
    lib->Require(&t->set_math_mode, "cublasSetMathMode");
    lib->Require(&t->get_property, "cublasGetProperty");
    lib->Require(&t->gemm_strided_batched, "cublasGemmStridedBatchedEx");
    if (!lib->missing().empty()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("cuBLAS lacks ", lib->missing())));
    }
    t->status_name = lib->Find<decltype(t->status_name)>("cublasGetStatusName");
    int v[3] = {0, 0, 0};
    const libraryPropertyType parts[3] = {MAJOR_VERSION, MINOR_VERSION,
                                          PATCH_LEVEL};
    for (int i = 0; i < 3; ++i) {
      if (t->get_property(parts[i], &v[i]) != CUBLAS_STATUS_SUCCESS) {
        return new Result(
            absl::UnavailableError("cuBLAS does not report its version"));
      }
    }
    t->version = absl::StrCat("cublas", v[0], ".", v[1], ".", v[2]);
    return new Result(t);
  }();
  return *api;
}

absl::Status CublasStatus(const CublasApi& api, cublasStatus_t r,
                          absl::string_view what) {
  if (r == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const char* name = api.status_name != nullptr ? api.status_name(r) : nullptr;
  const std::string msg = absl::StrCat(
      what, ": ", name != nullptr ? name : absl::StrCat("cublasStatus_t ", r));
  switch (r) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(msg);
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

cudaDataType CudaType(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return CUDA_R_32F;
    case DataType::kFp16:
      return CUDA_R_16F;
    case DataType::kBf16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

std::string ErrorName(const CudaApi& api, CUresult r) {
  const char* name = nullptr;
  if (api.cuGetErrorName_(r, &name) != CUDA_SUCCESS || name == nullptr) {
    return absl::StrCat("CUresult ", static_cast<int>(r));
  }
  return name;
}

// Errors after which the context is unusable until it is re-created.
bool IsSticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

absl::StatusCode StatusCodeOf(CUresult r) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_VALUE:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CuStatus(const CudaApi& api, CUresult r, absl::string_view what) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  return absl::Status(StatusCodeOf(r),
                      absl::StrCat(what, ": ", ErrorName(api, r)));
}

gpu::GpuResult Result(CUresult r, const char* call) {
  return {static_cast<int>(r), call};
}

CUdeviceptr DevicePtr(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// FP32 lanes per SM by compute capability, for the nominal peak.
int Fp32LanesPerSm(int major, int minor) {
  if (major >= 9 || (major == 8 && minor != 0)) return 128;
  return 64;
}

// The CUDA driver API on one device's primary context.
class CudaDriver final : public gpu::GpuDriver {
 public:
  CudaDriver(const CudaApi* api, CUdevice dev, std::string device_key,
             const CublasApi* blas, std::string no_blas,
             std::string cudnn_version)
      : api_(api),
        dev_(dev),
        device_key_(std::move(device_key)),
        blas_(blas),
        no_blas_(std::move(no_blas)),
        cudnn_version_(std::move(cudnn_version)) {}

  absl::string_view context_name() const override { return "CUDA context"; }
  gpu::GpuError DescribeError(int code) const override {
    const auto r = static_cast<CUresult>(code);
    return {ErrorName(*api_, r), StatusCodeOf(r), IsSticky(r)};
  }

  gpu::GpuResult CreateContext() override;
  gpu::GpuResult DestroyContext(bool faulted, bool reset) override;
  gpu::GpuResult MakeCurrent() override {
    return Result(api_->cuCtxSetCurrent_(ctx_), "cuCtxSetCurrent");
  }

  gpu::GpuResult Alloc(size_t bytes, void** ptr) override {
    CUdeviceptr p = 0;
    const CUresult r = api_->cuMemAlloc_(&p, bytes);
    *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    return Result(r, "cuMemAlloc");
  }
  gpu::GpuResult Free(void* ptr) override {
    return Result(api_->cuMemFree_(DevicePtr(ptr)), "cuMemFree");
  }
  gpu::GpuResult CopyHtoD(void* dst, const void* src, size_t bytes) override {
    return Result(api_->cuMemcpyHtoD_(DevicePtr(dst), src, bytes),
                  "cuMemcpyHtoD");
  }
  gpu::GpuResult CopyDtoH(void* dst, const void* src, size_t bytes) override {
    return Result(api_->cuMemcpyDtoH_(dst, DevicePtr(src), bytes),
                  "cuMemcpyDtoH");
  }
  gpu::GpuResult Memset(void* dst, uint32_t pattern, int element_bytes,
                        size_t count) override {
    // On the legacy stream, which the device's blocking stream waits for.
    if (element_bytes == 4) {
      return Result(api_->cuMemsetD32_(DevicePtr(dst), pattern, count),
                    "cuMemsetD32");
    }
    return Result(api_->cuMemsetD16_(DevicePtr(dst),
                                     static_cast<uint16_t>(pattern), count),
                  "cuMemsetD16");
  }

  gpu::GpuResult LoadModule(const std::string& binary,
                            gpu::GpuModule* module) override {
    CUmodule m = nullptr;
    const CUresult r = api_->cuModuleLoadData_(&m, binary.data());
    *module = m;
    return Result(r, "cuModuleLoadData");
  }
  gpu::GpuResult GetFunction(gpu::GpuModule module, const std::string& name,
                             gpu::GpuFunction* fn) override {
    CUfunction f = nullptr;
    const CUresult r = api_->cuModuleGetFunction_(
        &f, static_cast<CUmodule>(module), name.c_str());
    *fn = f;
    return Result(r, "cuModuleGetFunction");
  }
  absl::Status EncodeTensorMap(const v1::TensorMap& map, void* address,
                               gpu::TensorMapBits* out) override;
  gpu::GpuResult Launch(gpu::GpuFunction fn, const gpu::LaunchGeometry& g,
                        void** params) override;
  gpu::GpuResult Synchronize() override {
    return Result(api_->cuStreamSynchronize_(active()), "cuStreamSynchronize");
  }

  gpu::GpuResult RecordEvent(gpu::TimingEvent event) override {
    CUevent e = event == gpu::TimingEvent::kStart ? start_ : stop_;
    return Result(api_->cuEventRecord_(e, active()), "cuEventRecord");
  }
  gpu::GpuResult SynchronizeStop() override {
    return Result(api_->cuEventSynchronize_(stop_), "cuEventSynchronize");
  }
  gpu::GpuResult ElapsedMs(float* ms) override {
    return Result(api_->cuEventElapsedTime_(ms, start_, stop_),
                  "cuEventElapsedTime");
  }

  absl::Status RunLibraryStep(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) override;
  std::vector<std::unique_ptr<ConvLibrary>> MakeConvLibraries(
      GpuDevice* device) override;

  void SetStream(void* stream) override {
    caller_stream_ = static_cast<CUstream>(stream);
  }

  // The cuDNN session of the current context, created on first use, bound
  // to the active stream.
  absl::StatusOr<gpu::CudnnSession*> Dnn() {
    if (dnn_ == nullptr) {
      ASSIGN_OR_RETURN(dnn_, gpu::CudnnSession::Create(active()));
      dnn_stream_ = active();
    } else if (dnn_stream_ != active()) {
      RETURN_IF_ERROR(dnn_->SetStream(active()));
      dnn_stream_ = active();
    }
    return dnn_.get();
  }

 private:
  // Runs a "blas.gemm" step on the stream; the handle is created on first
  // use.
  absl::Status RunBlas(const v1::KernelStep& step,
                       const std::vector<void*>& buffers);
  // Runs a "cudnn.conv" step on the stream.
  absl::Status RunCudnn(const v1::KernelStep& step,
                        const std::vector<void*>& buffers);

  const CudaApi* const api_;
  const CUdevice dev_;
  const std::string device_key_;
  const CublasApi* const blas_;      // null when cuBLAS was not found
  const std::string no_blas_;        // why, then
  const std::string cudnn_version_;  // empty when cuDNN was not found
  // The stream work goes on: the caller's (SetStream), else the driver's.
  CUstream active() const {
    return caller_stream_ != nullptr ? caller_stream_ : stream_;
  }

  cublasHandle_t blas_handle_ = nullptr;
  CUstream blas_stream_ = nullptr;  // the stream blas_handle_ is bound to
  std::unique_ptr<gpu::CudnnSession> dnn_;
  CUstream dnn_stream_ = nullptr;  // the stream dnn_ is bound to
  CUstream caller_stream_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
};

gpu::GpuResult CudaDriver::CreateContext() {
  gpu::GpuResult r = Result(api_->cuDevicePrimaryCtxRetain_(&ctx_, dev_),
                            "cuDevicePrimaryCtxRetain");
  if (r.ok()) r = Result(api_->cuCtxSetCurrent_(ctx_), "cuCtxSetCurrent");
  // A blocking stream: the synchronous copies on the default stream order
  // after the kernels launched here.
  if (r.ok()) {
    r = Result(api_->cuStreamCreate_(&stream_, CU_STREAM_DEFAULT),
               "cuStreamCreate");
  }
  if (r.ok()) {
    r = Result(api_->cuEventCreate_(&start_, CU_EVENT_DEFAULT),
               "cuEventCreate");
  }
  if (r.ok()) {
    r = Result(api_->cuEventCreate_(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  return r;
}

// Errors are ignored. `reset` resets the device's primary context: other
// users of it in this process lose their state too.
gpu::GpuResult CudaDriver::DestroyContext(bool faulted, bool reset) {
  if (ctx_ == nullptr) return {};
  api_->cuCtxSetCurrent_(ctx_);
  if (start_ != nullptr) api_->cuEventDestroy_(start_);
  if (stop_ != nullptr) api_->cuEventDestroy_(stop_);
  // After a fault the handle's device state is gone with the context; the
  // handle itself is dropped rather than destroyed in a broken context.
  if (blas_handle_ != nullptr && !faulted) blas_->destroy(blas_handle_);
  blas_handle_ = nullptr;
  // The same for cuDNN's handle and plans.
  if (dnn_ != nullptr && faulted) dnn_->Abandon();
  dnn_.reset();
  if (stream_ != nullptr) api_->cuStreamDestroy_(stream_);
  start_ = stop_ = nullptr;
  stream_ = nullptr;
  if (reset) api_->cuDevicePrimaryCtxReset_(dev_);
  api_->cuDevicePrimaryCtxRelease_(dev_);
  ctx_ = nullptr;
  return {};
}

absl::Status CudaDriver::EncodeTensorMap(const v1::TensorMap& map,
                                         void* address,
                                         gpu::TensorMapBits* out) {
  static_assert(sizeof(CUtensorMap) == sizeof(gpu::TensorMapBits));
  const bool im2col = map.mode() == v1::TensorMap::IM2COL;
  const char* call =
      im2col ? "cuTensorMapEncodeIm2col" : "cuTensorMapEncodeTiled";
  if (im2col ? api_->cuTensorMapEncodeIm2col_ == nullptr
             : api_->cuTensorMapEncodeTiled_ == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the CUDA driver has no ", call));
  }
  const CUtensorMapDataType type =
      map.element_bytes() == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
      : map.element_bytes() == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                 : CU_TENSOR_MAP_DATA_TYPE_UINT32;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  if (map.swizzle_bytes() == 32) swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
  if (map.swizzle_bytes() == 64) swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
  if (map.swizzle_bytes() == 128) swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  // CheckTensorMap bounds the rank by 5; the 32-bit lists are passed where
  // they are, the 64-bit ones converted to the driver's type.
  static_assert(std::is_same_v<cuuint32_t, uint32_t>);
  const int rank = map.dims_size();
  std::array<cuuint64_t, 5> dims{}, strides{};
  std::copy(map.dims().begin(), map.dims().end(), dims.begin());
  std::copy(map.strides().begin(), map.strides().end(), strides.begin());
  auto* bits = reinterpret_cast<CUtensorMap*>(out);
  const CUresult r =
      im2col ? api_->cuTensorMapEncodeIm2col_(
                   bits, type, rank, address, dims.data(), strides.data(),
                   map.lower_corner().data(), map.upper_corner().data(),
                   map.channels_per_pixel(), map.pixels_per_column(),
                   map.element_strides().data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                   swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
             : api_->cuTensorMapEncodeTiled_(
                   bits, type, rank, address, dims.data(), strides.data(),
                   map.box().data(), map.element_strides().data(),
                   CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  // The driver names no field: the usual causes are named instead.
  return absl::InvalidArgumentError(
      absl::StrCat(call, ": ", DescribeError(r).name,
                   " (the address must be 16-byte aligned, the strides "
                   "multiples of 16 bytes, the corners within the rank's "
                   "range)"));
}

gpu::GpuResult CudaDriver::Launch(gpu::GpuFunction fn,
                                  const gpu::LaunchGeometry& g, void** params) {
  const auto f = static_cast<CUfunction>(fn);
  // Dynamic shared memory over the default 48 KiB must be opted into.
  if (g.shared_bytes > 48 * 1024) {
    const CUresult r = api_->cuFuncSetAttribute_(
        f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        static_cast<int>(g.shared_bytes));
    if (r != CUDA_SUCCESS) return Result(r, "cuFuncSetAttribute");
  }
  return Result(api_->cuLaunchKernel_(
                    f, g.grid[0], g.grid[1], g.grid[2], g.block[0], g.block[1],
                    g.block[2], g.shared_bytes, active(), params, nullptr),
                "cuLaunchKernel");
}

absl::Status CudaDriver::RunLibraryStep(const v1::KernelStep& step,
                                        const std::vector<void*>& buffers) {
  if (step.kernel() == gpu::kCudnnConvKernel) {
    if (cudnn_version_.empty()) {
      return absl::NotFoundError(
          absl::StrCat("step ", step.kernel(), ": no cuDNN on ", device_key_));
    }
    return RunCudnn(step, buffers);
  }
  return RunBlas(step, buffers);
}

absl::Status CudaDriver::RunCudnn(const v1::KernelStep& step,
                                  const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const gpu::CudnnConvStep c, gpu::DecodeCudnnConvStep(step));
  ASSIGN_OR_RETURN(gpu::CudnnSession * dnn, Dnn());
  // ExecutePlan has checked the buffer against the daemon's need, which
  // the step carries; this process's cuDNN may need more for the config.
  for (void* b : buffers) {
    if (reinterpret_cast<uintptr_t>(b) % 16 != 0) {
      return absl::InvalidArgumentError(
          "cudnn.conv: tensors and workspace must be 16-byte aligned");
    }
  }
  const bool has_workspace = buffers.size() > 3;
  return dnn->Run(c.problem, c.config, buffers[0], buffers[1], buffers[2],
                  has_workspace ? buffers[3] : nullptr, c.workspace_bytes);
}

absl::Status CudaDriver::RunBlas(const v1::KernelStep& step,
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
    cublasHandle_t h = nullptr;
    RETURN_IF_ERROR(CublasStatus(*blas_, blas_->create(&h), "cublasCreate"));
    // Default math: CUBLAS_COMPUTE_32F then never uses TF32. Reductions of a
    // 16-bit output also stay in fp32.
    const auto math = static_cast<cublasMath_t>(
        CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    absl::Status s = CublasStatus(*blas_, blas_->set_math_mode(h, math),
                                  "cublasSetMathMode");
    if (s.ok())
      s = CublasStatus(*blas_, blas_->set_stream(h, active()),
                       "cublasSetStream");
    if (!s.ok()) {
      blas_->destroy(h);
      return s;
    }
    blas_handle_ = h;
    blas_stream_ = active();
  } else if (blas_stream_ != active()) {
    RETURN_IF_ERROR(CublasStatus(
        *blas_, blas_->set_stream(blas_handle_, active()), "cublasSetStream"));
    blas_stream_ = active();
  }
  const gpu::ColumnMajorGemm c = gpu::ToColumnMajor(g);
  const float alpha = 1.0f, beta = static_cast<float>(g.beta);
  const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
  const cudaDataType ab = CudaType(g.ab_type);
  return CublasStatus(
      *blas_,
      blas_->gemm_strided_batched(
          blas_handle_, op(c.trans_first), op(c.trans_second), c.m, c.n, c.k,
          &alpha, buffers[c.first_buffer], ab, c.ld_first, c.stride_first,
          buffers[c.second_buffer], ab, c.ld_second, c.stride_second, &beta,
          buffers[gpu::kBlasC], CudaType(g.c_type), c.ldc, c.stride_c, c.batch,
          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmStridedBatchedEx(m ", c.m, ", n ", c.n, ", k ",
                   c.k, ", batch ", c.batch, ")"));
}

// cuDNN as the device's convolution library: one method, whose configs are
// the engine configs of cuDNN's heuristics for the problem's operation graph.
// Every call runs under the device's lock, in its context.
class CudnnLibrary final : public ConvLibrary {
 public:
  CudnnLibrary(GpuDevice* device, CudaDriver* driver, std::string version)
      : device_(device), driver_(driver), version_(std::move(version)) {
    methods_ = {{gpu::kCudnnSolverId, "cudnn", v1::IMPLICIT_GEMM}};
  }

  absl::string_view name() const override { return "cudnn"; }
  const std::string& version() const override { return version_; }
  const std::vector<LibraryMethod>& methods() const override {
    return methods_;
  }

  absl::StatusOr<std::vector<std::vector<int64_t>>> Configs(
      uint32_t solver_id, const ConvProblem& p) override {
    RETURN_IF_ERROR(CheckMethod(solver_id));
    std::vector<std::vector<int64_t>> out;
    const auto configs_of_p = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(gpu::CudnnSession * dnn, driver_->Dnn());
      ASSIGN_OR_RETURN(const std::vector<gpu::CudnnEngineConfig> configs,
                       dnn->Configs(p));
      for (const gpu::CudnnEngineConfig& c : configs) {
        out.push_back(gpu::EncodeEngineConfig(c));
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(device_->RunInContext(configs_of_p));
    return out;
  }

  absl::StatusOr<LibraryStep> Step(
      uint32_t solver_id, const ConvProblem& p,
      const std::vector<int64_t>& config) override {
    RETURN_IF_ERROR(CheckMethod(solver_id));
    ASSIGN_OR_RETURN(const gpu::CudnnEngineConfig c,
                     gpu::DecodeEngineConfig(config));
    LibraryStep out;
    const auto plan = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(gpu::CudnnSession * dnn, driver_->Dnn());
      ASSIGN_OR_RETURN(out.workspace_bytes, dnn->WorkspaceBytes(p, c));
      out.step = gpu::MakeCudnnConvStep(p, c, out.workspace_bytes);
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(device_->RunInContext(plan));
    return out;
  }

 private:
  static absl::Status CheckMethod(uint32_t solver_id) {
    if (solver_id == gpu::kCudnnSolverId) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat("cuDNN has no method ", solver_id));
  }

  GpuDevice* const device_;
  CudaDriver* const driver_;
  const std::string version_;
  std::vector<LibraryMethod> methods_;
};

std::vector<std::unique_ptr<ConvLibrary>> CudaDriver::MakeConvLibraries(
    GpuDevice* device) {
  std::vector<std::unique_ptr<ConvLibrary>> out;
  if (!cudnn_version_.empty()) {
    out.push_back(std::make_unique<CudnnLibrary>(device, this, cudnn_version_));
  }
  return out;
}

absl::StatusOr<DeviceInfo> QueryInfo(const CudaApi& api, CUdevice dev) {
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    return api.cuDeviceGetAttribute_(&v, a, dev) == CUDA_SUCCESS ? v : 0;
  };
  DeviceInfo info;
  info.backend = v1::CUDA;
  const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.arch = absl::StrCat("sm_", major, minor);
  info.compute_units = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  size_t bytes = 0;
  RETURN_IF_ERROR(
      CuStatus(api, api.cuDeviceTotalMem_(&bytes, dev), "cuDeviceTotalMem"));
  info.memory_bytes = static_cast<int64_t>(bytes);
  int driver = 0;
  RETURN_IF_ERROR(
      CuStatus(api, api.cuDriverGetVersion_(&driver), "cuDriverGetVersion"));
  info.driver_version = absl::StrCat(driver / 1000, ".", (driver % 1000) / 10);
  // Nominal figures for estimates only. Clock attributes are in kHz; newer
  // drivers may report 0, then typical data-centre values stand in.
  const double core_ghz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) > 0
                              ? attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) * 1e-6
                              : 1.5;
  info.peak_gflops =
      info.compute_units * Fp32LanesPerSm(major, minor) * 2.0 * core_ghz;
  const int mem_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  const int bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  // Double data rate: two transfers per memory clock.
  info.memory_gbps = mem_khz > 0 && bus_bits > 0
                         ? 2.0 * mem_khz * 1e3 * (bus_bits / 8) * 1e-9
                         : 1000.0;
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuDevice>> CudaDevice::Open(int ordinal) {
  ASSIGN_OR_RETURN(const CudaApi* api, LoadDriver());
  if (CUresult r = api->cuInit_(0); r != CUDA_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        "CUDA driver present but cuInit failed: ", ErrorName(*api, r)));
  }
  int count = 0;
  if (CUresult r = api->cuDeviceGetCount_(&count); r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("cuDeviceGetCount: ", ErrorName(*api, r)));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device ", ordinal, " (", count, " present)"));
  }
  CUdevice dev = 0;
  if (CUresult r = api->cuDeviceGet_(&dev, ordinal); r != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("cuDeviceGet(", ordinal, "): ", ErrorName(*api, r)));
  }
  absl::StatusOr<DeviceInfo> info = QueryInfo(*api, dev);
  if (!info.ok()) return absl::UnavailableError(info.status().message());
  // Timings depend on the compiler, so its version is part of the device key.
  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  if (!nvrtc.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "CUDA device ", ordinal, " found but ", nvrtc.status().message()));
  }
  info->compiler_version = (*nvrtc)->version();
  // Without cuBLAS the device still runs compiled kernels; the solvers that
  // need the BLAS see an empty `blas` and stay away.
  absl::StatusOr<const CublasApi*> blas = LoadCublas();
  if (blas.ok()) info->blas = (*blas)->version;
  // Without cuDNN there is no "cudnn" solver; its version scopes the key.
  absl::StatusOr<std::string> dnn = gpu::CudnnSession::Version();
  if (dnn.ok()) info->libraries = *dnn;
  auto driver = std::make_unique<CudaDriver>(
      api, dev, info->Key(), blas.ok() ? *blas : nullptr,
      blas.ok() ? "" : std::string(blas.status().message()),
      dnn.ok() ? *dnn : "");
  absl::StatusOr<std::unique_ptr<GpuDevice>> device =
      GpuDevice::Create(*std::move(info), std::move(driver));
  if (!device.ok()) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", ordinal, ": ", device.status().message()));
  }
  return device;
}

#else  // !CONVTUNE_HAVE_CUDA_HEADERS

absl::StatusOr<std::unique_ptr<GpuDevice>> CudaDevice::Open(int ordinal) {
  return absl::UnavailableError(
      "no CUDA support: convtune was built without the CUDA headers");
}

#endif

}  // namespace convtune
