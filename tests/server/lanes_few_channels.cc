// conv_few_channels.cu on host lanes, built once per set of options (a CMake
// list of kernel_lanes_test): CT_LANES_NS names this build's namespace,
// CT_LANES_OPTIONS its options as a plan lists them, sorted.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include "kernels/gpu/conv_few_channels.cu"

Variant Build() {
  Variant v{"conv_few_channels.cu", CT_LANES_OPTIONS, {}};
#if CT_DIR == 1
  v.kernels["conv_few_channels"] = Kernel(conv_few_channels);
#else
  v.kernels["conv_few_channels_wrw"] = Kernel(conv_few_channels_wrw);
  v.kernels["conv_few_channels_sum"] = Kernel(conv_few_channels_sum);
#endif
  return v;
}

[[maybe_unused]] const bool kRegistered = Register(Build());

}  // namespace convtune::lanes::CT_LANES_NS
