// The lowering kernels of the BLAS GEMM solvers, one chunk of images (the
// images [n0, n0 + nb)) and every group at a time:
//   conv_im2col       gathers x into the chunk's column matrix, with zeros
//                     where a filter tap falls into the padding.
//   conv_col2im       gathers the column matrix back into dx: each dx element
//                     of the chunk is written once, with the sum of the
//                     column entries that came from it (0 if none), so dx
//                     needs no clearing and no atomics.
//   conv_f32_to_type  sums `slices` consecutive runs of fp32 values (partial
//                     sums of dw in the workspace) into the tensor type.
//   conv_pack         copies a chunk of a tensor (x or dy), sampled every
//                     stride-th position, into a dense chunk.
//   conv_unpack       writes every element of a chunk of a tensor once (dx,
//                     or y from a channel-major chunk): the dense chunk's
//                     value at the sampled positions, 0 elsewhere.
//   conv_zero_unsampled  (NHWC) writes 0 at the positions of dx that no
//                     output samples, for a GEMM that writes the others in
//                     place.
// Column layouts, with FS = FD*FH*FW, OS = OD*OH*OW, width = C/G * FS, the
// tap f = (fd*FH + fh)*FW + fw, the output position o = (od*OH + oh)*OW + ow
// and i the image within the chunk:
//   NCHW: col[((i*G + g)*width + c*FS + f)*OS + o]    a width x OS matrix
//         per image and group; its rows follow w's (c, f) order.
//   NCHW, images inner (for dw):
//         col[((g*width + c*FS + f)*nb + i)*OS + o]  a width x (nb*OS)
//         matrix per group, the chunk's (image, position) pairs contiguous.
//   NHWC: col[((g*nb + i)*OS + o)*width + f*C/G + c]  an (nb*OS) x width
//         matrix per group; its columns follow w's (f, c) order.
// Dense chunks of conv_pack and conv_unpack, with CH channels, OS the
// sampled size and ch the channel:
//   image-major     NCHW: dense[(i*CH + ch)*OS + o]; NHWC: dense[(i*OS + o)*CH
//   + ch] channel-major   dense[(ch*nb + i)*OS + o] (NCHW only): a CH x (nb*OS)
//                   matrix, for GEMMs over all of a chunk's positions.
// The solver keeps a chunk's column matrix, dense chunk, x, dx and dy under
// 2^31 elements, so offsets inside a chunk are 32-bit; the chunk's start is
// 64-bit.
//
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_NHWC. The kernels are the
// same for every direction.
// Scalars: conv_im2col takes the problem (plan_args order), then n0, nb,
// images_inner (0 or 1) and channel_blocks (NCHW only); conv_col2im the
// problem, n0 and nb; conv_f32_to_type the element count and slices; conv_pack
// CH, the source's ID, IH, IW, the sampled OD, OH, OW, the strides SD, SH, SW,
// n0, nb and channel_major (0 or 1), band and lane_shift; conv_unpack CH, dx's
// ID, IH, IW, the sampled OD, OH, OW, SD, SH, SW, n0, nb, channel_major, band
// and lane_shift; conv_zero_unsampled the same without channel_major.

#define CT_PROBLEM_ARGS                                                        \
  a_c, a_id, a_ih, a_iw, a_fd, a_fh, a_fw, a_pd, a_ph, a_pw, a_sd, a_sh, a_sw, \
      a_dd, a_dh, a_dw, a_g

// The problem's sizes in 32 bits; spatial arrays are (D, H, W).
struct CtLower {
  int c, g, cg;
  int in[3], f[3], pad[3], st[3], dil[3], out[3];
  int fs, os, is, width;
};

CT_DEVICE CtLower ct_lower(ct_i64 c, ct_i64 id, ct_i64 ih, ct_i64 iw, ct_i64 fd,
                           ct_i64 fh, ct_i64 fw, ct_i64 pd, ct_i64 ph,
                           ct_i64 pw, ct_i64 sd, ct_i64 sh, ct_i64 sw,
                           ct_i64 dd, ct_i64 dh, ct_i64 dw, ct_i64 groups) {
  CtLower q;
  q.c = static_cast<int>(c), q.g = static_cast<int>(groups), q.cg = q.c / q.g;
  const ct_i64 v[5][3] = {
      {id, ih, iw}, {fd, fh, fw}, {pd, ph, pw}, {sd, sh, sw}, {dd, dh, dw}};
  for (int i = 0; i < 3; ++i) {
    q.in[i] = static_cast<int>(v[0][i]), q.f[i] = static_cast<int>(v[1][i]);
    q.pad[i] = static_cast<int>(v[2][i]), q.st[i] = static_cast<int>(v[3][i]);
    q.dil[i] = static_cast<int>(v[4][i]);
    q.out[i] =
        (q.in[i] + 2 * q.pad[i] - q.dil[i] * (q.f[i] - 1) - 1) / q.st[i] + 1;
  }
  q.fs = q.f[0] * q.f[1] * q.f[2];
  q.os = q.out[0] * q.out[1] * q.out[2];
  q.is = q.in[0] * q.in[1] * q.in[2];
  q.width = q.cg * q.fs;
  return q;
}

CT_DEVICE ct_i64 ct_grid_stride() {
  return static_cast<ct_i64>(gridDim.x) * blockDim.x;
}

#if CT_NHWC
CT_KERNEL void conv_im2col(const ct_t* px, ct_t* col, CT_PROBLEM_PARAMS,
                           ct_i64 a_n0, ct_i64 a_nb, ct_i64 a_images_inner,
                           ct_i64 a_channel_blocks) {
  const CtLower q = ct_lower(CT_PROBLEM_ARGS);
  const int nb = static_cast<int>(a_nb);
  const ct_i64 total = static_cast<ct_i64>(nb) * q.g * q.width * q.os;
  const ct_t* x = px + a_n0 * q.c * q.is;  // the chunk's first image
  for (ct_i64 idx = ct_global_index_x(); idx < total; idx += ct_grid_stride()) {
    int t = static_cast<int>(idx), i, g, c, f, o;
    c = t % q.cg, t /= q.cg;
    f = t % q.fs, t /= q.fs;
    o = t % q.os, t /= q.os;
    i = t % nb, g = t / nb;
    const int ow = o % q.out[2], oh = (o / q.out[2]) % q.out[1],
              od = o / (q.out[2] * q.out[1]);
    const int fw = f % q.f[2], fh = (f / q.f[2]) % q.f[1],
              fd = f / (q.f[2] * q.f[1]);
    const int d = od * q.st[0] - q.pad[0] + fd * q.dil[0];
    const int h = oh * q.st[1] - q.pad[1] + fh * q.dil[1];
    const int w = ow * q.st[2] - q.pad[2] + fw * q.dil[2];
    ct_t v = ct_from_float<ct_t>(0.0f);
    if (d >= 0 && d < q.in[0] && h >= 0 && h < q.in[1] && w >= 0 &&
        w < q.in[2]) {
      v = x[(((i * q.in[0] + d) * q.in[1] + h) * q.in[2] + w) * q.c + g * q.cg +
            c];
    }
    col[idx] = v;
  }
}
#else
// NCHW: a thread owns one output position o of one image and group and a
// block of the group's channels (channel_blocks blocks split them evenly),
// and walks its channels' taps: its position's sizes are divided out once,
// and a warp's threads write consecutive entries of each column row.
CT_KERNEL void conv_im2col(const ct_t* px, ct_t* col, CT_PROBLEM_PARAMS,
                           ct_i64 a_n0, ct_i64 a_nb, ct_i64 a_images_inner,
                           ct_i64 a_channel_blocks) {
  const CtLower q = ct_lower(CT_PROBLEM_ARGS);
  const int nb = static_cast<int>(a_nb);
  const bool images_inner = a_images_inner != 0;
  const int cbs = static_cast<int>(a_channel_blocks);
  const int per_block = (q.cg + cbs - 1) / cbs;
  const ct_i64 total = static_cast<ct_i64>(cbs) * q.g * nb * q.os;
  const ct_t* x = px + a_n0 * q.c * q.is;  // the chunk's first image
  for (ct_i64 idx = ct_global_index_x(); idx < total; idx += ct_grid_stride()) {
    int t = static_cast<int>(idx);
    const int o = t % q.os;
    t /= q.os;
    const int i = t % nb;
    t /= nb;
    const int g = t % q.g, cb = t / q.g;
    const int c0 = cb * per_block, c1 = min(q.cg, c0 + per_block);
    const int ow = o % q.out[2], oh = (o / q.out[2]) % q.out[1],
              od = o / (q.out[2] * q.out[1]);
    // Column row r = c * FS + f of this image and group starts at
    // row0 + r * row_step.
    const int row_step = images_inner ? nb * q.os : q.os;
    ct_t* dst =
        col + o +
        (images_inner ? static_cast<ct_i64>(g) * q.width * nb * q.os +
                            static_cast<ct_i64>(i) * q.os
                      : (static_cast<ct_i64>(i) * q.g + g) * q.width * q.os) +
        static_cast<ct_i64>(c0) * q.fs * row_step;
    const int d0 = od * q.st[0] - q.pad[0], h0 = oh * q.st[1] - q.pad[1],
              w0 = ow * q.st[2] - q.pad[2];
    for (int c = c0; c < c1; ++c) {
      const ct_t* xc = x + (static_cast<ct_i64>(i) * q.c + g * q.cg + c) * q.is;
      for (int fd = 0; fd < q.f[0]; ++fd) {
        const int d = d0 + fd * q.dil[0];
        const bool d_in = d >= 0 && d < q.in[0];
        for (int fh = 0; fh < q.f[1]; ++fh) {
          const int h = h0 + fh * q.dil[1];
          const bool dh_in = d_in && h >= 0 && h < q.in[1];
          const ct_t* xr = xc + (d * q.in[1] + h) * q.in[2];
          for (int fw = 0; fw < q.f[2]; ++fw, dst += row_step) {
            const int w = w0 + fw * q.dil[2];
            *dst = dh_in && w >= 0 && w < q.in[2] ? xr[w]
                                                  : ct_from_float<ct_t>(0.0f);
          }
        }
      }
    }
  }
}
#endif

// The output position that padded input coordinate t reaches along an axis,
// if any.
CT_DEVICE bool ct_reaches(int t, int s, int lim, int& o) {
  if (t < 0 || t % s != 0) return false;
  o = t / s;
  return o < lim;
}

CT_KERNEL void conv_col2im(const ct_t* col, ct_t* px, CT_PROBLEM_PARAMS,
                           ct_i64 a_n0, ct_i64 a_nb) {
  const CtLower q = ct_lower(CT_PROBLEM_ARGS);
  const int nb = static_cast<int>(a_nb);
  const ct_i64 total = static_cast<ct_i64>(nb) * q.c * q.is;
  ct_t* x = px + a_n0 * q.c * q.is;  // the chunk's first image
  for (ct_i64 idx = ct_global_index_x(); idx < total; idx += ct_grid_stride()) {
    int t = static_cast<int>(idx), i, ch, d, h, w;
#if CT_NHWC
    ch = t % q.c, t /= q.c;
    w = t % q.in[2], t /= q.in[2];
    h = t % q.in[1], t /= q.in[1];
    d = t % q.in[0], i = t / q.in[0];
#else
    w = t % q.in[2], t /= q.in[2];
    h = t % q.in[1], t /= q.in[1];
    d = t % q.in[0], t /= q.in[0];
    ch = t % q.c, i = t / q.c;
#endif
    const int g = ch / q.cg, c = ch % q.cg;
    float sum = 0.0f;
    int od, oh, ow;
    for (int fd = 0; fd < q.f[0]; ++fd) {
      if (!ct_reaches(d + q.pad[0] - fd * q.dil[0], q.st[0], q.out[0], od))
        continue;
      for (int fh = 0; fh < q.f[1]; ++fh) {
        if (!ct_reaches(h + q.pad[1] - fh * q.dil[1], q.st[1], q.out[1], oh))
          continue;
        for (int fw = 0; fw < q.f[2]; ++fw) {
          if (!ct_reaches(w + q.pad[2] - fw * q.dil[2], q.st[2], q.out[2], ow))
            continue;
          const int f = (fd * q.f[1] + fh) * q.f[2] + fw;
          const int o = (od * q.out[1] + oh) * q.out[2] + ow;
#if CT_NHWC
          sum += ct_to_float(
              col[((g * nb + i) * q.os + o) * q.width + f * q.cg + c]);
#else
          sum += ct_to_float(
              col[((i * q.g + g) * q.width + c * q.fs + f) * q.os + o]);
#endif
        }
      }
    }
    x[idx] = ct_from_float<ct_t>(sum);
  }
}

CT_KERNEL void conv_f32_to_type(const float* src, ct_t* dst, ct_i64 count,
                                ct_i64 slices) {
  ct_sum_slices(src, dst, count, slices);
}

// Spatial sizes (D, H, W) in 32 bits.
struct CtDims {
  int d, h, w;
};

CT_DEVICE CtDims ct_dims(ct_i64 d, ct_i64 h, ct_i64 w) {
  return {static_cast<int>(d), static_cast<int>(h), static_cast<int>(w)};
}

// conv_pack and conv_unpack take a block as rows of 2^lane_shift lanes (the
// last scalar), each row of lanes one work item. NCHW an item is a band of
// `band` consecutive rows (d, h) of one channel plane, walked in order with
// counters, its lanes along w: no index is divided per element or per row.
// NHWC an item is one image row (i, d, h) of the tensor walked (the dense
// chunk for conv_pack, dx for conv_unpack), divided once and walked along w
// with counters, its lanes along each position's channels. The solver picks
// the lanes to cover a position's channels and the band to give enough
// items.

// The block's lane and row, and rows per block.
CT_DEVICE int ct_lane(int shift) {
  return static_cast<int>(threadIdx.x) & ((1 << shift) - 1);
}
CT_DEVICE int ct_row(int shift) {
  return static_cast<int>(threadIdx.x) >> shift;
}
CT_DEVICE int ct_rows(int shift) {
  return static_cast<int>(blockDim.x) >> shift;
}

// This thread's work items.
#define CT_FOR_ITEMS(var, count, shift)                                   \
  for (int var =                                                          \
           static_cast<int>(blockIdx.x) * ct_rows(shift) + ct_row(shift); \
       var < (count); var += static_cast<int>(gridDim.x) * ct_rows(shift))

// Channel plane `plane` = (i, ch) of a chunk of nb images as the dense
// chunk's plane: image-major (i, ch) or channel-major (ch, i).
CT_DEVICE int ct_dense_plane(int plane, int ch_count, int nb,
                             bool channel_major) {
  return channel_major ? (plane % ch_count) * nb + plane / ch_count : plane;
}

// A position along one axis walked one step at a time, with the output
// position it samples at stride s: t = o * s + m.
struct CtWalk {
  int t, o, m;
};
CT_DEVICE CtWalk ct_walk(int t, int s) { return {t, t / s, t % s}; }
CT_DEVICE void ct_step(CtWalk& w, int s) {
  ++w.t;
  if (++w.m == s) w.m = 0, ++w.o;
}
CT_DEVICE bool ct_sampled(const CtWalk& w, int lim) {
  return w.m == 0 && w.o < lim;
}

// NHWC rows of channels moved 16 bytes a lane where every row is whole
// 16-byte vectors and both tensors start on 16 bytes (`vec`), else an
// element a lane.
constexpr int kCtRowVec = 16 / sizeof(ct_t);  // elements a vector
CT_DEVICE bool ct_rows_vec(const void* a, const void* b, int ch_count) {
  return ch_count % kCtRowVec == 0 &&
         ((reinterpret_cast<ct_u64>(a) | reinterpret_cast<ct_u64>(b)) & 15) ==
             0;
}
CT_DEVICE void ct_copy_row(ct_t* to, const ct_t* from, int ch_count, int lane,
                           int lanes, bool vec) {
  if (vec) {
    for (int v = lane; v < ch_count / kCtRowVec; v += lanes) {
      reinterpret_cast<ct_v16*>(to)[v] =
          reinterpret_cast<const ct_v16*>(from)[v];
    }
  } else {
    for (int ch = lane; ch < ch_count; ch += lanes) to[ch] = from[ch];
  }
}
CT_DEVICE void ct_zero_row(ct_t* to, int ch_count, int lane, int lanes,
                           bool vec) {
  if (vec) {
    const ct_v16 zero = {{0, 0, 0, 0}};
    for (int v = lane; v < ch_count / kCtRowVec; v += lanes)
      reinterpret_cast<ct_v16*>(to)[v] = zero;
  } else {
    const ct_t zero = ct_from_float<ct_t>(0.0f);
    for (int ch = lane; ch < ch_count; ch += lanes) to[ch] = zero;
  }
}

CT_KERNEL void conv_pack(const ct_t* psrc, ct_t* dense, ct_i64 a_channels,
                         ct_i64 a_id, ct_i64 a_ih, ct_i64 a_iw, ct_i64 a_od,
                         ct_i64 a_oh, ct_i64 a_ow, ct_i64 a_sd, ct_i64 a_sh,
                         ct_i64 a_sw, ct_i64 a_n0, ct_i64 a_nb,
                         ct_i64 a_channel_major, ct_i64 a_band,
                         ct_i64 a_lane_shift) {
  const int ch_count = static_cast<int>(a_channels),
            nb = static_cast<int>(a_nb);
  const CtDims in = ct_dims(a_id, a_ih, a_iw), out = ct_dims(a_od, a_oh, a_ow);
  const CtDims st = ct_dims(a_sd, a_sh, a_sw);
  const int os = out.d * out.h * out.w, is = in.d * in.h * in.w;
  const int shift = static_cast<int>(a_lane_shift), lanes = 1 << shift;
  const int lane = ct_lane(shift);
  const ct_t* src = psrc + a_n0 * ch_count * is;  // the chunk's first image
#if CT_NHWC
  // One row (i, od, oh) of the dense chunk per item.
  const bool vec = ct_rows_vec(src, dense, ch_count);
  const int rows = out.d * out.h;
  CT_FOR_ITEMS(item, nb * rows, shift) {
    const int r = item % rows, i = item / rows;
    const int oh = r % out.h, od = r / out.h;
    const ct_t* from = src + (static_cast<ct_i64>(i) * is +
                              (od * st.d * in.h + oh * st.h) * in.w) *
                                 ch_count;
    ct_t* to = dense + static_cast<ct_i64>(item) * out.w * ch_count;
    const ct_i64 step = static_cast<ct_i64>(st.w) * ch_count;
    for (int ow = 0; ow < out.w; ++ow, from += step, to += ch_count)
      ct_copy_row(to, from, ch_count, lane, lanes, vec);
  }
#else
  const int plane_rows = out.d * out.h;
  const bool channel_major = a_channel_major != 0;
  // Dense rows of whole 8-byte runs (a plane's, when nothing is skipped,
  // else each of its rows) aligned to one: the launch's threads take the
  // runs in turn, each written with one store.
  constexpr int kRun = 8 / static_cast<int>(sizeof(ct_t));
  const bool whole = st.d == 1 && st.h == 1 && st.w == 1;  // in = out
  const int run_rows = whole ? 1 : plane_rows, row_len = whole ? os : out.w;
  if (row_len % kRun == 0 && (reinterpret_cast<ct_u64>(dense) & 7u) == 0) {
    const int row_runs = row_len / kRun;
    const int runs = nb * ch_count * run_rows * row_runs;
    for (int v = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
         v < runs; v += static_cast<int>(gridDim.x * blockDim.x)) {
      const int row = v / row_runs, e0 = (v - row * row_runs) * kRun;
      const int plane = row / run_rows, r = row - plane * run_rows;
      const int od = r / out.h, oh = r - od * out.h;
      const ct_t* from = src + static_cast<ct_i64>(plane) * is +
                         (od * st.d * in.h + oh * st.h) * in.w;
      __align__(8) ct_t run[kRun];
#pragma unroll
      for (int k = 0; k < kRun; ++k) run[k] = from[(e0 + k) * st.w];
      ct_t* to = dense +
                 static_cast<ct_i64>(
                     ct_dense_plane(plane, ch_count, nb, channel_major)) *
                     os +
                 r * out.w + e0;
      *reinterpret_cast<uint2*>(to) = *reinterpret_cast<const uint2*>(run);
    }
    return;
  }
  // A band of the dense plane's rows (od, oh) per item.
  const int band = static_cast<int>(a_band);
  const int bands = (plane_rows + band - 1) / band;
  CT_FOR_ITEMS(item, nb * ch_count * bands, shift) {
    const int plane = item / bands, r0 = (item - plane * bands) * band;
    const int r1 = min(plane_rows, r0 + band);
    const ct_t* from = src + static_cast<ct_i64>(plane) * is;
    ct_t* to = dense + static_cast<ct_i64>(
                           ct_dense_plane(plane, ch_count, nb, channel_major)) *
                           os;
    int od = r0 / out.h, oh = r0 - od * out.h;
    for (int r = r0; r < r1; ++r) {
      const ct_t* from_row = from + (od * st.d * in.h + oh * st.h) * in.w;
      ct_t* to_row = to + r * out.w;
      for (int ow = lane; ow < out.w; ow += lanes)
        to_row[ow] = from_row[ow * st.w];
      if (++oh == out.h) oh = 0, ++od;
    }
  }
#endif
}

#if !CT_NHWC
// conv_unpack (NCHW) where dx's rows are whole runs of kRun elements (Vec
// their bytes) and dx is aligned to one: the launch's threads take the
// chunk's runs in turn, each written with one store, the sampled elements
// from the dense chunk and 0 between them; writing element by element left
// the stores a quarter as wide. Index arithmetic is most of the work: few
// divisions a run, its columns walked with a counter.
template <int kRun, typename Vec>
CT_DEVICE void ct_unpack_runs(const ct_t* dense, ct_t* dx, int ch_count, int nb,
                              const CtDims& in, const CtDims& out,
                              const CtDims& st, bool channel_major) {
  static_assert(sizeof(Vec) == kRun * sizeof(ct_t), "a run is one vector");
  const ct_t zero = ct_from_float<ct_t>(0.0f);
  const int plane_rows = in.d * in.h, os = out.d * out.h * out.w;
  const int row_runs = in.w / kRun;
  const int runs = nb * ch_count * plane_rows * row_runs;
  for (int v = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
       v < runs; v += static_cast<int>(gridDim.x * blockDim.x)) {
    const int row = v / row_runs, w0 = (v - row * row_runs) * kRun;
    const int plane = row / plane_rows, r = row - plane * plane_rows;
    const int d = in.d == 1 ? 0 : r / in.h, h = r - d * in.h;
    __align__(sizeof(Vec)) ct_t run[kRun];
    int od = 0, oh;
    if ((in.d == 1 || ct_reaches(d, st.d, out.d, od)) &&
        ct_reaches(h, st.h, out.h, oh)) {
      const ct_t* from_row = dense +
                             static_cast<ct_i64>(ct_dense_plane(
                                 plane, ch_count, nb, channel_major)) *
                                 os +
                             (od * out.h + oh) * out.w;
      int ow = w0 / st.w, m = w0 - ow * st.w;
#pragma unroll
      for (int k = 0; k < kRun; ++k) {
        run[k] = m == 0 && ow < out.w ? from_row[ow] : zero;
        if (++m == st.w) m = 0, ++ow;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kRun; ++k) run[k] = zero;
    }
    *reinterpret_cast<Vec*>(dx + static_cast<ct_i64>(row) * in.w + w0) =
        *reinterpret_cast<const Vec*>(run);
  }
}
#endif

CT_KERNEL void conv_unpack(const ct_t* dense, ct_t* pdx, ct_i64 a_channels,
                           ct_i64 a_id, ct_i64 a_ih, ct_i64 a_iw, ct_i64 a_od,
                           ct_i64 a_oh, ct_i64 a_ow, ct_i64 a_sd, ct_i64 a_sh,
                           ct_i64 a_sw, ct_i64 a_n0, ct_i64 a_nb,
                           ct_i64 a_channel_major, ct_i64 a_band,
                           ct_i64 a_lane_shift) {
  const int ch_count = static_cast<int>(a_channels),
            nb = static_cast<int>(a_nb);
  const CtDims in = ct_dims(a_id, a_ih, a_iw), out = ct_dims(a_od, a_oh, a_ow);
  const CtDims st = ct_dims(a_sd, a_sh, a_sw);
  const int os = out.d * out.h * out.w, is = in.d * in.h * in.w;
  const int shift = static_cast<int>(a_lane_shift), lanes = 1 << shift;
  const int lane = ct_lane(shift);
  ct_t* dx = pdx + a_n0 * ch_count * is;  // the chunk's first image
#if CT_NHWC
  // One row (i, d, h) of dx per item: each position's channels copied from
  // the dense chunk where it was sampled, else 0.
  const bool vec = ct_rows_vec(dense, dx, ch_count);
  const int rows = in.d * in.h;
  CT_FOR_ITEMS(item, nb * rows, shift) {
    const int r = item % rows, i = item / rows;
    const int h = r % in.h, d = r / in.h;
    int od, oh;
    const bool row_sampled =
        ct_reaches(d, st.d, out.d, od) && ct_reaches(h, st.h, out.h, oh);
    ct_t* to = dx + static_cast<ct_i64>(item) * in.w * ch_count;
    const ct_t* from = row_sampled ? dense + (static_cast<ct_i64>(i) * os +
                                              (od * out.h + oh) * out.w) *
                                                 ch_count
                                   : dense;
    CtWalk w = ct_walk(0, st.w);
    for (; w.t < in.w; ct_step(w, st.w), to += ch_count) {
      if (row_sampled && ct_sampled(w, out.w)) {
        ct_copy_row(to, from + static_cast<ct_i64>(w.o) * ch_count, ch_count,
                    lane, lanes, vec);
      } else {
        ct_zero_row(to, ch_count, lane, lanes, vec);
      }
    }
  }
#else
  const ct_t zero = ct_from_float<ct_t>(0.0f);
  const int plane_rows = in.d * in.h;
  // Rows of whole runs of 8 (else 4) bytes, dx aligned to one: see
  // ct_unpack_runs.
  const bool channel_major = a_channel_major != 0;
  const ct_u64 at = reinterpret_cast<ct_u64>(dx);
  constexpr int kLong = 8 / static_cast<int>(sizeof(ct_t));
  if (in.w % kLong == 0 && (at & 7u) == 0) {
    ct_unpack_runs<kLong, uint2>(dense, dx, ch_count, nb, in, out, st,
                                 channel_major);
    return;
  }
  constexpr int kShort = 4 / static_cast<int>(sizeof(ct_t));
  if (kShort > 1 && in.w % kShort == 0 && (at & 3u) == 0) {
    ct_unpack_runs<kShort, ct_u32>(dense, dx, ch_count, nb, in, out, st,
                                   channel_major);
    return;
  }
  // A band of the plane's rows (d, h) of dx per item. Along w a lane meets
  // the same w modulo the stride on every step when the stride divides the
  // lanes; else it walks w with counters.
  const int band = static_cast<int>(a_band);
  const int bands = (plane_rows + band - 1) / band;
  const bool lane_fixed = lanes % st.w == 0;
  const bool lane_sampled = lane_fixed && lane % st.w == 0;
  CT_FOR_ITEMS(item, nb * ch_count * bands, shift) {
    const int plane = item / bands, r0 = (item - plane * bands) * band;
    const int r1 = min(plane_rows, r0 + band);
    ct_t* to = dx + static_cast<ct_i64>(plane) * is;
    const ct_t* from = dense + static_cast<ct_i64>(ct_dense_plane(
                                   plane, ch_count, nb, channel_major)) *
                                   os;
    const int d0 = r0 / in.h;
    CtWalk d = ct_walk(d0, st.d), h = ct_walk(r0 - d0 * in.h, st.h);
    for (int r = r0; r < r1; ++r) {
      ct_t* to_row = to + r * in.w;
      if (ct_sampled(d, out.d) && ct_sampled(h, out.h)) {
        const ct_t* from_row = from + (d.o * out.h + h.o) * out.w;
        if (lane_fixed) {
          const int step = lanes / st.w;
          for (int w = lane, o = lane / st.w; w < in.w; w += lanes, o += step) {
            to_row[w] = lane_sampled && o < out.w ? from_row[o] : zero;
          }
        } else {
          int ow;
          for (int w = lane; w < in.w; w += lanes) {
            to_row[w] = ct_reaches(w, st.w, out.w, ow) ? from_row[ow] : zero;
          }
        }
      } else {
        for (int w = lane; w < in.w; w += lanes) to_row[w] = zero;
      }
      ct_step(h, st.h);
      if (h.t == in.h) h = ct_walk(0, st.h), ct_step(d, st.d);
    }
  }
#endif
}

#if CT_NHWC
// conv_zero_unsampled: the positions of dx (images [n0, n0 + nb)) that no
// output samples set to 0; the sampled ones, which a GEMM writes in place,
// are left alone. Items and lanes as conv_unpack's NHWC.
CT_KERNEL void conv_zero_unsampled(ct_t* pdx, ct_i64 a_channels, ct_i64 a_id,
                                   ct_i64 a_ih, ct_i64 a_iw, ct_i64 a_od,
                                   ct_i64 a_oh, ct_i64 a_ow, ct_i64 a_sd,
                                   ct_i64 a_sh, ct_i64 a_sw, ct_i64 a_n0,
                                   ct_i64 a_nb, ct_i64 /*a_band*/,
                                   ct_i64 a_lane_shift) {
  const int ch_count = static_cast<int>(a_channels),
            nb = static_cast<int>(a_nb);
  const CtDims in = ct_dims(a_id, a_ih, a_iw), out = ct_dims(a_od, a_oh, a_ow);
  const CtDims st = ct_dims(a_sd, a_sh, a_sw);
  const int is = in.d * in.h * in.w;
  const int shift = static_cast<int>(a_lane_shift), lanes = 1 << shift;
  const int lane = ct_lane(shift);
  ct_t* dx = pdx + a_n0 * ch_count * is;
  const bool vec = ct_rows_vec(dx, dx, ch_count);
  const int rows = in.d * in.h;
  CT_FOR_ITEMS(item, nb * rows, shift) {
    const int r = item % rows;
    const int h = r % in.h, d = r / in.h;
    int od, oh;
    const bool row_sampled =
        ct_reaches(d, st.d, out.d, od) && ct_reaches(h, st.h, out.h, oh);
    ct_t* to = dx + static_cast<ct_i64>(item) * in.w * ch_count;
    CtWalk w = ct_walk(0, st.w);
    for (; w.t < in.w; ct_step(w, st.w), to += ch_count) {
      if (!row_sampled || !ct_sampled(w, out.w))
        ct_zero_row(to, ch_count, lane, lanes, vec);
    }
  }
}
#endif
