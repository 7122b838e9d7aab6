// Every CPU solver, in every direction and type, over a table of small
// problems and every perf config, against the float64 reference.
#include "server/solvers/cpu_solvers.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_device.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/solver_registry.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

struct Shape {
  std::string name;
  ConvProblem p;
};

ConvProblem Conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                   int64_t fh, int64_t fw, int64_t pad, int64_t stride = 1,
                   int64_t dil = 1, int64_t groups = 1) {
  ConvProblem p;
  p.n = n, p.c = c, p.k = k, p.groups = groups;
  p.in = {1, h, w};
  p.filter = {1, fh, fw};
  p.pad = {0, pad, pad};
  p.stride = {1, stride, stride};
  p.dilation = {1, dil, dil};
  return p;
}

ConvProblem Conv3d(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w,
                   int64_t k, int64_t f, int64_t pad, int64_t stride = 1,
                   int64_t groups = 1) {
  ConvProblem p;
  p.spatial_dims = 3;
  p.n = n, p.c = c, p.k = k, p.groups = groups;
  p.in = {d, h, w};
  p.filter = {f, f, f};
  p.pad = {pad, pad, pad};
  p.stride = {stride, stride, stride};
  return p;
}

std::vector<Shape> Shapes() {
  ConvProblem asym = Conv2d(1, 4, 6, 8, 3, 3, 1, 0);
  asym.pad = {0, 1, 0};
  return {
      {"3x3 pad1", Conv2d(2, 3, 7, 9, 4, 3, 3, 1)},
      {"3x3 no pad odd", Conv2d(1, 5, 9, 7, 3, 3, 3, 0)},
      {"3x3 stride2", Conv2d(1, 4, 9, 8, 6, 3, 3, 1, 2)},
      {"3x3 dilation2", Conv2d(1, 3, 10, 9, 5, 3, 3, 2, 1, 2)},
      {"3x3 pad3", Conv2d(1, 2, 5, 6, 3, 3, 3, 3)},
      {"groups2", Conv2d(2, 4, 6, 7, 6, 3, 3, 1, 1, 1, 2)},
      {"depthwise", Conv2d(1, 6, 7, 7, 6, 3, 3, 1, 1, 1, 6)},
      {"5x5", Conv2d(1, 3, 11, 10, 4, 5, 5, 2)},
      {"3x1", asym},
      {"1x1", Conv2d(2, 8, 5, 6, 5, 1, 1, 0)},
      {"1x1 groups2", Conv2d(1, 6, 4, 5, 4, 1, 1, 0, 1, 1, 2)},
      {"1x1 stride2", Conv2d(1, 6, 7, 7, 4, 1, 1, 0, 2)},
      {"resnet 3x3", Conv2d(1, 16, 14, 14, 16, 3, 3, 1)},
      {"resnet 1x1", Conv2d(1, 32, 7, 7, 16, 1, 1, 0)},
      {"many filters, few outputs", Conv2d(1, 4, 5, 5, 40, 3, 3, 0)},
      {"large image", Conv2d(1, 3, 40, 41, 10, 3, 3, 1)},
      {"resnet 7x7 s2", Conv2d(1, 3, 24, 24, 8, 7, 7, 3, 2)},
      {"3d 3x3x3", Conv3d(1, 3, 5, 6, 5, 4, 3, 1)},
      {"3d stride2 groups2", Conv3d(2, 4, 5, 5, 6, 4, 3, 1, 2, 2)},
      {"3d 1x1x1", Conv3d(1, 5, 3, 4, 5, 6, 1, 0)},
  };
}

struct Buffers {
  std::unique_ptr<DeviceBuffer> x, w, y, ws;
};

// Allocates x, w, y with fresh random inputs and a NaN-poisoned output (and
// workspace), runs the plan and compares with the reference.
void RunAndCheck(CpuDevice& device, const ConvProblem& p, const Solver& solver,
                 const PerfConfig& config, std::mt19937_64& rng) {
  SCOPED_TRACE(absl::StrCat("config [", PerfConfigString(config), "]"));
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  FillRandom(y.data(), p.type, p.y_elements(), rng);
  std::vector<char>* out = &ByTensor(p.output(), x, w, y);
  FillNaN(out->data(), p.type, out->size() / ElementBytes(p.type));
  const std::vector<ReferenceValue> want =
      ReferenceOutput(p, {x.data(), w.data(), y.data()});

  absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t ws_bytes = solver.WorkspaceBytes(p);
  ASSERT_EQ(plan->workspace_bytes(), ws_bytes);
  ASSERT_EQ(plan->solver_id(), solver.id());
  std::vector<float> ws(ws_bytes / sizeof(float) + 1);
  FillNaN(ws.data(), DataType::kFp32, ws.size());

  PlanBuffers buffers{x.data(), w.data(), y.data(),
                      ws_bytes > 0 ? ws.data() : nullptr, ws_bytes};
  ASSERT_EQ(ExecutePlan(device, *plan, buffers), absl::OkStatus());
  EXPECT_EQ(CompareOutput(p, want, out->data()), absl::OkStatus());
}

struct Combo {
  uint32_t solver_id;
  Direction direction;
  DataType type;
};

void PrintTo(const Combo& c, std::ostream* os) {
  *os << "solver " << c.solver_id << " " << DirectionName(c.direction) << " "
      << DataTypeName(c.type);
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  return absl::StrCat("solver", info.param.solver_id, "_",
                      DirectionName(info.param.direction), "_",
                      DataTypeName(info.param.type));
}

class CpuSolverCorrectness : public ::testing::TestWithParam<Combo> {};

TEST_P(CpuSolverCorrectness, MatchesReferenceOnEveryShapeAndConfig) {
  const Combo combo = GetParam();
  const Solver* solver = SolverRegistry::Default().Find(combo.solver_id);
  ASSERT_NE(solver, nullptr);
  CpuDevice device;
  std::random_device seeds;
  int applicable = 0;
  for (const Shape& shape : Shapes()) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      ConvProblem p = shape.p;
      p.layout = layout;
      p.direction = combo.direction;
      p.type = combo.type;
      ASSERT_EQ(ValidateProblem(p), absl::OkStatus()) << shape.name;
      const absl::Status applies = solver->IsApplicable(p);
      if (!applies.ok()) {
        EXPECT_EQ(applies.code(), absl::StatusCode::kFailedPrecondition)
            << applies;
        continue;
      }
      ++applicable;
      const uint64_t seed = (uint64_t{seeds()} << 32) | seeds();
      std::mt19937_64 rng(seed);
      SCOPED_TRACE(
          absl::StrCat(shape.name, ": ", DescribeProblem(p), " seed ", seed));
      const std::vector<PerfConfig> space = solver->ConfigSpace(p);
      ASSERT_FALSE(space.empty());
      for (const PerfConfig& config : space) {
        ASSERT_EQ(solver->ValidateConfig(p, config), absl::OkStatus());
        RunAndCheck(device, p, *solver, config, rng);
      }
    }
  }
  if (combo.solver_id == kCpuWinogradF2x3Id &&
      combo.direction == Direction::kBackwardWeights) {
    EXPECT_EQ(applicable, 0);
  } else {
    EXPECT_GE(applicable, 4) << "too few shapes apply to this solver";
  }
}

std::vector<Combo> AllCombos() {
  std::vector<Combo> combos;
  for (uint32_t id : {kCpuDirectNaiveId, kCpuDirectTiledId, kCpuIm2colGemmId,
                      kCpuGemm1x1Id, kCpuWinogradF2x3Id}) {
    for (Direction d : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
      for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
        combos.push_back({id, d, t});
      }
    }
  }
  return combos;
}

INSTANTIATE_TEST_SUITE_P(AllSolvers, CpuSolverCorrectness,
                         ::testing::ValuesIn(AllCombos()), ComboName);

TEST(CpuSolvers, IdsAreUniqueAndStable) {
  const std::map<uint32_t, std::string> want = {{1, "cpu_direct_naive"},
                                                {2, "cpu_direct_tiled"},
                                                {3, "cpu_im2col_gemm"},
                                                {4, "cpu_gemm_1x1"},
                                                {5, "cpu_winograd_f2x3"}};
  std::map<uint32_t, std::string> got;
  for (const auto& s : MakeCpuSolvers()) {
    EXPECT_TRUE(got.emplace(s->id(), std::string(s->name())).second)
        << "id " << s->id();
    EXPECT_EQ(s->backend(), v1::CPU);
  }
  EXPECT_EQ(got, want);
  for (const auto& [id, name] : want) {
    const Solver* s = SolverRegistry::Default().Find(id);
    ASSERT_NE(s, nullptr) << id;
    EXPECT_EQ(s->name(), name);
  }
}

TEST(CpuSolvers, FamiliesAndDynamic) {
  const auto& r = SolverRegistry::Default();
  EXPECT_EQ(r.Find(kCpuDirectNaiveId)->family(), v1::DIRECT);
  EXPECT_EQ(r.Find(kCpuDirectTiledId)->family(), v1::DIRECT);
  EXPECT_EQ(r.Find(kCpuIm2colGemmId)->family(), v1::GEMM);
  EXPECT_EQ(r.Find(kCpuGemm1x1Id)->family(), v1::GEMM);
  EXPECT_EQ(r.Find(kCpuWinogradF2x3Id)->family(), v1::WINOGRAD);
  EXPECT_TRUE(r.Find(kCpuDirectNaiveId)->dynamic());
  EXPECT_TRUE(r.Find(kCpuDirectTiledId)->dynamic());
}

void ExpectNotApplicable(uint32_t id, const ConvProblem& p,
                         absl::string_view constraint) {
  const absl::Status s = SolverRegistry::Default().Find(id)->IsApplicable(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
      << DescribeProblem(p);
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(constraint)));
}

TEST(CpuSolvers, WinogradNamesTheFailingConstraint) {
  ExpectNotApplicable(kCpuWinogradF2x3Id, Conv2d(1, 3, 9, 9, 4, 5, 5, 2),
                      "filter");
  ExpectNotApplicable(kCpuWinogradF2x3Id, Conv2d(1, 3, 9, 9, 4, 5, 5, 2),
                      "5x5");
  ExpectNotApplicable(kCpuWinogradF2x3Id, Conv2d(1, 3, 9, 9, 4, 3, 3, 1, 2),
                      "stride");
  ExpectNotApplicable(kCpuWinogradF2x3Id, Conv2d(1, 3, 9, 9, 4, 3, 3, 2, 1, 2),
                      "dilation");
  ExpectNotApplicable(kCpuWinogradF2x3Id, Conv3d(1, 3, 5, 5, 5, 4, 3, 1),
                      "spatial_dims");
  ConvProblem w = Conv2d(1, 3, 9, 9, 4, 3, 3, 1);
  w.direction = Direction::kBackwardWeights;
  ExpectNotApplicable(kCpuWinogradF2x3Id, w, "direction");
}

TEST(CpuSolvers, Gemm1x1NamesTheFailingConstraint) {
  ExpectNotApplicable(kCpuGemm1x1Id, Conv2d(1, 3, 9, 9, 4, 3, 3, 1), "filter");
  ExpectNotApplicable(kCpuGemm1x1Id, Conv2d(1, 3, 9, 9, 4, 1, 1, 1), "pad");
  ExpectNotApplicable(kCpuGemm1x1Id, Conv2d(1, 3, 9, 9, 4, 1, 1, 0, 2),
                      "stride");
  EXPECT_EQ(SolverRegistry::Default()
                .Find(kCpuGemm1x1Id)
                ->WorkspaceBytes(Conv2d(1, 3, 9, 9, 4, 1, 1, 0)),
            0);
}

TEST(CpuSolvers, TiledRejectsConfigsOutsideItsSpace) {
  const Solver* s = SolverRegistry::Default().Find(kCpuDirectTiledId);
  const ConvProblem p = Conv2d(1, 3, 9, 9, 4, 3, 3, 1);
  const std::vector<PerfConfig> space = s->ConfigSpace(p);
  EXPECT_GE(space.size(), 6u);
  EXPECT_NE(std::find(space.begin(), space.end(), s->DefaultConfig(p)),
            space.end());
  EXPECT_EQ(s->ValidateConfig(p, {5, 8}).code(),
            absl::StatusCode::kInvalidArgument);
}

// Every plan that needs workspace refuses to run on one byte less.
TEST(CpuSolvers, TooLittleWorkspaceIsResourceExhausted) {
  CpuDevice device;
  int checked = 0;
  for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    for (const auto& solver : MakeCpuSolvers()) {
      ConvProblem p = Conv2d(1, 4, 8, 8, 4, 3, 3, 1);
      if (solver->id() == kCpuGemm1x1Id) p = Conv2d(1, 4, 8, 8, 4, 1, 1, 0);
      p.type = type;
      ASSERT_EQ(solver->IsApplicable(p), absl::OkStatus()) << solver->name();
      const int64_t need = solver->WorkspaceBytes(p);
      if (need == 0) continue;
      ++checked;
      std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes()),
          ws(need);
      absl::StatusOr<v1::ExecutionPlan> plan =
          solver->MakePlan(p, solver->DefaultConfig(p));
      ASSERT_TRUE(plan.ok());
      PlanBuffers short_ws{x.data(), w.data(), y.data(), ws.data(), need - 1};
      EXPECT_EQ(ExecutePlan(device, *plan, short_ws).code(),
                absl::StatusCode::kResourceExhausted)
          << solver->name();
      PlanBuffers no_ws{x.data(), w.data(), y.data(), nullptr, 0};
      EXPECT_EQ(ExecutePlan(device, *plan, no_ws).code(),
                absl::StatusCode::kResourceExhausted);
    }
  }
  // im2col and winograd at every type, gemm_1x1 for the 16-bit types.
  EXPECT_EQ(checked, 8);
}

}  // namespace
}  // namespace convtune
