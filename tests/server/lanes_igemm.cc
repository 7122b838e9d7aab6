// conv_igemm.cu on host lanes, built once per set of options (a CMake list of
// kernel_lanes_test): CT_LANES_NS names this build's namespace,
// CT_LANES_OPTIONS its options as a plan lists them, sorted.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include "kernels/gpu/conv_igemm.cu"

Variant Build() {
  Variant v{"conv_igemm.cu", CT_LANES_OPTIONS, {}};
  v.kernels["conv_igemm"] = Kernel(conv_igemm);
  v.kernels["conv_igemm_reduce"] = Kernel(conv_igemm_reduce);
  return v;
}

[[maybe_unused]] const bool kRegistered = Register(Build());

}  // namespace convtune::lanes::CT_LANES_NS
