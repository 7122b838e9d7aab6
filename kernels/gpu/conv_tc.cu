// Tensor-core implicit GEMM over channel-last operands, fp16 and bf16 on CUDA
// sm_80 and newer, every direction. F and B: one forward-shaped pass per
// group g (conv_tc, compiled for CT_DIR 1 and 2):
//   dst[m = (n, oh, ow)][o] = sum over (r, s, c) src[n][ih][iw][g][c] *
//   filt[g][o][r][s][c]
// with ih = oh*SH + r*DH - PH and iw = ow*SW + s*DW - PW (0 outside the
// source). Forward runs it on x and w; backward data on dy and the filter
// turned 180 degrees with k and c swapped (stride 1, pad (R-1)*DH - PH;
// with a stride, one such pass for each of its phases: tc_pack_filter_t).
//   src   [N][H][W][G][CP]   CP: channels per group, a multiple of 32, the
//                            padding zero
//   filt  [G][KO][R][S][CP]
//   dst   y or dx in the problem's layout (CT_NHWC), G*KO channels
// tc_pack_act and tc_pack_filter bring x, dy and w into these shapes where
// the tensors do not already have them. W (conv_tc_wrw, CT_DIR 3, described
// there) reduces over positions into fp32 partial sums per split, which
// tc_wrw_reduce adds into dw.
//
// conv_tc: a block computes a BM x BN tile of the GEMM (rows m, columns o)
// over reduction steps of BK channels (32 or 64; CP a multiple of BK) of one
// filter tap, the taps of a channel block one after another so that the
// source rows they share are still in L1. Each step's operand tiles go from
// global to shared memory by cp.async (16 bytes a copy, zeros for taps in
// the padding) into a ring of CT_STAGES stages, so the loads of later steps
// overlap the products of this one. WM x WN warps read their
// fragments with ldmatrix and multiply with mma.sync m16n8k16 (fp32 sums).
// The finished tile goes through shared memory so that the stores to dst
// run along its contiguous dimension.
// Shared tiles are rows of BK channels in 16-byte chunks; chunk j of row r
// sits at chunk j ^ ((r >> 1) & 3) for BK 32 (four chunks) and j ^ (r & 7)
// for BK 64 (eight), which keeps the eight rows an ldmatrix reads on
// distinct banks.
//
// CT_WGMMA 1 (sm_90a, every direction): the products run as Hopper's
// warpgroup MMA instead, described at tc_wgmma_mainloop; the copies and the
// store are the same, and so are the tiles but for W's (tc_swizzle_w).
//
// CT_TMA 1 (with CT_WGMMA): the tensor memory accelerator copies the tiles
// instead, described at tc_tma_mainloop; the kernel then takes two tensor
// maps after its scalars: for F and B tm_src (im2col over src) and tm_filt
// (tiles of filt), for W tm_x (im2col over x) and tm_dy (tiles of dy).
//
// WM 1 and WN > 1 (with CT_TMA, F and B: CT_SWAP): the MMA's roles turn,
// for layers of few output channels: each warpgroup multiplies its 64
// filter rows (the MMA's M) by the whole source tile (its N, BM positions),
// so that a 64-column tile still runs the MMA BM wide. The tiles, copies and
// store are the same; the sums are the tile's transpose in registers.
//
// CT_HALO 1 (with CT_WGMMA, F and B over stride-1 passes, NHWC): a block's
// rows are a CT_HALO_TW wide, BM / CT_HALO_TW high tile of output positions
// of one image, and each channel block of the source is staged once as the
// tile's halo (its rows and columns CT_HALO_EH and CT_HALO_EW further, the
// filter's reach), which the MMA reads for every tap at the tap's offset:
// the im2col tiles read each source pixel once a tap, the halo about once.
// With CT_TMA the copies go through the tensor maps, tm_src then a tiled
// map over the source. Described at tc_halo_desc.
//
// CT_CLUSTER 2 (with CT_TMA, F and B): blocks run in clusters of two along
// x, the two column tiles of one row tile (the solver launches an even
// number of column tiles); each block's copy brings half the rows of the
// source tile into both blocks' shared memory (multicast), so the pair reads
// its source once. Described at tc_tma_mainloop.
//
// Options: CT_TYPE (2 fp16, 3 bf16), CT_NHWC, BM BN BK (block tile), WM WN
// (warps), CT_STAGES, CT_WGMMA, CT_TMA, CT_CLUSTER, CT_PHASE, CT_HALO with
// CT_HALO_TW, CT_HALO_EH and CT_HALO_EW. Scalars:
//   conv_tc         N H W G CP KO OH OW R S PH PW SH SW DH DW (N: the chunk),
//                   with CT_PHASE then FH FW QSH QSW QOH QOW: output (oh,
//                   ow) lands at (oh * QSH + QOH, ow * QSW + QOW) of a
//                   destination FH x FW (a phase of a strided backward
//                   data pass, described at tc_pack_filter_t)
//   tc_pack_act     n0 nb G CG CP HW: images [n0, n0 + nb) of a tensor with
//                   G*CG channels into [nb][HW][G][CP]
//   tc_pack_filter  G KG CG R S flip CP: w into [G][KO][R][S][CP]; flip 0 is
//                   the forward filter (KO = KG, CG channels padded to CP),
//                   flip 1 the backward one (KO = CG, KG padded to CP)
//   tc_pack_filter_t  G KG CG R S flip CP JR JS QR QS SR SS: flip 1 alone,
//                   in 32x32 tiles, the taps (j, l) < (JR, JS) being w's
//                   taps (QR + SR * (JR - 1 - j), QS + SS * (JS - 1 - l));
//                   JR = R, JS = S, Q 0 and S 1 turn the whole filter
//   conv_tc_wrw     N H W G CP KG KP OH OW R S PH PW SH SW DH DW splits
//                   accumulate (N: the chunk)
//   tc_wrw_reduce   G KG CG CP R S splits
//   tc_pack_rows    n0 nb C H W OW S SW PW DW CP (described there)
//   tc_pack_filter_rows  K C R S CP
//   tc_wrw_reduce_rows   K C CP R S splits
// The solver keeps every offset within a chunk under 2^31 elements.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif
#ifndef CT_STAGES
#define CT_STAGES 4
#endif
#ifndef BK
#define BK 32
#endif
#ifndef CT_WGMMA
#define CT_WGMMA 0
#endif
#ifndef CT_TMA
#define CT_TMA 0
#endif
#ifndef CT_CLUSTER
#define CT_CLUSTER 1
#endif
#ifndef CT_PHASE
#define CT_PHASE 0
#endif
#ifndef CT_HALO
#define CT_HALO 0
#endif
#ifndef CT_HALO_TW
#define CT_HALO_TW 8
#endif
#ifndef CT_HALO_EH
#define CT_HALO_EH 2
#endif
#ifndef CT_HALO_EW
#define CT_HALO_EW 2
#endif

#define CT_SWAP (CT_WGMMA && CT_DIR != 3 && WN > 1)
// The MMA's N: the filter tile's columns, or turned the source tile's rows.
#if CT_SWAP
#define CT_WG_N BM
#else
#define CT_WG_N BN
#endif

#define CT_CHUNKS (BK / 8)  // 16-byte chunks per tile row
#define CT_ROW_BYTES (BK * 2)
#define CT_THREADS (WM * WN * 32)
#define CT_WTM (BM / WM)
#define CT_WTN (BN / WN)
#define CT_MI (CT_WTM / 16)
#define CT_NI (CT_WTN / 8)
#define CT_A_BYTES (BM * CT_ROW_BYTES)
#define CT_STAGE_BYTES ((BM + BN) * CT_ROW_BYTES)
// The output tile in shared memory: in the tensor type, but fp32 for NCHW
// after the warpgroup MMA. A channels-last tile in fp32 (eight 4-byte stores
// a fragment, each two-way bank-conflicted, and as many loads) left
// ResNet-50's 16-bit F and B layers 7-30% slower on the H200; an NCHW tile
// in the tensor type was no faster (its fragments' neighbours lie a row
// apart, so each value is a store of its own).
#define CT_TILE_FP32 (CT_WGMMA && !CT_NHWC)
#define CT_TILE_ES (CT_TILE_FP32 ? 4 : 2)
#if CT_NHWC
#define CT_OUT_TILE_BYTES (BM * (BN + 8) * CT_TILE_ES)
#else
#define CT_OUT_TILE_BYTES (BN * (BM + 8) * CT_TILE_ES)
#endif
// With CT_TMA, the stage barriers' offset in the aligned shared memory: past
// the ring and the output tile, whichever is larger.
// (The halo tiles' ring holds the filter tiles and two halos.)
#if CT_HALO && CT_DIR != 3
#define CT_RING_BYTES (CT_HALO_AT + 2 * CT_HALO_BYTES)
#else
#define CT_RING_BYTES (CT_STAGES * CT_STAGE_BYTES)
#endif
#define CT_BARRIERS_AT \
  (CT_RING_BYTES > CT_OUT_TILE_BYTES ? CT_RING_BYTES : CT_OUT_TILE_BYTES)
#define CT_AL \
  (BM * CT_CHUNKS / CT_THREADS)  // A chunks a thread copies per stage
#define CT_BL (BN * CT_CHUNKS / CT_THREADS)

#if CT_DIR == 3
#define CT_W_A_ROW \
  (BM * 2)  // bytes of a tile row: one position's BM output channels
#define CT_W_B_ROW (BN * 2)  // one position's BN filter columns
#define CT_W_A_BYTES (BK * CT_W_A_ROW)
#define CT_W_STAGE_BYTES (BK * (BM + BN) * 2)
// Chunks a thread copies per stage (the last round partly, where the
// threads do not divide the tile: 192-row tiles' 384 threads).
#define CT_W_AL ((BK * (BM / 8) + CT_THREADS - 1) / CT_THREADS)
#define CT_W_BL ((BK * (BN / 8) + CT_THREADS - 1) / CT_THREADS)
static_assert((BK == 32 || (CT_WGMMA && BK == 64)) && BM >= 64 && BN >= 64,
              "W tiles: 32 positions (64 with CT_WGMMA) by rows of 8+ chunks");
static_assert(CT_THREADS % (BM / 8) == 0 && CT_THREADS % (BN / 8) == 0,
              "each thread copies one chunk column of each tile");
#endif

static_assert(CT_WTM % 16 == 0 && CT_NI % 2 == 0,
              "warp tile: 16-row by 16-column multiples");
static_assert(BK == 32 || BK == 64,
              "BK: 32 or 64 channels (positions for W) a step");
#if CT_DIR != 3
#if !CT_TMA
static_assert(CT_AL >= 1 && CT_BL >= 1 &&
                  CT_AL * CT_THREADS == BM * CT_CHUNKS &&
                  CT_BL * CT_THREADS == BN * CT_CHUNKS,
              "tile chunks must divide evenly among the threads");
#endif
#endif
#if CT_SWAP
static_assert(WM == 1 && WN * 16 == BN && BN % 64 == 0,
              "CT_SWAP: a warpgroup per 64 filter rows, each warp 16 of them");
static_assert(BM == 64 || BM == 128 || BM == 192 || BM == 256,
              "CT_SWAP: BM 64, 128, 192, 256 (the MMA's N)");
static_assert(CT_TMA && CT_CLUSTER == 1, "CT_SWAP: through the maps, alone");
#elif CT_WGMMA
static_assert(BM % 64 == 0 && WM * 16 == BM && WN == 1,
              "CT_WGMMA: a warpgroup per 64 rows, each warp 16 rows of it");
#if CT_DIR == 3
static_assert(BN % 64 == 0, "CT_WGMMA W: BN of whole 64-column atoms");
#endif
static_assert(BN == 32 || BN == 64 || BN == 96 || BN == 128 || BN == 256,
              "CT_WGMMA: BN 32, 64, 96, 128, 256");
static_assert(CT_STAGES >= 3, "CT_WGMMA: at least three stages");
#endif
#if CT_TMA
static_assert(CT_WGMMA, "CT_TMA: the warpgroup MMA");
#endif
#if CT_HALO
static_assert(CT_WGMMA && !CT_SWAP && CT_NHWC && CT_CLUSTER == 1 &&
                  (!CT_TMA || CT_DIR != 3),
              "CT_HALO: on the warpgroup MMA, NHWC; through the tensor maps "
              "for F and B alone");
static_assert((CT_HALO_TW == 8 || CT_HALO_TW % 64 == 0) && BM % CT_HALO_TW == 0,
              "CT_HALO: tile rows of 8 positions, or of whole warpgroups");
static_assert(CT_HALO_EH >= 0 && CT_HALO_EW >= 0, "CT_HALO: the filter reach");
#endif
// The halo tile: its rows and columns of source pixels, each pixel a row of
// BK channels swizzled as the other tiles (tc_swizzle, by pixel index); the
// ring's stages hold the filter tile alone, the two halo buffers follow it.
#define CT_HALO_TH (BM / CT_HALO_TW)
#define CT_HALO_HW (CT_HALO_TW + CT_HALO_EW)
#define CT_HALO_PIX ((CT_HALO_TH + CT_HALO_EH) * CT_HALO_HW)
#define CT_HALO_BYTES (((CT_HALO_PIX * CT_ROW_BYTES) + 1023) / 1024 * 1024)
#define CT_HALO_STAGE_BYTES (BN * CT_ROW_BYTES)
#define CT_HALO_AT (CT_STAGES * CT_HALO_STAGE_BYTES)
static_assert(CT_CLUSTER == 1 || (CT_CLUSTER == 2 && CT_TMA && CT_DIR != 3),
              "CT_CLUSTER 2: F and B through the tensor maps");

// The byte offset of 16-byte chunk j of row r in a shared tile.
CT_DEVICE ct_u32 tc_swizzle(int r, int j) {
#if BK == 32
  return static_cast<ct_u32>(r * CT_ROW_BYTES + ((j ^ ((r >> 1) & 3)) << 4));
#else
  return static_cast<ct_u32>(r * CT_ROW_BYTES + ((j ^ (r & 7)) << 4));
#endif
}

// dst[i][pos][g][c] = the source's channel g*CG + c of image n0 + i at pos,
// 0 for c >= CG. NCHW: 64x64 tiles of (channel, position) through shared
// memory, 256 threads, values moved in pairs (positions in, channels out);
// NHWC: one element per thread of a 1-D launch, or where CG is a multiple
// of 8 a run of 8 channels per thread in 16-byte copies.
CT_KERNEL void tc_pack_act(const ct_t* psrc, ct_t* pdst, ct_i64 a_n0,
                           ct_i64 a_nb, ct_i64 a_g, ct_i64 a_cg, ct_i64 a_cp,
                           ct_i64 a_hw) {
  const int groups = static_cast<int>(a_g), cg = static_cast<int>(a_cg);
  const int cp = static_cast<int>(a_cp), hw = static_cast<int>(a_hw);
  const int row = groups * cp;  // of dst
  const ct_u16* src = reinterpret_cast<const ct_u16*>(psrc);
  ct_u16* dst = reinterpret_cast<ct_u16*>(pdst);
#if CT_NHWC
  const ct_i64 count = a_nb * hw * row;
  if (cg % 8 == 0) {
    // Runs of 8 channels, each wholly data or wholly padding (cp is a
    // multiple of 32), a 16-byte copy each where both tensors align; the
    // solver launches a thread a run (AddPackStep).
    const bool whole =
        ((reinterpret_cast<ct_u64>(psrc) | reinterpret_cast<ct_u64>(pdst)) &
         15) == 0;
    const ct_i64 stride = static_cast<ct_i64>(gridDim.x) * blockDim.x;
    for (ct_i64 i = ct_global_index_x() * 8; i < count; i += stride * 8) {
      const ct_i64 at = i / row;  // image-in-chunk * hw + pos
      const int ch = static_cast<int>(i - at * row);
      const int g = ch / cp, c = ch - g * cp;
      const ct_u16* from = src + (a_n0 * hw + at) * (groups * cg) + g * cg + c;
      if (whole) {
        ct_v16 v = {{0u, 0u, 0u, 0u}};
        if (c < cg) v = *reinterpret_cast<const ct_v16*>(from);
        *reinterpret_cast<ct_v16*>(dst + i) = v;
      } else {
        for (int j = 0; j < 8; ++j)
          dst[i + j] = c < cg ? from[j] : static_cast<ct_u16>(0);
      }
    }
    return;
  }
  const ct_i64 i = ct_global_index_x();
  if (i >= count) return;
  const ct_i64 at = i / row;  // image-in-chunk * hw + pos
  const int ch = static_cast<int>(i - at * row);
  const int g = ch / cp, c = ch - g * cp;
  dst[i] = c < cg ? src[(a_n0 * hw + at) * (groups * cg) + g * cg + c]
                  : static_cast<ct_u16>(0);
#else
  // tile[channel][position], rows padded by one pair.
  __shared__ ct_u32 tile[64][33];
  const int lane = threadIdx.x & 31, wy = threadIdx.x >> 5;
  const int pos0 = blockIdx.x * 64, ch0 = blockIdx.y * 64;
  const ct_i64 image = a_n0 + blockIdx.z;
  const int pos = pos0 + 2 * lane;
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    const int j = wy + 8 * jj, ch = ch0 + j;
    ct_u32 v = 0;
    if (ch < row && pos < hw) {
      const int g = ch / cp, c = ch - g * cp;
      if (c < cg) {
        const ct_u16* at =
            src + (image * (groups * cg) + g * cg + c) * hw + pos;
        if ((hw & 1) == 0) {
          v = *reinterpret_cast<const ct_u32*>(at);
        } else {
          v = at[0] | (pos + 1 < hw ? static_cast<ct_u32>(at[1]) << 16 : 0u);
        }
      }
    }
    tile[j][lane] = v;
  }
  __syncthreads();
  const ct_u16* half =
      reinterpret_cast<const ct_u16*>(&tile[0][0]);  // [64][66]
  ct_u16* out = dst + static_cast<ct_i64>(blockIdx.z) * hw * row;
  const int ch =
      ch0 + 2 * lane;  // row is a multiple of 32: ch + 1 < row with ch
#pragma unroll
  for (int jj = 0; jj < 8; ++jj) {
    const int j = wy + 8 * jj, p = pos0 + j;
    if (p < hw && ch < row) {
      const ct_u32 v =
          half[(2 * lane) * 66 + j] |
          (static_cast<ct_u32>(half[(2 * lane + 1) * 66 + j]) << 16);
      *reinterpret_cast<ct_u32*>(out + static_cast<ct_i64>(p) * row + ch) = v;
    }
  }
#endif
}

// The strides of w in (k, c, -, r, s) order for the compiled layout.
CT_DEVICE void tc_filter_strides(ct_i64* st, ct_i64 cg, ct_i64 fr, ct_i64 fs) {
  const ct_i64 sp[3] = {1, fr, fs};
  ct_strides<ct_i64>(st, cg, sp);
}

// One element of dst [G][KO][R][S][CP] per thread of a 1-D launch.
CT_KERNEL void tc_pack_filter(const ct_t* pw, ct_t* pdst, ct_i64 a_g,
                              ct_i64 a_kg, ct_i64 a_cg, ct_i64 a_r, ct_i64 a_s,
                              ct_i64 a_flip, ct_i64 a_cp) {
  const int kg = static_cast<int>(a_kg), cg = static_cast<int>(a_cg);
  const int fr = static_cast<int>(a_r), fs = static_cast<int>(a_s);
  const bool flip = a_flip != 0;
  const int ko_count = flip ? cg : kg,
            red = flip ? kg : cg;  // red: the reduced channels
  const int cp = static_cast<int>(a_cp);
  const ct_i64 count = a_g * ko_count * fr * fs * cp;
  const ct_i64 i = ct_global_index_x();
  if (i >= count) return;
  const int c = static_cast<int>(i % cp);
  ct_i64 rest = i / cp;
  int s = static_cast<int>(rest % fs);
  rest /= fs;
  int r = static_cast<int>(rest % fr);
  rest /= fr;
  const int o = static_cast<int>(rest % ko_count);
  const ct_i64 g = rest / ko_count;
  ct_u16 v = 0;
  if (c < red) {
    // The filter element (k, ci, r, s) of group g.
    const ct_i64 k = g * kg + (flip ? c : o);
    const int ci = flip ? o : c;
    if (flip) r = fr - 1 - r, s = fs - 1 - s;
    ct_i64 st[5];
    tc_filter_strides(st, cg, fr, fs);
    v = reinterpret_cast<const ct_u16*>(
        pw)[k * st[0] + ci * st[1] + r * st[3] + s * st[4]];
  }
  reinterpret_cast<ct_u16*>(pdst)[i] = v;
}

// The backward filter of tc_pack_filter (flip 1) in 32x32 tiles of (o, c)
// through shared memory, so that both the reads (along o, w's input
// channels) and the writes (along c) are runs of 64 bytes; one element a
// thread reads w's k-strided elements instead. Grid (CP/32, KO/32,
// G*JR*JS), 256 threads; dst [G][KO][JR][JS][CP].
//
// Backward data with stride (SR, SS) runs as SR * SS stride-1 passes over
// dy, one for each phase (QR, QS) of the filter: the rows i of dx with
// (i + PH) mod SR = QR take only the taps r = QR + SR * j, and such a pass
// is a forward pass of dy with those taps turned (a JR x JS filter), whose
// outputs land SR rows and SS columns apart in dx (conv_tc's CT_PHASE).
CT_KERNEL void tc_pack_filter_t(const ct_t* pw, ct_t* pdst, ct_i64 a_g,
                                ct_i64 a_kg, ct_i64 a_cg, ct_i64 a_r,
                                ct_i64 a_s, ct_i64 a_flip, ct_i64 a_cp,
                                ct_i64 a_jr, ct_i64 a_js, ct_i64 a_qr,
                                ct_i64 a_qs, ct_i64 a_sr, ct_i64 a_ss) {
  (void)a_g, (void)a_flip;
  const int kg = static_cast<int>(a_kg), cg = static_cast<int>(a_cg);
  const int fr = static_cast<int>(a_r), fs = static_cast<int>(a_s);
  const int cp = static_cast<int>(a_cp);
  const int jr = static_cast<int>(a_jr), js = static_cast<int>(a_js);
  const int rs = blockIdx.z % (jr * js), g = blockIdx.z / (jr * js);
  const int r = rs / js, s = rs - r * js;
  // The tap of w that tap (r, s) of the pass takes.
  const int wr = static_cast<int>(a_qr + a_sr * (jr - 1 - r));
  const int ws = static_cast<int>(a_qs + a_ss * (js - 1 - s));
  const int c0 = blockIdx.x * 32, o0 = blockIdx.y * 32;
  const int lane = threadIdx.x & 31, wy = threadIdx.x >> 5;
  __shared__ ct_u16 tile[32][33];  // [c][o]
  ct_i64 st[5];
  tc_filter_strides(st, cg, fr, fs);
  const int o = o0 + lane;
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    const int j = wy + 8 * jj, c = c0 + j;
    ct_u16 v = 0;
    if (c < kg && o < cg) {
      // The filter element (k, o, wr, ws) of group g.
      const ct_i64 k = static_cast<ct_i64>(g) * kg + c;
      v = reinterpret_cast<const ct_u16*>(
          pw)[k * st[0] + o * st[1] + wr * st[3] + ws * st[4]];
    }
    tile[j][lane] = v;
  }
  __syncthreads();
  ct_u16* dst = reinterpret_cast<ct_u16*>(pdst);
  const int c = c0 + lane;  // CP is a multiple of 32
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    const int j = wy + 8 * jj, oo = o0 + j;
    if (oo < cg) {
      const ct_i64 at = ((static_cast<ct_i64>(g) * cg + oo) * jr + r) * js + s;
      dst[at * cp + c] = tile[lane][j];
    }
  }
}

// Small channel counts (the first layer's 3): the filter width folds into
// the channels, so that a reduction step covers a whole filter row instead
// of one tap padded from C to 32 channels. F and W, one group:
//   src'[n][ih][ow][s*C + c] = x[n][ih][ow*SW + s*DW - PW][c] (0 outside,
//                              and for s*C + c >= S*C up to CP)
//   filt'[k][r][0][s*C + c]  = w[k][c][r][s]
// and conv_tc runs src' with filt' as an R x 1 filter, stride (SH, 1), no
// width padding, over a source OW wide; conv_tc_wrw likewise sums the
// partials of filt', which tc_wrw_reduce_rows unfolds into dw.
// tc_pack_rows: images [n0, n0 + nb) of x (C channels, H x W) into src'
// [nb][H][OW][CP]. A thread of the 1-D launch builds eight consecutive
// elements of src' (16 bytes: CP is a multiple of 32), stored at once, at
// kTcPackRun consecutive output columns. The solver keeps a chunk's src'
// under 2^31 elements, so the thread's index divides in 32 bits.
constexpr int kTcPackRun = 4;
CT_KERNEL void tc_pack_rows(const ct_t* px, ct_t* pdst, ct_i64 a_n0,
                            ct_i64 a_nb, ct_i64 a_c, ct_i64 a_h, ct_i64 a_w,
                            ct_i64 a_ow, ct_i64 a_s, ct_i64 a_sw, ct_i64 a_pw,
                            ct_i64 a_dw, ct_i64 a_cp) {
  const int eights = static_cast<int>(a_cp / 8);  // of a src' row
  const int c_count = static_cast<int>(a_c), ow_count = static_cast<int>(a_ow),
            h_count = static_cast<int>(a_h);
  const int runs = (ow_count + kTcPackRun - 1) / kTcPackRun;
  const ct_i64 count = a_nb * h_count * runs * eights;
  const ct_i64 i = ct_global_index_x();
  if (i >= count) return;
  int rest = static_cast<int>(i);
  const int f0 = (rest % eights) * 8;
  rest /= eights;
  const int ow0 = (rest % runs) * kTcPackRun;
  rest /= runs;
  const int ih = rest % h_count;
  const ct_i64 n = a_n0 + rest / h_count;
  ct_i64 st[5];
  const ct_i64 sp[3] = {1, a_h, a_w};
  ct_strides<ct_i64>(st, a_c, sp);
  const ct_u16* row =
      reinterpret_cast<const ct_u16*>(px) + n * st[0] + ih * st[3];
  const int folded = c_count * static_cast<int>(a_s);
  const int w_count = static_cast<int>(a_w), sw = static_cast<int>(a_sw),
            dw = static_cast<int>(a_dw);
  // (fs, c) of element f0 + j.
  const int fs0 = f0 / c_count, c0 = f0 - fs0 * c_count;
  ct_v16* to = reinterpret_cast<ct_v16*>(pdst) +
               ((n - a_n0) * h_count + ih) * ow_count * eights +
               static_cast<ct_i64>(ow0) * eights + f0 / 8;
  const int run = min(kTcPackRun, ow_count - ow0);
#if CT_NHWC
  if (dw == 1) {
    // Undilated channels-last: the folded (fs, c) run is x's row read on
    // from column iw0, so element f of the column is row[iw0 * C + f].
    const int end = w_count * c_count;
    for (int q = 0; q < run; ++q, to += eights) {
      const int e0 = ((ow0 + q) * sw - static_cast<int>(a_pw)) * c_count + f0;
      ct_v16 out;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int e = e0 + j;
        const ct_u32 v =
            f0 + j < folded && e >= 0 && e < end ? row[e] : ct_u32{0};
        if (j % 2 == 0) {
          out.w[j / 2] = v;
        } else {
          out.w[j / 2] |= v << 16;
        }
      }
      *to = out;
    }
    return;
  }
#endif
  for (int q = 0; q < run; ++q, to += eights) {
    const int iw0 = (ow0 + q) * sw - static_cast<int>(a_pw);
    int fs = fs0, c = c0;
    ct_v16 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      ct_u32 v = 0;
      if (f0 + j < folded) {
        const int iw = iw0 + fs * dw;
        if (iw >= 0 && iw < w_count) v = row[c * st[1] + iw * st[4]];
      }
      if (++c == c_count) c = 0, ++fs;
      if (j % 2 == 0) {
        out.w[j / 2] = v;
      } else {
        out.w[j / 2] |= v << 16;
      }
    }
    *to = out;
  }
}

// filt' [K][R][CP] from w (K x C x R x S); one element per thread.
CT_KERNEL void tc_pack_filter_rows(const ct_t* pw, ct_t* pdst, ct_i64 a_k,
                                   ct_i64 a_c, ct_i64 a_r, ct_i64 a_s,
                                   ct_i64 a_cp) {
  const ct_i64 count = a_k * a_r * a_cp;
  const ct_i64 i = ct_global_index_x();
  if (i >= count) return;
  const int c_count = static_cast<int>(a_c);
  const int f = static_cast<int>(i % a_cp);
  const ct_i64 rest = i / a_cp;
  const ct_i64 r = rest % a_r, k = rest / a_r;
  ct_u16 v = 0;
  if (f < c_count * static_cast<int>(a_s)) {
    const int fs = f / c_count, c = f - fs * c_count;
    ct_i64 st[5];
    tc_filter_strides(st, a_c, a_r, a_s);
    v = reinterpret_cast<const ct_u16*>(
        pw)[k * st[0] + c * st[1] + r * st[3] + fs * st[4]];
  }
  reinterpret_cast<ct_u16*>(pdst)[i] = v;
}

// The tensor-core kernels: CUDA, 16-bit types (a build for fp32, as when every
// source is compile-checked with its defaults, has the packing kernels alone).
#if defined(CONVTUNE_BACKEND_CUDA) && CT_TYPE != 1

CT_DEVICE ct_u32 tc_shared_address(const void* p) {
  ct_u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
      : "=r"(a)
      : "l"(p));
  return a;
}

// 16 bytes from global to shared; `bytes` 0 writes zeros instead. kL1: the
// copy goes through L1 (source rows that nine taps read), else through L2
// only.
template <bool kL1 = false>
CT_DEVICE void tc_copy16(ct_u32 dst, const void* src, int bytes) {
  if (kL1) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(bytes)
                 : "memory");
  }
}
CT_DEVICE void tc_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
CT_DEVICE void tc_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

CT_DEVICE void tc_ldmatrix4(ct_u32* d, ct_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(addr));
}

// The same, each 8x8 matrix transposed on the way (for tiles stored with the
// reduction dimension as rows).
CT_DEVICE void tc_ldmatrix4_trans(ct_u32* d, ct_u32 addr) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(addr));
}

// The stage ring both kernels run: zeroes acc, then for each of `steps`
// reduction steps waits for its stage, issues the copies of the step
// CT_STAGES - 1 ahead (load(step, slot)), and multiplies the stage's tiles
// in slices of 16 (fragments(stage address, slice, af, bf) reads a slice's
// fragments). Returns with every copy landed; the caller's next barrier
// frees shared memory.
template <int kStageBytes, typename Load, typename Fragments>
CT_DEVICE void tc_mainloop(float (&acc)[CT_MI][CT_NI][4], int steps,
                           ct_u32 smem, Load& load, Fragments& fragments) {
#pragma unroll
  for (int mi = 0; mi < CT_MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < CT_NI; ++ni) {
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[mi][ni][v] = 0.0f;
    }
  }
#pragma unroll
  for (int st = 0; st < CT_STAGES - 1; ++st) {
    if (st < steps) load(st, st);
    tc_commit();
  }
  for (int kt = 0; kt < steps; ++kt) {
    tc_wait<CT_STAGES - 2>();
    __syncthreads();
    // The stage read in the previous step is free once every warp is here.
    const int next = kt + CT_STAGES - 1;
    if (next < steps) load(next, next % CT_STAGES);
    tc_commit();
    const ct_u32 stage = smem + (kt % CT_STAGES) * kStageBytes;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      ct_u32 af[CT_MI][4], bf[CT_NI][2];
      fragments(stage, kk, af, bf);
#pragma unroll
      for (int mi = 0; mi < CT_MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < CT_NI; ++ni)
          ct_mma_16816(acc[mi][ni], af[mi], bf[ni]);
      }
    }
  }
  tc_wait<0>();
}

#if CT_WGMMA
// Hopper's warpgroup MMA (sm_90a). Each warpgroup (four consecutive warps)
// multiplies its 64 rows of the A tile by the whole B tile straight from
// shared memory: wgmma.mma_async m64nBNk16, fp32 sums in registers laid out
// as mma.sync's m16n8 fragments (warp i of the group holds rows 16i to
// 16i + 15), so that acc[0][n8][v] is the same element in both paths.
//
// F and B: both tiles are K-major: rows of BK channels, 16-byte chunks
// swizzled by tc_swizzle. For BK 64 (128-byte rows) that is the 128-byte
// swizzle of the MMA's shared-memory descriptor, for BK 32 (64-byte rows)
// the 64-byte one, given tiles aligned to 1024 bytes; eight rows make one
// swizzle atom, the descriptor's stride between 8-row groups. A k16 slice
// starts 32 bytes further along the row.
// W: both tiles have the reduction (positions) as rows and M or N
// contiguous, which the MMA reads transposed: atoms of 64 columns by BK rows
// of 128 bytes with the 128-byte swizzle (tc_swizzle_w); the descriptor's
// leading offset steps from one atom to the next along N, its stride from
// one 8-row group to the next, and a k16 slice starts 16 rows further on.

#define CT_F2(i) "+f"(d[i]), "+f"(d[i + 1])
#define CT_F8(i) CT_F2(i), CT_F2(i + 2), CT_F2(i + 4), CT_F2(i + 6)
#if CT_DIR == 3
#define CT_WGMMA_TRANS "1, 1"
#define CT_WG_STAGE_BYTES CT_W_STAGE_BYTES
#define CT_WG_A_BYTES CT_W_A_BYTES
#define CT_WG_GROUP_BYTES (BK * 128)  // a warpgroup's 64 rows of A
#define CT_WG_SLICE_BYTES (16 * 128)  // from one k16 slice to the next
#else
#define CT_WGMMA_TRANS "0, 0"
#define CT_WG_STAGE_BYTES CT_STAGE_BYTES
#define CT_WG_A_BYTES CT_A_BYTES
#define CT_WG_GROUP_BYTES (64 * CT_ROW_BYTES)
#define CT_WG_SLICE_BYTES 32
#endif
#if CT_TYPE == 3
#define CT_WGMMA_TYPE ".f32.bf16.bf16"
#else
#define CT_WGMMA_TYPE ".f32.f16.f16"
#endif
#if CT_WG_N == 32
#define CT_WGMMA_SHAPE "m64n32k16"
#define CT_WGMMA_D \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define CT_WGMMA_A "%16"
#define CT_WGMMA_B "%17"
#define CT_WGMMA_P "%18"
#define CT_WGMMA_OUTS CT_F8(0), CT_F8(8)
#elif CT_WG_N == 64
#define CT_WGMMA_SHAPE "m64n64k16"
#define CT_WGMMA_D                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "  \
  "%30, %31}"
#define CT_WGMMA_A "%32"
#define CT_WGMMA_B "%33"
#define CT_WGMMA_P "%34"
#define CT_WGMMA_OUTS CT_F8(0), CT_F8(8), CT_F8(16), CT_F8(24)
#elif CT_WG_N == 96
#define CT_WGMMA_SHAPE "m64n96k16"
#define CT_WGMMA_D                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "  \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47}"
#define CT_WGMMA_A "%48"
#define CT_WGMMA_B "%49"
#define CT_WGMMA_P "%50"
#define CT_WGMMA_OUTS \
  CT_F8(0), CT_F8(8), CT_F8(16), CT_F8(24), CT_F8(32), CT_F8(40)
#elif CT_WG_N == 128
#define CT_WGMMA_SHAPE "m64n128k16"
#define CT_WGMMA_D                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "  \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "  \
  "%58, %59, %60, %61, %62, %63}"
#define CT_WGMMA_A "%64"
#define CT_WGMMA_B "%65"
#define CT_WGMMA_P "%66"
#define CT_WGMMA_OUTS                                                        \
  CT_F8(0), CT_F8(8), CT_F8(16), CT_F8(24), CT_F8(32), CT_F8(40), CT_F8(48), \
      CT_F8(56)
#elif CT_WG_N == 192
#define CT_WGMMA_SHAPE "m64n192k16"
#define CT_WGMMA_D                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "  \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "  \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "  \
  "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "  \
  "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "  \
  "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define CT_WGMMA_A "%96"
#define CT_WGMMA_B "%97"
#define CT_WGMMA_P "%98"
#define CT_WGMMA_OUTS                                                        \
  CT_F8(0), CT_F8(8), CT_F8(16), CT_F8(24), CT_F8(32), CT_F8(40), CT_F8(48), \
      CT_F8(56), CT_F8(64), CT_F8(72), CT_F8(80), CT_F8(88)
#elif CT_WG_N == 256
#define CT_WGMMA_SHAPE "m64n256k16"
#define CT_WGMMA_D                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
  "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "   \
  "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "   \
  "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "   \
  "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, "   \
  "%86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, "   \
  "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
  "%124, %125, %126, %127}"
#define CT_WGMMA_A "%128"
#define CT_WGMMA_B "%129"
#define CT_WGMMA_P "%130"
#define CT_WGMMA_OUTS                                                        \
  CT_F8(0), CT_F8(8), CT_F8(16), CT_F8(24), CT_F8(32), CT_F8(40), CT_F8(48), \
      CT_F8(56), CT_F8(64), CT_F8(72), CT_F8(80), CT_F8(88), CT_F8(96),      \
      CT_F8(104), CT_F8(112), CT_F8(120)
#endif

// The shared-memory matrix descriptor of a tile at `addr`: K-major for F
// and B, M- or N-major for W.
CT_DEVICE unsigned long long tc_wgmma_desc(ct_u32 addr) {
#if CT_DIR == 3
  constexpr unsigned long long kSwizzle = 1, kLead = BK * 128,
                               kGroupBytes = 1024;
#elif BK == 64
  constexpr unsigned long long kSwizzle = 1, kLead = 16, kGroupBytes = 1024;
#else
  constexpr unsigned long long kSwizzle = 2, kLead = 16, kGroupBytes = 512;
#endif
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         ((kLead >> 4) << 16) | ((kGroupBytes >> 4) << 32) | (kSwizzle << 62);
}

// d = A B (+ d when `accumulate`) for one k16 slice; d: this thread's
// CT_WG_N / 2 sums.
CT_DEVICE void tc_wgmma(float* d, unsigned long long a, unsigned long long b,
                        int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " CT_WGMMA_P
               ", 0;\n"
               "wgmma.mma_async.sync.aligned." CT_WGMMA_SHAPE CT_WGMMA_TYPE
               " " CT_WGMMA_D ", " CT_WGMMA_A ", " CT_WGMMA_B
               ", p, 1, 1, " CT_WGMMA_TRANS ";\n}\n"
               : CT_WGMMA_OUTS
               : "l"(a), "l"(b), "r"(accumulate));
}

// Keeps the compiler from moving reads or writes of v across the MMAs.
CT_DEVICE void tc_hold(float& v) { asm volatile("" : "+f"(v)::"memory"); }

// Where this warpgroup's operands lie in a stage: its 64 rows of the A
// tile and the whole B tile, or with CT_SWAP its 64 rows of the filter tile
// (the MMA's A) and the whole source tile (its B).
struct tc_wg_operands {
  ct_u32 a, b;
};
CT_DEVICE tc_wg_operands tc_wg_operands_of_thread() {
  const ct_u32 wg = threadIdx.x / 128;
#if CT_SWAP
  return {CT_A_BYTES + wg * 64 * CT_ROW_BYTES, 0};
#else
  return {wg * CT_WG_GROUP_BYTES, CT_WG_A_BYTES};
#endif
}

// One reduction step's MMAs, A through descriptor `a` (its k16 slices
// `a_slice` of the descriptor's 16-byte units apart) and B the tile at `b`,
// committed as a group; returns once the step before's group is done, so
// that one step's MMAs stay in flight. The first step overwrites the sums.
CT_DEVICE void tc_wgmma_step_at(float* d, unsigned long long a,
                                unsigned long long a_slice, ct_u32 b,
                                bool first) {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    tc_wgmma(d, a + kk * a_slice, tc_wgmma_desc(b + kk * CT_WG_SLICE_BYTES),
             !first || kk > 0);
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// As tc_wgmma_step_at on the stage at `stage`, this warpgroup's operands
// where `at` says.
CT_DEVICE void tc_wgmma_step(float* d, ct_u32 stage, tc_wg_operands at,
                             bool first) {
  tc_wgmma_step_at(d, tc_wgmma_desc(stage + at.a), CT_WG_SLICE_BYTES >> 4,
                   stage + at.b, first);
}
// Waits for the last step's MMAs; the sums are then in d.
CT_DEVICE void tc_wgmma_drain(float* d) {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < CT_MI * CT_NI * 4; ++i) tc_hold(d[i]);
}

// The stage ring of the warpgroup MMA: as tc_mainloop, with copies issued
// CT_STAGES - 2 steps ahead, so that the slot being filled is two steps
// behind the one being multiplied: each warpgroup keeps one step's MMAs in
// flight while it issues the next, and waits for the step before, whose
// slot the copies after the next barrier reuse. The copies go out before
// the step's MMAs: issued after them, they left the 3-stage rings of
// ResNet-50's 3x3 F and B layers 8-11% slower on the H200. cp.async writes
// through the generic proxy and the MMA reads through the async one: each
// thread fences its landed copies before the barrier.
template <int kStageBytes, typename Load, typename Step>
CT_DEVICE void tc_wgmma_ring(float (&acc)[CT_MI][CT_NI][4], int steps,
                             ct_u32 smem, Load& load, Step& step) {
  // The first slice overwrites the sums: zeroing them first would be reads
  // of the MMA's registers in its pipeline. Without steps (a W split with no
  // positions) no MMA runs, and the sums are zeros.
  float* d = &acc[0][0][0];
  if (steps == 0) {
#pragma unroll
    for (int i = 0; i < CT_MI * CT_NI * 4; ++i) d[i] = 0.0f;
    return;
  }
#pragma unroll
  for (int st = 0; st < CT_STAGES - 2; ++st) {
    if (st < steps) load(st, st);
    tc_commit();
  }
  for (int kt = 0; kt < steps; ++kt) {
    tc_wait<CT_STAGES - 3>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int next = kt + CT_STAGES - 2;
    if (next < steps) load(next, next % CT_STAGES);
    tc_commit();
    step(d, smem + (kt % CT_STAGES) * kStageBytes, kt == 0);
  }
  tc_wgmma_drain(d);
  tc_wait<0>();
}
// The ring over stages holding both tiles (tc_wgmma_step).
template <typename Load>
CT_DEVICE void tc_wgmma_mainloop(float (&acc)[CT_MI][CT_NI][4], int steps,
                                 ct_u32 smem, Load& load) {
  const tc_wg_operands at = tc_wg_operands_of_thread();
  auto step = [&](float* d, ct_u32 stage, bool first) {
    tc_wgmma_step(d, stage, at, first);
  };
  tc_wgmma_ring<CT_WG_STAGE_BYTES>(acc, steps, smem, load, step);
}

#if CT_HALO
// The halo tiles (CT_HALO): a stage of the ring holds the filter tile alone
// (the MMA's B), and the MMA reads A straight from the halo of the step's
// channel block, whose pixels are rows of BK channels swizzled as the other
// tiles' rows (tc_swizzle by pixel index, from a 1024-byte boundary). The
// swizzle is a function of the address, so any run of pixels is a K-major
// operand with the same swizzle: for tap (r, s) a warpgroup's 64 rows
// (eight tile rows of 8 positions, or 64 positions of one tile row) start
// at its first output position's pixel moved r rows and s columns on, and
// the descriptor's stride from one 8-row group to the next is a halo row
// (or 8 pixels). Every tap reads the same halo, which is copied once a
// channel block (load(step, slot) copies it at the block's first tap, into
// the buffer of the block's parity). That buffer is refilled two channel
// blocks later, CT_STAGES - 2 steps ahead; every warpgroup has then waited
// for the MMAs of the step two before the refill's, the previous block's
// last tap or later when the taps are at least CT_STAGES - 1 (the solver
// keeps them so). The descriptor's base offset stays 0 at any start: on
// the H100 a 128-byte swizzled operand starting 1 to 21 rows past a
// 1024-byte boundary read exactly with it, and wrongly with the start's
// row within the pattern there. A halo laid out in planes of one 16-byte
// chunk of every pixel, read without a swizzle, was checked and ran 1.2-3x
// slower than the im2col tiles on VGG-16's 64-channel 224x224 B layer on
// the H100: the eight rows the MMA reads together then share their banks.
//
// Through the tensor maps (CT_TMA), one thread issues each step's filter
// tile and at a channel block's first tap the halo (a box of the tiled map
// tm_src over the source, its rows and columns from the tile's first
// output position less the padding, zeros outside the image) onto the
// stage's barrier, as tc_tma_mainloop; the halo lands in the same swizzle,
// the map's being a function of the address too.
CT_DEVICE unsigned long long tc_halo_desc(ct_u32 addr) {
#if BK == 64
  constexpr unsigned long long kSwizzle = 1;
#else
  constexpr unsigned long long kSwizzle = 2;
#endif
  constexpr unsigned long long kStride =
      (CT_HALO_TW == 8 ? CT_HALO_HW : 8) * CT_ROW_BYTES;
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         ((kStride >> 4) << 32) | (kSwizzle << 62);
}
#endif  // CT_HALO

#if CT_TMA
// A CUDA tensor map (CUtensorMap), opaque, passed by value.
struct __align__(64) ct_tensor_map {
  ct_u64 bits[16];
};

CT_DEVICE void tc_barrier_init(ct_u32 bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(count)
               : "memory");
}
// Arrives on `bar` and adds `bytes` to the bytes its phase waits for.
CT_DEVICE void tc_barrier_expect(ct_u32 bar, int bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}
// Waits until the phase of `bar` with this parity has completed.
CT_DEVICE void tc_barrier_wait(ct_u32 bar, int parity) {
  ct_u32 done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
// A column of the im2col map's pixels (BM for F and B, BK for W), its
// channels from c on, starting at (w, h, n) with the tap's offsets added to
// w and h, into a swizzled tile at `dst`; completes on `bar`.
CT_DEVICE void tc_tma_im2col(ct_u32 dst, const ct_tensor_map* map, ct_u32 bar,
                             int c, int w, int h, int n, ct_u16 dw, ct_u16 dh) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::
          "r"(dst),
      "l"(reinterpret_cast<ct_u64>(map)), "r"(c), "r"(w), "r"(h), "r"(n),
      "r"(bar), "h"(dw), "h"(dh)
      : "memory");
}
// As tc_tma_im2col, into `dst` and onto `bar` in each block of the cluster
// whose bit `mask` sets.
CT_DEVICE void tc_tma_im2col_multicast(ct_u32 dst, const ct_tensor_map* map,
                                       ct_u32 bar, int c, int w, int h, int n,
                                       ct_u16 dw, ct_u16 dh, ct_u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::"
      "complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4, %5}], "
      "[%6], {%7, %8}, %9;\n" ::"r"(dst),
      "l"(reinterpret_cast<ct_u64>(map)), "r"(c), "r"(w), "r"(h), "r"(n),
      "r"(bar), "h"(dw), "h"(dh), "h"(mask)
      : "memory");
}
// Every thread of the cluster arrives, then waits for all the others: the
// writes of each before it are seen by each after it.
CT_DEVICE void tc_cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
// This block's rank in its cluster.
CT_DEVICE int tc_cluster_rank() {
  ct_u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return static_cast<int>(rank);
}
// The barrier of the block tc_tma_mainloop waits on: the block's, or with
// CT_CLUSTER the cluster's, whose blocks write into each other's stages.
CT_DEVICE void tc_ring_sync() {
#if CT_CLUSTER > 1
  tc_cluster_sync();
#else
  __syncthreads();
#endif
}

// The box of the tiled map at (c, t, o, g) into `dst`; completes on `bar`.
CT_DEVICE void tc_tma_tile(ct_u32 dst, const ct_tensor_map* map, ct_u32 bar,
                           int c, int t, int o, int g) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<ct_u64>(map)), "r"(c), "r"(t), "r"(o), "r"(g),
      "r"(bar)
      : "memory");
}

// The stage ring with the tensor memory accelerator: one thread issues each
// step's tile copies (issue(step, slot)), CT_STAGES - 2 steps ahead as in
// tc_wgmma_mainloop, and every warp waits on the stage's barrier (bars + 8 *
// slot), whose phase completes when all of them have landed. The
// copies address the source in hardware (im2col mode: each row of the tile
// one output position's source pixel for the tap, zeros outside the image),
// so no thread computes an address or tests a bound; they write through the
// async proxy, which the MMA reads through too. A warp of its own issuing
// the copies up to CT_STAGES steps ahead, each slot released by the MMA
// warps through a second barrier and no block barrier a step, was 2-10%
// slower on the H200 on ResNet-50's 3x3 and stride-2 1x1 F layers, tile for
// tile. The issuing thread sets the barriers up first; the other threads
// wait on them only after the loop's first block barrier. Without steps (a
// W split with no positions) the sums are zeros.
// With CT_CLUSTER each block's copies also land in its peer, so every
// barrier above is the cluster's: a slot is reused once both blocks are done
// with it, and the first copies go out once both have set their barriers up.
// Each barrier still waits for a whole stage's bytes, half its source tile
// copied by each block; a peer's bytes may land before this block's issuer
// arrives, which the barrier's pending arrival holds the phase open for.
// step(d, stage, first) multiplies a stage into the sums d (as
// tc_wgmma_ring).
template <int kStageBytes, typename Issue, typename Step>
CT_DEVICE void tc_tma_ring(float (&acc)[CT_MI][CT_NI][4], int steps,
                           ct_u32 smem, ct_u32 bars, Issue& issue, Step& step) {
  float* d = &acc[0][0][0];
  if (steps == 0) {
#pragma unroll
    for (int i = 0; i < CT_MI * CT_NI * 4; ++i) d[i] = 0.0f;
    return;
  }
  const bool issuer = threadIdx.x == 0;
  if (issuer) {
    for (int st = 0; st < CT_STAGES; ++st) tc_barrier_init(bars + 8 * st, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
#if CT_CLUSTER > 1
  tc_cluster_sync();
#endif
  if (issuer) {
#pragma unroll
    for (int st = 0; st < CT_STAGES - 2; ++st) {
      if (st < steps) issue(st, st);
    }
  }
  for (int kt = 0; kt < steps; ++kt) {
    // Every warp is past its wait for step kt - 2's MMAs: that slot is free.
    tc_ring_sync();
    const int next = kt + CT_STAGES - 2;
    if (issuer && next < steps) issue(next, next % CT_STAGES);
    const int slot = kt % CT_STAGES;
    tc_barrier_wait(bars + 8 * slot, (kt / CT_STAGES) & 1);
    step(d, smem + slot * kStageBytes, kt == 0);
  }
  tc_wgmma_drain(d);
#if CT_CLUSTER > 1
  // Neither block leaves while copies it issued may still be landing in
  // the other.
  tc_cluster_sync();
#endif
}
// The ring over stages holding both tiles (tc_wgmma_step).
template <typename Issue>
CT_DEVICE void tc_tma_mainloop(float (&acc)[CT_MI][CT_NI][4], int steps,
                               ct_u32 smem, ct_u32 bars, Issue& issue) {
  const tc_wg_operands at = tc_wg_operands_of_thread();
  auto step = [&](float* d, ct_u32 stage, bool first) {
    tc_wgmma_step(d, stage, at, first);
  };
  tc_tma_ring<CT_WG_STAGE_BYTES>(acc, steps, smem, bars, issue, step);
}
#endif  // CT_TMA
#endif  // CT_WGMMA

// The output tile's element as stored in shared memory (tc_put) and as
// written to the tensor (tc_bits): 16-bit bits, or fp32 converted on the way.
CT_DEVICE void tc_put(ct_u16* at, float v) {
  *at = ct_from_float<ct_t>(v).bits;
}
CT_DEVICE void tc_put(float* at, float v) { *at = v; }
CT_DEVICE ct_u16 tc_bits(ct_u16 v) { return v; }
CT_DEVICE ct_u16 tc_bits(float v) { return ct_from_float<ct_t>(v).bits; }

#if CT_DIR != 3
// This thread's copies of a step's filter rows (conv_tc's loads): row i
// from filt + at[i] + off into base + to[i], zeros where ok[i] is not set
// (rows past the filter's).
template <int kRows>
CT_DEVICE void tc_copy_filter(ct_u32 base, const ct_u16* filt,
                              const int (&at)[kRows], const bool (&ok)[kRows],
                              const ct_u32 (&to)[kRows], int off) {
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const ct_u16* p = ok[i] ? filt + at[i] + off : filt;
    tc_copy16(base + to[i], p, ok[i] ? 16 : 0);
  }
}

// Grid: x = row tiles * column tiles (column tiles fastest, so that blocks
// running together share their source rows), y = groups. Block: CT_THREADS.
// Dynamic shared memory: the larger of the stage ring and the output tile.
#if CT_CLUSTER > 1
#define CT_CLUSTER_DIMS __cluster_dims__(CT_CLUSTER, 1, 1)
#else
#define CT_CLUSTER_DIMS
#endif
// Halo tiles of 8 warps and at most 128 columns run two blocks a
// multiprocessor, one's copies beside the other's MMAs (their registers
// capped to 128 a thread for it).
#if CT_HALO && CT_THREADS <= 256 && BN <= 128
#define CT_MIN_BLOCKS 2
#else
#define CT_MIN_BLOCKS 1
#endif
CT_KERNEL void __launch_bounds__(CT_THREADS, CT_MIN_BLOCKS) CT_CLUSTER_DIMS
    conv_tc(const ct_t* psrc, const ct_t* pfilt, ct_t* pdst, ct_i64 a_n,
            ct_i64 a_h, ct_i64 a_w, ct_i64 a_g, ct_i64 a_cp, ct_i64 a_ko,
            ct_i64 a_oh, ct_i64 a_ow, ct_i64 a_r, ct_i64 a_s, ct_i64 a_ph,
            ct_i64 a_pw, ct_i64 a_sh, ct_i64 a_sw, ct_i64 a_dh, ct_i64 a_dw
#if CT_PHASE
            ,
            ct_i64 a_fh, ct_i64 a_fw, ct_i64 a_qsh, ct_i64 a_qsw, ct_i64 a_qoh,
            ct_i64 a_qow
#endif
#if CT_TMA
            ,
            const __grid_constant__ ct_tensor_map tm_src,
            const __grid_constant__ ct_tensor_map tm_filt
#endif
    ) {
  extern __shared__ __align__(16) unsigned char tc_smem[];
  const int h = static_cast<int>(a_h), w = static_cast<int>(a_w);
  const int groups = static_cast<int>(a_g), cp = static_cast<int>(a_cp);
  const int ko = static_cast<int>(a_ko), ohw = static_cast<int>(a_oh * a_ow);
  const int ow = static_cast<int>(a_ow), fs = static_cast<int>(a_s);
  const int dh = static_cast<int>(a_dh), dw = static_cast<int>(a_dw);
  const int rows = static_cast<int>(a_n) * ohw;
  const int row_stride = groups * cp;  // of src

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wn = warp / WM;
  const int col_tiles = (ko + BN - 1) / BN;
  const int m0 = static_cast<int>(blockIdx.x / col_tiles) * BM;
  const int o0 = static_cast<int>(blockIdx.x % col_tiles) * BN;
  const int g = blockIdx.y;
#if !CT_TMA
  const int chunk = tid % CT_CHUNKS;

  // The source rows and filter rows this thread copies: where each starts
  // (for source rows, where tap (0, 0) would read, which may lie in the
  // padding), and for source rows which filter rows and columns (bits of
  // a_rows and a_cols; the solver allows at most 32 of each) read inside the
  // source. Each copy of a step then costs a shift, a test and an add.
  const int fr_count = static_cast<int>(a_r);
#if !CT_HALO
  int a_at[CT_AL];
  ct_u32 a_to[CT_AL], a_rows[CT_AL], a_cols[CT_AL];
#pragma unroll
  for (int i = 0; i < CT_AL; ++i) {
    const int r = tid / CT_CHUNKS + i * (CT_THREADS / CT_CHUNKS);
    const int m = m0 + r;
    a_to[i] = tc_swizzle(r, chunk);
    a_at[i] = 0, a_rows[i] = 0, a_cols[i] = 0;
    if (m < rows) {
      const int n = m / ohw, pos = m - n * ohw;
      const int oh = pos / ow, oq = pos - oh * ow;
      const int ih = oh * static_cast<int>(a_sh) - static_cast<int>(a_ph);
      const int iw = oq * static_cast<int>(a_sw) - static_cast<int>(a_pw);
      a_at[i] = (n * h * w + ih * w + iw) * row_stride + g * cp + chunk * 8;
      for (int t = 0; t < fr_count; ++t) {
        if (static_cast<unsigned>(ih + t * dh) < static_cast<unsigned>(h))
          a_rows[i] |= 1u << t;
      }
      for (int t = 0; t < fs; ++t) {
        if (static_cast<unsigned>(iw + t * dw) < static_cast<unsigned>(w))
          a_cols[i] |= 1u << t;
      }
    }
  }
#endif
  const int taps = fr_count * fs;
  int b_at[CT_BL];
  bool b_ok[CT_BL];
  ct_u32 b_to[CT_BL];
#pragma unroll
  for (int i = 0; i < CT_BL; ++i) {
    const int r = tid / CT_CHUNKS + i * (CT_THREADS / CT_CHUNKS);
    b_ok[i] = o0 + r < ko;
    b_to[i] = (CT_HALO ? 0 : CT_A_BYTES) + tc_swizzle(r, chunk);
    b_at[i] = ((g * ko + (b_ok[i] ? o0 + r : 0)) * taps) * cp + chunk * 8;
  }
#else
  const int fr_count = static_cast<int>(a_r);
#endif

#if CT_WGMMA
  // The MMA's swizzle repeats every 1024 bytes: tiles start on such a
  // boundary (the launch asks for 1024 bytes more).
  const ct_u32 raw = tc_shared_address(tc_smem);
  const ct_u32 smem = (raw + 1023u) & ~1023u;
  unsigned char* tile_base = tc_smem + (smem - raw);
#else
  const ct_u32 smem = tc_shared_address(tc_smem);
  unsigned char* tile_base = tc_smem;
#endif
  const int cblocks = cp / BK;
#if CT_HALO
  const int steps = fr_count * fs * cblocks;
  // The block's tile: image t_n, output rows from y0, columns from x0 (row
  // tiles in x fastest, then y, then images; column tiles fastest of all).
  const int oh_count = static_cast<int>(a_oh);
  const int tiles_w = (ow + CT_HALO_TW - 1) / CT_HALO_TW;
  const int tiles_h = (oh_count + CT_HALO_TH - 1) / CT_HALO_TH;
  int tile_at = static_cast<int>(blockIdx.x / col_tiles);
  const int t_x = tile_at % tiles_w;
  tile_at /= tiles_w;
  const int t_y = tile_at % tiles_h, t_n = tile_at / tiles_h;
  const int y0 = t_y * CT_HALO_TH, x0 = t_x * CT_HALO_TW;
  const int ih0 = y0 - static_cast<int>(a_ph),
            iw0 = x0 - static_cast<int>(a_pw);
#if CT_TMA
  const ct_u32 bars = smem + CT_BARRIERS_AT;
  // Issued by one thread in step order, as the copies below.
  int fr = 0, fc = 0, c0 = 0, cb = 0;
  auto issue = [&](int /*kt*/, int slot) {
    const ct_u32 bar = bars + 8 * slot;
    if (fr == 0 && fc == 0) {
      tc_barrier_expect(bar, CT_HALO_STAGE_BYTES + CT_HALO_PIX * CT_ROW_BYTES);
      tc_tma_tile(smem + CT_HALO_AT + (cb & 1) * CT_HALO_BYTES, &tm_src, bar,
                  g * cp + c0, iw0, ih0, t_n);
    } else {
      tc_barrier_expect(bar, CT_HALO_STAGE_BYTES);
    }
    tc_tma_tile(smem + slot * CT_HALO_STAGE_BYTES, &tm_filt, bar, c0,
                fr * fs + fc, o0, g);
    if (++fc == fs) {
      fc = 0;
      if (++fr == fr_count) fr = 0, c0 += BK, ++cb;
    }
  };
#else
  const ct_u16* src = reinterpret_cast<const ct_u16*>(psrc);
  const ct_u16* filt = reinterpret_cast<const ct_u16*>(pfilt);
  const ct_u16* src_image = src + t_n * h * w * row_stride + g * cp;
  // Issues the copies of the next step into stage `slot` (and at a channel
  // block's first tap its halo), the steps in order as below.
  int fr = 0, fc = 0, c0 = 0, cb = 0;
  auto load = [&](int /*kt*/, int slot) {
    if (fr == 0 && fc == 0) {
      const ct_u32 halo = smem + CT_HALO_AT + (cb & 1) * CT_HALO_BYTES;
      for (int e = tid; e < CT_HALO_PIX * CT_CHUNKS; e += CT_THREADS) {
        const int px = e / CT_CHUNKS, j = e - px * CT_CHUNKS;
        const int hy = px / CT_HALO_HW, hx = px - hy * CT_HALO_HW;
        const int ih = ih0 + hy, iw = iw0 + hx;
        const bool ok = static_cast<unsigned>(ih) < static_cast<unsigned>(h) &&
                        static_cast<unsigned>(iw) < static_cast<unsigned>(w);
        const ct_u16* q =
            ok ? src_image + (ih * w + iw) * row_stride + c0 + j * 8 : src;
        tc_copy16(halo + tc_swizzle(px, j), q, ok ? 16 : 0);
      }
    }
    tc_copy_filter(smem + slot * CT_HALO_STAGE_BYTES, filt, b_at, b_ok, b_to,
                   (fr * fs + fc) * cp + c0);
    if (++fc == fs) {
      fc = 0;
      if (++fr == fr_count) fr = 0, c0 += BK, ++cb;
    }
  };
#endif  // CT_TMA
  // This warpgroup's 64 rows start at tile row wg * 64, output position
  // (wg * 64 / CT_HALO_TW, wg * 64 % CT_HALO_TW) of the tile, whose tap
  // (0, 0) pixel has the same coordinates in the halo; each step moves them
  // on by its tap (the steps in order, one call each).
  const int wg_row = (tid / 128) * 64;
  const ct_u32 wg_at =
      ((wg_row / CT_HALO_TW) * CT_HALO_HW + wg_row % CT_HALO_TW) * CT_ROW_BYTES;
  const int tap_h = dh * CT_HALO_HW * CT_ROW_BYTES, tap_w = dw * CT_ROW_BYTES;
  int ar = 0, as = 0, acb = 0;
  auto step = [&](float* d, ct_u32 stage, bool first) {
    const ct_u32 a = smem + CT_HALO_AT + (acb & 1) * CT_HALO_BYTES + wg_at +
                     ar * tap_h + as * tap_w;
    tc_wgmma_step_at(d, tc_halo_desc(a), 32 >> 4, stage, first);
    if (++as == fs) {
      as = 0;
      if (++ar == fr_count) ar = 0, ++acb;
    }
  };
#elif CT_TMA
  const int steps = fr_count * fs * cblocks;
  // The step barriers follow the stage ring and the output tile.
  const ct_u32 bars = smem + CT_BARRIERS_AT;
  // The tile's first output position, where tap (0, 0) of its source
  // starts: the copies run on from there along the output positions. In a
  // cluster, this block copies the rows from rank * BM / 2 on.
#if CT_CLUSTER > 1
  const int rank = tc_cluster_rank();
  const int m_first = m0 + rank * (BM / CT_CLUSTER);
  const ct_u32 a_half =
      static_cast<ct_u32>(rank) * (BM / CT_CLUSTER) * CT_ROW_BYTES;
#else
  const int m_first = m0;
#endif
  const int n_first = m_first / ohw, pos_first = m_first - n_first * ohw;
  const int oh_first = pos_first / ow;
  const int h_first =
      oh_first * static_cast<int>(a_sh) - static_cast<int>(a_ph);
  const int w_first = (pos_first - oh_first * ow) * static_cast<int>(a_sw) -
                      static_cast<int>(a_pw);
  // Issued by one thread, in step order (filter column fastest, then row,
  // then channel block), so the tap and channels are counted on.
  int fr = 0, fc = 0, c0 = 0;
  auto issue = [&](int /*kt*/, int slot) {
    const ct_u32 base = smem + slot * CT_STAGE_BYTES, bar = bars + 8 * slot;
    tc_barrier_expect(bar, CT_STAGE_BYTES);
#if CT_CLUSTER > 1
    tc_tma_im2col_multicast(base + a_half, &tm_src, bar, g * cp + c0, w_first,
                            h_first, n_first, static_cast<ct_u16>(fc * dw),
                            static_cast<ct_u16>(fr * dh),
                            static_cast<ct_u16>((1u << CT_CLUSTER) - 1));
#else
    tc_tma_im2col(base, &tm_src, bar, g * cp + c0, w_first, h_first, n_first,
                  static_cast<ct_u16>(fc * dw), static_cast<ct_u16>(fr * dh));
#endif
    tc_tma_tile(base + CT_A_BYTES, &tm_filt, bar, c0, fr * fs + fc, o0, g);
    if (++fc == fs) {
      fc = 0;
      if (++fr == fr_count) fr = 0, c0 += BK;
    }
  };
#else
  const int steps = taps * cblocks;
  const ct_u16* src = reinterpret_cast<const ct_u16*>(psrc);
  const ct_u16* filt = reinterpret_cast<const ct_u16*>(pfilt);

  // Issues the copies of the next reduction step into stage `slot`: the
  // steps go in order (filter column fastest, then row, then channel
  // block), one call each, so the step's tap and channels are counted on
  // rather than divided out of its index.
  int fr = 0, fc = 0, c0 = 0;
  auto load = [&](int /*kt*/, int slot) {
    const int off = (fr * dh * w + fc * dw) * row_stride + c0;
    const int b_off = (fr * fs + fc) * cp + c0;
    const ct_u32 base = smem + slot * CT_STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < CT_AL; ++i) {
      const bool ok = ((a_rows[i] >> fr) & (a_cols[i] >> fc) & 1u) != 0;
      const ct_u16* p = ok ? src + (a_at[i] + off) : src;
      tc_copy16<true>(base + a_to[i], p, ok ? 16 : 0);
    }
    tc_copy_filter(base, filt, b_at, b_ok, b_to, b_off);
    if (++fc == fs) {
      fc = 0;
      if (++fr == fr_count) fr = 0, c0 += BK;
    }
  };
#endif  // CT_TMA

#if !CT_WGMMA
  // Slice kk of a stage: A rows m (ldmatrix matrices (m 0-7, k 0-7), (m 8-15,
  // k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)), B rows o likewise in pairs of
  // 8-column fragments.
  auto fragments = [&](ct_u32 stage, int kk, ct_u32(&af)[CT_MI][4],
                       ct_u32(&bf)[CT_NI][2]) {
#pragma unroll
    for (int mi = 0; mi < CT_MI; ++mi) {
      const int r = wm * CT_WTM + mi * 16 + (lane & 15);
      tc_ldmatrix4(af[mi], stage + tc_swizzle(r, kk * 2 + (lane >> 4)));
    }
#pragma unroll
    for (int nj = 0; nj < CT_NI / 2; ++nj) {
      const int r = wn * CT_WTN + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
      ct_u32 t[4];
      tc_ldmatrix4(
          t, stage + CT_A_BYTES + tc_swizzle(r, kk * 2 + ((lane >> 3) & 1)));
      bf[2 * nj][0] = t[0], bf[2 * nj][1] = t[1];
      bf[2 * nj + 1][0] = t[2], bf[2 * nj + 1][1] = t[3];
    }
  };
#endif
  float acc[CT_MI][CT_NI][4];
#if CT_HALO && CT_TMA
  tc_tma_ring<CT_HALO_STAGE_BYTES>(acc, steps, smem, bars, issue, step);
#elif CT_HALO
  tc_wgmma_ring<CT_HALO_STAGE_BYTES>(acc, steps, smem, load, step);
#elif CT_TMA
  tc_tma_mainloop(acc, steps, smem, bars, issue);
#elif CT_WGMMA
  tc_wgmma_mainloop(acc, steps, smem, load);
#else
  tc_mainloop<CT_STAGE_BYTES>(acc, steps, smem, load, fragments);
#endif
  __syncthreads();
  ct_u16* dst = reinterpret_cast<ct_u16*>(pdst);
  const ct_i64 channels = static_cast<ct_i64>(groups) * ko;
  // Where output position `pos` of an image lands in the destination's
  // image of `plane` positions, and the destination pixel of output row m
  // (m itself without phases).
#if CT_PHASE
  const ct_i64 plane = a_fh * a_fw;
  auto landing = [&](int pos) -> ct_i64 {
    const int oh = pos / ow, oq = pos - oh * ow;
    return (oh * a_qsh + a_qoh) * a_fw + oq * a_qsw + a_qow;
  };
  auto pixel = [&](int m) -> ct_i64 {
    const int n = m / ohw;
    return n * plane + landing(m - n * ohw);
  };
#else
  const ct_i64 plane = ohw;
  auto landing = [](int pos) -> ct_i64 { return pos; };
  auto pixel = [](int m) -> ct_i64 { return m; };
#endif

  // The tile through shared memory: [BN][BM + 8] for NCHW (positions
  // contiguous), [BM][BN + 8] for NHWC (channels contiguous), in the type
  // CT_TILE_FP32 names; an fp32 tile is converted on the way out.
#if CT_TILE_FP32
  float* tile = reinterpret_cast<float*>(tile_base);
#else
  ct_u16* tile = reinterpret_cast<ct_u16*>(tile_base);
#endif
#if CT_NHWC
  constexpr int kLd = BN + 8;
#else
  constexpr int kLd = BM + 8;
#endif
  // The sum of tile row r (an output position) and column c (a channel).
  auto put = [&](int r, int c, float v) {
#if CT_NHWC
    tc_put(&tile[r * kLd + c], v);
#else
    tc_put(&tile[c * kLd + r], v);
#endif
  };
#if CT_SWAP
  // The sums turned: the MMA's rows are this warp's 16 filter rows and its
  // columns the positions, acc[mi][ni] their 8-column slice 2 * mi + ni.
#pragma unroll
  for (int mi = 0; mi < CT_MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < CT_NI; ++ni) {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int r = mi * 16 + ni * 8 + (lane & 3) * 2 + (v & 1);
        const int c = warp * 16 + (lane >> 2) + (v >> 1) * 8;
        put(r, c, acc[mi][ni][v]);
      }
    }
  }
#else
#pragma unroll
  for (int mi = 0; mi < CT_MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < CT_NI; ++ni) {
#if CT_NHWC && !CT_TILE_FP32
      // Each pair of neighbouring channels as one 32-bit word: the eight
      // rows and four pairs of a warp's store fall on distinct banks.
#pragma unroll
      for (int v = 0; v < 4; v += 2) {
        const int r = wm * CT_WTM + mi * 16 + (lane >> 2) + (v >> 1) * 8;
        const int c = wn * CT_WTN + ni * 8 + (lane & 3) * 2;
        *reinterpret_cast<ct_u32*>(&tile[r * kLd + c]) =
            ct_from_float<ct_t>(acc[mi][ni][v]).bits |
            (static_cast<ct_u32>(ct_from_float<ct_t>(acc[mi][ni][v + 1]).bits)
             << 16);
      }
#else
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int r = wm * CT_WTM + mi * 16 + (lane >> 2) + (v >> 1) * 8;
        const int c = wn * CT_WTN + ni * 8 + (lane & 3) * 2 + (v & 1);
        put(r, c, acc[mi][ni][v]);
      }
#endif
    }
  }
#endif  // CT_SWAP
  __syncthreads();
#if CT_NHWC && CT_WGMMA
  // Eight channels a thread, stored as one 16-byte vector where aligned (the
  // caller's tensor may start anywhere).
  const bool vector = channels % 8 == 0 && ko % 8 == 0 &&
                      (reinterpret_cast<ct_u64>(pdst) & 15u) == 0;
  // The destination pixel of tile row r, or -1 past the output.
#if CT_HALO
  auto row_pixel = [&](int r) -> ct_i64 {
    const int y = y0 + r / CT_HALO_TW, x = x0 + r % CT_HALO_TW;
    if (y >= oh_count || x >= ow) return -1;
    return t_n * plane + landing(y * ow + x);
  };
#else
  auto row_pixel = [&](int r) -> ct_i64 {
    return m0 + r < rows ? pixel(m0 + r) : -1;
  };
#endif
  for (int e = tid; e < BM * (BN / 8); e += CT_THREADS) {
    const int r = e / (BN / 8), c = (e - r * (BN / 8)) * 8;
    const ct_i64 px = row_pixel(r);
    if (px < 0 || o0 + c >= ko) continue;
    const auto* from = tile + r * kLd + c;
    ct_u16* at = dst + px * channels + g * ko + o0 + c;
    if (vector) {
#if CT_TILE_FP32
      uint4 packed;
      ct_u32* word = reinterpret_cast<ct_u32*>(&packed);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        word[j] = tc_bits(from[2 * j]) |
                  (static_cast<ct_u32>(tc_bits(from[2 * j + 1])) << 16);
      }
      *reinterpret_cast<uint4*>(at) = packed;
#else
      *reinterpret_cast<uint4*>(at) = *reinterpret_cast<const uint4*>(from);
#endif
    } else {
      for (int j = 0; j < 8 && o0 + c + j < ko; ++j) at[j] = tc_bits(from[j]);
    }
  }
#elif CT_NHWC
  for (int e = tid; e < BM * BN; e += CT_THREADS) {
    const int r = e / BN, c = e - r * BN;
    if (m0 + r < rows && o0 + c < ko) {
      dst[pixel(m0 + r) * channels + g * ko + o0 + c] = tile[r * kLd + c];
    }
  }
#elif CT_THREADS % BM == 0
  const int r = tid % BM, m = m0 + r;
  if (m < rows) {
    const int n = m / ohw, pos = m - n * ohw;
    ct_u16* at = dst + (static_cast<ct_i64>(n) * channels + g * ko) * plane +
                 landing(pos);
    for (int c = tid / BM; c < BN && o0 + c < ko; c += CT_THREADS / BM) {
      at[static_cast<ct_i64>(o0 + c) * plane] = tc_bits(tile[c * kLd + r]);
    }
  }
#else
  // Fewer threads than rows (CT_SWAP): neighbouring threads take
  // neighbouring positions of a channel.
  for (int e = tid; e < BM * BN; e += CT_THREADS) {
    const int c = e / BM, r = e - c * BM, m = m0 + r;
    if (m >= rows || o0 + c >= ko) continue;
    const int n = m / ohw, pos = m - n * ohw;
    dst[(static_cast<ct_i64>(n) * channels + g * ko + o0 + c) * plane +
        landing(pos)] = tc_bits(tile[c * kLd + r]);
  }
#endif
}

#else  // CT_DIR == 3

// Chunk j of row r of a W tile with `row` bytes a row (eight chunks or more).
// For the warpgroup MMA the tile is instead a run of 64-column atoms, each
// BK rows of 128 bytes, which is the MMA's 128-byte-swizzled layout for an
// operand whose M or N dimension is contiguous.
// Moves an output position (image n, row oh, column q of ow) on by step_h
// rows and step_w (< ow) columns.
CT_DEVICE void tc_next_position(int& n, int& oh, int& q, int step_h, int step_w,
                                int ow, int oh_count) {
  q += step_w, oh += step_h;
  if (q >= ow) q -= ow, ++oh;
  while (oh >= oh_count) oh -= oh_count, ++n;
}

CT_DEVICE ct_u32 tc_swizzle_w(int r, int j, int row) {
#if CT_WGMMA
  return static_cast<ct_u32>((j >> 3) * (BK * 128) + r * 128 +
                             (((j & 7) ^ (r & 7)) << 4));
#else
  return static_cast<ct_u32>(r * row + ((j ^ (r & 7)) << 4));
#endif
}

// Backward weights as a GEMM per group with the positions as reduction:
//   part[split][g][k][(r*S + s)*CP + c] (+)= sum over positions p = (n, oh, ow)
//       of the split: dy[p][g][k] * x[n][oh*SH + r*DH - PH][ow*SW + s*DW -
//       PW][g][c]
// over packed (or already channel-last) x [N][H][W][G][CP] and dy
// [N][OH][OW][G][KP] (CP and KP: CG and KG, padded to 32 unless already
// channel-last in eights). Both tiles hold BK positions as
// rows (output channels, filter columns contiguous) and reach the MMA
// through ldmatrix.trans, or with CT_WGMMA straight from shared memory, read
// transposed by the warpgroup MMA. Each split writes its own fp32 slice of the
// workspace, adding to it when `accumulate` (chunks after the first); a
// split with no positions writes zeros.
// Grid: x = row tiles * column tiles, y = groups, z = splits.
CT_KERNEL void __launch_bounds__(CT_THREADS)
    conv_tc_wrw(const ct_t* px, const ct_t* pdy, float* part, ct_i64 a_n,
                ct_i64 a_h, ct_i64 a_w, ct_i64 a_g, ct_i64 a_cp, ct_i64 a_kg,
                ct_i64 a_kp, ct_i64 a_oh, ct_i64 a_ow, ct_i64 a_r, ct_i64 a_s,
                ct_i64 a_ph, ct_i64 a_pw, ct_i64 a_sh, ct_i64 a_sw, ct_i64 a_dh,
                ct_i64 a_dw, ct_i64 a_splits, ct_i64 a_accumulate
#if CT_TMA
                ,
                const __grid_constant__ ct_tensor_map tm_x,
                const __grid_constant__ ct_tensor_map tm_dy
#endif
    ) {
  extern __shared__ __align__(16) unsigned char tc_smem[];
  const int h = static_cast<int>(a_h), w = static_cast<int>(a_w);
  const int groups = static_cast<int>(a_g), cp = static_cast<int>(a_cp);
  const int kg = static_cast<int>(a_kg), kp = static_cast<int>(a_kp);
  const int ow = static_cast<int>(a_ow), ohw = static_cast<int>(a_oh * a_ow);
  const int fs = static_cast<int>(a_s);
  const int sh = static_cast<int>(a_sh), sw = static_cast<int>(a_sw);
#if CT_TMA
  // A tap's columns: cp padded to whole 64-channel boxes, those past cp
  // never stored.
  const int cq = (cp + 63) / 64 * 64;
#else
  const int cq = cp;
#endif
  const int cols = static_cast<int>(a_r) * fs * cq;
  const int positions = static_cast<int>(a_n) * ohw;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wn = warp / WM;
  const int col_tiles = (cols + BN - 1) / BN;
  const int m0 = static_cast<int>(blockIdx.x / col_tiles) * BM;
  const int n0 = static_cast<int>(blockIdx.x % col_tiles) * BN;
  const int g = blockIdx.y, split = blockIdx.z;
  const int splits = static_cast<int>(a_splits);
  const int per = ((positions + splits - 1) / splits + BK - 1) / BK * BK;
  const int p_begin = min(positions, split * per),
            p_end = min(positions, p_begin + per);
  const int steps = (p_end - p_begin + BK - 1) / BK;

#if !CT_TMA
  // The dy columns (output channels) and filter columns (tap, channel) this
  // thread copies.
  const int a_chunk = tid % (BM / 8);
  const bool a_ok = m0 + a_chunk * 8 < kp;
  const int a_at = g * kp + m0 + a_chunk * 8;
  const int dy_row = groups * kp;
  const int b_chunk = tid % (BN / 8);
  const int col = n0 + b_chunk * 8;
  const bool b_ok = col < cols;
  const int tap = b_ok ? col / cp : 0;
  const int fr = tap / fs, fc = tap - fr * fs;
  const int b_h = fr * static_cast<int>(a_dh) - static_cast<int>(a_ph);
  const int b_w = fc * static_cast<int>(a_dw) - static_cast<int>(a_pw);
  const int b_at = g * cp + (col - tap * cp);
  const int x_row = groups * cp;
#endif

#if CT_WGMMA
  // Tiles on 1024-byte boundaries, as for conv_tc.
  const ct_u32 smem = (tc_shared_address(tc_smem) + 1023u) & ~1023u;
#else
  const ct_u32 smem = tc_shared_address(tc_smem);
#endif
  // The copies of step 0, 1, 2, ... are issued in that order, each moving
  // the positions on by BK (step_h output rows and step_w columns), so that
  // none divides.
  const int oh_count = static_cast<int>(a_oh);
  const int step_h = BK / ow, step_w = BK - step_h * ow;
#if !CT_TMA
  const ct_u16* x = reinterpret_cast<const ct_u16*>(px);
  const ct_u16* dy = reinterpret_cast<const ct_u16*>(pdy);

  // Where each x row this thread copies stands: position q, image n, output
  // row and column.
  int b_q[CT_W_BL], b_n[CT_W_BL], b_oh[CT_W_BL], b_ow[CT_W_BL];
#pragma unroll
  for (int i = 0; i < CT_W_BL; ++i) {
    b_q[i] = p_begin + tid / (BN / 8) + i * (CT_THREADS / (BN / 8));
    b_n[i] = b_q[i] / ohw;
    const int pos = b_q[i] - b_n[i] * ohw;
    b_oh[i] = pos / ow, b_ow[i] = pos - b_oh[i] * ow;
  }

  auto load = [&](int kt, int slot) {
    const int q0 = p_begin + kt * BK;
    const ct_u32 base = smem + slot * CT_W_STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < CT_W_AL; ++i) {
      const int r = tid / (BM / 8) + i * (CT_THREADS / (BM / 8));
      if (r >= BK) break;
      const int q = q0 + r;
      const bool ok = a_ok && q < p_end;
      const ct_u16* p = ok ? dy + q * dy_row + a_at : dy;
      tc_copy16(base + tc_swizzle_w(r, a_chunk, CT_W_A_ROW), p, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < CT_W_BL; ++i) {
      const int r = tid / (BN / 8) + i * (CT_THREADS / (BN / 8));
      if (r >= BK) break;
      const int ih = b_oh[i] * sh + b_h, iw = b_ow[i] * sw + b_w;
      const bool ok = b_ok && b_q[i] < p_end &&
                      static_cast<unsigned>(ih) < static_cast<unsigned>(h) &&
                      static_cast<unsigned>(iw) < static_cast<unsigned>(w);
      const ct_u16* p =
          ok ? x + ((b_n[i] * h + ih) * w + iw) * x_row + b_at : x;
      tc_copy16(base + CT_W_A_BYTES + tc_swizzle_w(r, b_chunk, CT_W_B_ROW), p,
                ok ? 16 : 0);
      b_q[i] += BK;
      tc_next_position(b_n[i], b_oh[i], b_ow[i], step_h, step_w, ow, oh_count);
    }
  };
#endif

#if CT_TMA
  // Each step's tiles are 64-column atoms of BK rows (tc_swizzle_w): BM / 64
  // boxes of dy (64 output channels by BK positions) and BN / 64 im2col
  // columns of x (BK positions' pixels, 64 channels, one tap), each into
  // its atom in the 128-byte swizzle. Positions past the last lie outside
  // both maps (past dy's positions, past x's images) and read as zeros;
  // output channels past kg (a box of 64 where kp is not a multiple of it)
  // read zeros or the next group's, and are never stored. The step barriers
  // follow the ring.
  const ct_u32 bars = smem + CT_STAGES * CT_W_STAGE_BYTES;
  // The x atoms' channel and tap offsets (columns past the last take the
  // last tap, and channels past cp read zeros past x's row or the next
  // group's: what they read is never stored).
  const int taps = static_cast<int>(a_r) * fs;
  int x_c[BN / 64];
  ct_u16 x_dw[BN / 64], x_dh[BN / 64];
#pragma unroll
  for (int j = 0; j < BN / 64; ++j) {
    const int col = n0 + j * 64, t = min(col / cq, taps - 1);
    x_c[j] = g * cp + (col < cols ? col - t * cq : 0);
    x_dw[j] = static_cast<ct_u16>((t % fs) * static_cast<int>(a_dw));
    x_dh[j] = static_cast<ct_u16>((t / fs) * static_cast<int>(a_dh));
  }
  // Issued by one thread in step order: the step's first position, counted
  // on by BK.
  int i_n = p_begin / ohw, i_oh = (p_begin - i_n * ohw) / ow;
  int i_ow = p_begin - i_n * ohw - i_oh * ow;
  auto issue = [&](int kt, int slot) {
    const ct_u32 base = smem + slot * CT_W_STAGE_BYTES, bar = bars + 8 * slot;
    tc_barrier_expect(bar, CT_W_STAGE_BYTES);
    const int q0 = p_begin + kt * BK;
#pragma unroll
    for (int j = 0; j < BM / 64; ++j) {
      tc_tma_tile(base + j * (BK * 128), &tm_dy, bar, g * kp + m0 + j * 64, q0,
                  0, 0);
    }
    const int iw = i_ow * sw - static_cast<int>(a_pw);
    const int ih = i_oh * sh - static_cast<int>(a_ph);
#pragma unroll
    for (int j = 0; j < BN / 64; ++j) {
      tc_tma_im2col(base + CT_W_A_BYTES + j * (BK * 128), &tm_x, bar, x_c[j],
                    iw, ih, i_n, x_dw[j], x_dh[j]);
    }
    tc_next_position(i_n, i_oh, i_ow, step_h, step_w, ow, oh_count);
  };
  float acc[CT_MI][CT_NI][4];
  tc_tma_mainloop(acc, steps, smem, bars, issue);
#elif CT_WGMMA
  float acc[CT_MI][CT_NI][4];
  tc_wgmma_mainloop(acc, steps, smem, load);
#else
  const int sub = lane >> 3,
            row8 = lane & 7;  // ldmatrix: which matrix, which of its rows
  auto fragments = [&](ct_u32 stage, int kk, ct_u32(&af)[CT_MI][4],
                       ct_u32(&bf)[CT_NI][2]) {
#pragma unroll
    for (int mi = 0; mi < CT_MI; ++mi) {
      // Matrices (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m
      // 8-15).
      const int r = kk * 16 + (sub >> 1) * 8 + row8;
      const int m = wm * CT_WTM + mi * 16 + (sub & 1) * 8;
      tc_ldmatrix4_trans(af[mi], stage + tc_swizzle_w(r, m >> 3, CT_W_A_ROW));
    }
#pragma unroll
    for (int nj = 0; nj < CT_NI / 2; ++nj) {
      // Matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n
      // 8-15).
      const int r = kk * 16 + (sub & 1) * 8 + row8;
      const int n = wn * CT_WTN + nj * 16 + (sub >> 1) * 8;
      ct_u32 t[4];
      tc_ldmatrix4_trans(
          t, stage + CT_W_A_BYTES + tc_swizzle_w(r, n >> 3, CT_W_B_ROW));
      bf[2 * nj][0] = t[0], bf[2 * nj][1] = t[1];
      bf[2 * nj + 1][0] = t[2], bf[2 * nj + 1][1] = t[3];
    }
  };
  float acc[CT_MI][CT_NI][4];
  tc_mainloop<CT_W_STAGE_BYTES>(acc, steps, smem, load, fragments);
#endif

  float* out = part + (static_cast<ct_i64>(split) * groups + g) * kg * cols;
  const bool accumulate = a_accumulate != 0;
#pragma unroll
  for (int mi = 0; mi < CT_MI; ++mi) {
#pragma unroll
    for (int ni = 0; ni < CT_NI; ++ni) {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int k = m0 + wm * CT_WTM + mi * 16 + (lane >> 2) + (v >> 1) * 8;
        const int c = n0 + wn * CT_WTN + ni * 8 + (lane & 3) * 2 + (v & 1);
        if (k < kg && c < cols) {
          float* at = out + static_cast<ct_i64>(k) * cols + c;
          *at = accumulate ? *at + acc[mi][ni][v] : acc[mi][ni][v];
        }
      }
    }
  }
}

#endif  // CT_DIR

#endif  // CONVTUNE_BACKEND_CUDA && CT_TYPE != 1

// dw from the splits' partial sums, [split][G][KG][tap*CP + c]. A block of
// 256 threads takes 32 quads (four consecutive channels of one (k, tap);
// the quads run over G*KG*taps*ceil(CG/4)), one a lane, and its 8 rows of
// 32 lanes split the splits: row r adds splits r, r + 8, ... in order, each
// split's four sums one 16-byte load (CP is a multiple of 8, so the four
// lie within the row). The rows' sums are then added in row order through
// shared memory and written in the filter's layout (CT_NHWC). The solver
// keeps every partial's index, and dw's, within 32 bits.
#define CT_REDUCE_ROWS 8
CT_KERNEL void __launch_bounds__(32 * CT_REDUCE_ROWS)
    tc_wrw_reduce(const float* part, ct_t* pdw, ct_i64 a_g, ct_i64 a_kg,
                  ct_i64 a_cg, ct_i64 a_cp, ct_i64 a_r, ct_i64 a_s,
                  ct_i64 a_splits) {
  __shared__ float4 rows_sum[CT_REDUCE_ROWS][32];
  const unsigned cg = static_cast<unsigned>(a_cg),
                 cp = static_cast<unsigned>(a_cp);
  const unsigned taps = static_cast<unsigned>(a_r * a_s);
  const unsigned quads = (cg + 3) / 4;
  const unsigned count = static_cast<unsigned>(a_g * a_kg) * taps * quads;
  const unsigned lane = threadIdx.x % 32, row = threadIdx.x / 32;
  const unsigned i = blockIdx.x * 32 + lane;
  const unsigned c0 = (i % quads) * 4, rest = i / quads;
  const unsigned tap = rest % taps, k = rest / taps;  // k = g*KG + kk
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (i < count) {
    const unsigned slice = static_cast<unsigned>(a_g * a_kg) * taps * cp;
    const float4* at = reinterpret_cast<const float4*>(
        part + (k * taps + tap) * cp + c0 + row * slice);
    const unsigned step = slice / 4 * CT_REDUCE_ROWS;
    const unsigned splits = static_cast<unsigned>(a_splits);
#pragma unroll 4
    for (unsigned z = row; z < splits; z += CT_REDUCE_ROWS, at += step) {
      const float4 v = *at;
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
  }
  rows_sum[row][lane] = sum;
  __syncthreads();
  if (row != 0 || i >= count) return;
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < CT_REDUCE_ROWS; ++r) {
    const float4 v = rows_sum[r][lane];
    s[0] += v.x, s[1] += v.y, s[2] += v.z, s[3] += v.w;
  }
#if CT_NHWC
  // dw [K][R][S][CG]
  ct_t* d = pdw + (k * taps + tap) * cg + c0;
  const unsigned cstride = 1;
#else
  // dw [K][CG][R][S]
  ct_t* d = pdw + k * cg * taps + c0 * taps + tap;
  const unsigned cstride = taps;
#endif
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) {
    if (c0 + j < cg) d[j * cstride] = ct_from_float<ct_t>(s[j]);
  }
}

// dw from the partial sums of a folded pass ([split][K][R*CP], column
// r*CP + s*C + c): one element of dw per thread of a 1-D launch.
CT_KERNEL void tc_wrw_reduce_rows(const float* part, ct_t* pdw, ct_i64 a_k,
                                  ct_i64 a_c, ct_i64 a_cp, ct_i64 a_r,
                                  ct_i64 a_s, ct_i64 a_splits) {
  const ct_i64 count = a_k * a_c * a_r * a_s;
  const ct_i64 i = ct_global_index_x();
  if (i >= count) return;
  // i in (k, r, s, c) order.
  const ct_i64 c = i % a_c;
  ct_i64 rest = i / a_c;
  const ct_i64 fs = rest % a_s;
  rest /= a_s;
  const ct_i64 r = rest % a_r, k = rest / a_r;
  const ct_i64 cols = a_r * a_cp, slice = a_k * cols;
  const ct_i64 at = k * cols + r * a_cp + fs * a_c + c;
  float sum = 0.0f;
  for (ct_i64 z = 0; z < a_splits; ++z) sum += part[z * slice + at];
  ct_i64 st[5];
  tc_filter_strides(st, a_c, a_r, a_s);
  pdw[k * st[0] + c * st[1] + r * st[3] + fs * st[4]] =
      ct_from_float<ct_t>(sum);
}
