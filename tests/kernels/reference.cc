#include "tests/kernels/reference.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/reference.h"
#include "kernels/numeric.h"

namespace convtune::reference {

double LoadAsDouble(DataType type, const void* data, int64_t i) {
  return LoadElement(data, type, i);
}

// Every direction is the same sum of x[n,c,i] * w[k,c,f] over the pairs that
// the forward definition y[n,k,o] = sum x[n,c,o*s-p+f*d] * w[k,c,f] links;
// each direction only differs in which element the product lands on.
ReferenceOutput ReferenceConv(const ConvProblem& p, const void* x,
                              const void* w, const void* y) {
  const Strides xs = XStrides(p), ws = WStrides(p), ys = YStrides(p);
  const int64_t out_elements = OutputElements(p);
  ReferenceOutput out{std::vector<double>(out_elements, 0.0),
                      std::vector<double>(out_elements, 0.0)};
  const int64_t cg = p.c_per_group(), kg = p.k_per_group();
  const int64_t od_n = p.out(0), oh_n = p.out(1), ow_n = p.out(2);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t cw = 0; cw < cg; ++cw) {
        const int64_t c = (k / kg) * cg + cw;
        for (int64_t od = 0; od < od_n; ++od)
          for (int64_t oh = 0; oh < oh_n; ++oh)
            for (int64_t ow = 0; ow < ow_n; ++ow)
              for (int64_t fd = 0; fd < p.filter[0]; ++fd)
                for (int64_t fh = 0; fh < p.filter[1]; ++fh)
                  for (int64_t fw = 0; fw < p.filter[2]; ++fw) {
                    const int64_t id =
                        od * p.stride[0] - p.pad[0] + fd * p.dilation[0];
                    const int64_t ih =
                        oh * p.stride[1] - p.pad[1] + fh * p.dilation[1];
                    const int64_t iw =
                        ow * p.stride[2] - p.pad[2] + fw * p.dilation[2];
                    if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] ||
                        iw < 0 || iw >= p.in[2]) {
                      continue;
                    }
                    const int64_t xi = n * xs[0] + c * xs[1] + id * xs[2] +
                                       ih * xs[3] + iw * xs[4];
                    const int64_t wi = k * ws[0] + cw * ws[1] + fd * ws[2] +
                                       fh * ws[3] + fw * ws[4];
                    const int64_t yi = n * ys[0] + k * ys[1] + od * ys[2] +
                                       oh * ys[3] + ow * ys[4];
                    double a, b;
                    int64_t dst;
                    switch (p.direction) {
                      case Direction::kForward:
                        a = LoadAsDouble(p.type, x, xi),
                        b = LoadAsDouble(p.type, w, wi), dst = yi;
                        break;
                      case Direction::kBackwardData:
                        a = LoadAsDouble(p.type, y, yi),
                        b = LoadAsDouble(p.type, w, wi), dst = xi;
                        break;
                      default:
                        a = LoadAsDouble(p.type, y, yi),
                        b = LoadAsDouble(p.type, x, xi), dst = wi;
                        break;
                    }
                    out.value[dst] += a * b;
                    out.magnitude[dst] += std::fabs(a * b);
                  }
      }
  return out;
}

std::vector<char> RandomTensor(DataType type, int64_t count, std::mt19937_64& rng) {
  std::vector<char> out(count * ElementBytes(type));
  FillRandom(out.data(), type, count, rng);
  return out;
}

void PoisonNaN(DataType type, void* data, int64_t count) { FillNaN(data, type, count); }

double RelativeTolerance(DataType type) { return Tolerance(type); }

std::string CompareWithReference(const ConvProblem& p, const void* out,
                                 const ReferenceOutput& ref) {
  const double rel = RelativeTolerance(p.type);
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < ref.value.size(); ++i) {
    const double got = LoadAsDouble(p.type, out, i);
    const double err = std::fabs(got - ref.value[i]);
    const double allowed = rel * ref.magnitude[i];
    if (!(err <= allowed)) {
      ++bad;
      const double ratio = allowed > 0 ? err / allowed : INFINITY;
      if (worst < 0 || !(ratio <= worst_ratio)) {
        worst = i;
        worst_ratio = ratio;
      }
    }
  }
  if (bad == 0) return "";
  return absl::StrCat(bad, " of ", ref.value.size(), " elements off; worst at ",
                      worst, ": got ", LoadAsDouble(p.type, out, worst),
                      ", want ", ref.value[worst], " (magnitude ",
                      ref.magnitude[worst], ")");
}

}  // namespace convtune::reference
