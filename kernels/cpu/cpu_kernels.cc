#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/onednn_library.h"

namespace convtune::cpu {
namespace {

const absl::flat_hash_map<absl::string_view, CpuKernelFn>& Registry() {
  static const auto* registry =
      new absl::flat_hash_map<absl::string_view, CpuKernelFn>({
          {kConvertKernel, &ConvertKernel},
          {kDirectNaiveKernel, &DirectNaiveKernel},
          {kDirectTiledKernel, &DirectTiledKernel},
          {kIm2colGemmKernel, &Im2colGemmKernel},
          {kGemm1x1Kernel, &Gemm1x1Kernel},
          {kWinogradF2x3Kernel, &WinogradF2x3Kernel},
          {kOnednnConvKernel, &OnednnConvKernel},
          {kFaultInjectionKernel, &FaultInjectionKernel},
      });
  return *registry;
}

}  // namespace

CpuKernelFn FindCpuKernel(absl::string_view name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second;
}

std::vector<absl::string_view> CpuKernelNames() {
  std::vector<absl::string_view> names;
  for (const auto& [name, fn] : Registry()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace convtune::cpu
