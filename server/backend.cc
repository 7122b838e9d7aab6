#include "server/backend.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu_device.h"
#include "kernels/cuda_device.h"
#include "kernels/hip_device.h"

namespace convtune {
namespace {

// Opens a GPU device through its backend (CudaDevice, HipDevice) and its
// compiler; Unavailable if either is missing.
template <typename DeviceT>
absl::StatusOr<SelectedBackend> OpenGpu(v1::Backend backend, int ordinal) {
  absl::StatusOr<std::unique_ptr<GpuDevice>> device = DeviceT::Open(ordinal);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<KernelCompiler>> compiler =
      MakeCompiler(backend);
  if (!compiler.ok()) return compiler.status();
  SelectedBackend out;
  out.note = absl::StrCat("using ", BackendName(backend), " device ", ordinal,
                          " (", (*device)->info().Key(), ")");
  out.device = *std::move(device);
  out.compiler = *std::move(compiler);
  return out;
}

}  // namespace

absl::StatusOr<SelectedBackend> SelectBackend(absl::string_view name,
                                              int ordinal) {
  if (ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device: must be >= 0, got ", ordinal));
  }
  if (name == "cpu") {
    SelectedBackend out;
    out.device = std::make_unique<CpuDevice>();
    out.note = "backend cpu";
    return out;
  }
  if (name == "cuda" || name == "hip") {
    absl::StatusOr<SelectedBackend> gpu =
        name == "cuda" ? OpenGpu<CudaDevice>(v1::CUDA, ordinal)
                       : OpenGpu<HipDevice>(v1::HIP, ordinal);
    if (!gpu.ok()) {
      return absl::UnavailableError(
          absl::StrCat("backend ", name, ": ", gpu.status().message()));
    }
    gpu->note = absl::StrCat("backend ", name, ": ", gpu->note);
    return gpu;
  }
  if (name != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend: unknown '", name, "' (expected auto, cpu, cuda or hip)"));
  }
  absl::StatusOr<SelectedBackend> cuda = OpenGpu<CudaDevice>(v1::CUDA, ordinal);
  if (cuda.ok()) {
    cuda->note = absl::StrCat("backend auto: ", cuda->note);
    return cuda;
  }
  absl::StatusOr<SelectedBackend> hip = OpenGpu<HipDevice>(v1::HIP, ordinal);
  if (hip.ok()) {
    hip->note = absl::StrCat("backend auto: ", cuda.status().message(), "; ",
                             hip->note);
    return hip;
  }
  SelectedBackend out;
  out.device = std::make_unique<CpuDevice>();
  out.note = absl::StrCat("backend auto: ", cuda.status().message(), "; ",
                          hip.status().message(), "; using cpu");
  return out;
}

}  // namespace convtune
