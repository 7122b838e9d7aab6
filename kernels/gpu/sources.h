// GPU kernel sources, embedded at build time from kernels/gpu/*.cu. Each is
// written once in the dialect NVRTC and hiprtc both accept; the prelude
// (prelude.cuh) supplies warp size, fp16/bf16 types and intrinsics per backend.
// Read-only; thread-safe.
#ifndef CONVTUNE_KERNELS_GPU_SOURCES_H_
#define CONVTUNE_KERNELS_GPU_SOURCES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/problem.pb.h"

namespace convtune {

// The text of an embedded source with the prelude for `backend` in front,
// ready to compile. NotFound for an unknown file.
absl::StatusOr<std::string> KernelSourceText(absl::string_view file,
                                             v1::Backend backend);

// Names of all embedded sources ("conv_direct.cu", ...).
std::vector<std::string> KernelSourceFiles();

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_GPU_SOURCES_H_
