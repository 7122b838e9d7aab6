// oneDNN as a convolution library of the CPU device: its direct, Winograd
// and automatic convolutions, each a solver, on the caller's NCHW or NHWC
// tensors. Each has two configs: {0} runs on the caller's layout as it is;
// {1} lets oneDNN pick its blocked layouts, with the reorders into and out of
// them inside the step (and so in its time), through the workspace. The
// workspace also holds oneDNN's scratchpad. Configs whose only oneDNN
// implementation is its reference code are not offered. Thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_ONEDNN_LIBRARY_H_
#define CONVTUNE_KERNELS_CPU_ONEDNN_LIBRARY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/conv_library.h"

namespace convtune::cpu {

// Solver ids of the oneDNN methods. Never reuse an id.
inline constexpr uint32_t kOnednnDirectId = 10;
inline constexpr uint32_t kOnednnWinogradId = 11;
inline constexpr uint32_t kOnednnAutoId = 12;

// The step: buffers x, w, y[, workspace]; scalars: the problem, then the
// solver id, the config's layout choice (0 or 1) and the workspace bytes the
// daemon's oneDNN needs for it. A process whose oneDNN needs more (another
// thread count, another ISA) refuses to run the step.
inline constexpr absl::string_view kOnednnConvKernel = "onednn.conv";

// The process's oneDNN library; null when convtune was built without it.
ConvLibrary* Onednn();

// Runs a "onednn.conv" step (the CPU kernel registry's entry).
absl::Status OnednnConvKernel(const v1::KernelStep& step,
                              const std::vector<void*>& buffers);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_ONEDNN_LIBRARY_H_
