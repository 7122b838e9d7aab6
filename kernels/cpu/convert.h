// "cpu.convert": converts a tensor between fp32 and fp16/bf16 storage, so that
// fp32 kernels (BLAS) serve the 16-bit types with fp32 accumulation.
// Stateless; thread-safe.
#ifndef CONVTUNE_KERNELS_CPU_CONVERT_H_
#define CONVTUNE_KERNELS_CPU_CONVERT_H_

#include <vector>

#include "absl/status/status.h"
#include "convtune/v1/plan.pb.h"

namespace convtune::cpu {

inline constexpr absl::string_view kConvertKernel = "cpu.convert";

// Buffers: (src, dst). Scalars: (count, src DataType, dst DataType).
absl::Status ConvertKernel(const v1::KernelStep& step,
                           const std::vector<void*>& buffers);

// Builds the step.
v1::KernelStep MakeConvertStep(int64_t count, int src_type, v1::BufferRef src,
                               int dst_type, v1::BufferRef dst);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_CONVERT_H_
