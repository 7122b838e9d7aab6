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
#include "tests/server/solver_check.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

class CpuSolverCorrectness : public ::testing::TestWithParam<Combo> {};

TEST_P(CpuSolverCorrectness, MatchesReferenceOnEveryShapeAndConfig) {
  const Combo combo = GetParam();
  const Solver* solver = SolverRegistry::Default().Find(combo.solver_id);
  ASSERT_NE(solver, nullptr);
  CpuDevice device;
  int applicable = 0;
  CheckEveryShape(device, *solver, combo.direction, combo.type, &applicable);
  if (HasFatalFailure()) return;
  if (combo.solver_id == kCpuWinogradF2x3Id &&
      combo.direction == Direction::kBackwardWeights) {
    EXPECT_EQ(applicable, 0);
  } else {
    EXPECT_GE(applicable, 4) << "too few shapes apply to this solver";
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllSolvers, CpuSolverCorrectness,
    ::testing::ValuesIn(CombosOf({kCpuDirectNaiveId, kCpuDirectTiledId,
                                  kCpuIm2colGemmId, kCpuGemm1x1Id,
                                  kCpuWinogradF2x3Id})),
    ComboName);

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
