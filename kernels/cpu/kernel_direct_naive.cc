// "cpu.direct_naive": the convolution straight from its definition, one
// output element at a time. The slow path that serves every problem.
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/parallel.h"

namespace convtune::cpu {
namespace {

template <DataType T>
void Forward(const ConvGeom& g, const void* xv, const void* wv, void* yv) {
  using E = Elem<T>;
  using S = typename E::Storage;
  const S* x = static_cast<const S*>(xv);
  const S* w = static_cast<const S*>(wv);
  S* y = static_cast<S*>(yv);
  ParallelFor(g.n * g.k, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nk = begin; nk < end; ++nk) {
      const int64_t n = nk / g.k, k = nk % g.k, c0 = (k / g.kg) * g.cg;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            float acc = 0.f;
            for (int64_t c = 0; c < g.cg; ++c)
              for (int64_t fd = 0; fd < g.f[0]; ++fd) {
                const int64_t id = od * g.stride[0] - g.pad[0] + fd * g.dil[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t fh = 0; fh < g.f[1]; ++fh) {
                  const int64_t ih =
                      oh * g.stride[1] - g.pad[1] + fh * g.dil[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t fw = 0; fw < g.f[2]; ++fw) {
                    const int64_t iw =
                        ow * g.stride[2] - g.pad[2] + fw * g.dil[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc += E::Get(x, n * g.xs[0] + (c0 + c) * g.xs[1] +
                                         id * g.xs[2] + ih * g.xs[3] +
                                         iw * g.xs[4]) *
                           E::Get(w, k * g.ws[0] + c * g.ws[1] + fd * g.ws[2] +
                                         fh * g.ws[3] + fw * g.ws[4]);
                  }
                }
              }
            E::Put(y,
                   n * g.ys[0] + k * g.ys[1] + od * g.ys[2] + oh * g.ys[3] +
                       ow * g.ys[4],
                   acc);
          }
    }
  });
}

// The output index o that input index i meets through filter tap f, or -1.
inline int64_t OutIndex(const ConvGeom& g, int axis, int64_t i, int64_t f) {
  const int64_t t = i + g.pad[axis] - f * g.dil[axis];
  if (t < 0 || t % g.stride[axis] != 0) return -1;
  const int64_t o = t / g.stride[axis];
  return o < g.out[axis] ? o : -1;
}

template <DataType T>
void BackwardData(const ConvGeom& g, void* xv, const void* wv, const void* yv) {
  using E = Elem<T>;
  using S = typename E::Storage;
  S* x = static_cast<S*>(xv);
  const S* w = static_cast<const S*>(wv);
  const S* y = static_cast<const S*>(yv);
  ParallelFor(g.n * g.c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / g.c, c = nc % g.c, k0 = (c / g.cg) * g.kg,
                    cw = c % g.cg;
      for (int64_t id = 0; id < g.in[0]; ++id)
        for (int64_t ih = 0; ih < g.in[1]; ++ih)
          for (int64_t iw = 0; iw < g.in[2]; ++iw) {
            float acc = 0.f;
            for (int64_t k = k0; k < k0 + g.kg; ++k)
              for (int64_t fd = 0; fd < g.f[0]; ++fd) {
                const int64_t od = OutIndex(g, 0, id, fd);
                if (od < 0) continue;
                for (int64_t fh = 0; fh < g.f[1]; ++fh) {
                  const int64_t oh = OutIndex(g, 1, ih, fh);
                  if (oh < 0) continue;
                  for (int64_t fw = 0; fw < g.f[2]; ++fw) {
                    const int64_t ow = OutIndex(g, 2, iw, fw);
                    if (ow < 0) continue;
                    acc += E::Get(y, n * g.ys[0] + k * g.ys[1] + od * g.ys[2] +
                                         oh * g.ys[3] + ow * g.ys[4]) *
                           E::Get(w, k * g.ws[0] + cw * g.ws[1] + fd * g.ws[2] +
                                         fh * g.ws[3] + fw * g.ws[4]);
                  }
                }
              }
            E::Put(x,
                   n * g.xs[0] + c * g.xs[1] + id * g.xs[2] + ih * g.xs[3] +
                       iw * g.xs[4],
                   acc);
          }
    }
  });
}

template <DataType T>
void BackwardWeights(const ConvGeom& g, const void* xv, void* wv,
                     const void* yv) {
  using E = Elem<T>;
  using S = typename E::Storage;
  const S* x = static_cast<const S*>(xv);
  S* w = static_cast<S*>(wv);
  const S* y = static_cast<const S*>(yv);
  ParallelFor(g.k * g.cg, 1, [&](int64_t begin, int64_t end) {
    for (int64_t kc = begin; kc < end; ++kc) {
      const int64_t k = kc / g.cg, cw = kc % g.cg, c = (k / g.kg) * g.cg + cw;
      for (int64_t fd = 0; fd < g.f[0]; ++fd)
        for (int64_t fh = 0; fh < g.f[1]; ++fh)
          for (int64_t fw = 0; fw < g.f[2]; ++fw) {
            float acc = 0.f;
            for (int64_t n = 0; n < g.n; ++n)
              for (int64_t od = 0; od < g.out[0]; ++od) {
                const int64_t id = od * g.stride[0] - g.pad[0] + fd * g.dil[0];
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                  const int64_t ih =
                      oh * g.stride[1] - g.pad[1] + fh * g.dil[1];
                  if (ih < 0 || ih >= g.in[1]) continue;
                  for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                    const int64_t iw =
                        ow * g.stride[2] - g.pad[2] + fw * g.dil[2];
                    if (iw < 0 || iw >= g.in[2]) continue;
                    acc += E::Get(x, n * g.xs[0] + c * g.xs[1] + id * g.xs[2] +
                                         ih * g.xs[3] + iw * g.xs[4]) *
                           E::Get(y, n * g.ys[0] + k * g.ys[1] + od * g.ys[2] +
                                         oh * g.ys[3] + ow * g.ys[4]);
                  }
                }
              }
            E::Put(w,
                   k * g.ws[0] + cw * g.ws[1] + fd * g.ws[2] + fh * g.ws[3] +
                       fw * g.ws[4],
                   acc);
          }
    }
  });
}

template <DataType T>
void Run(const ConvGeom& g, const std::vector<void*>& b) {
  switch (g.p.direction) {
    case Direction::kForward:
      Forward<T>(g, b[0], b[1], b[2]);
      break;
    case Direction::kBackwardData:
      BackwardData<T>(g, b[0], b[1], b[2]);
      break;
    case Direction::kBackwardWeights:
      BackwardWeights<T>(g, b[0], b[1], b[2]);
      break;
  }
}

}  // namespace

absl::Status DirectNaiveKernel(const v1::KernelStep& step,
                               const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvGeom g,
                   DecodeConvStep(kDirectNaiveKernel, step, buffers, 3, 0));
  switch (g.p.type) {
    case DataType::kFp32:
      Run<DataType::kFp32>(g, buffers);
      break;
    case DataType::kFp16:
      Run<DataType::kFp16>(g, buffers);
      break;
    case DataType::kBf16:
      Run<DataType::kBf16>(g, buffers);
      break;
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu
