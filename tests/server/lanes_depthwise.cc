// conv_depthwise.cu on host lanes, built once per set of options (a CMake
// list of kernel_lanes_test): CT_LANES_NS names this build's namespace,
// CT_LANES_OPTIONS its options as a plan lists them, sorted.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include "kernels/gpu/conv_depthwise.cu"

void SetDynamicShared(float* shared) { ct_dw_smem = shared; }

Variant Build() {
  Variant v{"conv_depthwise.cu", CT_LANES_OPTIONS, {}};
#if CT_DIR != 3
  v.kernels["conv_depthwise"] = Kernel(conv_depthwise, SetDynamicShared);
  v.kernels["conv_depthwise_rows"] =
      Kernel(conv_depthwise_rows, SetDynamicShared);
  v.kernels["conv_depthwise_nhwc"] =
      Kernel(conv_depthwise_nhwc, SetDynamicShared);
#else
  v.kernels["conv_depthwise_wrw"] =
      Kernel(conv_depthwise_wrw, SetDynamicShared);
  v.kernels["conv_depthwise_rows_wrw"] =
      Kernel(conv_depthwise_rows_wrw, SetDynamicShared);
  v.kernels["conv_depthwise_nhwc_wrw"] =
      Kernel(conv_depthwise_nhwc_wrw, SetDynamicShared);
  v.kernels["conv_depthwise_reduce"] = Kernel(conv_depthwise_reduce);
#endif
  return v;
}

[[maybe_unused]] const bool kRegistered = Register(Build());

}  // namespace convtune::lanes::CT_LANES_NS
