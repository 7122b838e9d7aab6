// conv_winograd.cu on host lanes, built once per set of options (a CMake
// list of kernel_lanes_test): CT_LANES_NS names this build's namespace,
// CT_LANES_OPTIONS its options as a plan lists them, sorted.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include "kernels/gpu/conv_winograd.cu"

Variant Build() {
  Variant v{"conv_winograd.cu", CT_LANES_OPTIONS, {}};
  v.kernels["wino_input"] = Kernel(wino_input);
#if CT_DIR != 3
  v.kernels["wino_filter"] = Kernel(wino_filter);
  v.kernels["wino_output"] = Kernel(wino_output);
#else
  v.kernels["wino_dy"] = Kernel(wino_dy);
  v.kernels["wino_wrw_output"] = Kernel(wino_wrw_output);
#endif
#if !CT_TILE16
  v.kernels["wino_gemm"] = Kernel(wino_gemm);
#endif
  return v;
}

[[maybe_unused]] const bool kRegistered = Register(Build());

}  // namespace convtune::lanes::CT_LANES_NS
