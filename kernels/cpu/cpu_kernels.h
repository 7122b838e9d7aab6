// The registry of built-in CPU kernels that plan steps name ("cpu.direct").
// The table is written out in cpu_kernels.cc (no static registration, so no
// kernel is lost by the linker). Read-only; thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_CPU_KERNELS_H_
#define CONVTUNE_KERNELS_CPU_CPU_KERNELS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"

namespace convtune::cpu {

// `buffers[i]` is the host address of step.buffers(i). Kernels validate their
// own scalars and return InvalidArgument on a malformed step.
using CpuKernelFn = absl::Status (*)(const v1::KernelStep& step,
                                     const std::vector<void*>& buffers);

// nullptr if no kernel has that name.
CpuKernelFn FindCpuKernel(absl::string_view name);

// Names of all registered kernels, sorted.
std::vector<absl::string_view> CpuKernelNames();

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_CPU_KERNELS_H_
