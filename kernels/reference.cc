#include "kernels/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/parallel.h"
#include "kernels/numeric.h"

namespace convtune {
namespace {

// Splits a dense index into canonical coordinates (outer, inner, d, h, w)
// given the dims and the layout.
std::array<int64_t, 5> Unflatten(int64_t index, int64_t inner,
                                 const std::array<int64_t, 3>& sp,
                                 Layout layout) {
  std::array<int64_t, 5> c{};
  if (layout == Layout::kNCHW) {
    c[4] = index % sp[2];
    index /= sp[2];
    c[3] = index % sp[1];
    index /= sp[1];
    c[2] = index % sp[0];
    index /= sp[0];
    c[1] = index % inner;
    index /= inner;
  } else {
    c[1] = index % inner;
    index /= inner;
    c[4] = index % sp[2];
    index /= sp[2];
    c[3] = index % sp[1];
    index /= sp[1];
    c[2] = index % sp[0];
    index /= sp[0];
  }
  c[0] = index;
  return c;
}

int64_t Offset(const Strides& s, int64_t a, int64_t b, int64_t d, int64_t h,
               int64_t w) {
  return a * s[0] + b * s[1] + d * s[2] + h * s[3] + w * s[4];
}

std::array<int64_t, 3> OutDims(const ConvProblem& p) {
  return {p.out(0), p.out(1), p.out(2)};
}

}  // namespace

double LoadElement(const void* data, DataType type, int64_t i) {
  switch (type) {
    case DataType::kFp32:
      return static_cast<const float*>(data)[i];
    case DataType::kFp16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBf16:
      return Bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
  }
  return 0;
}

void StoreElement(void* data, DataType type, int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (type) {
    case DataType::kFp32:
      static_cast<float*>(data)[i] = f;
      break;
    case DataType::kFp16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(f);
      break;
    case DataType::kBf16:
      static_cast<uint16_t*>(data)[i] = FloatToBf16(f);
      break;
  }
}

namespace {

// splitmix64: a full-period 64-bit sequence, fast enough for tensors of
// hundreds of millions of elements.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (-1, 1) from 24 random bits: (2u + 1 - 2^24) / 2^24 has an odd
// numerator, so it is never zero and exact in fp32.
float UnitFloat(uint32_t bits24) {
  return static_cast<float>(2 * static_cast<int32_t>(bits24) + 1 - (1 << 24)) *
         0x1p-24f;
}

template <typename T, typename Convert>
void FillRun(T* out, int64_t count, uint64_t state, Convert convert) {
  for (int64_t i = 0; i < count; ++i) {
    // Redraw until the stored value is non-zero (fp16 flushes tiny values).
    T v;
    do {
      v = convert(UnitFloat(static_cast<uint32_t>(SplitMix64(state) >> 40)));
    } while (convert.IsZero(v));
    out[i] = v;
  }
}

// Runs of kFillRun elements, each from its own state derived from the seed
// and the run's index, so that the values depend on the seed alone however
// many threads draw them. Large tensors (benchmark inputs of hundreds of
// MB) are drawn on several threads.
constexpr int64_t kFillRun = int64_t{1} << 20;
constexpr int64_t kRunsPerThread = 4;

template <typename T, typename Convert>
void FillTyped(T* out, int64_t count, uint64_t seed, Convert convert) {
  const int64_t runs = (count + kFillRun - 1) / kFillRun;
  auto fill_runs = [&](int64_t first, int64_t step) {
    for (int64_t r = first; r < runs; r += step) {
      uint64_t state =
          seed ^ (static_cast<uint64_t>(r) * 0xd1342543de82ef95ull);
      state = SplitMix64(state);
      FillRun(out + r * kFillRun, std::min(kFillRun, count - r * kFillRun),
              state, convert);
    }
  };
  const int64_t threads =
      std::min<int64_t>({static_cast<int64_t>(cpu::NumThreads()), 16,
                         std::max<int64_t>(1, runs / kRunsPerThread)});
  std::vector<std::thread> helpers;
  for (int64_t t = 1; t < threads; ++t)
    helpers.emplace_back(fill_runs, t, threads);
  fill_runs(0, threads);
  for (std::thread& h : helpers) h.join();
}

struct ToFp32 {
  float operator()(float f) const { return f; }
  bool IsZero(float v) const { return v == 0; }
};
struct ToFp16 {
  uint16_t operator()(float f) const { return FloatToHalf(f); }
  bool IsZero(uint16_t v) const { return (v & 0x7fff) == 0; }
};
struct ToBf16 {
  uint16_t operator()(float f) const { return FloatToBf16(f); }
  bool IsZero(uint16_t v) const { return (v & 0x7fff) == 0; }
};

}  // namespace

void FillRandom(void* data, DataType type, int64_t count,
                std::mt19937_64& rng) {
  const uint64_t seed = rng();
  switch (type) {
    case DataType::kFp32:
      FillTyped(static_cast<float*>(data), count, seed, ToFp32());
      break;
    case DataType::kFp16:
      FillTyped(static_cast<uint16_t*>(data), count, seed, ToFp16());
      break;
    case DataType::kBf16:
      FillTyped(static_cast<uint16_t*>(data), count, seed, ToBf16());
      break;
  }
}

uint32_t NaNBits(DataType type) {
  // Sign 0, exponent all ones, the quiet bit.
  switch (type) {
    case DataType::kFp32:
      return 0x7fc00000u;
    case DataType::kFp16:
      return 0x7e00u;
    case DataType::kBf16:
      return 0x7fc0u;
  }
  return 0;
}

void FillNaN(void* data, DataType type, int64_t count) {
  const uint32_t bits = NaNBits(type);
  if (type == DataType::kFp32) {
    std::fill_n(static_cast<uint32_t*>(data), count, bits);
  } else {
    std::fill_n(static_cast<uint16_t*>(data), count,
                static_cast<uint16_t>(bits));
  }
}

double Tolerance(DataType type) {
  switch (type) {
    case DataType::kFp32:
      return 1e-4;
    case DataType::kFp16:
      return 1e-2;
    case DataType::kBf16:
      return 3e-2;
  }
  return 0;
}

ReferenceValue ReferenceElement(const ConvProblem& p, const HostTensors& t,
                                int64_t index) {
  const Strides xs = XStrides(p), ws = WStrides(p), ys = YStrides(p);
  const int64_t cg = p.c_per_group(), kg = p.k_per_group();
  const std::array<int64_t, 3> od = OutDims(p);
  ReferenceValue r;
  auto acc = [&](const void* a, int64_t ai, const void* b, int64_t bi) {
    const double prod = LoadElement(a, p.type, ai) * LoadElement(b, p.type, bi);
    r.value += prod;
    r.abs_sum += std::fabs(prod);
  };
  if (p.direction == Direction::kForward) {
    const auto [n, k, d, h, w] = Unflatten(index, p.k, od, p.layout);
    const int64_t g = k / kg;
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t fd = 0; fd < p.filter[0]; ++fd)
        for (int64_t fh = 0; fh < p.filter[1]; ++fh)
          for (int64_t fw = 0; fw < p.filter[2]; ++fw) {
            const int64_t id = d * p.stride[0] - p.pad[0] + fd * p.dilation[0];
            const int64_t ih = h * p.stride[1] - p.pad[1] + fh * p.dilation[1];
            const int64_t iw = w * p.stride[2] - p.pad[2] + fw * p.dilation[2];
            if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 ||
                iw >= p.in[2]) {
              continue;
            }
            acc(t.x, Offset(xs, n, g * cg + c, id, ih, iw), t.w,
                Offset(ws, k, c, fd, fh, fw));
          }
    return r;
  }
  if (p.direction == Direction::kBackwardData) {
    const auto [n, ci, d, h, w] = Unflatten(index, p.c, p.in, p.layout);
    const int64_t g = ci / cg, c = ci % cg;
    const std::array<int64_t, 3> i = {d, h, w};
    for (int64_t k = g * kg; k < (g + 1) * kg; ++k)
      for (int64_t fd = 0; fd < p.filter[0]; ++fd)
        for (int64_t fh = 0; fh < p.filter[1]; ++fh)
          for (int64_t fw = 0; fw < p.filter[2]; ++fw) {
            const std::array<int64_t, 3> f = {fd, fh, fw};
            std::array<int64_t, 3> o{};
            bool hit = true;
            for (int a = 0; a < 3 && hit; ++a) {
              const int64_t num = i[a] + p.pad[a] - f[a] * p.dilation[a];
              hit = num >= 0 && num % p.stride[a] == 0 &&
                    num / p.stride[a] < od[a];
              o[a] = hit ? num / p.stride[a] : 0;
            }
            if (!hit) continue;
            acc(t.y, Offset(ys, n, k, o[0], o[1], o[2]), t.w,
                Offset(ws, k, c, fd, fh, fw));
          }
    return r;
  }
  const auto [k, c, fd, fh, fw] = Unflatten(index, cg, p.filter, p.layout);
  const int64_t g = k / kg;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t d = 0; d < od[0]; ++d)
      for (int64_t h = 0; h < od[1]; ++h)
        for (int64_t w = 0; w < od[2]; ++w) {
          const int64_t id = d * p.stride[0] - p.pad[0] + fd * p.dilation[0];
          const int64_t ih = h * p.stride[1] - p.pad[1] + fh * p.dilation[1];
          const int64_t iw = w * p.stride[2] - p.pad[2] + fw * p.dilation[2];
          if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 ||
              iw >= p.in[2]) {
            continue;
          }
          acc(t.x, Offset(xs, n, g * cg + c, id, ih, iw), t.y,
              Offset(ys, n, k, d, h, w));
        }
  return r;
}

namespace {

// Half the spacing of `type`'s values nearest zero (its subnormals): the
// most that rounding a tiny output to the type moves it.
double HalfSmallestStep(DataType type) {
  switch (type) {
    case DataType::kFp32:
      return std::ldexp(1.0, -150);
    case DataType::kFp16:
      return std::ldexp(1.0, -25);
    case DataType::kBf16:
      return std::ldexp(1.0, -134);
  }
  return 0;
}

absl::Status CheckAgainst(const ConvProblem& p, int64_t index,
                          const ReferenceValue& ref, double got) {
  // The output's own rounding to 16 bits is part of the allowed error, down
  // to the subnormals' fixed spacing.
  const double allowed =
      Tolerance(p.type) * (ref.abs_sum + std::fabs(ref.value)) +
      HalfSmallestStep(p.type);
  if (!(std::fabs(got - ref.value) <= allowed)) {
    return absl::InternalError(absl::StrCat(
        "output element ", index, " is ", got, "; the float64 reference is ",
        ref.value, " (allowed error ", allowed, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckElement(const ConvProblem& p, const HostTensors& t,
                          int64_t index, double got) {
  return CheckAgainst(p, index, ReferenceElement(p, t, index), got);
}

}  // namespace

absl::Status CheckOutput(const ConvProblem& p, const HostTensors& t,
                         const void* output, int samples,
                         std::mt19937_64& rng) {
  const int64_t total = p.output_elements();
  const bool all = samples <= 0 || samples >= total;
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  for (int64_t s = 0; s < (all ? total : samples); ++s) {
    const int64_t index = all ? s : pick(rng);
    absl::Status st =
        CheckElement(p, t, index, LoadElement(output, p.type, index));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::vector<ReferenceSample> SampleReference(const ConvProblem& p,
                                             const HostTensors& t, int samples,
                                             std::mt19937_64& rng) {
  const int64_t last = p.output_elements() - 1;
  std::uniform_int_distribution<int64_t> pick(0, last);
  std::vector<ReferenceSample> out(std::max(samples, 0));
  for (size_t i = 0; i < out.size(); ++i) {
    // The output's two ends hold the edge tiles of most kernels.
    out[i].index = i == 0 ? 0 : i == 1 ? last : pick(rng);
  }
  // A backward-weights element sums over the whole batch and image: the
  // samples are shared out among up to 16 cores when they are that long.
  const double terms =
      p.macs() / static_cast<double>(std::max<int64_t>(1, p.output_elements()));
  const bool long_sums = terms * static_cast<double>(out.size()) >= (1 << 22);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < out.size();) {
      out[i].ref = ReferenceElement(p, t, out[i].index);
    }
  };
  std::vector<std::thread> helpers;
  const size_t wanted =
      long_sums ? std::min<size_t>({out.size(), size_t{16},
                                    static_cast<size_t>(cpu::NumThreads())})
                : 1;
  for (size_t h = 1; h < wanted; ++h) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads: this one does the rest
    }
  }
  work();
  for (std::thread& h : helpers) h.join();
  return out;
}

absl::Status CheckSamples(const ConvProblem& p,
                          const std::vector<ReferenceSample>& samples,
                          const std::vector<double>& values) {
  if (samples.size() != values.size()) {
    return absl::InvalidArgumentError("one value per reference sample");
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    absl::Status st =
        CheckAgainst(p, samples[i].index, samples[i].ref, values[i]);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

std::vector<ReferenceValue> ReferenceOutput(const ConvProblem& p,
                                            const HostTensors& t) {
  std::vector<ReferenceValue> out(p.output_elements());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    out[i] = ReferenceElement(p, t, i);
  }
  return out;
}

absl::Status CompareOutput(const ConvProblem& p,
                           const std::vector<ReferenceValue>& ref,
                           const void* output) {
  const double tolerance = Tolerance(p.type);
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(ref.size()); ++i) {
    const double err = std::fabs(LoadElement(output, p.type, i) - ref[i].value);
    const double allowed = tolerance * ref[i].abs_sum;
    // False for a NaN element, which therefore counts as off.
    if (err <= allowed) continue;
    ++bad;
    const double ratio =
        allowed > 0 ? err / allowed : std::numeric_limits<double>::infinity();
    // A NaN ratio (a NaN element) ranks worst.
    if (worst < 0 || !(ratio <= worst_ratio)) {
      worst = i;
      worst_ratio = ratio;
    }
  }
  if (bad == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      bad, " of ", ref.size(), " output elements are off; the worst, element ",
      worst, ", is ", LoadElement(output, p.type, worst),
      "; the float64 reference is ", ref[worst].value, " (allowed error ",
      tolerance * ref[worst].abs_sum, ")"));
}

}  // namespace convtune
