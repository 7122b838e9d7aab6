// Direct convolution from the definition, one thread per output element of
// the direction (y, dx or dw), for any problem:
//   conv_naive      64-bit indices, every problem.
// Options: CT_TYPE (1 fp32, 2 fp16, 3 bf16), CT_DIR (1 F, 2 B, 3 W), CT_NHWC.
// Scalars: the problem, in plan_args order. Sizes are never compiled in.

#define CT_PROBLEM_ARGS                                                      \
  a_n, a_c, a_k, a_id, a_ih, a_iw, a_fd, a_fh, a_fw, a_pd, a_ph, a_pw, a_sd, \
      a_sh, a_sw, a_dd, a_dh, a_dw, a_g

// The problem with index type I and dense strides in (outer, inner, D, H, W)
// order for the compiled layout.
template <typename I>
struct CtGeo {
  I n, cg, kg, g;
  I in[3], f[3], pad[3], st[3], dil[3], out[3];
  I xs[5], ws[5], ys[5];
};

template <typename I>
CT_DEVICE CtGeo<I> ct_geo(ct_i64 n, ct_i64 c, ct_i64 k, ct_i64 id, ct_i64 ih,
                          ct_i64 iw, ct_i64 fd, ct_i64 fh, ct_i64 fw, ct_i64 pd,
                          ct_i64 ph, ct_i64 pw, ct_i64 sd, ct_i64 sh, ct_i64 sw,
                          ct_i64 dd, ct_i64 dh, ct_i64 dw, ct_i64 groups) {
  CtGeo<I> q;
  q.n = static_cast<I>(n), q.g = static_cast<I>(groups);
  q.cg = static_cast<I>(c / groups), q.kg = static_cast<I>(k / groups);
  const ct_i64 v[5][3] = {
      {id, ih, iw}, {fd, fh, fw}, {pd, ph, pw}, {sd, sh, sw}, {dd, dh, dw}};
  for (int i = 0; i < 3; ++i) {
    q.in[i] = static_cast<I>(v[0][i]), q.f[i] = static_cast<I>(v[1][i]);
    q.pad[i] = static_cast<I>(v[2][i]), q.st[i] = static_cast<I>(v[3][i]);
    q.dil[i] = static_cast<I>(v[4][i]);
    q.out[i] =
        (q.in[i] + 2 * q.pad[i] - q.dil[i] * (q.f[i] - 1) - 1) / q.st[i] + 1;
  }
  ct_strides<I>(q.xs, q.cg * q.g, q.in);
  ct_strides<I>(q.ws, q.cg, q.f);
  ct_strides<I>(q.ys, q.kg * q.g, q.out);
  return q;
}

// Splits a dense index of a tensor with dims (outer, inner, D, H, W) in the
// compiled layout into those five coordinates.
template <typename I>
CT_DEVICE void ct_coords(I idx, I inner, const I* sp, I* c) {
#if CT_NHWC
  c[1] = idx % inner, idx /= inner;
  c[4] = idx % sp[2], idx /= sp[2];
  c[3] = idx % sp[1], idx /= sp[1];
  c[2] = idx % sp[0], c[0] = idx / sp[0];
#else
  c[4] = idx % sp[2], idx /= sp[2];
  c[3] = idx % sp[1], idx /= sp[1];
  c[2] = idx % sp[0], idx /= sp[0];
  c[1] = idx % inner, c[0] = idx / inner;
#endif
}

template <typename I>
CT_DEVICE I ct_total_outputs(const CtGeo<I>& q) {
#if CT_DIR == 1
  return q.n * q.kg * q.g * q.out[0] * q.out[1] * q.out[2];
#elif CT_DIR == 2
  return q.n * q.cg * q.g * q.in[0] * q.in[1] * q.in[2];
#else
  return q.kg * q.g * q.cg * q.f[0] * q.f[1] * q.f[2];
#endif
}

#if CT_DIR == 1
// y at dense index idx: the sum over the group's channels and the taps.
template <typename I>
CT_DEVICE float ct_direct_element(const CtGeo<I>& q, const ct_t* px,
                                  const ct_t* pw, I idx) {
  I o[5];
  ct_coords<I>(idx, q.kg * q.g, q.out, o);
  const I g = o[1] / q.kg;
  float sum = 0.0f;
  for (I fd = 0; fd < q.f[0]; ++fd) {
    const I d = o[2] * q.st[0] - q.pad[0] + fd * q.dil[0];
    if (d < 0 || d >= q.in[0]) continue;
    for (I fh = 0; fh < q.f[1]; ++fh) {
      const I h = o[3] * q.st[1] - q.pad[1] + fh * q.dil[1];
      if (h < 0 || h >= q.in[1]) continue;
      for (I fw = 0; fw < q.f[2]; ++fw) {
        const I w = o[4] * q.st[2] - q.pad[2] + fw * q.dil[2];
        if (w < 0 || w >= q.in[2]) continue;
        const I xb = o[0] * q.xs[0] + g * q.cg * q.xs[1] + d * q.xs[2] +
                     h * q.xs[3] + w * q.xs[4];
        const I wb =
            o[1] * q.ws[0] + fd * q.ws[2] + fh * q.ws[3] + fw * q.ws[4];
        for (I c = 0; c < q.cg; ++c) {
          sum += ct_to_float(px[xb + c * q.xs[1]]) *
                 ct_to_float(pw[wb + c * q.ws[1]]);
        }
      }
    }
  }
  return sum;
}
#elif CT_DIR == 2
// The output coordinate that padded input coordinate t reaches, if any.
template <typename I>
CT_DEVICE bool ct_src(I t, I s, I lim, I& o) {
  if (t < 0 || t % s != 0) return false;
  o = t / s;
  return o < lim;
}

// dx at dense index idx: the sum over the group's output channels and taps.
template <typename I>
CT_DEVICE float ct_direct_element(const CtGeo<I>& q, const ct_t* pw,
                                  const ct_t* py, I idx) {
  I i[5];
  ct_coords<I>(idx, q.cg * q.g, q.in, i);
  const I g = i[1] / q.cg, c = i[1] % q.cg;
  float sum = 0.0f;
  I od, oh, ow;
  for (I fd = 0; fd < q.f[0]; ++fd) {
    if (!ct_src<I>(i[2] + q.pad[0] - fd * q.dil[0], q.st[0], q.out[0], od))
      continue;
    for (I fh = 0; fh < q.f[1]; ++fh) {
      if (!ct_src<I>(i[3] + q.pad[1] - fh * q.dil[1], q.st[1], q.out[1], oh))
        continue;
      for (I fw = 0; fw < q.f[2]; ++fw) {
        if (!ct_src<I>(i[4] + q.pad[2] - fw * q.dil[2], q.st[2], q.out[2], ow))
          continue;
        const I yb = i[0] * q.ys[0] + g * q.kg * q.ys[1] + od * q.ys[2] +
                     oh * q.ys[3] + ow * q.ys[4];
        const I wb = g * q.kg * q.ws[0] + c * q.ws[1] + fd * q.ws[2] +
                     fh * q.ws[3] + fw * q.ws[4];
        for (I k = 0; k < q.kg; ++k) {
          sum += ct_to_float(py[yb + k * q.ys[1]]) *
                 ct_to_float(pw[wb + k * q.ws[0]]);
        }
      }
    }
  }
  return sum;
}
#else
// The dw element at dense index idx: its (k, c, taps) and where its sum over
// (n, od, oh, ow) starts in y and in x.
template <typename I>
CT_DEVICE void ct_wrw_bases(const CtGeo<I>& q, I idx, I* kc, I& yb, I& xb) {
#if CT_NHWC
  kc[1] = idx % q.cg, idx /= q.cg;
  kc[4] = idx % q.f[2], idx /= q.f[2];
  kc[3] = idx % q.f[1], idx /= q.f[1];
  kc[2] = idx % q.f[0], kc[0] = idx / q.f[0];
#else
  kc[4] = idx % q.f[2], idx /= q.f[2];
  kc[3] = idx % q.f[1], idx /= q.f[1];
  kc[2] = idx % q.f[0], idx /= q.f[0];
  kc[1] = idx % q.cg, kc[0] = idx / q.cg;
#endif
  const I g = kc[0] / q.kg;
  yb = kc[0] * q.ys[1];
  xb = (g * q.cg + kc[1]) * q.xs[1];
}

// The term of reduction position r = (n, od, oh, ow) of one dw element.
template <typename I>
CT_DEVICE float ct_wrw_term(const CtGeo<I>& q, const ct_t* px, const ct_t* py,
                            const I* kc, I yb, I xb, I r) {
  const I ow = r % q.out[2], t1 = r / q.out[2];
  const I oh = t1 % q.out[1], t2 = t1 / q.out[1];
  const I od = t2 % q.out[0], n = t2 / q.out[0];
  const I d = od * q.st[0] - q.pad[0] + kc[2] * q.dil[0];
  const I h = oh * q.st[1] - q.pad[1] + kc[3] * q.dil[1];
  const I w = ow * q.st[2] - q.pad[2] + kc[4] * q.dil[2];
  if (d < 0 || d >= q.in[0] || h < 0 || h >= q.in[1] || w < 0 || w >= q.in[2])
    return 0.0f;
  return ct_to_float(py[yb + n * q.ys[0] + od * q.ys[2] + oh * q.ys[3] +
                        ow * q.ys[4]]) *
         ct_to_float(
             px[xb + n * q.xs[0] + d * q.xs[2] + h * q.xs[3] + w * q.xs[4]]);
}

template <typename I>
CT_DEVICE float ct_direct_element(const CtGeo<I>& q, const ct_t* px,
                                  const ct_t* py, I idx) {
  I kc[5], yb, xb;
  ct_wrw_bases<I>(q, idx, kc, yb, xb);
  const I red = q.n * q.out[0] * q.out[1] * q.out[2];
  float sum = 0.0f;
  for (I r = 0; r < red; ++r) sum += ct_wrw_term<I>(q, px, py, kc, yb, xb, r);
  return sum;
}
#endif

template <typename I>
CT_DEVICE void ct_direct(const ct_t* px, const ct_t* pw, const ct_t* py,
                         const CtGeo<I>& q) {
  const I total = ct_total_outputs<I>(q);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
       idx < total; idx += step) {
#if CT_DIR == 1
    const_cast<ct_t*>(py)[idx] =
        ct_from_float<ct_t>(ct_direct_element<I>(q, px, pw, idx));
#elif CT_DIR == 2
    const_cast<ct_t*>(px)[idx] =
        ct_from_float<ct_t>(ct_direct_element<I>(q, pw, py, idx));
#else
    const_cast<ct_t*>(pw)[idx] =
        ct_from_float<ct_t>(ct_direct_element<I>(q, px, py, idx));
#endif
  }
}

CT_KERNEL void conv_naive(const ct_t* px, const ct_t* pw, const ct_t* py,
                          CT_PROBLEM_PARAMS) {
  ct_direct<ct_i64>(px, pw, py, ct_geo<ct_i64>(CT_PROBLEM_ARGS));
}
