// oneDNN's solvers on the CPU device: listed with their library, in every
// direction, type and layout over the solver shapes and every config they
// offer, against the float64 reference; and ranked by a real find beside
// the own kernels.
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/onednn_library.h"
#include "kernels/cpu_device.h"
#include "server/core.h"
#include "server/solver_registry.h"
#include "server/solvers/library_solver.h"
#include "server/thread_pool.h"
#include "storage/memory_store.h"
#include "tests/server/solver_check.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class OnednnSolvers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu::Onednn() == nullptr) {
      GTEST_SKIP() << "convtune was built without oneDNN (libdnnl-dev)";
    }
    registry_ = SolverRegistry::WithLibraries(device_);
  }

  CpuDevice device_;
  std::unique_ptr<SolverRegistry> registry_;
};

TEST_F(OnednnSolvers, AreListedWithTheirLibraryAndStableIds) {
  EXPECT_THAT(device_.info().libraries, StartsWith("onednn2."));
  EXPECT_THAT(device_.info().Key(), HasSubstr(device_.info().libraries));
  const std::map<uint32_t, std::string> want = {
      {10, "onednn_direct"}, {11, "onednn_winograd"}, {12, "onednn_auto"}};
  for (const auto& [id, name] : want) {
    const Solver* s = registry_->Find(id);
    ASSERT_NE(s, nullptr) << id;
    EXPECT_EQ(s->name(), name);
    EXPECT_EQ(s->library(), cpu::Onednn()->version());
    EXPECT_EQ(s->backend(), v1::CPU);
    EXPECT_TRUE(SolverRegistry::Runs(*s, device_.info()));
  }
  // The own kernels stay as they are, with no library.
  const Solver* own = registry_->Find(1);
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->library(), "");
  EXPECT_EQ(SolverRegistry::Default().Find(10), nullptr);
}

TEST_F(OnednnSolvers, RejectConfigsTheLibraryDoesNotOffer) {
  const Solver* s = registry_->Find(cpu::kOnednnDirectId);
  const ConvProblem p = Conv2d(1, 16, 8, 8, 16, 3, 3, 1);
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(s->ValidateConfig(p, {2}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->ValidateConfig(p, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->ValidateConfig(p, s->DefaultConfig(p)), absl::OkStatus());
  EXPECT_FALSE(s->MakePlan(p, {7}).ok());
}

TEST_F(OnednnSolvers, FailedPreconditionSaysWhy) {
  // oneDNN has no fp16 convolution on CPUs without AVX-512 FP16, and its
  // Winograd takes 3x3 stride-1 filters only.
  ConvProblem p = Conv2d(1, 16, 9, 9, 16, 5, 5, 2);
  const absl::Status s =
      registry_->Find(cpu::kOnednnWinogradId)->IsApplicable(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("Winograd"));
}

class OnednnCorrectness : public ::testing::TestWithParam<Combo> {};

TEST_P(OnednnCorrectness, MatchesReferenceOnEveryShapeLayoutAndConfig) {
  if (cpu::Onednn() == nullptr) GTEST_SKIP() << "built without oneDNN";
  const Combo combo = GetParam();
  CpuDevice device;
  auto registry = SolverRegistry::WithLibraries(device);
  const Solver* solver = registry->Find(combo.solver_id);
  ASSERT_NE(solver, nullptr);
  int applicable = 0;
  std::vector<PerfConfig> configs;
  CheckEveryShape(
      device, *solver, combo.direction, combo.type, &applicable, &configs,
      [&](const ConvProblem& p, const absl::Status& s) {
        if (!s.ok()) {
          EXPECT_THAT(std::string(s.message()), HasSubstr("oneDNN"));
        } else {
          EXPECT_EQ(solver->DefaultConfig(p), solver->ConfigSpace(p).front());
        }
      });
  if (HasFatalFailure()) return;
  std::set<int64_t> layouts_run;
  for (const PerfConfig& c : configs) layouts_run.insert(c[0]);
  // The direct and automatic methods run every fp32 shape on the caller's
  // layouts and on oneDNN's blocked ones.
  if (combo.type == DataType::kFp32 &&
      combo.solver_id != cpu::kOnednnWinogradId) {
    EXPECT_GE(applicable, 20);
    EXPECT_EQ(layouts_run, (std::set<int64_t>{0, 1}));
  }
}

INSTANTIATE_TEST_SUITE_P(AllMethods, OnednnCorrectness,
                         ::testing::ValuesIn(CombosOf({cpu::kOnednnDirectId,
                                                       cpu::kOnednnWinogradId,
                                                       cpu::kOnednnAutoId})),
                         ComboName);

// A NORMAL find on the CPU device ranks oneDNN's solvers beside the own
// kernels: each library result carries the library, and its stored config is
// one the library offers.
TEST_F(OnednnSolvers, FindRanksThemBesideTheOwnKernels) {
  std::unique_ptr<storage::Store> store = storage::NewMemoryStore();
  ThreadPool compile("t-compile", 2), timing("t-timing", 1);
  Core::Options options;
  options.timing.max_repeats = 3;
  Core core(device_, *registry_, *store, compile, timing, options);
  ConvProblem p = Conv2d(2, 32, 14, 14, 32, 3, 3, 1);
  FindParams params;
  params.mode = v1::NORMAL;
  absl::StatusOr<FindOutcome> found = core.find().FindBlocking(p, params);
  ASSERT_TRUE(found.ok()) << found.status();
  int library = 0, own = 0;
  for (const v1::PerfResult& r : found->record.results()) {
    EXPECT_TRUE(r.measured());
    if (r.library().empty()) {
      ++own;
      continue;
    }
    ++library;
    EXPECT_EQ(r.library(), cpu::Onednn()->version());
    const Solver* s = registry_->Find(r.solver_id());
    ASSERT_NE(s, nullptr);
    PerfConfig config(r.perf_config().begin(), r.perf_config().end());
    EXPECT_EQ(s->ValidateConfig(p, config), absl::OkStatus());
  }
  EXPECT_GE(library, 2);
  EXPECT_GE(own, 3);
  core.Shutdown();
}

// A plan asks for the workspace its process's oneDNN needs; a step that
// gives less (another process's oneDNN needing more) is refused, not run.
TEST_F(OnednnSolvers, AStepGivingTooLittleWorkspaceIsRefused) {
  const Solver* s = registry_->Find(cpu::kOnednnDirectId);
  const ConvProblem p = Conv2d(1, 16, 8, 8, 16, 3, 3, 1);
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, {1});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->workspace_bytes(), 0) << "blocked layouts need a workspace";
  v1::KernelStep step = plan->steps(0);
  std::vector<float> x(p.x_elements()), w(p.w_elements()), y(p.y_elements());
  std::vector<char> ws(plan->workspace_bytes());
  std::vector<void*> buffers = {x.data(), w.data(), y.data(), ws.data()};
  ASSERT_EQ(cpu::OnednnConvKernel(step, buffers), absl::OkStatus());
  step.set_scalars(step.scalars_size() - 1, plan->workspace_bytes() - 64);
  EXPECT_EQ(cpu::OnednnConvKernel(step, buffers).code(),
            absl::StatusCode::kResourceExhausted);
  step.mutable_buffers(3)->set_role(v1::BUFFER_X);
  EXPECT_EQ(cpu::OnednnConvKernel(step, buffers).code(),
            absl::StatusCode::kInvalidArgument);
}

// Under a workspace limit a find times only the configs that fit: of the
// direct method's two configs (which differ in workspace) the larger is left
// out, the other kept, and no stored result needs more than the limit.
TEST_F(OnednnSolvers, FindUnderALimitTimesOnlyConfigsThatFit) {
  std::unique_ptr<storage::Store> store = storage::NewMemoryStore();
  ThreadPool compile("t-compile", 2), timing("t-timing", 1);
  Core::Options options;
  options.timing.max_repeats = 3;
  Core core(device_, *registry_, *store, compile, timing, options);
  const ConvProblem p = Conv2d(1, 16, 8, 8, 16, 3, 3, 1);
  const Solver* s = registry_->Find(cpu::kOnednnDirectId);
  const int64_t ws0 = s->ConfigWorkspaceBytes(p, {0}),
                ws1 = s->ConfigWorkspaceBytes(p, {1});
  ASSERT_NE(ws0, ws1);
  const PerfConfig keep = {ws0 < ws1 ? 0 : 1};
  const int64_t limit = std::min(ws0, ws1);
  FindParams params;
  params.mode = v1::NORMAL;
  params.workspace_limit = limit;
  absl::StatusOr<FindOutcome> found = core.find().FindBlocking(p, params);
  ASSERT_TRUE(found.ok()) << found.status();
  bool direct = false;
  for (const v1::PerfResult& r : found->record.results()) {
    EXPECT_LE(r.workspace_bytes(), limit) << r.solver_name();
    if (r.solver_id() == cpu::kOnednnDirectId) {
      direct = true;
      EXPECT_EQ(PerfConfig(r.perf_config().begin(), r.perf_config().end()),
                keep);
    }
  }
  EXPECT_TRUE(direct);
  core.Shutdown();
}

}  // namespace
}  // namespace convtune
