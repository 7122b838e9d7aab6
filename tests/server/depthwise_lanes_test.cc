// gpu_depthwise's kernels run on host lanes (host_lanes.h): each case's plan
// from the solver, its kernels built with the options the plan names (the
// CMake list of this test), on fresh random inputs with NaN-poisoned
// outputs, against the float64 reference. This checks the kernels' indexing
// on the machine that has no GPU; gpu_solvers_test checks them on one.
#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/problem.h"
#include "kernels/reference.h"
#include "server/solver_registry.h"
#include "server/solvers/gpu_solvers.h"
#include "tests/server/host_lanes.h"

namespace convtune {
namespace {

struct LanesCase {
  const char* name;
  Layout layout;
  DataType type;
  Direction direction;
  int64_t n, c, h, w, f, pad, stride, dilation;
  PerfConfig config;
};

void PrintTo(const LanesCase& lc, std::ostream* os) { *os << lc.name; }

ConvProblem ProblemOf(const LanesCase& lc) {
  ConvProblem p;
  p.layout = lc.layout, p.type = lc.type, p.direction = lc.direction;
  p.n = lc.n, p.c = p.k = p.groups = lc.c;
  p.in = {1, lc.h, lc.w};
  p.filter = {1, lc.f, lc.f};
  p.pad = {0, lc.pad, lc.pad};
  p.stride = {1, lc.stride, lc.stride};
  p.dilation = {1, lc.dilation, lc.dilation};
  return p;
}

std::string SortedOptions(const v1::KernelSource& source) {
  std::vector<std::string> options(source.options().begin(),
                                   source.options().end());
  std::sort(options.begin(), options.end());
  return absl::StrJoin(options, " ");
}

class DepthwiseLanes : public ::testing::TestWithParam<LanesCase> {};

TEST_P(DepthwiseLanes, MatchesReference) {
  const LanesCase& lc = GetParam();
  const ConvProblem p = ProblemOf(lc);
  const Solver* dw = SolverRegistry::Default().Find(kGpuDepthwiseId);
  ASSERT_EQ(dw->IsApplicable(p), absl::OkStatus()) << DescribeProblem(p);
  absl::StatusOr<v1::ExecutionPlan> plan = dw->MakePlan(p, lc.config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->sources_size(), 1);
  const std::string options = SortedOptions(plan->sources(0));
  const auto& variants = lanes::Variants();
  const auto variant = std::find_if(
      variants.begin(), variants.end(),
      [&](const lanes::Variant& v) { return v.options == options; });
  ASSERT_NE(variant, variants.end())
      << "no host-lanes build of conv_depthwise.cu with " << options
      << " (add it to depthwise_lanes_test's list in CMakeLists.txt)";

  std::random_device seeds;
  std::mt19937_64 rng((uint64_t{seeds()} << 32) | seeds());
  const int64_t es = ElementBytes(p.type);
  std::vector<char> x(p.x_elements() * es), w(p.w_elements() * es),
      y(p.y_elements() * es);
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  FillRandom(y.data(), p.type, p.y_elements(), rng);
  // The inputs as they were: the reference reads these, and a kernel must
  // leave its inputs as they are.
  const std::vector<char> x0 = x, w0 = w, y0 = y;
  std::vector<char>& out = p.direction == Direction::kForward        ? y
                           : p.direction == Direction::kBackwardData ? x
                                                                     : w;
  FillNaN(out.data(), p.type, static_cast<int64_t>(out.size()) / es);
  std::vector<float> ws(plan->workspace_bytes() / sizeof(float) + 1);
  FillNaN(ws.data(), DataType::kFp32, static_cast<int64_t>(ws.size()));
  for (const v1::KernelStep& step : plan->steps()) {
    const std::vector<int64_t> scalars(step.scalars().begin(),
                                       step.scalars().end());
    ASSERT_TRUE(variant->run(step.kernel(), step.grid(0), step.grid(1),
                             step.block(0), step.shared_bytes(), scalars,
                             x.data(), w.data(), y.data(), ws.data()))
        << step.kernel() << " is not in the host-lanes build";
  }
  for (const auto& [now, before] :
       {std::pair(&x, &x0), std::pair(&w, &w0), std::pair(&y, &y0)}) {
    if (now != &out) EXPECT_TRUE(*now == *before) << "an input was written";
  }
  // Every element, each within the type's rounding of its own value too.
  EXPECT_EQ(CheckOutput(p, HostTensors{x0.data(), w0.data(), y0.data()},
                        out.data(), 0, rng),
            absl::OkStatus())
      << DescribeProblem(p) << " config [" << PerfConfigString(lc.config)
      << "]";
}

constexpr Layout kNhwc = Layout::kNHWC, kNchw = Layout::kNCHW;
constexpr DataType kF32 = DataType::kFp32, kF16 = DataType::kFp16,
                   kB16 = DataType::kBf16;
constexpr Direction kF = Direction::kForward, kB = Direction::kBackwardData,
                    kW = Direction::kBackwardWeights;

// name, layout, type, direction, n, c, h, w, filter, pad, stride, dilation,
// config. Each case's options are one build in CMakeLists.txt.
// clang-format off
const LanesCase kCases[] = {
    {"vector_f",             kNhwc, kF16, kF, 1, 32, 64, 112, 3, 1, 1, 1, {0, 4, 16, 8}},
    {"vector_b_stride2",     kNhwc, kF16, kB, 2, 48, 28, 28,  3, 1, 2, 1, {3, 4, 16, 16}},
    {"vector_w",             kNhwc, kF16, kW, 2, 32, 64, 112, 3, 1, 1, 1, {0, 4, 16, 8}},
    {"rows_f",               kNchw, kF16, kF, 2, 8,  28, 28,  3, 1, 1, 1, {0, 4, 1}},
    {"rows_f_prefetch",      kNchw, kF16, kF, 2, 8,  28, 28,  3, 1, 1, 1, {0, 8, 2}},
    {"rows_b_stride2",       kNchw, kF16, kB, 2, 8,  28, 28,  3, 1, 2, 1, {0, 4, 1}},
    {"rows_w",               kNchw, kF32, kW, 2, 8,  28, 28,  3, 1, 1, 1, {0, 4, 1}},
    {"tile_f_stride3",       kNchw, kF32, kF, 2, 8,  20, 20,  3, 1, 3, 1, {16, 16, 1}},
    {"tile_w_stride3",       kNchw, kF32, kW, 2, 8,  20, 20,  3, 1, 3, 1, {16, 16, 1}},
    {"tile_f_channels_last", kNhwc, kB16, kF, 2, 24, 20, 20,  3, 1, 3, 1, {4, 8, 32}},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Kernels, DepthwiseLanes, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<LanesCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace convtune
