// Grouped convolution with few channels per group (depthwise, channel
// multipliers, ShuffleNet-style groups), every direction, 2-D and 3-D, any
// stride, padding and dilation. Tiles are staged through dynamic shared
// memory, which the solver sizes (the step's shared_bytes) for the tile and
// the filter.
//   F, B  conv_depthwise: a block of CT_THREADS threads computes a CT_TH x
//         CT_TW tile of one output plane (y for F, dx for B) for CT_KB
//         consecutive channels: CT_KB is 1 in NCHW (threads run along w) and
//         in NHWC the threads run along channels. Each stage (one reduction
//         channel of the group and one filter depth) holds the source patch
//         the tile reads, [row][column][group of the block], and the taps,
//         [tap][CT_KB]. B gathers per dx element: a tap counts where the
//         stride divides (the stencil of F with the filter flipped).
//   W     conv_depthwise_wrw: a block owns CT_KB output channels and a chunk
//         of the (n, od, oh) output rows, which it walks in CT_TH x CT_TW
//         tiles, staging the dy tile and the x patch. Its threads form
//         32-lane groups; group i owns taps i, i + groups, ... (at most
//         CT_WSLOTS per pass) and its lanes split the tile's positions
//         (NCHW) or run along the channels (NHWC, CT_KB lanes). Every block
//         writes each of its dw elements once: with CT_WS_OUT=1 chunk c
//         writes fp32 partials to workspace + c * |dw|, which
//         conv_depthwise_reduce adds up into dw.
// One channel per group (C = K = G), NCHW, 2-D, has row kernels that stage
// nothing: taps are read through the L1 cache, the filter size, the strides,
// the dilation and padding along w are compiled in and every loop over taps
// unrolled, so that a thread reads each filter row's source columns as one
// window, in whole vectors of CT_RVL elements where rows allow.
//   F, B  conv_depthwise_rows: a thread computes CT_RV consecutive outputs of
//         one destination row; a block is rows of 2^lane_shift threads, so a
//         block covers several rows (of one or more planes) when rows are
//         short, and a row longer than 2^lane_shift * CT_RV is walked.
//   W     conv_depthwise_rows_wrw: a block owns one channel and a chunk of
//         the (n, oh) rows; its threads keep a sum per tap over the positions
//         they visit (rows of 2^lane_shift lanes along w, CT_RV consecutive
//         positions per lane), then the block adds them up. CT_WS_OUT as
//         above.
// Indices are 32-bit: the solver admits only problems whose tensors (and the
// workspace) index in 32 bits.
//
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_DIR (1 F, 2 B, 3 W), CT_NHWC,
// CT_TH CT_TW CT_KB (the tile), CT_THREADS (F and B), CT_WS_OUT (W); the row
// kernels CT_RFH CT_RFW (filter), CT_RV (outputs or positions per lane),
// CT_RSH CT_RSW CT_RDW CT_RPW (stride, dilation along w, padding along w),
// CT_RVL (elements a window load takes: rows of the source are whole
// vectors), CT_RVS (rows of the destination, W's dy, are whole runs of
// CT_RV elements, each one access) and CT_RPRE (F and B: every filter row's
// window loaded before the sums). Scalars: the problem (plan_args order); W
// then the number of chunks; the row kernels then lane_shift. Sizes are never
// compiled in.

#ifndef CT_TH
#define CT_TH 16
#endif
#ifndef CT_TW
#define CT_TW 16
#endif
#ifndef CT_KB
#define CT_KB 1
#endif
#ifndef CT_THREADS
#define CT_THREADS 256
#endif
#ifndef CT_WS_OUT
#define CT_WS_OUT 0
#endif

#ifndef CT_RFH
#define CT_RFH 3
#endif
#ifndef CT_RFW
#define CT_RFW 3
#endif
#ifndef CT_RV
#define CT_RV 4
#endif
#ifndef CT_RSH
#define CT_RSH 1
#endif
#ifndef CT_RSW
#define CT_RSW 1
#endif
#ifndef CT_RDW
#define CT_RDW 1
#endif
#ifndef CT_RPW
#define CT_RPW 0
#endif
#ifndef CT_RVL
#define CT_RVL 1
#endif
#ifndef CT_RVS
#define CT_RVS 0
#endif
#ifndef CT_RPRE
#define CT_RPRE 0
#endif

// Taps one 32-lane group of the W kernel sums per pass, at most.
#define CT_WSLOTS 4
// Tile items per thread of the F and B kernels.
#define CT_PER (CT_TH * CT_TW * CT_KB / CT_THREADS)
// Global loads a thread issues before it stores them to shared memory.
#define CT_BATCH 4

CT_EXTERN_SHARED(float, ct_dw_smem);

// The problem; spatial arrays are (D, H, W). Strides are in (outer, channel,
// D, H, W) order for the compiled layout: xs and ys of the activations, ws
// of the filter (outer = output channel, channel = channel in the group).
struct CtDw {
  int n, g, cg, kg, c, k;
  int in[3], f[3], pad[3], st[3], dil[3], out[3];
  int xs[5], ws[5], ys[5];
};

#define CT_MAKE_DW(q)                                                          \
  CtDw q;                                                                      \
  {                                                                            \
    const ct_i64 v[5][3] = {{a_id, a_ih, a_iw},                                \
                            {a_fd, a_fh, a_fw},                                \
                            {a_pd, a_ph, a_pw},                                \
                            {a_sd, a_sh, a_sw},                                \
                            {a_dd, a_dh, a_dw}};                               \
    q.n = static_cast<int>(a_n), q.g = static_cast<int>(a_g);                  \
    q.c = static_cast<int>(a_c), q.k = static_cast<int>(a_k);                  \
    q.cg = q.c / q.g, q.kg = q.k / q.g;                                        \
    for (int i = 0; i < 3; ++i) {                                              \
      q.in[i] = static_cast<int>(v[0][i]), q.f[i] = static_cast<int>(v[1][i]); \
      q.pad[i] = static_cast<int>(v[2][i]),                                    \
      q.st[i] = static_cast<int>(v[3][i]);                                     \
      q.dil[i] = static_cast<int>(v[4][i]);                                    \
      q.out[i] =                                                               \
          (q.in[i] + 2 * q.pad[i] - q.dil[i] * (q.f[i] - 1) - 1) / q.st[i] +   \
          1;                                                                   \
    }                                                                          \
    ct_strides<int>(q.xs, q.c, q.in);                                          \
    ct_strides<int>(q.ws, q.cg, q.f);                                          \
    ct_strides<int>(q.ys, q.k, q.out);                                         \
  }

CT_DEVICE int ct_dw_min(int a, int b) { return a < b ? a : b; }
CT_DEVICE int ct_dw_floor_div(int a, int b) {
  return a >= 0 ? a / b : -((b - 1 - a) / b);
}

// Stages a [rows][cols][ng] patch of a tensor into shared memory: element
// (r, c, gl) is channel ch0 + gl * ch_step at (d, h0 + r, w0 + c), zero
// outside the tensor (sp its spatial size, s its strides, n already in base).
CT_DEVICE void ct_dw_stage(float* dst, const ct_t* src, int base, int ch0,
                           int ch_step, int ng, int d, int h0, int w0, int rows,
                           int cols, const int* sp, const int* s, int tid,
                           int threads) {
  const int total = ng * rows * cols;
  const int b = base + ch0 * s[1] + d * s[2];
  for (int e0 = tid; e0 < total; e0 += CT_BATCH * threads) {
    float v[CT_BATCH];
#pragma unroll
    for (int u = 0; u < CT_BATCH; ++u) {
      const int e = e0 + u * threads;
      v[u] = 0.0f;
      if (e < total) {
        const int gl = e % ng, rest = e / ng;
        const int h = h0 + rest / cols, w = w0 + rest % cols;
        if (h >= 0 && h < sp[1] && w >= 0 && w < sp[2]) {
          v[u] =
              ct_to_float(src[b + gl * ch_step * s[1] + h * s[3] + w * s[4]]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < CT_BATCH; ++u) {
      const int e = e0 + u * threads;
      if (e < total) dst[e] = v[u];
    }
  }
}

#if CT_DIR != 3
// F: the source is x, the destination y; B: the source is dy, the
// destination dx. `red` source channels of each group feed every destination
// channel of the group.
CT_KERNEL void conv_depthwise(ct_t* px, const ct_t* pw, ct_t* py,
                              CT_PROBLEM_PARAMS) {
  CT_MAKE_DW(q);
#if CT_DIR == 1
  const int dpg = q.kg, spg = q.cg, dch = q.k;
  const int *dsp = q.out, *ssp = q.in, *dst = q.ys, *sst = q.xs;
  ct_t* out = py;
  const ct_t* src = px;
#else
  const int dpg = q.cg, spg = q.kg, dch = q.c;
  const int *dsp = q.in, *ssp = q.out, *dst = q.xs, *sst = q.ys;
  ct_t* out = px;
  const ct_t* src = py;
#endif
  const int tid = threadIdx.x;
  const int tiles_w = (dsp[2] + CT_TW - 1) / CT_TW,
            tiles_h = (dsp[1] + CT_TH - 1) / CT_TH;
  const int cblocks = (dch + CT_KB - 1) / CT_KB;
  int b = blockIdx.x;
  const int w0 = (b % tiles_w) * CT_TW;
  b /= tiles_w;
  const int h0 = (b % tiles_h) * CT_TH;
  b /= tiles_h;
  const int dz = b % dsp[0];
  b /= dsp[0];
  const int k0 = (b % cblocks) * CT_KB, n = b / cblocks;
  const int g0 = k0 / dpg, ng = (ct_dw_min(k0 + CT_KB, dch) - 1) / dpg - g0 + 1;
  const int sh = q.st[1], sw = q.st[2], dh = q.dil[1], dw = q.dil[2];
  const int fh_n = q.f[1], fw_n = q.f[2], taps = fh_n * fw_n;
#if CT_DIR == 1
  const int org_h = h0 * sh - q.pad[1], org_w = w0 * sw - q.pad[2];
  const int rows = (CT_TH - 1) * sh + (fh_n - 1) * dh + 1;
  const int cols = (CT_TW - 1) * sw + (fw_n - 1) * dw + 1;
#else
  // The dy rows (columns) the tile's taps reach, and where dx row h0 falls
  // in the patch, in input units: a tap (fh) of row h0 + r reads patch
  // row (r + base_h - fh * dh) / sh where that divides.
  const int org_h = ct_dw_floor_div(h0 + q.pad[1] - (fh_n - 1) * dh, sh);
  const int org_w = ct_dw_floor_div(w0 + q.pad[2] - (fw_n - 1) * dw, sw);
  const int rows = ct_dw_floor_div(h0 + CT_TH - 1 + q.pad[1], sh) - org_h + 1;
  const int cols = ct_dw_floor_div(w0 + CT_TW - 1 + q.pad[2], sw) - org_w + 1;
  const int base_h = h0 + q.pad[1] - org_h * sh,
            base_w = w0 + q.pad[2] - org_w * sw;
#endif
  float* wsm = ct_dw_smem;
  float* patch = ct_dw_smem + taps * CT_KB;

  float acc[CT_PER];
#pragma unroll
  for (int j = 0; j < CT_PER; ++j) acc[j] = 0.0f;

  for (int r = 0; r < spg; ++r) {
    for (int fd = 0; fd < q.f[0]; ++fd) {
#if CT_DIR == 1
      const int sd = dz * q.st[0] - q.pad[0] + fd * q.dil[0];
      if (sd < 0 || sd >= ssp[0]) continue;
#else
      const int t = dz + q.pad[0] - fd * q.dil[0];
      if (t < 0 || t % q.st[0] != 0 || t / q.st[0] >= ssp[0]) continue;
      const int sd = t / q.st[0];
#endif
      __syncthreads();
      for (int e = tid; e < taps * CT_KB; e += CT_THREADS) {
        const int oc = k0 + e % CT_KB, tap = e / CT_KB;
        const int tw =
            (tap % fw_n) * q.ws[4] + (tap / fw_n) * q.ws[3] + fd * q.ws[2];
        float v = 0.0f;
        if (oc < dch) {
#if CT_DIR == 1
          v = ct_to_float(pw[oc * q.ws[0] + r * q.ws[1] + tw]);
#else
          v = ct_to_float(pw[((oc / q.cg) * q.kg + r) * q.ws[0] +
                             (oc % q.cg) * q.ws[1] + tw]);
#endif
        }
        wsm[e] = v;
      }
      ct_dw_stage(patch, src, n * sst[0], g0 * spg + r, spg, ng, sd, org_h,
                  org_w, rows, cols, ssp, sst, tid, CT_THREADS);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < CT_PER; ++j) {
        const int e = tid + j * CT_THREADS;
        const int kl = e % CT_KB, pos = e / CT_KB;
        const int oc = k0 + kl;
        if (oc >= dch) continue;
        const int rr = pos / CT_TW, cc = pos % CT_TW, gl = oc / dpg - g0;
        const float* wk = wsm + kl;
        float s = 0.0f;
#if CT_DIR == 1
        const float* p0 = patch + (rr * sh * cols + cc * sw) * ng + gl;
        for (int fh = 0; fh < fh_n; ++fh) {
          const float* prow = p0 + fh * dh * cols * ng;
          const float* wrow = wk + fh * fw_n * CT_KB;
          for (int fw = 0; fw < fw_n; ++fw)
            s += prow[fw * dw * ng] * wrow[fw * CT_KB];
        }
#else
        if (sh == 1 && sw == 1) {
          const float* p0 =
              patch + ((rr + base_h) * cols + cc + base_w) * ng + gl;
          for (int fh = 0; fh < fh_n; ++fh) {
            const float* prow = p0 - fh * dh * cols * ng;
            const float* wrow = wk + fh * fw_n * CT_KB;
            for (int fw = 0; fw < fw_n; ++fw)
              s += prow[-fw * dw * ng] * wrow[fw * CT_KB];
          }
        } else {
          for (int fh = 0; fh < fh_n; ++fh) {
            const int relh = rr + base_h - fh * dh;
            if (relh % sh != 0) continue;
            const float* prow = patch + (relh / sh) * cols * ng + gl;
            const float* wrow = wk + fh * fw_n * CT_KB;
            for (int fw = 0; fw < fw_n; ++fw) {
              const int relw = cc + base_w - fw * dw;
              if (relw % sw == 0)
                s += prow[(relw / sw) * ng] * wrow[fw * CT_KB];
            }
          }
        }
#endif
        acc[j] += s;
      }
    }
  }

#pragma unroll
  for (int j = 0; j < CT_PER; ++j) {
    const int e = tid + j * CT_THREADS;
    const int oc = k0 + e % CT_KB, pos = e / CT_KB;
    const int oh = h0 + pos / CT_TW, ow = w0 + pos % CT_TW;
    if (oc < dch && oh < dsp[1] && ow < dsp[2]) {
      out[n * dst[0] + oc * dst[1] + dz * dst[2] + oh * dst[3] + ow * dst[4]] =
          ct_from_float<ct_t>(acc[j]);
    }
  }
}
#endif

// The thread's lane and row in a block of rows of 2^shift threads.
CT_DEVICE int ct_rows_lane(int shift) {
  return static_cast<int>(threadIdx.x) & ((1 << shift) - 1);
}
CT_DEVICE int ct_rows_row(int shift) {
  return static_cast<int>(threadIdx.x) >> shift;
}

// floor(a / b) for b > 0, in constant expressions.
#define CT_FLOOR_DIV(a, b) (((a) >= 0 ? (a) : (a) - (b) + 1) / (b))

// A thread's window of source columns along one filter row, relative to its
// base column sb: F and W read sb + j * CT_RSW - CT_RPW + fw * CT_RDW for
// output (W: position) x0 + j, with sb = x0 * CT_RSW; B reads dy column
// sb + t / CT_RSW where t = j + CT_RPW - fw * CT_RDW is a multiple of
// CT_RSW, with sb = x0 / CT_RSW (the solver keeps CT_RV a multiple of the
// stride). [CT_ROLO, CT_ROHI] bounds the offsets; the window covers it in
// whole vectors of CT_RVL elements, from CT_RALO, CT_RWIN long.
#if CT_DIR == 2
#define CT_ROLO CT_FLOOR_DIV(CT_RPW - (CT_RFW - 1) * CT_RDW, CT_RSW)
#define CT_ROHI CT_FLOOR_DIV(CT_RV - 1 + CT_RPW, CT_RSW)
#else
#define CT_ROLO (-CT_RPW)
#define CT_ROHI ((CT_RV - 1) * CT_RSW - CT_RPW + (CT_RFW - 1) * CT_RDW)
#endif
#define CT_RALO (CT_FLOOR_DIV(CT_ROLO, CT_RVL) * CT_RVL)
#define CT_RWIN (CT_FLOOR_DIV(CT_ROHI, CT_RVL) * CT_RVL + CT_RVL - CT_RALO)

template <int kElems>
struct alignas(kElems * sizeof(ct_t)) CtRowVec {
  ct_t e[kElems];
};

template <int kElems>
CT_DEVICE bool ct_rows_aligned(const void* p) {
  return reinterpret_cast<unsigned long long>(p) % sizeof(CtRowVec<kElems>) ==
         0;
}

// win[i] = row[col0 + i] for i < CT_RWIN, zero outside [0, n). With vec
// (col0 and n multiples of CT_RVL, row aligned to its vectors) a vector lies
// wholly inside or outside the row and is one load.
CT_DEVICE void ct_rows_window(float* win, const ct_t* row, int col0, int n,
                              bool vec) {
#if CT_RVL > 1
  if (vec) {
#pragma unroll
    for (int v = 0; v < CT_RWIN / CT_RVL; ++v) {
      const int col = col0 + v * CT_RVL;
      CtRowVec<CT_RVL> e;
      if (col >= 0 && col < n) {
        e = *reinterpret_cast<const CtRowVec<CT_RVL>*>(row + col);
      }
#pragma unroll
      for (int i = 0; i < CT_RVL; ++i) {
        win[v * CT_RVL + i] = col >= 0 && col < n ? ct_to_float(e.e[i]) : 0.0f;
      }
    }
    return;
  }
#endif
#pragma unroll
  for (int q = 0; q < CT_RWIN; ++q) {
    const int col = col0 + q;
    win[q] = col >= 0 && col < n ? ct_to_float(row[col]) : 0.0f;
  }
}

// out[j] = row[x0 + j] for j < CT_RV, zero past n; one load where vec (the
// row's CT_RV-element runs aligned, n a multiple of CT_RV).
CT_DEVICE void ct_rows_run(float* out, const ct_t* row, int x0, int n,
                           bool vec) {
#if CT_RVS
  if (vec) {
    const CtRowVec<CT_RV> e =
        *reinterpret_cast<const CtRowVec<CT_RV>*>(row + x0);
#pragma unroll
    for (int j = 0; j < CT_RV; ++j) out[j] = ct_to_float(e.e[j]);
    return;
  }
#endif
#pragma unroll
  for (int j = 0; j < CT_RV; ++j)
    out[j] = x0 + j < n ? ct_to_float(row[x0 + j]) : 0.0f;
}

#if CT_DIR != 3
// F: y from x; B: dx from dy (a tap reaches dx where the stride divides).
// The stride (CT_RSH, CT_RSW), the dilation along w (CT_RDW) and the padding
// along w (CT_RPW) are compiled in, so that every column offset is a
// constant.
CT_KERNEL void __launch_bounds__(256)
    conv_depthwise_rows(ct_t* px, const ct_t* pw, ct_t* py, CT_PROBLEM_PARAMS,
                        ct_i64 a_lane_shift) {
  const int c = static_cast<int>(a_c);
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);
  const int ph = static_cast<int>(a_ph), dh = static_cast<int>(a_dh);
  const int oh = (ih + 2 * ph - dh * (CT_RFH - 1) - 1) / CT_RSH + 1;
  const int ow = (iw + 2 * CT_RPW - CT_RDW * (CT_RFW - 1) - 1) / CT_RSW + 1;
#if CT_DIR == 1
  const int src_h = ih, src_w = iw, dst_h = oh, dst_w = ow;
  const ct_t* src = px;
  ct_t* dst = py;
#else
  const int src_h = oh, src_w = ow, dst_h = ih, dst_w = iw;
  const ct_t* src = py;
  ct_t* dst = px;
#endif
  const int shift = static_cast<int>(a_lane_shift);
  const int lanes = 1 << shift;
  const int rows = static_cast<int>(a_n) * c * dst_h;
  const int row =
      static_cast<int>(blockIdx.x) * (static_cast<int>(blockDim.x) >> shift) +
      ct_rows_row(shift);
  if (row >= rows) return;
  const int plane = row / dst_h, r = row - plane * dst_h;
  const ct_t* sp = src + plane * (src_h * src_w);
  ct_t* dp = dst + plane * (dst_h * dst_w) + r * dst_w;
  const bool vec_in = ct_rows_aligned<CT_RVL>(src);
  const bool vec_out = ct_rows_aligned<CT_RV>(dst);
  float wk[CT_RFH][CT_RFW];
  const ct_t* wp = pw + (plane % c) * (CT_RFH * CT_RFW);
#pragma unroll
  for (int fh = 0; fh < CT_RFH; ++fh)
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw) {
      wk[fh][fw] = ct_to_float(wp[fh * CT_RFW + fw]);
    }
  for (int x0 = ct_rows_lane(shift) * CT_RV; x0 < dst_w; x0 += lanes * CT_RV) {
#if CT_DIR == 1
    const int sb = x0 * CT_RSW;
#else
    const int sb = x0 / CT_RSW;
#endif
    float acc[CT_RV];
#pragma unroll
    for (int j = 0; j < CT_RV; ++j) acc[j] = 0.0f;
#if CT_RPRE
    // Every filter row's window first, then the sums, so that the loads of
    // all rows are in flight at once: a row the filter misses reads as an
    // empty row (no load), and the vector test is made once for all rows.
    float wins[CT_RFH][CT_RWIN];
    const ct_t* srows[CT_RFH];
    int widths[CT_RFH];
#pragma unroll
    for (int fh = 0; fh < CT_RFH; ++fh) {
#if CT_DIR == 1
      const int sr = r * CT_RSH - ph + fh * dh;
      const bool hit = sr >= 0 && sr < src_h;
#else
      const int t = r + ph - fh * dh;
      const int sr = t >= 0 ? t / CT_RSH : 0;
      const bool hit = t >= 0 && t % CT_RSH == 0 && sr < src_h;
#endif
      srows[fh] = sp + (hit ? sr : 0) * src_w;
      widths[fh] = hit ? src_w : 0;
    }
    if (vec_in) {
#pragma unroll
      for (int fh = 0; fh < CT_RFH; ++fh)
        ct_rows_window(wins[fh], srows[fh], sb + CT_RALO, widths[fh], true);
    } else {
#pragma unroll
      for (int fh = 0; fh < CT_RFH; ++fh)
        ct_rows_window(wins[fh], srows[fh], sb + CT_RALO, widths[fh], false);
    }
#endif
#pragma unroll
    for (int fh = 0; fh < CT_RFH; ++fh) {
#if CT_RPRE
      const float* win = wins[fh];
#else
#if CT_DIR == 1
      const int sr = r * CT_RSH - ph + fh * dh;
      if (sr < 0 || sr >= src_h) continue;
#else
      const int t = r + ph - fh * dh;
      if (t < 0 || t % CT_RSH != 0) continue;
      const int sr = t / CT_RSH;
      if (sr >= src_h) continue;
#endif
      float win[CT_RWIN];
      ct_rows_window(win, sp + sr * src_w, sb + CT_RALO, src_w, vec_in);
#endif
#pragma unroll
      for (int fw = 0; fw < CT_RFW; ++fw)
#pragma unroll
        for (int j = 0; j < CT_RV; ++j) {
#if CT_DIR == 1
          acc[j] +=
              win[j * CT_RSW - CT_RPW + fw * CT_RDW - CT_RALO] * wk[fh][fw];
#else
          const int t = j + CT_RPW - fw * CT_RDW;
          if (t % CT_RSW == 0) acc[j] += win[t / CT_RSW - CT_RALO] * wk[fh][fw];
#endif
        }
    }
#if CT_RVS
    if (vec_out) {
      CtRowVec<CT_RV> e;
#pragma unroll
      for (int j = 0; j < CT_RV; ++j) e.e[j] = ct_from_float<ct_t>(acc[j]);
      *reinterpret_cast<CtRowVec<CT_RV>*>(dp + x0) = e;
      continue;
    }
#endif
#pragma unroll
    for (int j = 0; j < CT_RV; ++j) {
      if (x0 + j < dst_w) dp[x0 + j] = ct_from_float<ct_t>(acc[j]);
    }
  }
}
#endif

#if CT_DIR == 3
// Blocks are (channel, chunk), the channel fastest; 256 threads. A lane
// takes CT_RV consecutive positions of a row (dy read as one vector where
// CT_RVS) and, along each filter row, one window of x columns.
CT_KERNEL void __launch_bounds__(256)
    conv_depthwise_rows_wrw(const ct_t* px, ct_t* pw, const ct_t* py,
#if CT_WS_OUT
                            float* pws,
#endif
                            CT_PROBLEM_PARAMS, ct_i64 a_chunks,
                            ct_i64 a_lane_shift) {
  const int c = static_cast<int>(a_c), chunks = static_cast<int>(a_chunks);
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);
  const int ph = static_cast<int>(a_ph), dh = static_cast<int>(a_dh);
  const int oh = (ih + 2 * ph - dh * (CT_RFH - 1) - 1) / CT_RSH + 1;
  const int ow = (iw + 2 * CT_RPW - CT_RDW * (CT_RFW - 1) - 1) / CT_RSW + 1;
  const int ch = static_cast<int>(blockIdx.x) % c,
            chunk = static_cast<int>(blockIdx.x) / c;
  const int rows_total = static_cast<int>(a_n) * oh;
  const int per_chunk = (rows_total + chunks - 1) / chunks;
  const int r_begin = ct_dw_min(rows_total, chunk * per_chunk);
  const int r_end = ct_dw_min(rows_total, r_begin + per_chunk);
  const int shift = static_cast<int>(a_lane_shift);
  const int lanes = 1 << shift,
            block_rows = static_cast<int>(blockDim.x) >> shift;
  const bool vec_x = ct_rows_aligned<CT_RVL>(px);
  const bool vec_dy = ct_rows_aligned<CT_RV>(py);

  float acc[CT_RFH][CT_RFW];
#pragma unroll
  for (int fh = 0; fh < CT_RFH; ++fh)
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw) acc[fh][fw] = 0.0f;
  for (int row = r_begin + ct_rows_row(shift); row < r_end; row += block_rows) {
    const int n = row / oh, r = row - n * oh;
    const ct_t* dyr = py + ((n * c + ch) * oh + r) * ow;
    const ct_t* xp = px + (n * c + ch) * (ih * iw);
    for (int x0 = ct_rows_lane(shift) * CT_RV; x0 < ow; x0 += lanes * CT_RV) {
      float g[CT_RV];
      ct_rows_run(g, dyr, x0, ow, vec_dy);
#pragma unroll
      for (int fh = 0; fh < CT_RFH; ++fh) {
        const int sr = r * CT_RSH - ph + fh * dh;
        if (sr < 0 || sr >= ih) continue;
        float win[CT_RWIN];
        ct_rows_window(win, xp + sr * iw, x0 * CT_RSW + CT_RALO, iw, vec_x);
#pragma unroll
        for (int fw = 0; fw < CT_RFW; ++fw)
#pragma unroll
          for (int j = 0; j < CT_RV; ++j) {
            acc[fh][fw] +=
                g[j] * win[j * CT_RSW - CT_RPW + fw * CT_RDW - CT_RALO];
          }
      }
    }
  }
  // The block's sum per tap: within warps by shuffles, then across warps.
  __shared__ float part[CT_RFH * CT_RFW][256 / 32];
  const int warp = static_cast<int>(threadIdx.x) / CT_WARP_SIZE;
  const int lane = static_cast<int>(threadIdx.x) % CT_WARP_SIZE;
  const int warps = static_cast<int>(blockDim.x) / CT_WARP_SIZE;
#pragma unroll
  for (int fh = 0; fh < CT_RFH; ++fh)
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw) {
      const float v = ct_warp_sum(acc[fh][fw]);
      if (lane == 0) part[fh * CT_RFW + fw][warp] = v;
    }
  __syncthreads();
  for (int t = static_cast<int>(threadIdx.x); t < CT_RFH * CT_RFW;
       t += static_cast<int>(blockDim.x)) {
    float v = 0.0f;
    for (int w = 0; w < warps; ++w) v += part[t][w];
#if CT_WS_OUT
    pws[chunk * (c * CT_RFH * CT_RFW) + ch * CT_RFH * CT_RFW + t] = v;
#else
    pw[ch * CT_RFH * CT_RFW + t] = ct_from_float<ct_t>(v);
#endif
  }
}
#endif

#if CT_DIR == 3
// Blocks are (channel block, chunk), the channel block fastest; blockDim.x
// is a multiple of 32. dw's fh, fw taps go CT_WSLOTS * (blockDim.x / 32) per
// pass over the chunk.
CT_KERNEL void conv_depthwise_wrw(const ct_t* px, ct_t* pw, const ct_t* py,
#if CT_WS_OUT
                                  float* pws,
#endif
                                  CT_PROBLEM_PARAMS, ct_i64 a_chunks) {
  CT_MAKE_DW(q);
  const int chunks = static_cast<int>(a_chunks);
  const int cblocks = (q.k + CT_KB - 1) / CT_KB;
  const int k0 = (blockIdx.x % cblocks) * CT_KB, chunk = blockIdx.x / cblocks;
  const int g0 = k0 / q.kg,
            ng = (ct_dw_min(k0 + CT_KB, q.k) - 1) / q.kg - g0 + 1;
  const int rows_total = q.n * q.out[0] * q.out[1];
  const int per_chunk = (rows_total + chunks - 1) / chunks;
  const int r_begin = ct_dw_min(rows_total, chunk * per_chunk);
  const int r_end = ct_dw_min(rows_total, r_begin + per_chunk);

  const int tid = threadIdx.x, threads = blockDim.x;
  const int lane = tid % 32, grp = tid / 32, groups = threads / 32;
  const int kl = lane % CT_KB, pl = lane / CT_KB;
  const int k = k0 + kl;
  const bool k_ok = k < q.k;
  const int gl = k_ok ? k / q.kg - g0 : 0;
  const int sh = q.st[1], sw = q.st[2], dh = q.dil[1], dw = q.dil[2];
  const int fw_n = q.f[2], taps = q.f[1] * fw_n;
  const int cols = (CT_TW - 1) * sw + (fw_n - 1) * dw + 1;
  float* dys = ct_dw_smem;
  float* xp = ct_dw_smem + CT_TH * CT_TW * CT_KB;
#if CT_WS_OUT
  const int w_count = q.k * q.cg * q.f[0] * taps;
#endif

  for (int c = 0; c < q.cg; ++c) {
    for (int fd = 0; fd < q.f[0]; ++fd) {
      for (int tb = 0; tb < taps; tb += groups * CT_WSLOTS) {
        float acc[CT_WSLOTS];
#pragma unroll
        for (int s = 0; s < CT_WSLOTS; ++s) acc[s] = 0.0f;
        for (int r = r_begin; r < r_end;) {
          const int plane = r / q.out[1], oh0 = r % q.out[1];
          const int nr = ct_dw_min(ct_dw_min(CT_TH, q.out[1] - oh0), r_end - r);
          r += nr;
          const int n = plane / q.out[0], od = plane % q.out[0];
          const int id = od * q.st[0] - q.pad[0] + fd * q.dil[0];
          if (id < 0 || id >= q.in[0]) continue;
          const int rows = (nr - 1) * sh + (q.f[1] - 1) * dh + 1;
          for (int w0 = 0; w0 < q.out[2]; w0 += CT_TW) {
            __syncthreads();
            for (int e = tid; e < CT_TH * CT_TW * CT_KB; e += threads) {
              const int kk = k0 + e % CT_KB, pos = e / CT_KB;
              const int rr = pos / CT_TW, ow = w0 + pos % CT_TW;
              float v = 0.0f;
              if (kk < q.k && rr < nr && ow < q.out[2]) {
                v = ct_to_float(py[n * q.ys[0] + kk * q.ys[1] + od * q.ys[2] +
                                   (oh0 + rr) * q.ys[3] + ow * q.ys[4]]);
              }
              dys[e] = v;
            }
            ct_dw_stage(xp, px, n * q.xs[0], g0 * q.cg + c, q.cg, ng, id,
                        oh0 * sh - q.pad[1], w0 * sw - q.pad[2], rows, cols,
                        q.in, q.xs, tid, threads);
            __syncthreads();
#pragma unroll
            for (int s = 0; s < CT_WSLOTS; ++s) {
              const int t = tb + s * groups + grp;
              if (t >= taps || !k_ok) continue;
              const float* xb =
                  xp + ((t / fw_n) * dh * cols + (t % fw_n) * dw) * ng + gl;
              float a = 0.0f;
              for (int p = pl; p < nr * CT_TW; p += 32 / CT_KB) {
                const int rr = p / CT_TW, cc = p % CT_TW;
                a += dys[p * CT_KB + kl] * xb[(rr * sh * cols + cc * sw) * ng];
              }
              acc[s] += a;
            }
          }
        }
#pragma unroll
        for (int s = 0; s < CT_WSLOTS; ++s) {
          float v = acc[s];
          // The position lanes of a channel are lanes kl, kl + CT_KB, ... of
          // the same 32-lane group, which xor masks below 32 keep together.
          for (int m = 16; m >= CT_KB; m /= 2) v += ct_shfl_xor(v, m);
          const int t = tb + s * groups + grp;
          if (pl == 0 && k_ok && t < taps) {
            const int idx = k * q.ws[0] + c * q.ws[1] + fd * q.ws[2] +
                            (t / fw_n) * q.ws[3] + (t % fw_n) * q.ws[4];
#if CT_WS_OUT
            pws[chunk * w_count + idx] = v;
#else
            pw[idx] = ct_from_float<ct_t>(v);
#endif
          }
        }
      }
    }
  }
}

// dw[i] = the sum of the chunks' fp32 partials workspace[c * count + i].
CT_KERNEL void conv_depthwise_reduce(const float* pws, ct_t* pw, ct_i64 a_count,
                                     ct_i64 a_chunks) {
  ct_sum_slices(pws, pw, a_count, a_chunks);
}
#endif

// One channel per group, channels-last (NHWC), 2-D: the vector kernels. A
// thread owns CT_DV consecutive channels (one aligned vector load of
// CT_DV * sizeof(ct_t) bytes per position) and CT_RV consecutive positions
// along w. A block is cvb channel vectors by blockDim.x / cvb position lanes
// (cvb a scalar); blockIdx.y picks the block's channel vectors. The filter
// (CT_RFH x CT_RFW), the stride along w (CT_RSW) and the dilation along w
// (CT_RDW) are compiled in, so that a thread's window of source columns
// stays in registers.
//   F, B  conv_depthwise_nhwc: the block's taps are staged in shared memory
//         as fp32 [tap][channel]. F, and B at unit stride along w, read one
//         window of source columns per filter row; B at stride > 1 gathers
//         the taps whose stride divides.
//   W     conv_depthwise_nhwc_wrw: blockIdx.x is a chunk of the (n, oh)
//         rows; a thread sums every tap of its channels over the positions
//         it visits, then the block adds its lanes up, tap by tap, through
//         shared memory (in lane order). CT_WS_OUT as above.
// A tensor whose base is not aligned to the vector is read and written
// element by element (the same arithmetic).
#ifndef CT_DV
#define CT_DV 8
#endif
#ifndef CT_WT
#define CT_WT 1
#endif
// Blocks of 256 threads a multiprocessor should hold at once: the compiler
// keeps a thread's registers within 65536 / (256 * CT_MINB).
#ifndef CT_MINB
#define CT_MINB 1
#endif

struct alignas(CT_DV * sizeof(ct_t)) CtDwVec {
  ct_t e[CT_DV];
};

CT_DEVICE bool ct_dwv_aligned(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) % sizeof(CtDwVec)) == 0;
}

// out[i] = p[i] for the CT_DV channels at p (element offset a multiple of
// CT_DV).
CT_DEVICE void ct_dwv_load(float* out, const ct_t* p, bool vec) {
  if (vec) {
    const CtDwVec v = *reinterpret_cast<const CtDwVec*>(p);
#pragma unroll
    for (int i = 0; i < CT_DV; ++i) out[i] = ct_to_float(v.e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < CT_DV; ++i) out[i] = ct_to_float(p[i]);
  }
}

CT_DEVICE void ct_dwv_store(ct_t* p, const float* in, bool vec) {
  CtDwVec v;
#pragma unroll
  for (int i = 0; i < CT_DV; ++i) v.e[i] = ct_from_float<ct_t>(in[i]);
  if (vec) {
    *reinterpret_cast<CtDwVec*>(p) = v;
  } else {
#pragma unroll
    for (int i = 0; i < CT_DV; ++i) p[i] = v.e[i];
  }
}

// Source columns a thread's CT_RV outputs read along one filter row at unit
// dilation steps of CT_RSW (F): its window.
#define CT_DWV_WIN ((CT_RV - 1) * CT_RSW + (CT_RFW - 1) * CT_RDW + 1)

#if CT_DIR != 3
CT_KERNEL void __launch_bounds__(256, CT_MINB)
    conv_depthwise_nhwc(ct_t* px, const ct_t* pw, ct_t* py, CT_PROBLEM_PARAMS,
                        ct_i64 a_cvb) {
  const int c = static_cast<int>(a_c);
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);
  const int ph = static_cast<int>(a_ph), pwd = static_cast<int>(a_pw);
  const int sh = static_cast<int>(a_sh), dh = static_cast<int>(a_dh);
  const int oh = (ih + 2 * ph - dh * (CT_RFH - 1) - 1) / sh + 1;
  const int ow = (iw + 2 * pwd - CT_RDW * (CT_RFW - 1) - 1) / CT_RSW + 1;
#if CT_DIR == 1
  const int src_h = ih, src_w = iw, dst_h = oh, dst_w = ow;
  const ct_t* src = px;
  ct_t* dst = py;
#else
  const int src_h = oh, src_w = ow, dst_h = ih, dst_w = iw;
  const ct_t* src = py;
  ct_t* dst = px;
#endif
  const bool vec = ct_dwv_aligned(src) && ct_dwv_aligned(dst);
  const int cvb = static_cast<int>(a_cvb), tid = static_cast<int>(threadIdx.x);
  const int lanes = static_cast<int>(blockDim.x) / cvb;
  const int cvl = tid % cvb, pl = tid / cvb;
  const int cb0 = static_cast<int>(blockIdx.y) * cvb * CT_DV;
  const int ch0 = cb0 + cvl * CT_DV;
  // The block's taps, [tap][channel of the block], fp32; B flips the filter.
  // A thread stages one channel's taps (bch <= 256 threads).
  float* wsm = ct_dw_smem;
  const int taps = CT_RFH * CT_RFW, bch = cvb * CT_DV;
  for (int ch = tid; ch < bch; ch += static_cast<int>(blockDim.x)) {
    const ct_t* ptaps = pw + (cb0 + ch) * taps;
    const bool live = cb0 + ch < c;
#pragma unroll
    for (int tap = 0; tap < taps; ++tap) {
#if CT_DIR == 1
      const int t = tap;
#else
      const int t = taps - 1 - tap;
#endif
      wsm[tap * bch + ch] = live ? ct_to_float(ptaps[t]) : 0.0f;
    }
  }
  __syncthreads();
  const int owbs = (dst_w + CT_RV - 1) / CT_RV;
  const int item = static_cast<int>(blockIdx.x) * lanes + pl;
  if (pl >= lanes || ch0 >= c || item >= static_cast<int>(a_n) * dst_h * owbs)
    return;
  const int x0 = (item % owbs) * CT_RV, row = item / owbs;
  const int n = row / dst_h, r = row % dst_h;
  const ct_t* sp = src + static_cast<ct_i64>(n) * src_h * src_w * c + ch0;
  const float* wch = wsm + cvl * CT_DV;
  float acc[CT_RV][CT_DV];
#pragma unroll
  for (int j = 0; j < CT_RV; ++j)
#pragma unroll
    for (int i = 0; i < CT_DV; ++i) acc[j][i] = 0.0f;

#pragma unroll
  for (int fh = 0; fh < CT_RFH; ++fh) {
#if CT_DIR == 1
    const int sr = r * sh - ph + fh * dh;
    if (sr < 0 || sr >= src_h) continue;
#else
    // Flipped tap fh is the filter's row CT_RFH - 1 - fh.
    const int t = r + ph - (CT_RFH - 1 - fh) * dh;
    if (t < 0 || t % sh != 0 || t / sh >= src_h) continue;
    const int sr = t / sh;
#endif
    const ct_t* srow = sp + sr * src_w * c;
#if CT_DIR == 1 || CT_RSW == 1
    // F reads columns x0 * CT_RSW - pw + q; B (unit stride along w) reads
    // x0 + pw - (CT_RFW - 1) * CT_RDW + q, where flipped tap fw of output j
    // is q = j + fw * CT_RDW.
#if CT_DIR == 1
    const int base = x0 * CT_RSW - pwd;
#else
    const int base = x0 + pwd - (CT_RFW - 1) * CT_RDW;
#endif
    // The row's taps in registers; the window streams through one column
    // at a time, each column feeding the outputs whose taps reach it
    // (output j, tap fw reads column j * CT_RSW + fw * CT_RDW), so that
    // only the sums and one column stay live.
    float wv[CT_RFW][CT_DV];
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw)
#pragma unroll
      for (int i = 0; i < CT_DV; ++i)
        wv[fw][i] = wch[(fh * CT_RFW + fw) * bch + i];
#pragma unroll
    for (int q = 0; q < CT_DWV_WIN; ++q) {
      const int col = base + q;
      float v[CT_DV];
      if (col >= 0 && col < src_w) {
        ct_dwv_load(v, srow + col * c, vec);
      } else {
#pragma unroll
        for (int i = 0; i < CT_DV; ++i) v[i] = 0.0f;
      }
#pragma unroll
      for (int fw = 0; fw < CT_RFW; ++fw) {
        const int off = q - fw * CT_RDW;
        if (off < 0 || off % CT_RSW != 0 || off / CT_RSW >= CT_RV) continue;
#pragma unroll
        for (int i = 0; i < CT_DV; ++i)
          acc[off / CT_RSW][i] += v[i] * wv[fw][i];
      }
    }
#else
    // B at stride CT_RSW > 1: dx column x reads dy column
    // (x + pw - fw * CT_RDW) / CT_RSW where that divides.
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw) {
      const float* wt = wch + (fh * CT_RFW + fw) * bch;
#pragma unroll
      for (int j = 0; j < CT_RV; ++j) {
        const int u = x0 + j + pwd - (CT_RFW - 1 - fw) * CT_RDW;
        if (u < 0 || u % CT_RSW != 0 || u / CT_RSW >= src_w) continue;
        float v[CT_DV];
        ct_dwv_load(v, srow + (u / CT_RSW) * c, vec);
#pragma unroll
        for (int i = 0; i < CT_DV; ++i) acc[j][i] += v[i] * wt[i];
      }
    }
#endif
  }
  ct_t* drow = dst + (static_cast<ct_i64>(n) * dst_h + r) * dst_w * c + ch0;
#pragma unroll
  for (int j = 0; j < CT_RV; ++j) {
    if (x0 + j < dst_w) ct_dwv_store(drow + (x0 + j) * c, acc[j], vec);
  }
}
#endif

#if CT_DIR == 3
CT_KERNEL void __launch_bounds__(256, CT_MINB)
    conv_depthwise_nhwc_wrw(const ct_t* px, ct_t* pw, const ct_t* py,
#if CT_WS_OUT
                            float* pws,
#endif
                            CT_PROBLEM_PARAMS, ct_i64 a_chunks, ct_i64 a_cvb) {
  const int c = static_cast<int>(a_c), chunks = static_cast<int>(a_chunks);
  const int ih = static_cast<int>(a_ih), iw = static_cast<int>(a_iw);
  const int ph = static_cast<int>(a_ph), pwd = static_cast<int>(a_pw);
  const int sh = static_cast<int>(a_sh), dh = static_cast<int>(a_dh);
  const int oh = (ih + 2 * ph - dh * (CT_RFH - 1) - 1) / sh + 1;
  const int ow = (iw + 2 * pwd - CT_RDW * (CT_RFW - 1) - 1) / CT_RSW + 1;
  const bool vec = ct_dwv_aligned(px) && ct_dwv_aligned(py);
  const int cvb = static_cast<int>(a_cvb), tid = static_cast<int>(threadIdx.x);
  const int lanes = static_cast<int>(blockDim.x) / cvb;
  const int cvl = tid % cvb, pl = tid / cvb;
  const int ch0 = (static_cast<int>(blockIdx.y) * cvb + cvl) * CT_DV;
  const int chunk = static_cast<int>(blockIdx.x);
  const int rows_total = static_cast<int>(a_n) * oh;
  const int per_chunk = (rows_total + chunks - 1) / chunks;
  const int r_begin = ct_dw_min(rows_total, chunk * per_chunk);
  const int r_end = ct_dw_min(rows_total, r_begin + per_chunk);
  const int owbs = (ow + CT_RV - 1) / CT_RV;
  const bool active = pl < lanes && ch0 < c;

  float acc[CT_RFH][CT_RFW][CT_DV];
#pragma unroll
  for (int fh = 0; fh < CT_RFH; ++fh)
#pragma unroll
    for (int fw = 0; fw < CT_RFW; ++fw)
#pragma unroll
      for (int i = 0; i < CT_DV; ++i) acc[fh][fw][i] = 0.0f;
  if (active) {
    for (int item = r_begin * owbs + pl; item < r_end * owbs; item += lanes) {
      const int x0 = (item % owbs) * CT_RV, row = item / owbs;
      const int n = row / oh, r = row % oh;
      const ct_t* dyr = py + (static_cast<ct_i64>(n) * oh + r) * ow * c + ch0;
      const ct_t* xp = px + static_cast<ct_i64>(n) * ih * iw * c + ch0;
      float g[CT_RV][CT_DV];
#pragma unroll
      for (int j = 0; j < CT_RV; ++j) {
        if (x0 + j < ow) {
          ct_dwv_load(g[j], dyr + (x0 + j) * c, vec);
        } else {
#pragma unroll
          for (int i = 0; i < CT_DV; ++i) g[j][i] = 0.0f;
        }
      }
#pragma unroll
      for (int fh = 0; fh < CT_RFH; ++fh) {
        const int sr = r * sh - ph + fh * dh;
        if (sr < 0 || sr >= ih) continue;
        const ct_t* xr = xp + sr * iw * c;
        const int base = x0 * CT_RSW - pwd;
        // The window streams through one column at a time: column q feeds
        // tap fw of position j where q = j * CT_RSW + fw * CT_RDW.
#pragma unroll
        for (int q = 0; q < CT_DWV_WIN; ++q) {
          const int col = base + q;
          float v[CT_DV];
          if (col >= 0 && col < iw) {
            ct_dwv_load(v, xr + col * c, vec);
          } else {
#pragma unroll
            for (int i = 0; i < CT_DV; ++i) v[i] = 0.0f;
          }
#pragma unroll
          for (int fw = 0; fw < CT_RFW; ++fw) {
            const int off = q - fw * CT_RDW;
            if (off < 0 || off % CT_RSW != 0 || off / CT_RSW >= CT_RV) continue;
#pragma unroll
            for (int i = 0; i < CT_DV; ++i)
              acc[fh][fw][i] += g[off / CT_RSW][i] * v[i];
          }
        }
      }
    }
  }
  // The block's sum per tap and channel: lanes' partials through shared
  // memory, [tap of the round][lane][channel of the block], CT_WT taps a
  // round, each added in lane order.
  float* red = ct_dw_smem;
  const int bch = cvb * CT_DV, taps = CT_RFH * CT_RFW;
  const int bc0 = static_cast<int>(blockIdx.y) * bch;
#pragma unroll
  for (int t0 = 0; t0 < taps; t0 += CT_WT) {
    __syncthreads();
    if (pl < lanes) {
#pragma unroll
      for (int t = 0; t < CT_WT; ++t) {
        if (t0 + t < taps) {
#pragma unroll
          for (int i = 0; i < CT_DV; ++i)
            red[(t * lanes + pl) * bch + cvl * CT_DV + i] =
                acc[(t0 + t) / CT_RFW][(t0 + t) % CT_RFW][i];
        }
      }
    }
    __syncthreads();
    const int round = ct_dw_min(CT_WT, taps - t0) * bch;
    for (int e = tid; e < round; e += static_cast<int>(blockDim.x)) {
      const int t = e / bch, ch = bc0 + e % bch;
      if (ch >= c) continue;
      const float* part = red + t * lanes * bch + e % bch;
      float s = 0.0f;
      for (int l = 0; l < lanes; ++l) s += part[l * bch];
      const int idx = ch * taps + t0 + t;
#if CT_WS_OUT
      pws[chunk * (c * taps) + idx] = s;
#else
      pw[idx] = ct_from_float<ct_t>(s);
#endif
    }
  }
}
#endif
