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
// conv_few_channels_wrw (backward weights): a block owns all CT_C x CT_FH x
// CT_FW taps of CT_KB output channels and sums them over a split of the
// CT_TH x CT_TW output tiles of every image, staging each tile's input patch
// (as above) and its dy in shared memory. A thread owns CT_KT channels of the
// CT_FW taps of one (channel, filter row), over every CT_WSUB-th position of
// each tile; the block then adds its threads' sums and writes them, fp32, to
// its split's slice of the workspace (dw's layout), and conv_few_channels_sum
// adds the slices into dw.
//
// Compiled in: CT_C (channels a group), the filter CT_FH x CT_FW, its stride
// CT_SH, CT_SW and dilation CT_DH, CT_DW, and the tile CT_TH, CT_TW, CT_KB,
// CT_KT, CT_PX (F). Sizes, padding and groups are arguments; W also takes the
// number of splits. Indices are 32-bit (a workspace slice's start 64-bit):
// the solver admits only problems whose tensors index in 32 bits.

// Defaults so that the source compiles on its own: a 3x3 first layer.
#ifndef CT_C
#define CT_C 3
#endif
#ifndef CT_FH
#define CT_FH 3
#endif
#ifndef CT_FW
#define CT_FW 3
#endif
#ifndef CT_SH
#define CT_SH 1
#endif
#ifndef CT_SW
#define CT_SW 1
#endif
#ifndef CT_DH
#define CT_DH 1
#endif
#ifndef CT_DW
#define CT_DW 1
#endif
#ifndef CT_TW
#define CT_TW 32
#endif
#ifndef CT_KB
#define CT_KB 32
#endif
#ifndef CT_KT
#define CT_KT 8
#endif
#ifndef CT_PX
#define CT_PX 4
#endif
#ifndef CT_TH
#define CT_TH 8
#endif
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
#define CT_TILE (CT_TH * CT_TW)

#if CT_DIR == 1 && !defined(CT_FC_MMA) && \
    (CT_PT % CT_TW != 0 || CT_TH != CT_PX * CT_ROW_STEP || CT_KT % 4 != 0)
#error "conv_few_channels: inconsistent tile"
#endif

struct alignas(16) CtF4 {
  float x, y, z, w;
};

// The problem as the kernels use it: sizes, the output's CT_TH x CT_TW
// tiles, and the block's group g and first output channel k0 (blockIdx.y
// counts CT_KB-channel blocks of each group).
#define CT_FC_SIZES                                                     \
  const int n_img = static_cast<int>(a_n);                              \
  const int kg = static_cast<int>(a_k / a_g);                           \
  const int ktot = static_cast<int>(a_k), ctot = static_cast<int>(a_c); \
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);   \
  const int ph = static_cast<int>(a_ph), pw = static_cast<int>(a_pw);   \
  const int oh_n = (ih + 2 * ph - CT_DH * (CT_FH - 1) - 1) / CT_SH + 1; \
  const int ow_n = (iw + 2 * pw - CT_DW * (CT_FW - 1) - 1) / CT_SW + 1; \
  const int tiles_w = (ow_n + CT_TW - 1) / CT_TW;                       \
  const int tiles_h = (oh_n + CT_TH - 1) / CT_TH;                       \
  const int kblocks = (kg + CT_KB - 1) / CT_KB;                         \
  const int g = blockIdx.y / kblocks;                                   \
  const int k0 = (blockIdx.y % kblocks) * CT_KB
// Output tile t (along the width fastest, then the height, then images):
// image n, corner (oh0, ow0), and its patch's corner (h0, w0).
#define CT_FC_TILE(t)                                  \
  const int ow0 = ((t) % tiles_w) * CT_TW;             \
  const int oh0 = (((t) / tiles_w) % tiles_h) * CT_TH; \
  const int n = (t) / (tiles_w * tiles_h);             \
  const int h0 = oh0 * CT_SH - ph, w0 = ow0 * CT_SW - pw

// Where the patch keeps its column q: by phase of the stride, (q % SW) *
// CT_CPS + q / SW. Tile column tx through filter column s reads patch column
// tx * SW + s * DW, kept at tx + ct_fc_col(s * DW).
CT_DEVICE int ct_fc_col(int q) { return (q % CT_SW) * CT_CPS + q / CT_SW; }

// dw's element for output channel gk (of all groups) and tap (c, r, s), in
// the filter's layout: [K][FH][FW][C] (NHWC) or [K][C][FH][FW].
CT_DEVICE int ct_fc_dw_at(int gk, int c, int r, int s) {
#if CT_NHWC
  return ((gk * CT_FH + r) * CT_FW + s) * CT_C + c;
#else
  return ((gk * CT_C + c) * CT_FH + r) * CT_FW + s;
#endif
}

// A staged value: the input in fp32, or (the MMA kernel) its 16 bits as
// they are.
template <typename T>
CT_DEVICE T ct_fc_value(ct_t v);
template <>
CT_DEVICE float ct_fc_value<float>(ct_t v) {
  return ct_to_float(v);
}
#if CT_TYPE != 1
template <>
CT_DEVICE ct_u16 ct_fc_value<ct_u16>(ct_t v) {
  return v.bits;
}
#endif

// Stages the CT_C x CT_PR x CT_PC input patch at (h0, w0) of image n, group
// g, into dst as [channel][row][ct_fc_col(column)], zero outside the
// tensor; the tensor's contiguous axis fastest across the block's `threads`
// threads.
template <typename T>
CT_DEVICE void ct_fc_stage_patch(T* dst, const ct_t* x, int n, int g, int h0,
                                 int w0, int ih, int iw, int ctot, int tid,
                                 int threads) {
  for (int e = tid; e < CT_C * CT_PR * CT_PC; e += threads) {
#if CT_NHWC
    const int c = e % CT_C, q = (e / CT_C) % CT_PC, r = e / (CT_C * CT_PC);
#else
    const int q = e % CT_PC, r = (e / CT_PC) % CT_PR, c = e / (CT_PC * CT_PR);
#endif
    const int h = h0 + r, wc = w0 + q;
    T v = T(0);
    if (h >= 0 && h < ih && wc >= 0 && wc < iw) {
#if CT_NHWC
      v = ct_fc_value<T>(x[((n * ih + h) * iw + wc) * ctot + g * CT_C + c]);
#else
      v = ct_fc_value<T>(x[((n * ctot + g * CT_C + c) * ih + h) * iw + wc]);
#endif
    }
    dst[(c * CT_PR + r) * CT_PITCH + ct_fc_col(q)] = v;
  }
}

// CT_VEC elements of the tensor type in one 16-byte store.
#define CT_VEC (16 / static_cast<int>(sizeof(ct_t)))
struct alignas(16) CtFcVec {
  ct_t e[16 / sizeof(ct_t)];
};

#if CT_DIR == 1 && !defined(CT_FC_MMA)
CT_KERNEL void __launch_bounds__(CT_FC_THREADS)
    conv_few_channels(const ct_t* x, const ct_t* w, ct_t* y,
                      CT_PROBLEM_PARAMS) {
  __shared__ float xs[CT_PATCH_FLOATS];
  __shared__ CtF4 ws4[CT_TAPS * CT_KB / 4];
  float* ws = reinterpret_cast<float*>(ws4);
  CT_FC_SIZES;
  CT_FC_TILE(static_cast<int>(blockIdx.x));
  if (n >= n_img) return;
  const int tid = threadIdx.x;

  ct_fc_stage_patch(xs, x, n, g, h0, w0, ih, iw, ctot, tid, CT_FC_THREADS);
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
        const int off = ct_fc_col(s * CT_DW);
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
    // Whole 16-byte runs where the channels and y keep every run aligned.
    const bool vec = ktot % CT_VEC == 0 && kg % CT_VEC == 0 &&
                     (reinterpret_cast<ct_u64>(y) & 15) == 0;
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

#if CT_DIR == 3 && !defined(CT_FC_MMA)
// Threads that own distinct dw elements, and the position subsets that
// share each such set.
#define CT_OWNERS ((CT_KB / CT_KT) * CT_C * CT_FH)
#define CT_WSUB (CT_FC_THREADS / CT_OWNERS)
#define CT_WTHREADS (CT_OWNERS * CT_WSUB)
#if CT_WSUB < 1 || CT_KB % CT_KT != 0 || CT_KT % 4 != 0
#error "conv_few_channels_wrw: inconsistent tile"
#endif
// The block's sums, one row of CT_KT x CT_FW a thread, fit where the patch
// and dy tile were.
#define CT_PATCH_ALIGNED ((CT_PATCH_FLOATS + 3) / 4 * 4)
#define CT_WSMEM_STAGE (CT_PATCH_ALIGNED + CT_TILE * CT_KB)
#define CT_WSMEM_SUMS (CT_WTHREADS * CT_KT * CT_FW)
#define CT_WSMEM \
  (CT_WSMEM_STAGE > CT_WSMEM_SUMS ? CT_WSMEM_STAGE : CT_WSMEM_SUMS)

CT_KERNEL void __launch_bounds__(CT_WTHREADS)
    conv_few_channels_wrw(const ct_t* x, ct_t* w, const ct_t* y, float* part,
                          CT_PROBLEM_PARAMS, ct_i64 a_splits) {
  __shared__ CtF4 smem4[(CT_WSMEM + 3) / 4];
  float* xs = reinterpret_cast<float*>(smem4);
  float* ds = xs + CT_PATCH_ALIGNED;  // [position][CT_KB]
  CT_FC_SIZES;
  const int tiles = n_img * tiles_h * tiles_w;
  const int splits = static_cast<int>(a_splits);
  const int tid = threadIdx.x;
  const int owner = tid % CT_OWNERS, sub = tid / CT_OWNERS;
  const int kq = owner % (CT_KB / CT_KT);
  const int cr = owner / (CT_KB / CT_KT);  // c * CT_FH + r
  const int c_own = cr / CT_FH, r_own = cr % CT_FH;

  float acc[CT_KT][CT_FW];
#pragma unroll
  for (int i = 0; i < CT_KT; ++i) {
#pragma unroll
    for (int s = 0; s < CT_FW; ++s) acc[i][s] = 0.0f;
  }
  for (int t = blockIdx.x; t < tiles; t += splits) {
    CT_FC_TILE(t);
    __syncthreads();  // the previous tile is consumed
    ct_fc_stage_patch(xs, x, n, g, h0, w0, ih, iw, ctot, tid, CT_WTHREADS);
    // dy of the tile's positions, zero past the output and the channels.
    for (int e = tid; e < CT_TILE * CT_KB; e += CT_WTHREADS) {
#if CT_NHWC
      const int kk = e % CT_KB, pos = e / CT_KB;
#else
      const int pos = e % CT_TILE, kk = e / CT_TILE;
#endif
      const int oh = oh0 + pos / CT_TW, ow = ow0 + pos % CT_TW;
      const int k = k0 + kk;
      float v = 0.0f;
      if (oh < oh_n && ow < ow_n && k < kg) {
#if CT_NHWC
        v = ct_to_float(y[((n * oh_n + oh) * ow_n + ow) * ktot + g * kg + k]);
#else
        v = ct_to_float(y[((n * ktot + g * kg + k) * oh_n + oh) * ow_n + ow]);
#endif
      }
      ds[pos * CT_KB + kk] = v;
    }
    __syncthreads();
    const float* xr = xs + (c_own * CT_PR + r_own * CT_DH) * CT_PITCH;
    for (int pos = sub; pos < CT_TILE; pos += CT_WSUB) {
      const int ty = pos / CT_TW, tx = pos % CT_TW;
      // Past the output, dy is zero but x may be anything, NaN included.
      if (oh0 + ty >= oh_n || ow0 + tx >= ow_n) continue;
      const float* xp = xr + ty * CT_SH * CT_PITCH + tx;
      float xv[CT_FW];
#pragma unroll
      for (int s = 0; s < CT_FW; ++s) {
        xv[s] = xp[ct_fc_col(s * CT_DW)];
      }
      const CtF4* dp =
          reinterpret_cast<const CtF4*>(ds + pos * CT_KB + kq * CT_KT);
#pragma unroll
      for (int i = 0; i < CT_KT; i += 4) {
        const CtF4 d = dp[i / 4];
#pragma unroll
        for (int s = 0; s < CT_FW; ++s) {
          acc[i][s] += d.x * xv[s];
          acc[i + 1][s] += d.y * xv[s];
          acc[i + 2][s] += d.z * xv[s];
          acc[i + 3][s] += d.w * xv[s];
        }
      }
    }
  }

  // The subsets' sums of each owner's elements, then the block's slice.
  __syncthreads();
  float* sums = xs;
#pragma unroll
  for (int i = 0; i < CT_KT; ++i) {
#pragma unroll
    for (int s = 0; s < CT_FW; ++s)
      sums[(tid * CT_KT + i) * CT_FW + s] = acc[i][s];
  }
  __syncthreads();
  const int count = static_cast<int>(a_k) * CT_TAPS;  // dw's elements
  float* slice = part + static_cast<long long>(blockIdx.x) * count;
  for (int e = tid; e < CT_OWNERS * CT_KT * CT_FW; e += CT_WTHREADS) {
    const int o = e / (CT_KT * CT_FW), i = (e / CT_FW) % CT_KT, s = e % CT_FW;
    float total = 0.0f;
    for (int u = 0; u < CT_WSUB; ++u)
      total += sums[(u * CT_OWNERS + o) * CT_KT * CT_FW + i * CT_FW + s];
    const int k = k0 + (o % (CT_KB / CT_KT)) * CT_KT + i;
    const int oc = o / (CT_KB / CT_KT);
    const int c = oc / CT_FH, r = oc % CT_FH;
    if (k < kg) slice[ct_fc_dw_at(g * kg + k, c, r, s)] = total;
  }
  (void)w;
}
#endif

#if CT_DIR == 3
// Adds the splits' slices into dw, in its type.
CT_KERNEL void conv_few_channels_sum(const float* part, ct_t* w, ct_i64 a_count,
                                     ct_i64 a_splits) {
  ct_sum_slices(part, w, a_count, a_splits);
}
#endif

#if defined(CT_FC_MMA) && defined(CONVTUNE_BACKEND_CUDA)
#if CT_TYPE == 1
#error "conv_few_channels_mma: 16-bit types only"
#endif
// The MMA kernels' warps a block, and their 16-bit patch in halves.
#define CT_MW 4
#define CT_PATCH_HALVES ((CT_C * CT_PR * CT_PITCH + 7) / 8 * 8)

CT_DEVICE ct_u32 ct_pack2(ct_u16 lo, ct_u16 hi) {
  return static_cast<ct_u32>(lo) | (static_cast<ct_u32>(hi) << 16);
}
#endif

#if CT_DIR == 1 && defined(CT_FC_MMA) && defined(CONVTUNE_BACKEND_CUDA)
// conv_few_channels_mma (16-bit types, sm_80+): F as a GEMM on the tensor
// cores, y[p][k] = sum over taps t = (c, fh, fw) of x(p, t) w[k][t]. Four
// warps a block, each taking every fourth step of 16 positions (of one row:
// CT_TW is a multiple of 16) of the CT_TH x CT_TW tile for all CT_KB
// channels: CT_KS k-steps of 16 taps, each CT_KB / 8 MMAs of 16 x 8. A
// lane's A fragments (x, 16 positions by 16 taps) come from the staged
// patch, two 16-bit values a register, taps past the filter zero; its B
// fragments (w, 16 taps by 8 channels) are 32-bit words of the filters
// staged as [channel][tap]. A step's sums leave through the warp's
// [position][channel] tile, so that NHWC y takes 16-byte runs.
#define CT_KS ((CT_TAPS + 15) / 16)  // k-steps of 16 taps
#define CT_WPITCH (CT_KS * 16 + 8)   // halves a staged filter, padded
#define CT_OPITCH (CT_KB + 8)        // halves a staged output position
#define CT_FSMEM (CT_PATCH_HALVES + CT_KB * CT_WPITCH + CT_MW * 16 * CT_OPITCH)
#if CT_KB % 8 != 0 || CT_TW % 16 != 0
#error "conv_few_channels_mma: inconsistent tile"
#endif

CT_KERNEL void __launch_bounds__(CT_MW * 32)
    conv_few_channels_mma(const ct_t* px, const ct_t* pf, ct_t* py,
                          CT_PROBLEM_PARAMS) {
  __shared__ ct_v16 smem16[(CT_FSMEM + 7) / 8];
  ct_u16* xs = reinterpret_cast<ct_u16*>(smem16);
  ct_u16* ws = xs + CT_PATCH_HALVES;  // [channel][CT_WPITCH]
  const ct_u16* f = reinterpret_cast<const ct_u16*>(pf);
  ct_u16* y = reinterpret_cast<ct_u16*>(py);
  CT_FC_SIZES;
  CT_FC_TILE(static_cast<int>(blockIdx.x));
  if (n >= n_img) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, q = lane & 3;
  ct_u16* os = ws + CT_KB * CT_WPITCH + warp * 16 * CT_OPITCH;

  ct_fc_stage_patch(xs, px, n, g, h0, w0, ih, iw, ctot, tid, CT_MW * 32);
  // The filters in tap order (c, fh, fw), zero past the taps and kg.
  for (int e = tid; e < CT_KB * CT_KS * 16; e += CT_MW * 32) {
    const int kk = e / (CT_KS * 16), t = e % (CT_KS * 16);
    const int k = k0 + kk;
    ct_u16 v = 0;
    if (k < kg && t < CT_TAPS) {
#if CT_NHWC
      // [K][FH][FW][C]
      const int c = t / (CT_FH * CT_FW), rs = t % (CT_FH * CT_FW);
      v = f[(g * kg + k) * CT_TAPS + rs * CT_C + c];
#else
      v = f[(g * kg + k) * CT_TAPS + t];  // [K][C][FH][FW]
#endif
    }
    ws[kk * CT_WPITCH + t] = v;
  }

  // This lane's taps of each k-step (2q, 2q + 1, 2q + 8, 2q + 9 past its
  // first) as patch offsets, -1 past the filter.
  int toff[CT_KS][4];
#pragma unroll
  for (int j = 0; j < CT_KS; ++j) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int t = 16 * j + 2 * q + (u & 1) + 8 * (u >> 1);
      const int c = t / (CT_FH * CT_FW), r = (t / CT_FW) % CT_FH, s = t % CT_FW;
      toff[j][u] = t < CT_TAPS ? (c * CT_PR + r * CT_DH) * CT_PITCH +
                                     ct_fc_col(s * CT_DW)
                               : -1;
    }
  }
  // NHWC y in 16-byte runs where the channels and y keep every run aligned.
  const bool vec =
      ktot % 8 == 0 && kg % 8 == 0 && (reinterpret_cast<ct_u64>(py) & 15) == 0;
  __syncthreads();

  for (int step = warp; step < CT_TILE / 16; step += CT_MW) {
    const int p0 = step * 16;
    const int ty = p0 / CT_TW, tx0 = p0 % CT_TW;
    const int oh = oh0 + ty;
    if (oh >= oh_n || ow0 + tx0 >= ow_n) continue;  // the same for the warp
    // Position gq's column of the patch (gq + 8's is 8 further on).
    const ct_u16* xp = xs + ty * CT_SH * CT_PITCH + tx0 + gq;
    float acc[CT_KB / 8][4];
#pragma unroll
    for (int i = 0; i < CT_KB / 8; ++i) {
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][v] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < CT_KS; ++j) {
      ct_u16 lo[4], hi[4];  // positions gq and gq + 8 at the lane's taps
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int o = toff[j][u];
        lo[u] = o >= 0 ? xp[o] : ct_u16(0);
        hi[u] = o >= 0 ? xp[o + 8] : ct_u16(0);
      }
      const ct_u32 a[4] = {ct_pack2(lo[0], lo[1]), ct_pack2(hi[0], hi[1]),
                           ct_pack2(lo[2], lo[3]), ct_pack2(hi[2], hi[3])};
      const ct_u16* wb = ws + gq * CT_WPITCH + 16 * j + 2 * q;
#pragma unroll
      for (int i = 0; i < CT_KB / 8; ++i) {
        const ct_u32* wi =
            reinterpret_cast<const ct_u32*>(wb + 8 * i * CT_WPITCH);
        const ct_u32 b[2] = {wi[0], wi[4]};
        ct_mma_16816(acc[i], a, b);
      }
    }
    // The step's 16 x CT_KB sums through the warp's tile.
#pragma unroll
    for (int i = 0; i < CT_KB / 8; ++i) {
      const int kk = 8 * i + 2 * q;
      *reinterpret_cast<ct_u32*>(os + gq * CT_OPITCH + kk) =
          ct_pack2(ct_from_float<ct_t>(acc[i][0]).bits,
                   ct_from_float<ct_t>(acc[i][1]).bits);
      *reinterpret_cast<ct_u32*>(os + (gq + 8) * CT_OPITCH + kk) =
          ct_pack2(ct_from_float<ct_t>(acc[i][2]).bits,
                   ct_from_float<ct_t>(acc[i][3]).bits);
    }
    __syncwarp();
#if CT_NHWC
    for (int e = lane; e < 16 * (CT_KB / 8); e += 32) {
      const int pos = e / (CT_KB / 8), kk = (e % (CT_KB / 8)) * 8;
      const int ow = ow0 + tx0 + pos, k = k0 + kk;
      if (ow >= ow_n || k >= kg) continue;
      ct_u16* dst = y + ((n * oh_n + oh) * ow_n + ow) * ktot + g * kg + k;
      const ct_u16* src = os + pos * CT_OPITCH + kk;
      if (vec && k + 8 <= kg) {
        *reinterpret_cast<ct_v16*>(dst) = *reinterpret_cast<const ct_v16*>(src);
      } else {
        for (int u = 0; u < 8 && k + u < kg; ++u) dst[u] = src[u];
      }
    }
#else
    for (int e = lane; e < 16 * CT_KB; e += 32) {
      const int pos = e % 16, kk = e / 16;
      const int ow = ow0 + tx0 + pos, k = k0 + kk;
      if (ow >= ow_n || k >= kg) continue;
      y[((n * ktot + g * kg + k) * oh_n + oh) * ow_n + ow] =
          os[pos * CT_OPITCH + kk];
    }
#endif
    __syncwarp();  // the tile is read before the next step writes it
  }
  (void)vec;
}
#endif

#if CT_DIR == 3 && defined(CT_FC_MMA) && defined(CONVTUNE_BACKEND_CUDA)
// conv_few_channels_mma_wrw (16-bit types, sm_80+): W as a GEMM on the
// tensor cores, dw[k][t] = sum over positions p of dy[p][k] * x(p, t), the
// taps t = (c, fh, fw) in dw's NCHW order. Four warps a block, each with
// the block's whole CT_KB x taps tile of sums (CT_KB / 16 by CT_NT MMA
// tiles of 16 x 8) over every fourth step of 16 positions of the staged
// tile. A lane's A fragments (dy, 16 channels by 16 positions) and B
// fragments (x, 16 positions by 8 taps) come from the staged dy and patch,
// two 16-bit values a register; taps past the filter's read as zero. The
// warps' sums meet in shared memory and go to the block's workspace slice
// as in conv_few_channels_wrw.
#define CT_MT (CT_KB / 16)
#define CT_NT ((CT_TAPS + 7) / 8)
#define CT_DPITCH (CT_KB + 8)  // halves a staged dy position, padded
#define CT_MSTAGE (CT_PATCH_HALVES + CT_TILE * CT_DPITCH)       // halves
#define CT_MSUMS (CT_MW * CT_MT * CT_NT * 32 * 4 * 2)           // as halves
#define CT_MSMEM (CT_MSTAGE > CT_MSUMS ? CT_MSTAGE : CT_MSUMS)  // halves
#if CT_KB % 16 != 0 || CT_TW % 16 != 0
#error "conv_few_channels_mma_wrw: inconsistent tile"
#endif

CT_KERNEL void __launch_bounds__(CT_MW * 32)
    conv_few_channels_mma_wrw(const ct_t* px, ct_t* w, const ct_t* py,
                              float* part, CT_PROBLEM_PARAMS, ct_i64 a_splits) {
  __shared__ ct_v16 smem16[(CT_MSMEM + 7) / 8];
  ct_u16* xs = reinterpret_cast<ct_u16*>(smem16);
  ct_u16* ds = xs + CT_PATCH_HALVES;  // [position][CT_DPITCH]
  const ct_u16* y = reinterpret_cast<const ct_u16*>(py);
  CT_FC_SIZES;
  const int tiles = n_img * tiles_h * tiles_w;
  const int splits = static_cast<int>(a_splits);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, q = lane & 3;
  // dy moves in 16-byte runs of 8 channels where every run aligns.
  const bool dy_vec = CT_NHWC && ktot % 8 == 0 && (g * kg + k0) % 8 == 0 &&
                      (reinterpret_cast<ct_u64>(py) & 15) == 0;

  // This lane's tap (column gq of each 8-tap tile) as a patch offset.
  int toff[CT_NT];
  bool tap_ok[CT_NT];
#pragma unroll
  for (int j = 0; j < CT_NT; ++j) {
    const int t = 8 * j + gq;
    tap_ok[j] = t < CT_TAPS;
    const int tt = tap_ok[j] ? t : 0;
    const int c = tt / (CT_FH * CT_FW), r = (tt / CT_FW) % CT_FH,
              s = tt % CT_FW;
    toff[j] = (c * CT_PR + r * CT_DH) * CT_PITCH + ct_fc_col(s * CT_DW);
  }
  float acc[CT_MT][CT_NT][4];
#pragma unroll
  for (int i = 0; i < CT_MT; ++i) {
#pragma unroll
    for (int j = 0; j < CT_NT; ++j) {
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;
    }
  }

  for (int t = blockIdx.x; t < tiles; t += splits) {
    CT_FC_TILE(t);
    __syncthreads();  // the previous tile is consumed
    ct_fc_stage_patch(xs, px, n, g, h0, w0, ih, iw, ctot, tid, CT_MW * 32);
    // dy, [position][channel], zero past the output and the channels.
    for (int e = tid; e < CT_TILE * (CT_KB / 8); e += CT_MW * 32) {
      const int pos = e / (CT_KB / 8), kk = (e % (CT_KB / 8)) * 8;
      const int oh = oh0 + pos / CT_TW, ow = ow0 + pos % CT_TW;
      const bool in = oh < oh_n && ow < ow_n;
      ct_u16* to = ds + pos * CT_DPITCH + kk;
      if (dy_vec && in && k0 + kk + 8 <= kg) {
        const ct_v16 v = *reinterpret_cast<const ct_v16*>(
            y + ((n * oh_n + oh) * ow_n + ow) * ktot + g * kg + k0 + kk);
        *reinterpret_cast<ct_v16*>(to) = v;
      } else {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int k = k0 + kk + u;
          ct_u16 v = 0;
          if (in && k < kg) {
#if CT_NHWC
            v = y[((n * oh_n + oh) * ow_n + ow) * ktot + g * kg + k];
#else
            v = y[((n * ktot + g * kg + k) * oh_n + oh) * ow_n + ow];
#endif
          }
          to[u] = v;
        }
      }
    }
    __syncthreads();
    for (int step = warp; step < CT_TILE / 16; step += CT_MW) {
      const int p0 = step * 16;
      const int pb = (p0 / CT_TW) * CT_SH * CT_PITCH + p0 % CT_TW + 2 * q;
      // The lane's four positions (one row: CT_TW is a multiple of 16) past
      // the output read as zero x, since x there may be anything, NaN
      // included, and zero dy does not cancel it.
      const int ow_l = ow0 + p0 % CT_TW + 2 * q;
      const bool row_in = oh0 + p0 / CT_TW < oh_n;
      const ct_u32 lo = (row_in && ow_l < ow_n ? 0xffffu : 0u) |
                        (row_in && ow_l + 1 < ow_n ? 0xffff0000u : 0u);
      const ct_u32 hi = (row_in && ow_l + 8 < ow_n ? 0xffffu : 0u) |
                        (row_in && ow_l + 9 < ow_n ? 0xffff0000u : 0u);
      ct_u32 b[CT_NT][2];
#pragma unroll
      for (int j = 0; j < CT_NT; ++j) {
        const ct_u16* xp = xs + toff[j] + pb;
        b[j][0] = tap_ok[j] ? ct_pack2(xp[0], xp[1]) & lo : 0u;
        b[j][1] = tap_ok[j] ? ct_pack2(xp[8], xp[9]) & hi : 0u;
      }
      const ct_u16* d0 = ds + (p0 + 2 * q) * CT_DPITCH + gq;
#pragma unroll
      for (int i = 0; i < CT_MT; ++i) {
        const ct_u16* d = d0 + 16 * i;
        ct_u32 a[4];
        a[0] = ct_pack2(d[0], d[CT_DPITCH]);
        a[1] = ct_pack2(d[8], d[CT_DPITCH + 8]);
        a[2] = ct_pack2(d[8 * CT_DPITCH], d[9 * CT_DPITCH]);
        a[3] = ct_pack2(d[8 * CT_DPITCH + 8], d[9 * CT_DPITCH + 8]);
#pragma unroll
        for (int j = 0; j < CT_NT; ++j) ct_mma_16816(acc[i][j], a, b[j]);
      }
    }
  }

  // The warps' sums, then the block's slice in dw's layout.
  __syncthreads();
  float* sums = reinterpret_cast<float*>(smem16);
#pragma unroll
  for (int i = 0; i < CT_MT; ++i) {
#pragma unroll
    for (int j = 0; j < CT_NT; ++j) {
#pragma unroll
      for (int v = 0; v < 4; ++v)
        sums[(((warp * CT_MT + i) * CT_NT + j) * 4 + v) * 32 + lane] =
            acc[i][j][v];
    }
  }
  __syncthreads();
  const int count = static_cast<int>(a_k) * CT_TAPS;  // dw's elements
  float* slice = part + static_cast<long long>(blockIdx.x) * count;
  for (int e = tid; e < CT_MT * CT_NT * 4 * 32; e += CT_MW * 32) {
    float total = 0.0f;
#pragma unroll
    for (int u = 0; u < CT_MW; ++u) total += sums[u * CT_MT * CT_NT * 128 + e];
    const int l = e % 32, v = (e / 32) % 4, j = (e / 128) % CT_NT,
              i = e / (128 * CT_NT);
    const int k = k0 + 16 * i + (l >> 2) + 8 * (v >> 1);
    const int tap = 8 * j + 2 * (l & 3) + (v & 1);
    if (k >= kg || tap >= CT_TAPS) continue;
    slice[ct_fc_dw_at(g * kg + k, tap / (CT_FH * CT_FW), (tap / CT_FW) % CT_FH,
                      tap % CT_FW)] = total;
  }
  (void)w;
}
#endif
