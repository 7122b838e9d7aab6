// Picks the daemon's device backend: an explicit cpu / cuda / hip, or auto
// (CUDA, then HIP, then the CPU), with a line saying which and why.
// Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_BACKEND_H_
#define CONVTUNE_SERVER_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/device.h"
#include "kernels/gpu/compiler.h"

namespace convtune {

struct SelectedBackend {
  std::unique_ptr<Device> device;
  // The run-time compiler of a GPU backend; null for the CPU.
  std::unique_ptr<KernelCompiler> compiler;
  // "backend auto: no CUDA driver (...); no HIP runtime (...); using cpu".
  std::string note;
};

// `name` is auto, cpu, cuda or hip; `ordinal` the GPU. InvalidArgument for
// another name or a negative ordinal; Unavailable, with the reason, when an
// explicitly named GPU backend cannot be opened.
absl::StatusOr<SelectedBackend> SelectBackend(absl::string_view name,
                                              int ordinal);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_BACKEND_H_
