// Forward convolution of layers with few input channels a group (a network's
// first layer: three colour channels), direct on the CUDA cores. An implicit
// GEMM pads such a reduction to its channel step and reads the input once
// for each tap; here the input patch is read once and every tap comes from
// shared memory.
//
// conv_few_channels: a block of CT_FC_THREADS threads computes CT_KB output
// channels of a CT_TH x CT_TW tile of one image's output. It stages the
// tile's input patch (every channel of the group, in fp32, zero outside the
// tensor) and the CT_KB filters, then each thread sums CT_PX positions of one
// column of the tile (rows CT_TH / CT_PX apart) for CT_KT channels, each tap
// one shared load a position and CT_KT / 4 16-byte broadcast loads of
// filters. The patch's columns are stored by phase of the stride (column q at
// (q % SW) * CT_CPS + q / SW), so that a warp's positions read consecutive
// words through every tap.
//
// Compiled in: CT_C (channels a group), the filter CT_FH x CT_FW, its stride
// CT_SH, CT_SW and dilation CT_DH, CT_DW, and the tile CT_TH, CT_TW, CT_KB,
// CT_KT, CT_PX. Sizes, padding and groups are arguments. Indices are 32-bit:
// the solver admits only problems whose tensors index in 32 bits.

#define CT_FC_THREADS 256
// Threads that share a set of CT_KT channels, and the tile's rows one step
// of a thread's CT_PX positions spans.
#define CT_PT (CT_FC_THREADS * CT_KT / CT_KB)
#define CT_ROW_STEP (CT_PT / CT_TW)
// The input patch: rows, columns, columns of one stride phase, row pitch.
#define CT_PR ((CT_TH - 1) * CT_SH + (CT_FH - 1) * CT_DH + 1)
#define CT_PC ((CT_TW - 1) * CT_SW + (CT_FW - 1) * CT_DW + 1)
#define CT_CPS ((CT_PC + CT_SW - 1) / CT_SW)
#define CT_PITCH (CT_SW * CT_CPS)
#define CT_PATCH_FLOATS (CT_C * CT_PR * CT_PITCH)
#define CT_TAPS (CT_C * CT_FH * CT_FW)

#if CT_PT % CT_TW != 0 || CT_TH != CT_PX * CT_ROW_STEP || CT_KT % 4 != 0
#error "conv_few_channels: inconsistent tile"
#endif

struct alignas(16) CtF4 {
  float x, y, z, w;
};

// CT_VEC elements of the tensor type in one 16-byte store.
#define CT_VEC (16 / static_cast<int>(sizeof(ct_t)))
struct alignas(16) CtFcVec {
  ct_t e[16 / sizeof(ct_t)];
};

#if CT_DIR == 1
CT_KERNEL void __launch_bounds__(CT_FC_THREADS)
    conv_few_channels(const ct_t* x, const ct_t* w, ct_t* y,
                      CT_PROBLEM_PARAMS) {
  __shared__ float xs[CT_PATCH_FLOATS];
  __shared__ CtF4 ws4[CT_TAPS * CT_KB / 4];
  float* ws = reinterpret_cast<float*>(ws4);
  const int n_img = static_cast<int>(a_n);
  const int kg = static_cast<int>(a_k / a_g);
  const int ktot = static_cast<int>(a_k), ctot = static_cast<int>(a_c);
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);
  const int oh_n =
      (ih + 2 * static_cast<int>(a_ph) - CT_DH * (CT_FH - 1) - 1) / CT_SH + 1;
  const int ow_n =
      (iw + 2 * static_cast<int>(a_pw) - CT_DW * (CT_FW - 1) - 1) / CT_SW + 1;
  const int tiles_w = (ow_n + CT_TW - 1) / CT_TW;
  const int tiles_h = (oh_n + CT_TH - 1) / CT_TH;
  int bx = blockIdx.x;
  const int ow0 = (bx % tiles_w) * CT_TW;
  bx /= tiles_w;
  const int oh0 = (bx % tiles_h) * CT_TH;
  const int n = bx / tiles_h;
  if (n >= n_img) return;
  const int kblocks = (kg + CT_KB - 1) / CT_KB;
  const int g = blockIdx.y / kblocks;
  const int k0 = (blockIdx.y % kblocks) * CT_KB;
  const int h0 = oh0 * CT_SH - static_cast<int>(a_ph);
  const int w0 = ow0 * CT_SW - static_cast<int>(a_pw);
  const int tid = threadIdx.x;

  // The patch, the tensor's contiguous axis fastest across threads.
  for (int e = tid; e < CT_C * CT_PR * CT_PC; e += CT_FC_THREADS) {
#if CT_NHWC
    const int c = e % CT_C, q = (e / CT_C) % CT_PC, r = e / (CT_C * CT_PC);
#else
    const int q = e % CT_PC, r = (e / CT_PC) % CT_PR, c = e / (CT_PC * CT_PR);
#endif
    const int h = h0 + r, wc = w0 + q;
    float v = 0.0f;
    if (h >= 0 && h < ih && wc >= 0 && wc < iw) {
#if CT_NHWC
      v = ct_to_float(x[((n * ih + h) * iw + wc) * ctot + g * CT_C + c]);
#else
      v = ct_to_float(x[((n * ctot + g * CT_C + c) * ih + h) * iw + wc]);
#endif
    }
    xs[(c * CT_PR + r) * CT_PITCH + (q % CT_SW) * CT_CPS + q / CT_SW] = v;
  }
  // The filters as ws[(c, fh, fw)][k], read in their own order.
  for (int e = tid; e < CT_KB * CT_TAPS; e += CT_FC_THREADS) {
    const int kk = e / CT_TAPS, m = e % CT_TAPS;
#if CT_NHWC
    // [K][FH][FW][C]
    const int c = m % CT_C, rs = m / CT_C;
    const int tap = c * CT_FH * CT_FW + rs;
#else
    const int tap = m;  // [K][C][FH][FW]
#endif
    const int k = k0 + kk;
    ws[tap * CT_KB + kk] =
        k < kg ? ct_to_float(w[(g * kg + k) * CT_TAPS + m]) : 0.0f;
  }
  __syncthreads();

  const int kq = tid / CT_PT, pt = tid % CT_PT;
  const int tx = pt % CT_TW, ty = pt / CT_TW;
  float acc[CT_PX][CT_KT];
#pragma unroll
  for (int j = 0; j < CT_PX; ++j) {
#pragma unroll
    for (int i = 0; i < CT_KT; ++i) acc[j][i] = 0.0f;
  }
  const float* xb = xs + ty * CT_SH * CT_PITCH + tx;
  const float* wb = ws + kq * CT_KT;
#pragma unroll 1
  for (int r = 0; r < CT_FH; ++r) {
#pragma unroll
    for (int c = 0; c < CT_C; ++c) {
      const float* xr = xb + (c * CT_PR + r * CT_DH) * CT_PITCH;
      const float* wr = wb + (c * CT_FH + r) * CT_FW * CT_KB;
#pragma unroll
      for (int s = 0; s < CT_FW; ++s) {
        const int off = ((s * CT_DW) % CT_SW) * CT_CPS + (s * CT_DW) / CT_SW;
        float xv[CT_PX];
#pragma unroll
        for (int j = 0; j < CT_PX; ++j)
          xv[j] = xr[off + j * CT_ROW_STEP * CT_SH * CT_PITCH];
#pragma unroll
        for (int i = 0; i < CT_KT; i += 4) {
          const CtF4 f = *reinterpret_cast<const CtF4*>(wr + s * CT_KB + i);
#pragma unroll
          for (int j = 0; j < CT_PX; ++j) {
            acc[j][i] += xv[j] * f.x;
            acc[j][i + 1] += xv[j] * f.y;
            acc[j][i + 2] += xv[j] * f.z;
            acc[j][i + 3] += xv[j] * f.w;
          }
        }
      }
    }
  }

  const int ow = ow0 + tx;
  if (ow >= ow_n) return;
  const int kb = k0 + kq * CT_KT;  // this thread's first channel in the group
#pragma unroll
  for (int j = 0; j < CT_PX; ++j) {
    const int oh = oh0 + ty + j * CT_ROW_STEP;
    if (oh >= oh_n) break;
#if CT_NHWC
    ct_t* dst = y + ((n * oh_n + oh) * ow_n + ow) * ktot + g * kg + kb;
    // Whole 16-byte runs where the channels keep every run aligned.
    const bool vec = ktot % CT_VEC == 0 && kg % CT_VEC == 0;
#pragma unroll
    for (int i = 0; i < CT_KT; i += CT_VEC) {
      if (vec && kb + i + CT_VEC <= kg) {
        CtFcVec v;
#pragma unroll
        for (int u = 0; u < CT_VEC; ++u)
          v.e[u] = ct_from_float<ct_t>(acc[j][i + u]);
        *reinterpret_cast<CtFcVec*>(dst + i) = v;
      } else {
#pragma unroll
        for (int u = 0; u < CT_VEC; ++u) {
          if (kb + i + u < kg) dst[i + u] = ct_from_float<ct_t>(acc[j][i + u]);
        }
      }
    }
#else
#pragma unroll
    for (int i = 0; i < CT_KT; ++i) {
      if (kb + i < kg) {
        y[((n * ktot + g * kg + kb + i) * oh_n + oh) * ow_n + ow] =
            ct_from_float<ct_t>(acc[j][i]);
      }
    }
#endif
  }
}
#endif
