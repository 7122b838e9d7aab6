// Every GPU solver's plans over a table of problems (every direction, type and
// layout; grouped, depthwise, 3-D): well formed, and every distinct kernel
// source they name compiles with NVRTC for sm_90 (and with hiprtc for gfx90a
// where hiprtc loads). Needs no GPU.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/sources.h"
#include "kernels/problem.h"
#include "server/solver_registry.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

ConvProblem Conv(int dims, int64_t n, int64_t c, std::array<int64_t, 3> in, int64_t k,
                 std::array<int64_t, 3> f, std::array<int64_t, 3> pad, int64_t stride,
                 int64_t dil, int64_t groups) {
  ConvProblem p;
  p.spatial_dims = dims;
  p.n = n, p.c = c, p.k = k, p.groups = groups;
  p.in = in, p.filter = f, p.pad = pad;
  p.stride = {dims == 3 ? stride : 1, stride, stride};
  p.dilation = {dims == 3 ? dil : 1, dil, dil};
  return p;
}

// Problems whose plans between them reach every kernel variant: 1x1 and
// large filters, strides, dilation, groups, depthwise with a multiplier,
// 3-D, and reductions long enough for backward-weights K splits.
std::vector<ConvProblem> Problems() {
  return {
      Conv(2, 2, 64, {1, 28, 28}, 64, {1, 3, 3}, {0, 1, 1}, 1, 1, 1),
      Conv(2, 4, 256, {1, 14, 14}, 128, {1, 1, 1}, {0, 0, 0}, 2, 1, 1),
      Conv(2, 1, 3, {1, 64, 64}, 16, {1, 7, 7}, {0, 3, 3}, 2, 1, 1),
      Conv(2, 1, 16, {1, 20, 20}, 16, {1, 3, 3}, {0, 2, 2}, 1, 2, 1),
      Conv(2, 2, 32, {1, 16, 16}, 64, {1, 3, 3}, {0, 1, 1}, 1, 1, 4),
      Conv(2, 2, 32, {1, 16, 16}, 32, {1, 3, 3}, {0, 1, 1}, 1, 1, 32),
      Conv(2, 1, 16, {1, 12, 12}, 32, {1, 5, 5}, {0, 2, 2}, 2, 1, 16),
      Conv(3, 1, 8, {6, 10, 10}, 16, {3, 3, 3}, {1, 1, 1}, 1, 1, 1),
      Conv(3, 1, 8, {6, 9, 9}, 8, {3, 3, 3}, {1, 1, 1}, 2, 1, 8),
  };
}

// The sources a solver's plans need, each with the problem that first
// needed it (for messages).
using SourceKey = std::pair<std::string, std::vector<std::string>>;
using SourceSet = std::map<SourceKey, std::string>;

void CheckPlan(const Solver& solver, const ConvProblem& p, const v1::ExecutionPlan& plan) {
  ASSERT_EQ(plan.solver_id(), solver.id());
  ASSERT_EQ(plan.workspace_bytes(), solver.WorkspaceBytes(p));
  ASSERT_FALSE(plan.steps().empty());
  for (const v1::KernelStep& step : plan.steps()) {
    ASSERT_FALSE(step.kernel().empty());
    ASSERT_GE(step.source_index(), 0);
    ASSERT_LT(step.source_index(), plan.sources_size());
    ASSERT_EQ(step.grid_size(), 3);
    ASSERT_EQ(step.block_size(), 3);
    EXPECT_GE(step.grid(0), 1u);
    EXPECT_LE(step.grid(1), 65535u);
    EXPECT_LE(step.grid(2), 65535u);
    EXPECT_GE(step.block(0), 1u);
    EXPECT_LE(step.block(0) * step.block(1) * step.block(2), 1024u);
    for (const v1::BufferRef& b : step.buffers()) {
      if (b.role() == v1::BUFFER_WORKSPACE) EXPECT_GT(plan.workspace_bytes(), 0);
    }
  }
}

// Builds applicable plans of `solver` and collects their sources. Tile
// configs are independent of type and layout in the kernels, so every
// config is compiled for fp32 NCHW and the default for the rest; a
// size-specialised solver compiles one source per problem, so it gets three.
int CollectSources(const Solver& solver, SourceSet* sources) {
  int plans = 0;
  const std::vector<ConvProblem> problems = Problems();
  for (size_t i = 0; i < problems.size(); ++i) {
    if (!solver.dynamic() && i != 0 && i != 4 && i != 7) continue;
    const ConvProblem& base = problems[i];
    for (Direction d : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
      for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
        for (Layout l : {Layout::kNCHW, Layout::kNHWC}) {
          ConvProblem p = base;
          p.direction = d, p.type = t, p.layout = l;
          EXPECT_EQ(ValidateProblem(p), absl::OkStatus());
          const absl::Status applies = solver.IsApplicable(p);
          if (!applies.ok()) {
            EXPECT_EQ(applies.code(), absl::StatusCode::kFailedPrecondition) << applies;
            continue;
          }
          std::vector<PerfConfig> configs = solver.ConfigSpace(p);
          if (t != DataType::kFp32 || l != Layout::kNCHW) configs = {solver.DefaultConfig(p)};
          EXPECT_EQ(solver.ValidateConfig(p, solver.DefaultConfig(p)), absl::OkStatus());
          for (const PerfConfig& config : configs) {
            absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
            EXPECT_TRUE(plan.ok()) << plan.status();
            if (!plan.ok()) continue;
            ++plans;
            CheckPlan(solver, p, *plan);
            for (const v1::KernelSource& s : plan->sources()) {
              SourceKey key{s.file(), {s.options().begin(), s.options().end()}};
              sources->emplace(key, DescribeProblem(p));
            }
          }
        }
      }
    }
  }
  return plans;
}

// Compiles every source on all cores; returns the failures.
std::vector<std::string> CompileAll(const KernelCompiler& compiler, const std::string& arch,
                                    const SourceSet& sources) {
  const std::vector<std::pair<SourceKey, std::string>> work(sources.begin(), sources.end());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  const auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      const auto& [key, problem] = work[i];
      CompileRequest req;
      req.file = key.first;
      req.options = key.second;
      req.arch = arch;
      absl::StatusOr<std::string> text = KernelSourceText(key.first, compiler.backend());
      absl::StatusOr<std::string> binary = absl::UnknownError("not compiled");
      if (text.ok()) {
        req.source = *std::move(text);
        binary = compiler.Compile(req);
      } else {
        binary = text.status();
      }
      if (!binary.ok() || binary->empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(absl::StrCat(key.first, " ", absl::StrJoin(key.second, " "), " (for ",
                                        problem, "): ", binary.status().ToString()));
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  return failures;
}

class GpuSolverCompile : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GpuSolverCompile, EveryPlanSourceCompiles) {
  const Solver* solver = SolverRegistry::Default().Find(GetParam());
  ASSERT_NE(solver, nullptr);
  EXPECT_EQ(solver->backend(), "gpu");
  SourceSet sources;
  const int plans = CollectSources(*solver, &sources);
  ASSERT_GT(plans, 0);
  ASSERT_FALSE(sources.empty());

  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
  DeviceInfo h200{.backend = "cuda", .arch = "sm_90"};
  if (solver->SupportsDevice(h200)) {
    const std::vector<std::string> failed = CompileAll(**nvrtc, "sm_90", sources);
    EXPECT_TRUE(failed.empty()) << failed.size() << " of " << sources.size()
                                << " sources fail on NVRTC:\n" << absl::StrJoin(failed, "\n");
  }

  DeviceInfo mi200{.backend = "hip", .arch = "gfx90a"};
  if (!solver->SupportsDevice(mi200)) return;
  absl::StatusOr<std::unique_ptr<KernelCompiler>> hiprtc = MakeHiprtcCompiler();
  if (!hiprtc.ok()) {
    GTEST_SKIP() << "NVRTC compiled " << sources.size() << " sources; hiprtc: "
                 << hiprtc.status();
  }
  const std::vector<std::string> failed = CompileAll(**hiprtc, "gfx90a", sources);
  EXPECT_TRUE(failed.empty()) << failed.size() << " of " << sources.size()
                              << " sources fail on hiprtc:\n" << absl::StrJoin(failed, "\n");
}

INSTANTIATE_TEST_SUITE_P(AllGpuSolvers, GpuSolverCompile,
                         ::testing::Values(kGpuDirectNaiveId, kGpuImplicitGemmId,
                                           kGpuImplicitGemmStaticId, kGpuDepthwiseId,
                                           kGpuTensorCoreIgemmId),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return absl::StrCat("solver", info.param);
                         });

TEST(GpuSolvers, IdsNamesAndDevices) {
  const std::map<uint32_t, std::string> want = {{101, "gpu_direct_naive"},
                                                {102, "gpu_implicit_gemm"},
                                                {103, "gpu_implicit_gemm_static"},
                                                {104, "gpu_depthwise"},
                                                {105, "gpu_tensor_core_igemm"}};
  std::map<uint32_t, std::string> got;
  for (const auto& s : MakeGpuSolvers()) {
    got[s->id()] = std::string(s->name());
    EXPECT_EQ(s->backend(), "gpu");
    EXPECT_EQ(s->dynamic(), s->id() != kGpuImplicitGemmStaticId) << s->name();
    EXPECT_EQ(SolverRegistry::Default().Find(s->id())->name(), s->name());
  }
  EXPECT_EQ(got, want);
  const Solver* tc = SolverRegistry::Default().Find(kGpuTensorCoreIgemmId);
  EXPECT_TRUE(tc->SupportsDevice({.backend = "cuda", .arch = "sm_90"}));
  EXPECT_TRUE(tc->SupportsDevice({.backend = "cuda", .arch = "sm_80"}));
  EXPECT_FALSE(tc->SupportsDevice({.backend = "cuda", .arch = "sm_75"}));
  EXPECT_FALSE(tc->SupportsDevice({.backend = "hip", .arch = "gfx90a"}));
}

TEST(GpuSolvers, ConstraintsAreNamed) {
  ConvProblem p;
  p.n = 1, p.c = 64, p.k = 64, p.in = {1, 8, 8}, p.filter = {1, 3, 3};
  const absl::Status tc = SolverRegistry::Default().Find(kGpuTensorCoreIgemmId)->IsApplicable(p);
  EXPECT_EQ(tc.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tc.message().find("fp16 or bf16"), std::string::npos) << tc;
  const absl::Status dw = SolverRegistry::Default().Find(kGpuDepthwiseId)->IsApplicable(p);
  EXPECT_EQ(dw.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(dw.message().find("C/G"), std::string::npos) << dw;
  p.groups = 64;
  EXPECT_EQ(SolverRegistry::Default().Find(kGpuDepthwiseId)->IsApplicable(p), absl::OkStatus());
  // 2^31 elements and more do not fit the 32-bit indices of implicit GEMM.
  p.groups = 1, p.n = 1024, p.in = {1, 256, 256};
  const absl::Status big = SolverRegistry::Default().Find(kGpuImplicitGemmId)->IsApplicable(p);
  EXPECT_EQ(big.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SolverRegistry::Default().Find(kGpuDirectNaiveId)->IsApplicable(p), absl::OkStatus());
}

TEST(GpuSolvers, BackwardWeightsSplitsIntoWorkspace) {
  ConvProblem p;
  p.n = 8, p.c = 64, p.k = 64, p.in = {1, 56, 56}, p.filter = {1, 3, 3}, p.pad = {0, 1, 1};
  p.direction = Direction::kBackwardWeights;
  const Solver* s = SolverRegistry::Default().Find(kGpuImplicitGemmId);
  EXPECT_EQ(s->WorkspaceBytes(p), 16 * p.w_elements() * 4);
  // Few output tiles and a long reduction: the default splits it.
  const PerfConfig def = s->DefaultConfig(p);
  EXPECT_GT(def.back(), 1);
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, def);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->steps_size(), 2);
  EXPECT_EQ(plan->steps(1).kernel(), "conv_igemm_reduce");
  p.direction = Direction::kForward;
  EXPECT_EQ(s->WorkspaceBytes(p), 0);
  for (const PerfConfig& c : s->ConfigSpace(p)) EXPECT_EQ(c.back(), 1);
}

}  // namespace
}  // namespace convtune
