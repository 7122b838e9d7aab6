// The built-in CPU convolution kernels that plan steps name, and the step
// builder the CPU solvers use. Every conv kernel takes buffers (x, w, y) plus a
// workspace where it needs one, the problem as the first kProblemScalars
// scalars and its own parameters after. Stateless; thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_KERNEL_CONV_H_
#define CONVTUNE_KERNELS_CPU_KERNEL_CONV_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"

namespace convtune::cpu {

// Any problem, any direction and type. No parameters, no workspace.
inline constexpr absl::string_view kDirectNaiveKernel = "cpu.direct_naive";
// Any problem. Parameters: (channel block, width block), one of
// kTiledBlocks each. No workspace.
inline constexpr absl::string_view kDirectTiledKernel = "cpu.direct_tiled";
// fp32 only. Workspace: Im2colWorkspaceBytes.
inline constexpr absl::string_view kIm2colGemmKernel = "cpu.im2col_gemm";
// fp32 only; a 1x1 filter, pad 0, stride 1. No workspace.
inline constexpr absl::string_view kGemm1x1Kernel = "cpu.gemm_1x1";
// fp32 only; 2-D, 3x3 filter, stride 1, dilation 1, forward or backward
// data. Workspace: WinogradWorkspaceBytes.
inline constexpr absl::string_view kWinogradF2x3Kernel = "cpu.winograd_f2x3";
// Faults on purpose, for tests of the measurement worker (kernel_fault.cc):
// scalar 1 picks a null write or a hang. Runs only under
// CONVTUNE_FAULT_SOLVER.
inline constexpr absl::string_view kFaultInjectionKernel =
    "cpu.fault_injection";

// The blocks the tiled kernel is compiled for.
inline constexpr int64_t kTiledBlocks[] = {4, 8, 16};

int64_t Im2colWorkspaceBytes(const ConvProblem& p);
int64_t WinogradWorkspaceBytes(const ConvProblem& p);

absl::Status FaultInjectionKernel(const v1::KernelStep& step,
                                  const std::vector<void*>& buffers);
absl::Status DirectNaiveKernel(const v1::KernelStep& step,
                               const std::vector<void*>& buffers);
absl::Status DirectTiledKernel(const v1::KernelStep& step,
                               const std::vector<void*>& buffers);
absl::Status Im2colGemmKernel(const v1::KernelStep& step,
                              const std::vector<void*>& buffers);
absl::Status Gemm1x1Kernel(const v1::KernelStep& step,
                           const std::vector<void*>& buffers);
absl::Status WinogradF2x3Kernel(const v1::KernelStep& step,
                                const std::vector<void*>& buffers);

// A conv step: buffers (x, w, y[, workspace]), the problem, then `params`.
// Pass a workspace ref with role BUFFER_ROLE_UNSPECIFIED to leave it out.
v1::KernelStep MakeConvStep(absl::string_view kernel, const ConvProblem& p,
                            std::initializer_list<int64_t> params,
                            const v1::BufferRef& x, const v1::BufferRef& w,
                            const v1::BufferRef& y,
                            const v1::BufferRef& workspace = {});

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_KERNEL_CONV_H_
