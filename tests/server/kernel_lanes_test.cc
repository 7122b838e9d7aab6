// The GPU kernel sources run on host lanes (host_lanes.h): each case's plan
// from its solver, the plan's sources built with the options it names (the
// CMake lists of this test), run on fresh random inputs with NaN-poisoned
// outputs and workspace, against the float64 reference. This checks the
// kernels' indexing on the machine that has no GPU; gpu_solvers_test checks
// them on one.
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

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
  uint32_t solver;
  Layout layout;
  DataType type;
  Direction direction;
  int64_t n, c, k, groups, h, w, f, pad, stride, dilation;
  PerfConfig config;
};

void PrintTo(const LanesCase& lc, std::ostream* os) { *os << lc.name; }

ConvProblem ProblemOf(const LanesCase& lc) {
  ConvProblem p;
  p.layout = lc.layout, p.type = lc.type, p.direction = lc.direction;
  p.n = lc.n, p.c = lc.c, p.k = lc.k, p.groups = lc.groups;
  p.in = {1, lc.h, lc.w};
  p.filter = {1, lc.f, lc.f};
  p.pad = {0, lc.pad, lc.pad};
  p.stride = {1, lc.stride, lc.stride};
  p.dilation = {1, lc.dilation, lc.dilation};
  return p;
}

class KernelLanes : public ::testing::TestWithParam<LanesCase> {};

TEST_P(KernelLanes, MatchesReference) {
  const LanesCase& lc = GetParam();
  const ConvProblem p = ProblemOf(lc);
  const Solver* solver = SolverRegistry::Default().Find(lc.solver);
  ASSERT_NE(solver, nullptr) << "solver " << lc.solver;
  ASSERT_EQ(solver->IsApplicable(p), absl::OkStatus()) << DescribeProblem(p);
  const PerfConfig config =
      lc.config.empty() ? solver->DefaultConfig(p) : lc.config;
  ASSERT_EQ(solver->ValidateConfig(p, config), absl::OkStatus());
  absl::StatusOr<v1::ExecutionPlan> plan = solver->MakePlan(p, config);
  ASSERT_TRUE(plan.ok()) << plan.status();

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
  ASSERT_EQ(lanes::RunPlan(*plan, x.data(), w.data(), y.data(), ws.data()),
            absl::OkStatus());
  for (const auto& [now, before] :
       {std::pair(&x, &x0), std::pair(&w, &w0), std::pair(&y, &y0)}) {
    if (now != &out) {
      EXPECT_TRUE(*now == *before) << "an input was written";
    }
  }
  // Every element, each within the type's rounding of its own value too.
  EXPECT_EQ(CheckOutput(p, HostTensors{x0.data(), w0.data(), y0.data()},
                        out.data(), 0, rng),
            absl::OkStatus())
      << DescribeProblem(p) << " config [" << PerfConfigString(config) << "]";
}

constexpr Layout kNhwc = Layout::kNHWC, kNchw = Layout::kNCHW;
constexpr DataType kF32 = DataType::kFp32, kF16 = DataType::kFp16,
                   kB16 = DataType::kBf16;
constexpr Direction kF = Direction::kForward, kB = Direction::kBackwardData,
                    kW = Direction::kBackwardWeights;

constexpr uint32_t kDw = kGpuDepthwiseId, kWino = kGpuWinogradF2x3Id,
                   kTiled = kGpuDirectTiledId, kNaive = kGpuDirectNaiveId,
                   kIgemm = kGpuImplicitGemmId,
                   kIgemmStatic = kGpuImplicitGemmStaticId,
                   kFew = kGpuFewChannelsId;

// name, solver, layout, type, direction, n, c, k, groups, h, w, filter, pad,
// stride, dilation, config (empty: the solver's default). Each case's sources
// are builds in CMakeLists.txt.
// clang-format off
const LanesCase kCases[] = {
    {"depthwise_vector_f",             kDw, kNhwc, kF16, kF, 1, 32, 32, 32, 64, 112, 3, 1, 1, 1, {0, 4, 16, 8}},
    {"depthwise_vector_b_stride2",     kDw, kNhwc, kF16, kB, 2, 48, 48, 48, 28, 28,  3, 1, 2, 1, {3, 4, 16, 16}},
    {"depthwise_vector_w",             kDw, kNhwc, kF16, kW, 2, 32, 32, 32, 64, 112, 3, 1, 1, 1, {0, 4, 16, 8}},
    {"depthwise_rows_f",               kDw, kNchw, kF16, kF, 2, 8,  8,  8,  28, 28,  3, 1, 1, 1, {0, 4, 1}},
    {"depthwise_rows_f_prefetch",      kDw, kNchw, kF16, kF, 2, 8,  8,  8,  28, 28,  3, 1, 1, 1, {0, 8, 2}},
    {"depthwise_rows_b_stride2",       kDw, kNchw, kF16, kB, 2, 8,  8,  8,  28, 28,  3, 1, 2, 1, {0, 4, 1}},
    {"depthwise_rows_w",               kDw, kNchw, kF32, kW, 2, 8,  8,  8,  28, 28,  3, 1, 1, 1, {0, 4, 1}},
    {"depthwise_tile_f_stride3",       kDw, kNchw, kF32, kF, 2, 8,  8,  8,  20, 20,  3, 1, 3, 1, {16, 16, 1}},
    {"depthwise_tile_w_stride3",       kDw, kNchw, kF32, kW, 2, 8,  8,  8,  20, 20,  3, 1, 3, 1, {16, 16, 1}},
    {"depthwise_tile_f_channels_last", kDw, kNhwc, kB16, kF, 2, 24, 24, 24, 20, 20,  3, 1, 3, 1, {4, 8, 32}},
    {"winograd_f",                     kWino, kNchw, kF32, kF, 2, 24, 20, 1, 13, 13, 3, 1, 1, 1, {32, 32, 16, 4, 4}},
    {"winograd_b_channels_last",       kWino, kNhwc, kF16, kB, 2, 16, 24, 1, 10, 9,  3, 1, 1, 1, {64, 64, 8, 4, 4}},
    {"winograd_w",                     kWino, kNchw, kF32, kW, 2, 12, 16, 1, 10, 11, 3, 1, 1, 1, {32, 32, 16, 4, 4}},
    {"winograd_w_grouped_last",        kWino, kNhwc, kB16, kW, 2, 16, 16, 2, 9,  10, 3, 0, 1, 1, {32, 32, 16, 4, 4}},
    {"tiled_f_stride2_dilated",        kTiled, kNchw, kF32, kF, 2, 6,  10, 1, 17, 17, 3, 2, 2, 2, {8, 8, 4}},
    {"tiled_b_grouped_last",           kTiled, kNhwc, kF16, kB, 2, 8,  12, 2, 15, 15, 3, 1, 2, 1, {8, 8, 4}},
    {"tiled_w_splits",                 kTiled, kNchw, kF32, kW, 2, 6,  8,  1, 14, 14, 3, 1, 1, 1, {8, 8, 4}},
    {"tiled_w_channels_last",          kTiled, kNhwc, kB16, kW, 1, 6,  8,  2, 10, 10, 3, 1, 1, 1, {8, 16, 8}},
    {"naive_b_grouped_dilated_last",   kNaive, kNhwc, kB16, kB, 2, 6, 9, 3, 11, 10, 3, 2, 2, 2, {}},
    {"naive_w",                        kNaive, kNchw, kF16, kW, 2, 4, 6, 1, 9,  9,  3, 1, 1, 1, {}},
    {"igemm_f_channels_last",          kIgemm, kNhwc, kF16, kF, 2, 16, 32, 1, 12, 12, 3, 1, 1, 1, {}},
    {"igemm_b_stride2",                kIgemm, kNchw, kF32, kB, 2, 12, 8,  1, 13, 13, 3, 1, 2, 1, {}},
    {"igemm_w_splits",                 kIgemm, kNchw, kF32, kW, 4, 8,  16, 1, 16, 16, 3, 1, 1, 1, {64, 32, 16, 4, 4, 4}},
    {"igemm_static_f_grouped",         kIgemmStatic, kNchw, kF32, kF, 2, 8, 12, 2, 10, 10, 1, 0, 1, 1, {}},
    {"few_channels_f_7x7_stride2",     kFew, kNchw, kF32, kF, 2, 3, 16, 1, 20, 20, 7, 3, 2, 1, {}},
    {"few_channels_f_channels_last",   kFew, kNhwc, kF16, kF, 2, 4, 24, 1, 16, 16, 3, 1, 1, 1, {}},
    {"few_channels_w_7x7_stride2",     kFew, kNchw, kF32, kW, 2, 3, 16, 1, 20, 20, 7, 3, 2, 1, {}},
    {"few_channels_w_channels_last",   kFew, kNhwc, kB16, kW, 2, 3, 8,  1, 16, 16, 3, 1, 1, 1, {}},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Plans, KernelLanes, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<LanesCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace convtune
