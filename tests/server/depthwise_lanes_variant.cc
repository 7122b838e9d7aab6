// conv_depthwise.cu on host lanes, built once per set of options (the
// CMake list of depthwise_lanes_test): CT_LANES_NS names this build's
// namespace, CT_LANES_OPTIONS its options as a plan lists them.
#include "tests/server/host_lanes.h"

#define CONVTUNE_BACKEND_HIP 1
namespace convtune::lanes::CT_LANES_NS {
#include "kernels/gpu/prelude.cuh"
#undef CT_KERNEL
#define CT_KERNEL static
#include "kernels/gpu/conv_depthwise.cu"

// The problem's scalars, in plan_args order, from a step's scalars.
#define CT_LANES_PROBLEM(s)                                                 \
  s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], \
      s[12], s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], \
      s[22]

// The workspace argument of the kernels that take one.
#if CT_WS_OUT
#define CT_LANES_WS ws,
#else
#define CT_LANES_WS
#endif

bool Run(const std::string& kernel, unsigned gx, unsigned gy, unsigned bx,
         size_t shared_bytes, const std::vector<int64_t>& s, void* vx, void* vw,
         void* vy, float* ws) {
  ct_t* x = static_cast<ct_t*>(vx);
  ct_t* w = static_cast<ct_t*>(vw);
  ct_t* y = static_cast<ct_t*>(vy);
  std::function<void()> body;
#if CT_DIR != 3
  if (kernel == "conv_depthwise") {
    body = [&] { conv_depthwise(x, w, y, CT_LANES_PROBLEM(s)); };
  } else if (kernel == "conv_depthwise_rows") {
    body = [&] { conv_depthwise_rows(x, w, y, CT_LANES_PROBLEM(s), s[23]); };
  } else if (kernel == "conv_depthwise_nhwc") {
    body = [&] { conv_depthwise_nhwc(x, w, y, CT_LANES_PROBLEM(s), s[23]); };
  }
#else
  if (kernel == "conv_depthwise_wrw") {
    body = [&] {
      conv_depthwise_wrw(x, w, y, CT_LANES_WS CT_LANES_PROBLEM(s), s[23]);
    };
  } else if (kernel == "conv_depthwise_rows_wrw") {
    body = [&] {
      conv_depthwise_rows_wrw(x, w, y, CT_LANES_WS CT_LANES_PROBLEM(s), s[23],
                              s[24]);
    };
  } else if (kernel == "conv_depthwise_nhwc_wrw") {
    body = [&] {
      conv_depthwise_nhwc_wrw(x, w, y, CT_LANES_WS CT_LANES_PROBLEM(s), s[23],
                              s[24]);
    };
  } else if (kernel == "conv_depthwise_reduce") {
    body = [&] { conv_depthwise_reduce(ws, w, s[0], s[1]); };
  }
#endif
  if (!body) return false;
  RunGrid(gx, gy, bx, shared_bytes, [&](float* shared) {
    ct_dw_smem = shared;
    body();
  });
  return true;
}

[[maybe_unused]] const bool kRegistered = Register(CT_LANES_OPTIONS, &Run);

}  // namespace convtune::lanes::CT_LANES_NS
