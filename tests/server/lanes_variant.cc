// One kernel source of kernels/gpu on host lanes, built once per source and
// set of options (the CMake lists of kernel_lanes_test): CT_LANES_FILE names
// the source and CT_LANES_INCLUDE its path, CT_LANES_NS this build's namespace,
// CT_LANES_OPTIONS its options as a plan lists them, sorted. The table below
// lists each source's kernels, by the name a plan step gives.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include CT_LANES_INCLUDE

#define CT_LANES_KERNEL(name, ...) \
  v.kernels[#name] = Kernel(name, ##__VA_ARGS__)

Variant Build() {
  Variant v{CT_LANES_FILE, CT_LANES_OPTIONS, {}};
#if defined(CT_LANES_CONV_DEPTHWISE)
  const SetShared dynamic = [](float* shared) { ct_dw_smem = shared; };
#if CT_DIR != 3
  CT_LANES_KERNEL(conv_depthwise, dynamic);
  CT_LANES_KERNEL(conv_depthwise_rows, dynamic);
  CT_LANES_KERNEL(conv_depthwise_nhwc, dynamic);
#else
  CT_LANES_KERNEL(conv_depthwise_wrw, dynamic);
  CT_LANES_KERNEL(conv_depthwise_rows_wrw, dynamic);
  CT_LANES_KERNEL(conv_depthwise_nhwc_wrw, dynamic);
  CT_LANES_KERNEL(conv_depthwise_reduce);
#endif
#elif defined(CT_LANES_CONV_WINOGRAD)
  CT_LANES_KERNEL(wino_input);
#if CT_DIR != 3
  CT_LANES_KERNEL(wino_filter);
  CT_LANES_KERNEL(wino_output);
#else
  CT_LANES_KERNEL(wino_dy);
  CT_LANES_KERNEL(wino_wrw_output);
#endif
#if !CT_TILE16
  CT_LANES_KERNEL(wino_gemm);
#endif
#elif defined(CT_LANES_CONV_DIRECT_TILED)
  CT_LANES_KERNEL(conv_tiled);
#if CT_WS_OUT
  CT_LANES_KERNEL(conv_tiled_reduce);
#endif
#elif defined(CT_LANES_CONV_DIRECT)
  CT_LANES_KERNEL(conv_naive);
#elif defined(CT_LANES_CONV_IGEMM)
  CT_LANES_KERNEL(conv_igemm);
  CT_LANES_KERNEL(conv_igemm_reduce);
#elif defined(CT_LANES_CONV_FEW_CHANNELS)
#if CT_DIR == 1
  CT_LANES_KERNEL(conv_few_channels);
#else
  CT_LANES_KERNEL(conv_few_channels_wrw);
  CT_LANES_KERNEL(conv_few_channels_sum);
#endif
#else
#error "no kernel table for CT_LANES_FILE"
#endif
  return v;
}

[[maybe_unused]] const bool kRegistered = Register(Build());

}  // namespace convtune::lanes::CT_LANES_NS
