// Winograd F(m x m, 3x3) for 2-D 3x3 stride-1 convolutions, every
// direction, as transforms into a workspace and (m + 2)^2 batched GEMMs per
// group (one per transformed position e = (m + 2) * row + column); m = 2,
// or m = 4 for F and B (CT_WINO_M):
//   F, B  wino_filter   U[e] = G g G^T of every filter (once);
//         then per chunk of images
//         wino_input    V[e] = B^T d B of every (m+2)^2 tile d of the source,
//         GEMM          M[e] = U[e]^T V[e] (channels of the source reduced),
//         wino_output   the m x m outputs A^T M[e] A of every tile.
//         B is the forward pass over dy with the filter turned 180 degrees,
//         C and K swapped and pad 2 - p (the solver sets the pads).
//   W     (m = 2) per chunk wino_input over x, wino_dy (A dy A^T of every 2x2
//   tile of
//         dy) and a GEMM summing DY[e] X[e]^T over the tiles into `splits`
//         partial sums (added to by later chunks); then wino_wrw_output
//         (dw = G^T (sum of the partials) G). This is F(3x3, 2x2): the tile of
//         dy is the filter and the 3x3 dw patch the output.
// The GEMM is wino_gemm (fp32 FMA) or the vendor BLAS (a "blas.gemm" step the
// solver writes). M and W's partial sums are fp32; U, V and the W tiles are
// fp32, or with CT_TILE16 the tensor's 16-bit type (for the BLAS's tensor
// cores, m = 2 only; a transformed value is then a sum of at most four
// inputs, each halved at most twice, so its range stays that of the inputs).
//
// Workspace matrices per (e, group) hold a channel index ch and a tile index
// t = (image * tiles_h + th) * tiles_w + tw of the chunk: [e][g][ch][t] for
// NCHW and [e][g][t][ch] for NHWC, so transforms read and write along the
// tensor's contiguous axis. W cuts the chunk's tiles into `splits` runs of
// ts = ceil(tiles / splits), each its own matrix: [e][g][s][ch][t % ts] (NHWC
// [e][g][s][t % ts][ch]), zero past the last tile, so one batched GEMM over
// (e, g, s) gives the partial sums [e][g][s][k][c]. The solver checks that
// every tensor and the workspace index in 32 bits.
//
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_DIR (1 F, 2 B, 3 W), CT_NHWC,
// CT_TILE16 (0 or 1), CT_WINO_M (2 or 4), CT_BM CT_BN CT_BK (wino_gemm's
// block tile) and CT_TM CT_TN (its per-thread tile).
// Scalars: each kernel's own, listed with it; sizes are never compiled in.

#ifndef CT_TILE16
#define CT_TILE16 0
#endif
#ifndef CT_WINO_M
#define CT_WINO_M 2
#endif
#define CT_WT (CT_WINO_M + 2)  // the transformed tile's side

// The transforms of F(m, 3) as constant matrices (the compiler folds the
// zeros and ones): G (WT x 3) for the filter, B^T (WT x WT) for the input
// tile, A^T (m x WT) for the output.
#if CT_WINO_M == 2
CT_DEVICE float ct_g(int i, int j) {
  const float g[4][3] = {
      {1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  return g[i][j];
}
CT_DEVICE float ct_bt(int i, int j) {
  const float b[4][4] = {
      {1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  return b[i][j];
}
CT_DEVICE float ct_at(int i, int j) {
  const float a[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  return a[i][j];
}
#elif CT_WINO_M == 4
CT_DEVICE float ct_g(int i, int j) {
  const float g[6][3] = {{0.25f, 0, 0},
                         {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                         {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                         {1.0f / 24, 1.0f / 12, 1.0f / 6},
                         {1.0f / 24, -1.0f / 12, 1.0f / 6},
                         {0, 0, 1}};
  return g[i][j];
}
CT_DEVICE float ct_bt(int i, int j) {
  const float b[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                         {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                         {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  return b[i][j];
}
CT_DEVICE float ct_at(int i, int j) {
  const float a[4][6] = {{1, 1, 1, 1, 1, 0},
                         {0, 1, -1, 2, -2, 0},
                         {0, 1, 1, 4, 4, 0},
                         {0, 1, -1, 8, -8, 1}};
  return a[i][j];
}
#else
#error "CT_WINO_M must be 2 or 4"
#endif
#if CT_DIR == 3 && CT_WINO_M != 2
#error "backward weights is F(3x3, 2x2): CT_WINO_M must be 2"
#endif
#if CT_TILE16
typedef ct_t ct_wt;
#else
typedef float ct_wt;
#endif

#ifndef CT_BM
#define CT_BM 64
#endif
#ifndef CT_BN
#define CT_BN 64
#endif
#ifndef CT_BK
#define CT_BK 8
#endif
#ifndef CT_TM
#define CT_TM 4
#endif
#ifndef CT_TN
#define CT_TN 4
#endif

// Element (n, c, h, w) of an activation tensor with `chans` channels.
CT_DEVICE int ct_act(int n, int c, int h, int w, int chans, int height,
                     int width) {
#if CT_NHWC
  return ((n * height + h) * width + w) * chans + c;
#else
  return ((n * chans + c) * height + h) * width + w;
#endif
}

// Element (k, c, r, s) of a 3x3 filter tensor with cg channels per group.
CT_DEVICE int ct_filter(int k, int c, int r, int s, int cg) {
#if CT_NHWC
  return ((k * 3 + r) * 3 + s) * cg + c;
#else
  return ((k * cg + c) * 3 + r) * 3 + s;
#endif
}

// Index of (e, g, ch, t) in a workspace matrix set.
CT_DEVICE int ct_tidx(int e, int g, int ch, int t, int groups, int chans,
                      int tiles) {
  const int base = (e * groups + g) * chans * tiles;
#if CT_NHWC
  return base + t * chans + ch;
#else
  return base + ch * tiles + t;
#endif
}

// Splits a work item into (g, ch, t), the workspace's contiguous axis fastest.
CT_DEVICE void ct_item(int idx, int chans, int tiles, int& g, int& ch, int& t) {
#if CT_NHWC
  ch = idx % chans;
  idx /= chans;
  t = idx % tiles;
  g = idx / tiles;
#else
  t = idx % tiles;
  idx /= tiles;
  ch = idx % chans;
  g = idx / chans;
#endif
}

// Work item idx of a transform that writes `splits` runs of ts tiles per
// group (ts = ceil(tiles / splits)): the group g, the channel ch, the chunk's
// tile t (tiles or more past the last: a zero tile), and the slot it is
// written to, run-major: gs = g * splits + run, tt = t % ts.
CT_DEVICE void ct_run_item(int idx, int chans, int ts, int splits, int& g,
                           int& ch, int& t, int& gs, int& tt) {
  ct_item(idx, chans, ts, gs, ch, tt);
  g = gs / splits;
  t = (gs % splits) * ts + tt;
}

CT_DEVICE int ct_flat_index() {
  return static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
}

#if CT_DIR != 3
// U[e][g][i][o] = G g G^T for source channel i and destination channel o of
// group g: for F the filter w[o][i], for B w[i][o] turned 180 degrees.
// Scalars: groups, ci, co (channels per group of the source, destination).
CT_KERNEL void wino_filter(const ct_t* w, ct_wt* u, ct_i64 a_groups,
                           ct_i64 a_ci, ct_i64 a_co) {
  const int groups = static_cast<int>(a_groups), ci = static_cast<int>(a_ci);
  const int co = static_cast<int>(a_co);
  const int idx = ct_flat_index();
  if (idx >= groups * ci * co) return;
  const int o = idx % co, i = (idx / co) % ci, g = idx / (co * ci);
  float f[3][3];
  for (int r = 0; r < 3; ++r)
    for (int s = 0; s < 3; ++s) {
#if CT_DIR == 1
      f[r][s] = ct_to_float(w[ct_filter(g * co + o, i, r, s, ci)]);
#else
      f[r][s] = ct_to_float(w[ct_filter(g * ci + i, o, 2 - r, 2 - s, co)]);
#endif
    }
  // U = G f G^T.
  float t[CT_WT][3];
#pragma unroll
  for (int r = 0; r < CT_WT; ++r)
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      t[r][c] = 0.0f;
#pragma unroll
      for (int k = 0; k < 3; ++k) t[r][c] += ct_g(r, k) * f[k][c];
    }
#pragma unroll
  for (int r = 0; r < CT_WT; ++r)
#pragma unroll
    for (int c = 0; c < CT_WT; ++c) {
      float v = 0.0f;
#pragma unroll
      for (int k = 0; k < 3; ++k) v += t[r][k] * ct_g(c, k);
      u[(((r * CT_WT + c) * groups + g) * ci + i) * co + o] =
          ct_from_float<ct_wt>(v);
    }
}
#endif

// V = B^T d B for every (m+2)^2 tile d of the chunk's source channels, the
// tile (th, tw) starting at (m th - ph, m tw - pw); outside the image d is 0.
// Scalars: n0, nb (the chunk's images), groups, chans (per group), h, w (the
// source's size), ph, pw, tiles_h, tiles_w, splits (1 for F and B).
CT_KERNEL void wino_input(const ct_t* src, ct_wt* v, ct_i64 a_n0, ct_i64 a_nb,
                          ct_i64 a_groups, ct_i64 a_chans, ct_i64 a_h,
                          ct_i64 a_w, ct_i64 a_ph, ct_i64 a_pw,
                          ct_i64 a_tiles_h, ct_i64 a_tiles_w, ct_i64 a_splits) {
  const int groups = static_cast<int>(a_groups),
            chans = static_cast<int>(a_chans);
  const int height = static_cast<int>(a_h), width = static_cast<int>(a_w);
  const int tiles_h = static_cast<int>(a_tiles_h),
            tiles_w = static_cast<int>(a_tiles_w);
  const int tiles = static_cast<int>(a_nb) * tiles_h * tiles_w;
  const int splits = static_cast<int>(a_splits),
            ts = (tiles + splits - 1) / splits;
  const int idx = ct_flat_index();
  if (idx >= groups * splits * chans * ts) return;
  int g, ch, t, gs, tt;
  ct_run_item(idx, chans, ts, splits, g, ch, t, gs, tt);
  const int tw = t % tiles_w, th = (t / tiles_w) % tiles_h;
  const int n = static_cast<int>(a_n0) + t / (tiles_w * tiles_h);
  const int h0 = CT_WINO_M * th - static_cast<int>(a_ph);
  const int w0 = CT_WINO_M * tw - static_cast<int>(a_pw);
  const int c = g * chans + ch;
  float d[CT_WT][CT_WT];
#pragma unroll
  for (int a = 0; a < CT_WT; ++a)
#pragma unroll
    for (int b = 0; b < CT_WT; ++b) {
      const int h = h0 + a, w = w0 + b;
      const bool in = t < tiles && h >= 0 && h < height && w >= 0 && w < width;
      d[a][b] = in ? ct_to_float(
                         src[ct_act(n, c, h, w, groups * chans, height, width)])
                   : 0.0f;
    }
  // r = B^T d, then V = r B.
  float r[CT_WT][CT_WT];
#pragma unroll
  for (int a = 0; a < CT_WT; ++a)
#pragma unroll
    for (int b = 0; b < CT_WT; ++b) {
      r[a][b] = 0.0f;
#pragma unroll
      for (int k = 0; k < CT_WT; ++k) r[a][b] += ct_bt(a, k) * d[k][b];
    }
#pragma unroll
  for (int a = 0; a < CT_WT; ++a)
#pragma unroll
    for (int b = 0; b < CT_WT; ++b) {
      float o = 0.0f;
#pragma unroll
      for (int k = 0; k < CT_WT; ++k) o += r[a][k] * ct_bt(b, k);
      v[ct_tidx(a * CT_WT + b, gs, ch, tt, groups * splits, chans, ts)] =
          ct_from_float<ct_wt>(o);
    }
}

#if CT_DIR != 3
// The m x m outputs A^T M A of every tile, clipped at the destination's edge.
// Scalars: n0, nb, groups, co (channels per group), h, w (the destination's
// size), tiles_h, tiles_w.
CT_KERNEL void wino_output(const float* m, ct_t* dst, ct_i64 a_n0, ct_i64 a_nb,
                           ct_i64 a_groups, ct_i64 a_co, ct_i64 a_h, ct_i64 a_w,
                           ct_i64 a_tiles_h, ct_i64 a_tiles_w) {
  const int groups = static_cast<int>(a_groups), co = static_cast<int>(a_co);
  const int height = static_cast<int>(a_h), width = static_cast<int>(a_w);
  const int tiles_h = static_cast<int>(a_tiles_h),
            tiles_w = static_cast<int>(a_tiles_w);
  const int tiles = static_cast<int>(a_nb) * tiles_h * tiles_w;
  const int idx = ct_flat_index();
  if (idx >= groups * co * tiles) return;
  int g, o, t;
  ct_item(idx, co, tiles, g, o, t);
  const int tw = t % tiles_w, th = (t / tiles_w) % tiles_h;
  const int n = static_cast<int>(a_n0) + t / (tiles_w * tiles_h);
  float e[CT_WT][CT_WT];
#pragma unroll
  for (int a = 0; a < CT_WT; ++a)
#pragma unroll
    for (int b = 0; b < CT_WT; ++b) {
      e[a][b] = m[ct_tidx(a * CT_WT + b, g, o, t, groups, co, tiles)];
    }
  // r = A^T e, then y = r A.
  float r[CT_WINO_M][CT_WT];
#pragma unroll
  for (int a = 0; a < CT_WINO_M; ++a)
#pragma unroll
    for (int b = 0; b < CT_WT; ++b) {
      r[a][b] = 0.0f;
#pragma unroll
      for (int k = 0; k < CT_WT; ++k) r[a][b] += ct_at(a, k) * e[k][b];
    }
#pragma unroll
  for (int a = 0; a < CT_WINO_M; ++a) {
    const int h = CT_WINO_M * th + a;
    if (h >= height) break;
#pragma unroll
    for (int b = 0; b < CT_WINO_M; ++b) {
      const int w = CT_WINO_M * tw + b;
      if (w >= width) break;
      float y = 0.0f;
#pragma unroll
      for (int k = 0; k < CT_WT; ++k) y += r[a][k] * ct_at(b, k);
      dst[ct_act(n, g * co + o, h, w, groups * co, height, width)] =
          ct_from_float<ct_t>(y);
    }
  }
}
#endif

#if CT_DIR == 3
// A u A^T for every 2x2 tile u of the chunk's dy, the tile (th, tw) at
// (2 th, 2 tw); outside dy u is 0. Scalars: n0, nb, groups, kg, h, w (dy's
// size), tiles_h, tiles_w, splits.
CT_KERNEL void wino_dy(const ct_t* dy, ct_wt* v, ct_i64 a_n0, ct_i64 a_nb,
                       ct_i64 a_groups, ct_i64 a_kg, ct_i64 a_h, ct_i64 a_w,
                       ct_i64 a_tiles_h, ct_i64 a_tiles_w, ct_i64 a_splits) {
  const int groups = static_cast<int>(a_groups), kg = static_cast<int>(a_kg);
  const int height = static_cast<int>(a_h), width = static_cast<int>(a_w);
  const int tiles_h = static_cast<int>(a_tiles_h),
            tiles_w = static_cast<int>(a_tiles_w);
  const int tiles = static_cast<int>(a_nb) * tiles_h * tiles_w;
  const int splits = static_cast<int>(a_splits),
            ts = (tiles + splits - 1) / splits;
  const int idx = ct_flat_index();
  if (idx >= groups * splits * kg * ts) return;
  int g, k, t, gs, tt;
  ct_run_item(idx, kg, ts, splits, g, k, t, gs, tt);
  const int tw = t % tiles_w, th = (t / tiles_w) % tiles_h;
  const int n = static_cast<int>(a_n0) + t / (tiles_w * tiles_h);
  float u[2][2];
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const int h = 2 * th + a, w = 2 * tw + b;
      u[a][b] =
          t < tiles && h < height && w < width
              ? ct_to_float(
                    dy[ct_act(n, g * kg + k, h, w, groups * kg, height, width)])
              : 0.0f;
    }
  float r[4][2];
  for (int b = 0; b < 2; ++b) {
    r[0][b] = u[0][b];
    r[1][b] = u[0][b] + u[1][b];
    r[2][b] = u[0][b] - u[1][b];
    r[3][b] = -u[1][b];
  }
  for (int a = 0; a < 4; ++a) {
    const float o[4] = {r[a][0], r[a][0] + r[a][1], r[a][0] - r[a][1],
                        -r[a][1]};
    for (int b = 0; b < 4; ++b) {
      v[ct_tidx(a * 4 + b, gs, k, tt, groups * splits, kg, ts)] =
          ct_from_float<ct_wt>(o[b]);
    }
  }
}

// dw = G^T P G where P sums the GEMM's partials [e][g][split][k][c].
// Scalars: groups, kg, cg, splits.
CT_KERNEL void wino_wrw_output(const float* m, ct_t* dw, ct_i64 a_groups,
                               ct_i64 a_kg, ct_i64 a_cg, ct_i64 a_splits) {
  const int groups = static_cast<int>(a_groups), kg = static_cast<int>(a_kg);
  const int cg = static_cast<int>(a_cg), splits = static_cast<int>(a_splits);
  const int idx = ct_flat_index();
  const int per_g = kg * cg;
  if (idx >= groups * per_g) return;  // idx = (g * kg + k) * cg + c
  const int g = idx / per_g, kc = idx % per_g;
  float e[4][4];
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      const float* part =
          m + (((a * 4 + b) * groups + g) * splits) * per_g + kc;
      float s = 0.0f;
      for (int p = 0; p < splits; ++p) s += part[p * per_g];
      e[a][b] = s;
    }
  float r[3][4];
  for (int b = 0; b < 4; ++b) {
    r[0][b] = e[0][b] + 0.5f * (e[1][b] + e[2][b]);
    r[1][b] = 0.5f * (e[1][b] - e[2][b]);
    r[2][b] = 0.5f * (e[1][b] + e[2][b]) + e[3][b];
  }
  const int c = idx % cg, k = idx / cg;  // k counts over every group
  for (int a = 0; a < 3; ++a) {
    const float o[3] = {r[a][0] + 0.5f * (r[a][1] + r[a][2]),
                        0.5f * (r[a][1] - r[a][2]),
                        0.5f * (r[a][1] + r[a][2]) + r[a][3]};
    for (int b = 0; b < 3; ++b)
      dw[ct_filter(k, c, a, b, cg)] = ct_from_float<ct_t>(o[b]);
  }
}
#endif

#if !CT_TILE16
// The batched GEMM C[z] (+)= A[z] B[z], A (m x r), B (r x n), in fp32. Each
// operand's orientation follows from the direction and layout (the workspace
// layouts above): *_RFAST when the reduction index is contiguous, C_MFAST
// when C's row index is.
#if CT_DIR == 3
#define CT_A_RFAST (1 - CT_NHWC)  // DY[k][t] or DY[t][k]
#define CT_B_RFAST (1 - CT_NHWC)  // X[c][t] or X[t][c]
#define CT_C_MFAST 0              // partials [k][c]
#else
#define CT_A_RFAST 0        // U[i][o]
#define CT_B_RFAST CT_NHWC  // V[i][t] or V[t][i]
#define CT_C_MFAST CT_NHWC  // M[o][t] or M[t][o]
#endif

#define CT_THREADS ((CT_BM / CT_TM) * (CT_BN / CT_TN))
#define CT_LA \
  (CT_BM * CT_BK / CT_THREADS)  // A elements each thread loads per step
#define CT_LB (CT_BN * CT_BK / CT_THREADS)

// Block (blockIdx.x, blockIdx.y) covers columns BN * x and rows BM * y of
// matrix blockIdx.z. Scalars: m, n, r, accumulate (1: add to C).
CT_KERNEL void __launch_bounds__(CT_THREADS)
    wino_gemm(const float* pa, const float* pb, float* pc, ct_i64 a_m,
              ct_i64 a_n, ct_i64 a_r, ct_i64 a_accumulate) {
  const int rows = static_cast<int>(a_m), cols = static_cast<int>(a_n);
  const int red = static_cast<int>(a_r), z = blockIdx.z;
  const int m0 = blockIdx.y * CT_BM, n0 = blockIdx.x * CT_BN;
  const float* a = pa + z * rows * red;
  const float* b = pb + z * red * cols;
  float* c = pc + z * rows * cols;
  const int steps = (red + CT_BK - 1) / CT_BK;

  __shared__ float as[2][CT_BK][CT_BM + 4];
  __shared__ float bs[2][CT_BK][CT_BN + 4];
  const int tid = threadIdx.x;
  int am[CT_LA], ar[CT_LA], bn[CT_LB], br[CT_LB];
#pragma unroll
  for (int i = 0; i < CT_LA; ++i) {
    const int e = tid + i * CT_THREADS;
    am[i] = CT_A_RFAST ? e / CT_BK : e % CT_BM;
    ar[i] = CT_A_RFAST ? e % CT_BK : e / CT_BM;
  }
#pragma unroll
  for (int i = 0; i < CT_LB; ++i) {
    const int e = tid + i * CT_THREADS;
    bn[i] = CT_B_RFAST ? e / CT_BK : e % CT_BN;
    br[i] = CT_B_RFAST ? e % CT_BK : e / CT_BN;
  }
  float ra[CT_LA], rb[CT_LB];
  auto load = [&](int r0) {
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) {
      const int m = m0 + am[i], r = r0 + ar[i];
      const int at = CT_A_RFAST ? m * red + r : r * rows + m;
      ra[i] = m < rows && r < red ? a[at] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) {
      const int n = n0 + bn[i], r = r0 + br[i];
      const int at = CT_B_RFAST ? n * red + r : r * cols + n;
      rb[i] = n < cols && r < red ? b[at] : 0.0f;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < CT_LA; ++i) as[buf][ar[i]][am[i]] = ra[i];
#pragma unroll
    for (int i = 0; i < CT_LB; ++i) bs[buf][br[i]][bn[i]] = rb[i];
  };

  // Consecutive threads own consecutive entries along C's contiguous axis.
#if CT_C_MFAST
  const int ty = tid % (CT_BM / CT_TM), tx = tid / (CT_BM / CT_TM);
#else
  const int tx = tid % (CT_BN / CT_TN), ty = tid / (CT_BN / CT_TN);
#endif
  float acc[CT_TM][CT_TN];
#pragma unroll
  for (int i = 0; i < CT_TM; ++i)
#pragma unroll
    for (int j = 0; j < CT_TN; ++j) acc[i][j] = 0.0f;

  // Double buffered: the next step's loads are in flight during the current
  // step's products; one barrier per step.
  if (steps > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int s = 0; s < steps; ++s) {
    const bool more = s + 1 < steps;
    if (more) load((s + 1) * CT_BK);
    const int buf = s & 1;
#pragma unroll
    for (int kk = 0; kk < CT_BK; ++kk) {
      float va[CT_TM], vb[CT_TN];
#pragma unroll
      for (int i = 0; i < CT_TM; ++i)
        va[i] = as[buf][kk][ty + i * (CT_BM / CT_TM)];
#pragma unroll
      for (int j = 0; j < CT_TN; ++j)
        vb[j] = bs[buf][kk][tx + j * (CT_BN / CT_TN)];
#pragma unroll
      for (int i = 0; i < CT_TM; ++i)
#pragma unroll
        for (int j = 0; j < CT_TN; ++j) acc[i][j] += va[i] * vb[j];
    }
    if (more) store(buf ^ 1);
    __syncthreads();
  }

  const bool accumulate = a_accumulate != 0;
#pragma unroll
  for (int i = 0; i < CT_TM; ++i)
#pragma unroll
    for (int j = 0; j < CT_TN; ++j) {
      const int m = m0 + ty + i * (CT_BM / CT_TM),
                n = n0 + tx + j * (CT_BN / CT_TN);
      if (m < rows && n < cols) {
        const int at = CT_C_MFAST ? n * rows + m : m * cols + n;
        c[at] = accumulate ? c[at] + acc[i][j] : acc[i][j];
      }
    }
}
#endif  // !CT_TILE16
