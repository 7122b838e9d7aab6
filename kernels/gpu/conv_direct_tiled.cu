// Direct convolution in tiles staged through shared memory, every direction,
// 2-D and 3-D (a loop over the filter's depth), any stride, padding, dilation
// and groups. A block has CT_TH * CT_TW threads.
//   F  conv_tiled: a block computes CT_TK output channels of a CT_TH x CT_TW
//      tile of one output plane (n, od), a thread one position of the tile.
//      Input channels go `cc` at a time: each stage holds the input patch the
//      tile reads through every tap and the CT_TK filters' taps for them.
//   B  conv_tiled: the same over dx, CT_TK input channels of a tile of one
//      input plane (n, id), each stage holding the dy patch the tile's taps
//      reach (an input position takes a tap only where the stride divides)
//      and `cc` output channels' filters.
//   W  conv_tiled: a block computes CT_TK output channels x `tc` input
//      channels x every (fh, fw) tap of one filter depth fd; each thread owns
//      up to CT_WSLOTS of those dw elements and sums them over its split of
//      the (n, od, CT_TH x CT_TW output tile) units, staging each unit's dy
//      tile and x patch. With CT_WS_OUT=1 split s writes fp32 partials to
//      workspace + s * |dw|, which conv_tiled_reduce adds up into dw.
// Indices are 32-bit: the solver admits only problems whose tensors (times
// the splits) index in 32 bits.
//
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_DIR (1 F, 2 B, 3 W), CT_NHWC,
// CT_TH CT_TW CT_TK (the tile), CT_WS_OUT.
// Scalars: the problem (plan_args order), then for F and B `cc`, for W `tc`
// and the number of splits. Sizes are never compiled in.

#ifndef CT_TH
#define CT_TH 8
#endif
#ifndef CT_TW
#define CT_TW 8
#endif
#ifndef CT_TK
#define CT_TK 8
#endif
#ifndef CT_WS_OUT
#define CT_WS_OUT 0
#endif

// Shared memory per block, in floats; the solver sizes stages (cc, tc) to it.
#define CT_SMEM_FLOATS 8192
// dw elements a thread of the W kernel owns, at most; the solver sizes tc to
// it.
#define CT_WSLOTS 8
#define CT_THREADS (CT_TH * CT_TW)

// The problem; spatial arrays are (D, H, W).
struct CtTiled {
  int n, g, cg, kg;
  int in[3], f[3], pad[3], st[3], dil[3], out[3];
};

#define CT_MAKE_TILED(q)                                                       \
  CtTiled q;                                                                   \
  {                                                                            \
    const ct_i64 v[5][3] = {{a_id, a_ih, a_iw},                                \
                            {a_fd, a_fh, a_fw},                                \
                            {a_pd, a_ph, a_pw},                                \
                            {a_sd, a_sh, a_sw},                                \
                            {a_dd, a_dh, a_dw}};                               \
    q.n = static_cast<int>(a_n), q.g = static_cast<int>(a_g);                  \
    q.cg = static_cast<int>(a_c / a_g), q.kg = static_cast<int>(a_k / a_g);    \
    for (int i = 0; i < 3; ++i) {                                              \
      q.in[i] = static_cast<int>(v[0][i]), q.f[i] = static_cast<int>(v[1][i]); \
      q.pad[i] = static_cast<int>(v[2][i]),                                    \
      q.st[i] = static_cast<int>(v[3][i]);                                     \
      q.dil[i] = static_cast<int>(v[4][i]);                                    \
      q.out[i] =                                                               \
          (q.in[i] + 2 * q.pad[i] - q.dil[i] * (q.f[i] - 1) - 1) / q.st[i] +   \
          1;                                                                   \
    }                                                                          \
  }

CT_DEVICE int ct_ceil_div(int a, int b) { return (a + b - 1) / b; }

// Element (n, c, d, h, w) of an activation tensor with `chans` channels and
// spatial size sp.
CT_DEVICE int ct_act(int n, int c, int d, int h, int w, int chans,
                     const int* sp) {
#if CT_NHWC
  return (((n * sp[0] + d) * sp[1] + h) * sp[2] + w) * chans + c;
#else
  return (((n * chans + c) * sp[0] + d) * sp[1] + h) * sp[2] + w;
#endif
}

// Element (k, c, fd, fh, fw) of the filter tensor.
CT_DEVICE int ct_wgt(const CtTiled& q, int k, int c, int fd, int fh, int fw) {
#if CT_NHWC
  return (((k * q.f[0] + fd) * q.f[1] + fh) * q.f[2] + fw) * q.cg + c;
#else
  return (((k * q.cg + c) * q.f[0] + fd) * q.f[1] + fh) * q.f[2] + fw;
#endif
}

// Splits the index of a staged (channel, row, column) element, the tensor's
// contiguous axis fastest.
CT_DEVICE void ct_patch_coords(int e, int chans, int rows, int cols, int& c,
                               int& r, int& s) {
#if CT_NHWC
  c = e % chans;
  e /= chans;
  s = e % cols;
  r = e / cols;
#else
  s = e % cols;
  e /= cols;
  r = e % rows;
  c = e / rows;
#endif
}

// Stages `chans` channels (from channel c0 of the tensor, `total` channels,
// spatial size sp, plane d) of the rows x cols patch at (h0, w0) into dst as
// [channel][row][col], zero outside the tensor.
CT_DEVICE void ct_stage_patch(float* dst, const ct_t* src, int n, int c0,
                              int chans, int total, int d, int h0, int w0,
                              int rows, int cols, const int* sp) {
  for (int e = threadIdx.x; e < chans * rows * cols; e += CT_THREADS) {
    int c, r, s;
    ct_patch_coords(e, chans, rows, cols, c, r, s);
    const int h = h0 + r, w = w0 + s;
    const bool in = h >= 0 && h < sp[1] && w >= 0 && w < sp[2];
    dst[(c * rows + r) * cols + s] =
        in ? ct_to_float(src[ct_act(n, c0 + c, d, h, w, total, sp)]) : 0.0f;
  }
}

// Stages filter taps of depth fd for `outs` x `ins` (k, c) pairs as
// dst[(o * in_stride + i) * taps + tap]. k_of_o says whether o counts output
// channels (from k0) and i input channels (from c0), or the other way round;
// pairs past kg or cg are zero.
CT_DEVICE void ct_stage_filters(float* dst, const ct_t* w, const CtTiled& q,
                                int g, bool k_of_o, int o0, int outs, int i0,
                                int ins, int in_stride, int fd) {
  const int taps = q.f[1] * q.f[2];
  for (int e = threadIdx.x; e < outs * ins * taps; e += CT_THREADS) {
    // The filter's contiguous axis fastest: taps (NCHW) or input channels
    // (NHWC).
    int o, i, t;
    const bool c_fast = CT_NHWC != 0;
    if (k_of_o) {
      if (c_fast) {
        i = e % ins, t = (e / ins) % taps, o = e / (ins * taps);
      } else {
        t = e % taps, i = (e / taps) % ins, o = e / (taps * ins);
      }
    } else {
      if (c_fast) {
        o = e % outs, t = (e / outs) % taps, i = e / (outs * taps);
      } else {
        t = e % taps, o = (e / taps) % outs, i = e / (taps * outs);
      }
    }
    const int k = k_of_o ? o0 + o : i0 + i, c = k_of_o ? i0 + i : o0 + o;
    const bool ok = k < q.kg && c < q.cg;
    dst[(o * in_stride + i) * taps + t] =
        ok ? ct_to_float(
                 w[ct_wgt(q, g * q.kg + k, c, fd, t / q.f[2], t % q.f[2])])
           : 0.0f;
  }
}

#if CT_DIR == 1
CT_KERNEL void __launch_bounds__(CT_THREADS)
    conv_tiled(const ct_t* x, const ct_t* w, ct_t* y, CT_PROBLEM_PARAMS,
               ct_i64 a_cc) {
  CT_MAKE_TILED(q);
  __shared__ float smem[CT_SMEM_FLOATS];
  const int cc = static_cast<int>(a_cc);
  const int tiles_w = ct_ceil_div(q.out[2], CT_TW),
            tiles_h = ct_ceil_div(q.out[1], CT_TH);
  int bx = blockIdx.x;
  const int tw0 = (bx % tiles_w) * CT_TW;
  bx /= tiles_w;
  const int th0 = (bx % tiles_h) * CT_TH;
  bx /= tiles_h;
  const int od = bx % q.out[0], n = bx / q.out[0];
  const int ktiles = ct_ceil_div(q.kg, CT_TK);
  const int k0 = (blockIdx.y % ktiles) * CT_TK, g = blockIdx.y / ktiles;
  const int tx = threadIdx.x % CT_TW, ty = threadIdx.x / CT_TW;
  // The input patch the tile reads through every (fh, fw) tap.
  const int rows = (CT_TH - 1) * q.st[1] + (q.f[1] - 1) * q.dil[1] + 1;
  const int cols = (CT_TW - 1) * q.st[2] + (q.f[2] - 1) * q.dil[2] + 1;
  const int h0 = th0 * q.st[1] - q.pad[1], w0 = tw0 * q.st[2] - q.pad[2];
  const int taps = q.f[1] * q.f[2];
  float* xs = smem;
  float* ws = smem + cc * rows * cols;

  float acc[CT_TK];
#pragma unroll
  for (int k = 0; k < CT_TK; ++k) acc[k] = 0.0f;
  for (int fd = 0; fd < q.f[0]; ++fd) {
    const int d = od * q.st[0] - q.pad[0] + fd * q.dil[0];
    if (d < 0 || d >= q.in[0]) continue;  // the same for the whole block
    for (int c0 = 0; c0 < q.cg; c0 += cc) {
      const int cn = min(cc, q.cg - c0);
      __syncthreads();  // the previous stage is consumed
      ct_stage_patch(xs, x, n, g * q.cg + c0, cn, q.g * q.cg, d, h0, w0, rows,
                     cols, q.in);
      ct_stage_filters(ws, w, q, g, true, k0, CT_TK, c0, cn, cc, fd);
      __syncthreads();
      for (int c = 0; c < cn; ++c)
        for (int fh = 0; fh < q.f[1]; ++fh) {
          const float* xr = xs +
                            (c * rows + ty * q.st[1] + fh * q.dil[1]) * cols +
                            tx * q.st[2];
          const float* wr = ws + c * taps + fh * q.f[2];
          for (int fw = 0; fw < q.f[2]; ++fw) {
            const float v = xr[fw * q.dil[2]];
#pragma unroll
            for (int k = 0; k < CT_TK; ++k)
              acc[k] += v * wr[k * cc * taps + fw];
          }
        }
    }
  }
  const int oh = th0 + ty, ow = tw0 + tx;
  if (oh < q.out[1] && ow < q.out[2]) {
#pragma unroll
    for (int k = 0; k < CT_TK; ++k) {
      if (k0 + k >= q.kg) break;
      y[ct_act(n, g * q.kg + k0 + k, od, oh, ow, q.g * q.kg, q.out)] =
          ct_from_float<ct_t>(acc[k]);
    }
  }
}

#elif CT_DIR == 2
CT_DEVICE int ct_floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The output coordinate that input coordinate t (padded, minus the tap's
// offset) comes from, if the stride divides it.
CT_DEVICE bool ct_exact(int t, int s, int& o) {
  if (t < 0) return false;
  if (s == 1) {
    o = t;
    return true;
  }
  o = t / s;
  return o * s == t;
}

CT_KERNEL void __launch_bounds__(CT_THREADS)
    conv_tiled(ct_t* x, const ct_t* w, const ct_t* y, CT_PROBLEM_PARAMS,
               ct_i64 a_cc) {
  CT_MAKE_TILED(q);
  __shared__ float smem[CT_SMEM_FLOATS];
  const int cc = static_cast<int>(a_cc);
  const int tiles_w = ct_ceil_div(q.in[2], CT_TW),
            tiles_h = ct_ceil_div(q.in[1], CT_TH);
  int bx = blockIdx.x;
  const int tw0 = (bx % tiles_w) * CT_TW;
  bx /= tiles_w;
  const int th0 = (bx % tiles_h) * CT_TH;
  bx /= tiles_h;
  const int id = bx % q.in[0], n = bx / q.in[0];
  const int ctiles = ct_ceil_div(q.cg, CT_TK);
  const int c0 = (blockIdx.y % ctiles) * CT_TK, g = blockIdx.y / ctiles;
  const int tx = threadIdx.x % CT_TW, ty = threadIdx.x / CT_TW;
  // The dy rows (columns) the tile's taps reach: from the first tap's
  // lowest to the last position's highest output coordinate.
  const int rows =
      (CT_TH - 1 + (q.f[1] - 1) * q.dil[1] + q.st[1] - 1) / q.st[1] + 1;
  const int cols =
      (CT_TW - 1 + (q.f[2] - 1) * q.dil[2] + q.st[2] - 1) / q.st[2] + 1;
  const int oh0 =
      ct_floor_div(th0 + q.pad[1] - (q.f[1] - 1) * q.dil[1], q.st[1]);
  const int ow0 =
      ct_floor_div(tw0 + q.pad[2] - (q.f[2] - 1) * q.dil[2], q.st[2]);
  const int taps = q.f[1] * q.f[2];
  const int ih = th0 + ty, iw = tw0 + tx;
  float* ys = smem;
  float* ws = smem + cc * rows * cols;

  float acc[CT_TK];
#pragma unroll
  for (int c = 0; c < CT_TK; ++c) acc[c] = 0.0f;
  for (int fd = 0; fd < q.f[0]; ++fd) {
    int od;
    if (!ct_exact(id + q.pad[0] - fd * q.dil[0], q.st[0], od) || od >= q.out[0])
      continue;
    for (int k0 = 0; k0 < q.kg; k0 += cc) {
      const int kn = min(cc, q.kg - k0);
      __syncthreads();  // the previous stage is consumed
      ct_stage_patch(ys, y, n, g * q.kg + k0, kn, q.g * q.kg, od, oh0, ow0,
                     rows, cols, q.out);
      ct_stage_filters(ws, w, q, g, false, c0, CT_TK, k0, kn, cc, fd);
      __syncthreads();
      for (int fh = 0; fh < q.f[1]; ++fh) {
        int oh;
        if (!ct_exact(ih + q.pad[1] - fh * q.dil[1], q.st[1], oh)) continue;
        for (int fw = 0; fw < q.f[2]; ++fw) {
          int ow;
          if (!ct_exact(iw + q.pad[2] - fw * q.dil[2], q.st[2], ow)) continue;
          const float* yr = ys + (oh - oh0) * cols + (ow - ow0);
          const float* wr = ws + fh * q.f[2] + fw;
          for (int k = 0; k < kn; ++k) {
            const float v = yr[k * rows * cols];
#pragma unroll
            for (int c = 0; c < CT_TK; ++c)
              acc[c] += v * wr[(c * cc + k) * taps];
          }
        }
      }
    }
  }
  if (ih < q.in[1] && iw < q.in[2]) {
#pragma unroll
    for (int c = 0; c < CT_TK; ++c) {
      if (c0 + c >= q.cg) break;
      x[ct_act(n, g * q.cg + c0 + c, id, ih, iw, q.g * q.cg, q.in)] =
          ct_from_float<ct_t>(acc[c]);
    }
  }
}

#else
#if CT_WS_OUT
#define CT_PART_PARAM float *part,
#else
#define CT_PART_PARAM
#endif

CT_KERNEL void __launch_bounds__(CT_THREADS)
    conv_tiled(const ct_t* x, ct_t* w, const ct_t* y,
               CT_PART_PARAM CT_PROBLEM_PARAMS, ct_i64 a_tc, ct_i64 a_splits) {
  CT_MAKE_TILED(q);
  __shared__ float smem[CT_SMEM_FLOATS];
  const int tc = static_cast<int>(a_tc), splits = static_cast<int>(a_splits);
  const int ktiles = ct_ceil_div(q.kg, CT_TK);
  const int k0 = (blockIdx.x % ktiles) * CT_TK, c0 = (blockIdx.x / ktiles) * tc;
  const int fd = blockIdx.y % q.f[0], g = blockIdx.y / q.f[0];
  const int split = blockIdx.z;
  const int taps = q.f[1] * q.f[2];
  const int rows = (CT_TH - 1) * q.st[1] + (q.f[1] - 1) * q.dil[1] + 1;
  const int cols = (CT_TW - 1) * q.st[2] + (q.f[2] - 1) * q.dil[2] + 1;
  float* dys = smem;
  float* xs = smem + CT_TK * CT_THREADS;

  // This thread's dw elements (k, c, fh, fw), e = tid + s * CT_THREADS, and
  // where each reads the staged dy tile and x patch.
  const int elems = CT_TK * tc * taps;
  int dbase[CT_WSLOTS], xbase[CT_WSLOTS];
  float acc[CT_WSLOTS];
#pragma unroll
  for (int s = 0; s < CT_WSLOTS; ++s) {
    const int e = threadIdx.x + s * CT_THREADS;
    const int fw = e % q.f[2], fh = (e / q.f[2]) % q.f[1];
    const int c = (e / taps) % tc, k = e / (taps * tc);
    dbase[s] = e < elems ? k * CT_THREADS : -1;
    xbase[s] = (c * rows + fh * q.dil[1]) * cols + fw * q.dil[2];
    acc[s] = 0.0f;
  }

  const int tiles_w = ct_ceil_div(q.out[2], CT_TW),
            tiles_h = ct_ceil_div(q.out[1], CT_TH);
  const int units = q.n * q.out[0] * tiles_h * tiles_w;
  const int per_split = ct_ceil_div(units, splits);
  const int u_end = min(units, (split + 1) * per_split);
  for (int u = split * per_split; u < u_end; ++u) {
    int r = u;
    const int tw0 = (r % tiles_w) * CT_TW;
    r /= tiles_w;
    const int th0 = (r % tiles_h) * CT_TH;
    r /= tiles_h;
    const int od = r % q.out[0], n = r / q.out[0];
    const int d = od * q.st[0] - q.pad[0] + fd * q.dil[0];
    if (d < 0 || d >= q.in[0]) continue;  // the same for the whole block
    __syncthreads();                      // the previous unit is consumed
    for (int e = threadIdx.x; e < CT_TK * CT_THREADS; e += CT_THREADS) {
#if CT_NHWC
      const int k = e % CT_TK, p = e / CT_TK;
#else
      const int p = e % CT_THREADS, k = e / CT_THREADS;
#endif
      const int oh = th0 + p / CT_TW, ow = tw0 + p % CT_TW;
      const bool ok = k0 + k < q.kg && oh < q.out[1] && ow < q.out[2];
      dys[k * CT_THREADS + p] =
          ok ? ct_to_float(y[ct_act(n, g * q.kg + k0 + k, od, oh, ow,
                                    q.g * q.kg, q.out)])
             : 0.0f;
    }
    // Only channels below cg are staged; elements of the others read stale
    // values and are never written.
    const int cn = min(tc, q.cg - c0);
    ct_stage_patch(xs, x, n, g * q.cg + c0, cn, q.g * q.cg, d,
                   th0 * q.st[1] - q.pad[1], tw0 * q.st[2] - q.pad[2], rows,
                   cols, q.in);
    __syncthreads();
#pragma unroll
    for (int s = 0; s < CT_WSLOTS; ++s) {
      if (dbase[s] < 0) continue;
      const float* dr = dys + dbase[s];
      const float* xr = xs + xbase[s];
      float sum = 0.0f;
      for (int py = 0; py < CT_TH; ++py)
        for (int px = 0; px < CT_TW; ++px) {
          sum += dr[py * CT_TW + px] * xr[py * q.st[1] * cols + px * q.st[2]];
        }
      acc[s] += sum;
    }
  }

#pragma unroll
  for (int s = 0; s < CT_WSLOTS; ++s) {
    const int e = threadIdx.x + s * CT_THREADS;
    if (e >= elems) continue;
    const int fw = e % q.f[2], fh = (e / q.f[2]) % q.f[1];
    const int c = (e / taps) % tc, k = e / (taps * tc);
    if (k0 + k >= q.kg || c0 + c >= q.cg) continue;
    const int at = ct_wgt(q, g * q.kg + k0 + k, c0 + c, fd, fh, fw);
#if CT_WS_OUT
    part[split * (q.g * q.kg * q.cg * q.f[0] * taps) + at] = acc[s];
#else
    w[at] = ct_from_float<ct_t>(acc[s]);
#endif
  }
}

// Sums the splits' partials into dw, in its type.
CT_KERNEL void conv_tiled_reduce(const float* part, ct_t* w, ct_i64 a_count,
                                 ct_i64 a_splits) {
  ct_sum_slices(part, w, a_count, a_splits);
}
#endif
