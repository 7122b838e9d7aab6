// The calls GpuDevice (kernels/gpu_device.h) makes on a GPU backend: one
// driver per opened device, owning its context, stream and timing events and
// the backend's vendor libraries (BLAS, cuDNN). Implemented for CUDA in
// kernels/cuda_device.cc and for HIP in kernels/hip_device.cc.
// Not thread-safe: the owning GpuDevice calls it under its lock only.
#ifndef CONVTUNE_KERNELS_GPU_GPU_DRIVER_H_
#define CONVTUNE_KERNELS_GPU_GPU_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/conv_library.h"
#include "kernels/gpu/launch_args.h"

namespace convtune {

class GpuDevice;

namespace gpu {

// What a driver call returned: the backend's error code (a CUresult or a
// hipError_t, 0 on success for both) and the vendor call that returned it,
// which error messages name.
struct GpuResult {
  int code = 0;
  const char* call = "";
  bool ok() const { return code == 0; }
};

// A backend error code as GpuDevice reports it.
struct GpuError {
  std::string name;  // "CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorOutOfMemory"
  // ResourceExhausted when out of memory, NotFound, InvalidArgument for a
  // rejected code object or value, Internal otherwise.
  absl::StatusCode status_code = absl::StatusCode::kInternal;
  // A kernel fault: the context is unusable until it is re-created.
  bool sticky = false;
};

// Backend handles: a CUmodule or hipModule_t, a CUfunction or hipFunction_t.
using GpuModule = void*;
using GpuFunction = void*;

// The driver's two timing events.
enum class TimingEvent { kStart, kStop };

// Device addresses are passed as void*. The calls from Alloc on REQUIRE: the
// context was created and is current on the calling thread (MakeCurrent).
class GpuDriver {
 public:
  // REQUIRES: DestroyContext was called after the last CreateContext.
  virtual ~GpuDriver() = default;

  // What a kernel fault leaves unusable, for messages: "CUDA context".
  virtual absl::string_view context_name() const = 0;
  // REQUIRES: code is not 0.
  virtual GpuError DescribeError(int code) const = 0;

  // Creates the context, its stream and the timing events, and makes the
  // context current. After a failure, DestroyContext releases what was made.
  virtual GpuResult CreateContext() = 0;
  // Destroys what CreateContext made, ignoring errors (after a fault the
  // objects may be gone already); what is already destroyed is skipped.
  // `faulted`: the context faulted, so the vendor libraries' handles are
  // dropped, not destroyed, in it. `reset` also resets the device, freeing
  // everything allocated and loaded there; only its error is returned.
  virtual GpuResult DestroyContext(bool faulted, bool reset) = 0;
  // Makes the context current on the calling thread.
  virtual GpuResult MakeCurrent() = 0;

  virtual GpuResult Alloc(size_t bytes, void** ptr) = 0;
  virtual GpuResult Free(void* ptr) = 0;
  // Synchronous copies. They need not wait for the work on the stream.
  virtual GpuResult CopyHtoD(void* dst, const void* src, size_t bytes) = 0;
  virtual GpuResult CopyDtoH(void* dst, const void* src, size_t bytes) = 0;
  // Sets `count` elements of `element_bytes` (2 or 4) bytes each to the low
  // bytes of `pattern`, ordered after the work on the stream and before the
  // work launched after it.
  virtual GpuResult Memset(void* dst, uint32_t pattern, int element_bytes,
                           size_t count) = 0;

  virtual GpuResult LoadModule(const std::string& binary,
                               GpuModule* module) = 0;
  virtual GpuResult GetFunction(GpuModule module, const std::string& name,
                                GpuFunction* fn) = 0;
  // Encodes `map` (checked by CheckTensorMap) over the memory at `address`
  // into `out`. InvalidArgument when the driver refuses it; Unimplemented
  // where the backend or driver has no tensor maps.
  virtual absl::Status EncodeTensorMap(const v1::TensorMap& map, void* address,
                                       TensorMapBits* out) {
    return absl::UnimplementedError(
        absl::StrCat(context_name(), ": no tensor maps"));
  }
  // Launches `fn` on the stream; `params` as gpu::KernelParams::data().
  virtual GpuResult Launch(GpuFunction fn, const LaunchGeometry& g,
                           void** params) = 0;
  // Waits for the work on the stream.
  virtual GpuResult Synchronize() = 0;
  // The stream the calls above and below use from now on: `stream` (the
  // caller's, of this context), or the driver's own when null.
  virtual void SetStream(void* stream) = 0;

  // Records `event` on the stream.
  virtual GpuResult RecordEvent(TimingEvent event) = 0;
  // Waits for the stop event.
  virtual GpuResult SynchronizeStop() = 0;
  // The milliseconds between the start and the stop event.
  virtual GpuResult ElapsedMs(float* ms) = 0;

  // Runs a library step (IsLibraryStep, kernels/gpu/blas_step.h) on the
  // stream. NotFound for a step the driver has no library for, naming why;
  // InvalidArgument for bad arguments; the library's error otherwise.
  virtual absl::Status RunLibraryStep(const v1::KernelStep& step,
                                      const std::vector<void*>& buffers) = 0;
  // The backend's convolution libraries, which run through `device`
  // (GpuDevice::RunInContext) and must not outlive it or this driver.
  virtual std::vector<std::unique_ptr<ConvLibrary>> MakeConvLibraries(
      GpuDevice* device) {
    return {};
  }
};

}  // namespace gpu
}  // namespace convtune

#endif  // CONVTUNE_KERNELS_GPU_GPU_DRIVER_H_
