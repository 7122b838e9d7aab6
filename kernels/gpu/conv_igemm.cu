// Implicit-GEMM convolution, every direction, as one tiled GEMM whose operands
// are gathered from the tensors while they are loaded into shared memory:
//   F: y[m = (n,od,oh,ow)][k]      = sum over (f, c)    x(m, f, c) * w[k][c][f]
//   B: dx[m = (n,id,ih,iw)][c]     = sum over (f, k)    dy(m, f, k) *
//   w[k][c][f] W: dw[k][n = (c,f)]            = sum over (n,od,oh,ow) dy * x,
//   split over
//      that sum into fp32 partials in the workspace when CT_WS_OUT is 1.
// F and B walk the reduction filter tap by filter tap, channels inside a tap,
// so no index in the main loop needs a division.
//
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_DIR (1 F, 2 B, 3 W), CT_NHWC,
// BM BN BK (block tile), then either TM TN (per-thread register tile, fp32
// FMA) or CT_MMA=1 with WM WN (warps; m16n8k16 tensor-core MMA, CUDA sm_80+,
// 16-bit types only). CT_STATIC=1 with CT_S_<size> compiles every size in.
// Scalars: the problem (plan_args order), then the number of K splits.

// Defaults, so the source also compiles on its own (compile-only checks);
// the solvers always pass every option.
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

#ifndef CT_MMA
#define CT_MMA 0
#endif
#ifndef CT_WS_OUT
#define CT_WS_OUT 0
#endif

#if CT_MMA
#define CT_THREADS (WM * WN * 32)
typedef ct_u16 smem_t;  // raw 16-bit values: the MMA reads them as pairs
#else
#define CT_THREADS ((BM / TM) * (BN / TN))
typedef float smem_t;
#endif
#define CT_LA (BM * BK / CT_THREADS)  // A elements each thread loads per tile
#define CT_LB (BN * BK / CT_THREADS)

// Which tile index runs fastest across threads when loading, chosen so that
// consecutive threads read neighbouring addresses in the usual cases.
#if CT_DIR == 1
#define CT_A_KFAST CT_NHWC
#define CT_B_KFAST 1
#elif CT_DIR == 2
#define CT_A_KFAST CT_NHWC
#define CT_B_KFAST 0
#else
#define CT_A_KFAST (1 - CT_NHWC)
#define CT_B_KFAST (1 - CT_NHWC)
#endif

#if CT_MMA
#define CT_AS(buf, m, k) as[buf][m][k]
#define CT_BS(buf, n, k) bs[buf][n][k]
#else
#define CT_AS(buf, m, k) as[buf][k][m]
#define CT_BS(buf, n, k) bs[buf][k][n]
#endif

#ifdef CT_STATIC
#define CT_ARG(name, a) (CT_S_##name)
#else
#define CT_ARG(name, a) (static_cast<int>(a))
#endif

// The problem in 32-bit (the solver checks every tensor fits) and dense
// strides in (outer, inner, D, H, W) order for the compiled layout.
struct CtGeo {
  int n, cg, kg, g;
  int id, ih, iw, fd, fh, fw, pd, ph, pw, sd, sh, sw, dd, dh, dw, od, oh, ow;
  int xs[5], ws[5], ys[5];
};

CT_DEVICE void ct_strides(int* s, int inner, int d, int h, int w) {
  const int sp[3] = {d, h, w};
  ct_strides<int>(s, inner, sp);
}

CT_DEVICE int ct_out_size(int in, int f, int p, int s, int d) {
  return (in + 2 * p - d * (f - 1) - 1) / s + 1;
}

#define CT_MAKE_GEO(geo)                                            \
  CtGeo geo;                                                        \
  geo.n = CT_ARG(N, a_n), geo.g = CT_ARG(G, a_g);                   \
  geo.cg = CT_ARG(C, a_c) / geo.g, geo.kg = CT_ARG(K, a_k) / geo.g; \
  geo.id = CT_ARG(ID, a_id), geo.ih = CT_ARG(IH, a_ih),             \
  geo.iw = CT_ARG(IW, a_iw);                                        \
  geo.fd = CT_ARG(FD, a_fd), geo.fh = CT_ARG(FH, a_fh),             \
  geo.fw = CT_ARG(FW, a_fw);                                        \
  geo.pd = CT_ARG(PD, a_pd), geo.ph = CT_ARG(PH, a_ph),             \
  geo.pw = CT_ARG(PW, a_pw);                                        \
  geo.sd = CT_ARG(SD, a_sd), geo.sh = CT_ARG(SH, a_sh),             \
  geo.sw = CT_ARG(SW, a_sw);                                        \
  geo.dd = CT_ARG(DD, a_dd), geo.dh = CT_ARG(DH, a_dh),             \
  geo.dw = CT_ARG(DW, a_dw);                                        \
  geo.od = ct_out_size(geo.id, geo.fd, geo.pd, geo.sd, geo.dd);     \
  geo.oh = ct_out_size(geo.ih, geo.fh, geo.ph, geo.sh, geo.dh);     \
  geo.ow = ct_out_size(geo.iw, geo.fw, geo.pw, geo.sw, geo.dw);     \
  ct_strides(geo.xs, geo.cg* geo.g, geo.id, geo.ih, geo.iw);        \
  ct_strides(geo.ws, geo.cg, geo.fd, geo.fh, geo.fw);               \
  ct_strides(geo.ys, geo.kg* geo.g, geo.od, geo.oh, geo.ow)

// Splits a flat index over (a, b, c, d) with d fastest.
CT_DEVICE void ct_split4(int m, int b, int c, int d, int& i0, int& i1, int& i2,
                         int& i3) {
  i3 = m % d;
  m /= d;
  i2 = m % c;
  m /= c;
  i1 = m % b;
  i0 = m / b;
}

// For backward data: the output coordinate that input coordinate t (padded,
// minus the filter offset) comes from, if any.
CT_DEVICE bool ct_src(int t, int s, int lim, int& o) {
  if (t < 0) return false;
  if (s == 1) {
    o = t;
  } else {
    o = t / s;
    if (o * s != t) return false;
  }
  return o < lim;
}

CT_DEVICE smem_t ct_fetch(const ct_t* p, int idx, bool ok) {
#if CT_MMA
  return ok ? reinterpret_cast<const ct_u16*>(p)[idx] : static_cast<ct_u16>(0);
#else
  return ok ? ct_to_float(p[idx]) : 0.0f;
#endif
}

#if CT_MMA
CT_DEVICE ct_u32 ct_pair(const smem_t* p) {
  return *reinterpret_cast<const ct_u32*>(p);
}

#define CT_MI (BM / WM / 16)
#define CT_NI (BN / WN / 8)
#endif

// The output element of GEMM cell (m, n) is at row index + column index in
// the output tensor (or in the workspace partials); -1 outside the problem.
CT_DEVICE int ct_row_index(const CtGeo& q, int m, int g, int split) {
#if CT_DIR == 1
  if (m >= q.n * q.od * q.oh * q.ow) return -1;
  int ni, od, oh, ow;
  ct_split4(m, q.od, q.oh, q.ow, ni, od, oh, ow);
  return ni * q.ys[0] + od * q.ys[2] + oh * q.ys[3] + ow * q.ys[4];
#elif CT_DIR == 2
  if (m >= q.n * q.id * q.ih * q.iw) return -1;
  int ni, id, ih, iw;
  ct_split4(m, q.id, q.ih, q.iw, ni, id, ih, iw);
  return ni * q.xs[0] + id * q.xs[2] + ih * q.xs[3] + iw * q.xs[4];
#else
  // Both weight layouts keep (c, taps) of one output channel contiguous, in
  // the order the GEMM column index uses.
  if (m >= q.kg) return -1;
  return (split * q.g * q.kg + g * q.kg + m) * q.ws[0];
#endif
}

CT_DEVICE int ct_col_index(const CtGeo& q, int n, int g) {
#if CT_DIR == 1
  return n < q.kg ? (g * q.kg + n) * q.ys[1] : -1;
#elif CT_DIR == 2
  return n < q.cg ? (g * q.cg + n) * q.xs[1] : -1;
#else
  return n < q.ws[0] ? n : -1;
#endif
}

#if CT_WS_OUT
#define CT_OUT_PARAM float *out_ws,
#else
#define CT_OUT_PARAM
#endif

CT_KERNEL void __launch_bounds__(CT_THREADS)
    conv_igemm(const ct_t* px, const ct_t* pw, const ct_t* py,
               CT_OUT_PARAM CT_PROBLEM_PARAMS, ct_i64 a_splits) {
  CT_MAKE_GEO(q);
  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int splits = static_cast<int>(a_splits);
  const int g = blockIdx.z / splits, split = blockIdx.z % splits;

  __shared__ smem_t
      as[2][CT_MMA ? BM : BK][(CT_MMA ? BK : BM) + (CT_MMA ? 8 : 4)]
      __attribute__((aligned(16)));
  __shared__ smem_t
      bs[2][CT_MMA ? BN : BK][(CT_MMA ? BK : BN) + (CT_MMA ? 8 : 4)]
      __attribute__((aligned(16)));

  // Tile coordinates of this thread's load slots.
  int am[CT_LA], ak[CT_LA], bn[CT_LB], bk[CT_LB];
#pragma unroll
  for (int i = 0; i < CT_LA; ++i) {
    const int e = tid + i * CT_THREADS;
    am[i] = CT_A_KFAST ? e / BK : e % BM;
    ak[i] = CT_A_KFAST ? e % BK : e / BM;
  }
#pragma unroll
  for (int i = 0; i < CT_LB; ++i) {
    const int e = tid + i * CT_THREADS;
    bn[i] = CT_B_KFAST ? e / BK : e % BN;
    bk[i] = CT_B_KFAST ? e % BK : e / BN;
  }

#if CT_DIR == 1
  // A = x at (n, od*s - p + f*d, c), B = w[k][c][f].
  const int rows = q.n * q.od * q.oh * q.ow;
  int a_base[CT_LA], a_d[CT_LA], a_h[CT_LA], a_w[CT_LA], b_base[CT_LB];
#pragma unroll
  for (int i = 0; i < CT_LA; ++i) {
    const int m = m0 + am[i];
    int ni = 0, d = 0, h = 0, w = 0;
    if (m < rows) ct_split4(m, q.od, q.oh, q.ow, ni, d, h, w);
    a_base[i] = ni * q.xs[0] + g * q.cg * q.xs[1];
    a_d[i] = m < rows ? d * q.sd - q.pd : -(1 << 29);
    a_h[i] = h * q.sh - q.ph;
    a_w[i] = w * q.sw - q.pw;
  }
#pragma unroll
  for (int i = 0; i < CT_LB; ++i) {
    const int n = n0 + bn[i];
    b_base[i] = n < q.kg ? (g * q.kg + n) * q.ws[0] : -1;
  }
  const int chunk_limit = q.cg;
#elif CT_DIR == 2
  // A = dy at the output pixel that input pixel m sees through tap f, B = w.
  const int rows = q.n * q.id * q.ih * q.iw;
  int a_base[CT_LA], a_d[CT_LA], a_h[CT_LA], a_w[CT_LA], b_base[CT_LB];
#pragma unroll
  for (int i = 0; i < CT_LA; ++i) {
    const int m = m0 + am[i];
    int ni = 0, d = 0, h = 0, w = 0;
    if (m < rows) ct_split4(m, q.id, q.ih, q.iw, ni, d, h, w);
    a_base[i] = ni * q.ys[0] + g * q.kg * q.ys[1];
    a_d[i] = m < rows ? d + q.pd : -(1 << 29);
    a_h[i] = h + q.ph;
    a_w[i] = w + q.pw;
  }
#pragma unroll
  for (int i = 0; i < CT_LB; ++i) {
    const int n = n0 + bn[i];
    b_base[i] = n < q.cg ? g * q.kg * q.ws[0] + n * q.ws[1] : -1;
  }
  const int chunk_limit = q.kg;
#else
  // A = dy[n][k][o], B = x at (n, o*s - p + f*d, c); the sum runs over (n, o).
  const int taps = q.fd * q.fh * q.fw;
  const int red = q.n * q.od * q.oh * q.ow;
  int a_base[CT_LA], b_base[CT_LB], b_d[CT_LB], b_h[CT_LB], b_w[CT_LB];
#pragma unroll
  for (int i = 0; i < CT_LA; ++i) {
    const int m = m0 + am[i];
    a_base[i] = m < q.kg ? (g * q.kg + m) * q.ys[1] : -1;
  }
#pragma unroll
  for (int i = 0; i < CT_LB; ++i) {
    const int n = n0 + bn[i];
    int c, fd, fh, fw;
#if CT_NHWC
    ct_split4(n, q.fh, q.fw, q.cg, fd, fh, fw, c);
#else
    ct_split4(n, q.fd, q.fh, q.fw, c, fd, fh, fw);
#endif
    b_base[i] = n < q.cg * taps ? (g * q.cg + c) * q.xs[1] : -1;
    b_d[i] = fd * q.dd - q.pd;
    b_h[i] = fh * q.dh - q.ph;
    b_w[i] = fw * q.dw - q.pw;
  }
  const int all_tiles = (red + BK - 1) / BK;
  const int per_split = (all_tiles + splits - 1) / splits;
  const int first_tile = split * per_split;
  const int ntiles =
      max(0, min(all_tiles, first_tile + per_split) - first_tile);
  int k0 = first_tile * BK;
#endif

#if CT_DIR != 3
  const int ntiles = q.fd * q.fh * q.fw * ((chunk_limit + BK - 1) / BK);
  int t_c = 0, t_fd = 0, t_fh = 0,
      t_fw = 0;  // the tile: a tap and a channel block
#endif

  smem_t ra[CT_LA], rb[CT_LB];
  auto load = [&]() {
#if CT_DIR == 1
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) {
      const int c = t_c + ak[i];
      const int d = a_d[i] + t_fd * q.dd, h = a_h[i] + t_fh * q.dh,
                w = a_w[i] + t_fw * q.dw;
      const bool ok = c < q.cg &&
                      static_cast<unsigned>(d) < static_cast<unsigned>(q.id) &&
                      static_cast<unsigned>(h) < static_cast<unsigned>(q.ih) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(q.iw);
      ra[i] = ct_fetch(
          px, a_base[i] + c * q.xs[1] + d * q.xs[2] + h * q.xs[3] + w * q.xs[4],
          ok);
    }
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) {
      const int c = t_c + bk[i];
      const bool ok = b_base[i] >= 0 && c < q.cg;
      rb[i] = ct_fetch(pw,
                       b_base[i] + c * q.ws[1] + t_fd * q.ws[2] +
                           t_fh * q.ws[3] + t_fw * q.ws[4],
                       ok);
    }
#elif CT_DIR == 2
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) {
      const int k = t_c + ak[i];
      int od = 0, oh = 0, ow = 0;
      const bool ok = k < q.kg &&
                      ct_src(a_d[i] - t_fd * q.dd, q.sd, q.od, od) &&
                      ct_src(a_h[i] - t_fh * q.dh, q.sh, q.oh, oh) &&
                      ct_src(a_w[i] - t_fw * q.dw, q.sw, q.ow, ow);
      ra[i] = ct_fetch(
          py,
          a_base[i] + k * q.ys[1] + od * q.ys[2] + oh * q.ys[3] + ow * q.ys[4],
          ok);
    }
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) {
      const int k = t_c + bk[i];
      const bool ok = b_base[i] >= 0 && k < q.kg;
      rb[i] = ct_fetch(pw,
                       b_base[i] + k * q.ws[0] + t_fd * q.ws[2] +
                           t_fh * q.ws[3] + t_fw * q.ws[4],
                       ok);
    }
#else
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) {
      const int k = k0 + ak[i];
      int ni = 0, od = 0, oh = 0, ow = 0;
      if (k < red) ct_split4(k, q.od, q.oh, q.ow, ni, od, oh, ow);
      const bool ok = a_base[i] >= 0 && k < red;
      ra[i] = ct_fetch(
          py,
          a_base[i] + ni * q.ys[0] + od * q.ys[2] + oh * q.ys[3] + ow * q.ys[4],
          ok);
    }
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) {
      const int k = k0 + bk[i];
      int ni = 0, od = 0, oh = 0, ow = 0;
      if (k < red) ct_split4(k, q.od, q.oh, q.ow, ni, od, oh, ow);
      const int d = od * q.sd + b_d[i], h = oh * q.sh + b_h[i],
                w = ow * q.sw + b_w[i];
      const bool ok = b_base[i] >= 0 && k < red &&
                      static_cast<unsigned>(d) < static_cast<unsigned>(q.id) &&
                      static_cast<unsigned>(h) < static_cast<unsigned>(q.ih) &&
                      static_cast<unsigned>(w) < static_cast<unsigned>(q.iw);
      rb[i] = ct_fetch(
          px,
          b_base[i] + ni * q.xs[0] + d * q.xs[2] + h * q.xs[3] + w * q.xs[4],
          ok);
    }
#endif
  };
  auto advance = [&]() {
#if CT_DIR == 3
    k0 += BK;
#else
    t_c += BK;
    if (t_c >= chunk_limit) {
      t_c = 0;
      if (++t_fw == q.fw) {
        t_fw = 0;
        if (++t_fh == q.fh) t_fh = 0, ++t_fd;
      }
    }
#endif
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) CT_AS(buf, am[i], ak[i]) = ra[i];
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) CT_BS(buf, bn[i], bk[i]) = rb[i];
  };

#if CT_MMA
  const int warp = tid / 32, lane = tid % 32, gid = lane >> 2, tig = lane & 3;
  const int wm0 = (warp / WN) * (BM / WM), wn0 = (warp % WN) * (BN / WN);
  float acc[CT_MI][CT_NI][4];
#pragma unroll
  for (int i = 0; i < CT_MI; ++i)
#pragma unroll
    for (int j = 0; j < CT_NI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
  auto compute = [&](int buf) {
#pragma unroll
    for (int ks = 0; ks < BK; ks += 16) {
      const int kc = ks + tig * 2;
      ct_u32 af[CT_MI][4], bf[CT_NI][2];
#pragma unroll
      for (int i = 0; i < CT_MI; ++i) {
        const int r = wm0 + i * 16 + gid;
        af[i][0] = ct_pair(&as[buf][r][kc]);
        af[i][1] = ct_pair(&as[buf][r + 8][kc]);
        af[i][2] = ct_pair(&as[buf][r][kc + 8]);
        af[i][3] = ct_pair(&as[buf][r + 8][kc + 8]);
      }
#pragma unroll
      for (int j = 0; j < CT_NI; ++j) {
        const int c = wn0 + j * 8 + gid;
        bf[j][0] = ct_pair(&bs[buf][c][kc]);
        bf[j][1] = ct_pair(&bs[buf][c][kc + 8]);
      }
#pragma unroll
      for (int i = 0; i < CT_MI; ++i)
#pragma unroll
        for (int j = 0; j < CT_NI; ++j) ct_mma_16816(acc[i][j], af[i], bf[j]);
    }
  };
#else
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  auto compute = [&](int buf) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = as[buf][kk][ty + i * (BM / TM)];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = bs[buf][kk][tx + j * (BN / TN)];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
  };
#endif

  // Double buffered: the next tile's global loads are in flight while the
  // current tile is multiplied; one barrier per tile.
  if (ntiles > 0) {
    load();
    store(0);
  }
  __syncthreads();
  for (int t = 0; t < ntiles; ++t) {
    const bool more = t + 1 < ntiles;
    if (more) {
      advance();
      load();
    }
    compute(t & 1);
    if (more) store((t & 1) ^ 1);
    __syncthreads();
  }

#if CT_WS_OUT
  float* out = out_ws;
#elif CT_DIR == 1
  ct_t* out = const_cast<ct_t*>(py);
#elif CT_DIR == 2
  ct_t* out = const_cast<ct_t*>(px);
#else
  ct_t* out = const_cast<ct_t*>(pw);
#endif
  auto put = [&](int m, int n, float v) {
    const int row = ct_row_index(q, m, g, split);
    const int col = ct_col_index(q, n, g);
    if (row >= 0 && col >= 0) {
#if CT_WS_OUT
      out[row + col] = v;
#else
      out[row + col] = ct_from_float<ct_t>(v);
#endif
    }
  };
#if CT_MMA
#pragma unroll
  for (int i = 0; i < CT_MI; ++i)
#pragma unroll
    for (int j = 0; j < CT_NI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        put(m0 + wm0 + i * 16 + gid + (r >> 1) * 8,
            n0 + wn0 + j * 8 + tig * 2 + (r & 1), acc[i][j][r]);
      }
#else
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      put(m0 + ty + i * (BM / TM), n0 + tx + j * (BN / TN), acc[i][j]);
#endif
}

// Sums the K-split partials of backward weights into dw, in its type.
CT_KERNEL void conv_igemm_reduce(const float* ws, ct_t* out, ct_i64 count,
                                 ct_i64 splits) {
  ct_sum_slices(ws, out, count, splits);
}
