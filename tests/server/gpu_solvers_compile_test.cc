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
#include <tuple>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/launch_args.h"
#include "kernels/gpu/sources.h"
#include "kernels/index_math.h"
#include "kernels/problem.h"
#include "server/solver_registry.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

bool Has(const std::vector<PerfConfig>& list, const PerfConfig& c) {
  return std::find(list.begin(), list.end(), c) != list.end();
}

ConvProblem Conv(int dims, int64_t n, int64_t c, std::array<int64_t, 3> in,
                 int64_t k, std::array<int64_t, 3> f,
                 std::array<int64_t, 3> pad, int64_t stride, int64_t dil,
                 int64_t groups) {
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
// 3-D, reductions long enough for backward-weights K splits, and a grouped
// 1x1 with stride 1 (the BLAS 1x1 solver).
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
      Conv(2, 2, 64, {1, 14, 14}, 32, {1, 1, 1}, {0, 0, 0}, 1, 1, 2),
  };
}

// The sources a solver's plans need, each with the problem that first
// needed it (for messages).
// File, options, arch suffix.
using SourceKey =
    std::tuple<std::string, std::vector<std::string>, std::string>;
using SourceSet = std::map<SourceKey, std::string>;

void CheckPlan(const Solver& solver, const ConvProblem& p,
               const v1::ExecutionPlan& plan) {
  ASSERT_EQ(plan.solver_id(), solver.id());
  const PerfConfig config(plan.perf_config().begin(), plan.perf_config().end());
  // An empty config is a config of its own where workspaces differ by it.
  ASSERT_EQ(plan.workspace_bytes(), solver.workspace_depends_on_config()
                                        ? solver.ConfigWorkspaceBytes(p, config)
                                        : solver.WorkspaceBytes(p));
  ASSERT_FALSE(plan.steps().empty());
  for (const v1::KernelStep& step : plan.steps()) {
    ASSERT_FALSE(step.kernel().empty());
    if (gpu::IsLibraryStep(step)) {
      // Run by the device's BLAS: a well-formed GEMM, no source, no geometry.
      EXPECT_EQ(gpu::DecodeBlasGemm(step).status(), absl::OkStatus());
      EXPECT_TRUE(step.code_object_hash().empty());
      EXPECT_TRUE(step.grid().empty());
      for (const v1::BufferRef& b : step.buffers()) {
        if (b.role() == v1::BUFFER_WORKSPACE)
          EXPECT_LT(b.offset_bytes(), plan.workspace_bytes());
      }
      continue;
    }
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
      if (b.role() == v1::BUFFER_WORKSPACE)
        EXPECT_GT(plan.workspace_bytes(), 0);
    }
  }
}

// Builds applicable plans of `solver` and collects their sources. Tile
// configs are independent of type and layout in the kernels, so every
// config is compiled for the first applicable type and layout of a problem
// and direction (fp32 NCHW, or fp16 NCHW for 16-bit solvers) and the
// default for the rest; a size-specialised solver compiles one source per
// problem, so it gets three.
int CollectSources(const Solver& solver, SourceSet* sources) {
  int plans = 0;
  const std::vector<ConvProblem> problems = Problems();
  for (size_t i = 0; i < problems.size(); ++i) {
    if (!solver.dynamic() && i != 0 && i != 4 && i != 7) continue;
    const ConvProblem& base = problems[i];
    for (Direction d : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
      bool whole_space = true;
      for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
        for (Layout l : {Layout::kNCHW, Layout::kNHWC}) {
          ConvProblem p = base;
          p.direction = d, p.type = t, p.layout = l;
          EXPECT_EQ(ValidateProblem(p), absl::OkStatus());
          const absl::Status applies = solver.IsApplicable(p);
          if (!applies.ok()) {
            EXPECT_EQ(applies.code(), absl::StatusCode::kFailedPrecondition)
                << applies;
            continue;
          }
          std::vector<PerfConfig> configs = solver.ConfigSpace(p);
          if (!whole_space) configs = {solver.DefaultConfig(p)};
          whole_space = false;
          EXPECT_EQ(solver.ValidateConfig(p, solver.DefaultConfig(p)),
                    absl::OkStatus());
          for (const PerfConfig& config : configs) {
            absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
            EXPECT_TRUE(plan.ok()) << plan.status();
            if (!plan.ok()) continue;
            ++plans;
            CheckPlan(solver, p, *plan);
            for (const v1::KernelSource& s : plan->sources()) {
              SourceKey key{s.file(),
                            {s.options().begin(), s.options().end()},
                            s.arch_suffix()};
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
std::vector<std::string> CompileAll(const KernelCompiler& compiler,
                                    const std::string& arch,
                                    const SourceSet& sources) {
  const std::vector<std::pair<SourceKey, std::string>> work(sources.begin(),
                                                            sources.end());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  const auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      const auto& [key, problem] = work[i];
      CompileRequest req;
      const auto& [file, options, suffix] = key;
      req.file = file;
      req.options = options;
      absl::StatusOr<std::string> target = SourceArch(arch, suffix);
      EXPECT_TRUE(target.ok()) << target.status();
      req.arch = target.value_or(arch);
      absl::StatusOr<std::string> text =
          KernelSourceText(file, compiler.backend());
      absl::StatusOr<std::string> binary = absl::UnknownError("not compiled");
      if (text.ok()) {
        req.source = *std::move(text);
        binary = compiler.Compile(req);
      } else {
        binary = text.status();
      }
      if (!binary.ok() || binary->empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(absl::StrCat(file, " ", absl::StrJoin(options, " "),
                                        " ", req.arch, " (for ", problem,
                                        "): ", binary.status().ToString()));
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  return failures;
}

// Every source compiles on NVRTC for sm_90 (sm_90a where it asks).
void ExpectCompilesOnNvrtc(const SourceSet& sources) {
  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
  const std::vector<std::string> failed = CompileAll(**nvrtc, "sm_90", sources);
  EXPECT_TRUE(failed.empty()) << failed.size() << " of " << sources.size()
                              << " sources fail on NVRTC:\n"
                              << absl::StrJoin(failed, "\n");
}

class GpuSolverCompile : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GpuSolverCompile, EveryPlanSourceCompiles) {
  const Solver* solver = SolverRegistry::Default().Find(GetParam());
  ASSERT_NE(solver, nullptr);
  EXPECT_EQ(solver->backend(), v1::GPU);
  SourceSet sources;
  const int plans = CollectSources(*solver, &sources);
  ASSERT_GT(plans, 0);
  ASSERT_FALSE(sources.empty());

  DeviceInfo h200{.backend = v1::CUDA, .arch = "sm_90", .blas = "cublas13.0.0"};
  if (solver->SupportsDevice(h200)) ExpectCompilesOnNvrtc(sources);

  DeviceInfo mi200{
      .backend = v1::HIP, .arch = "gfx90a", .blas = "rocblas2.45.0"};
  if (!solver->SupportsDevice(mi200)) return;
  absl::StatusOr<std::unique_ptr<KernelCompiler>> hiprtc = MakeHiprtcCompiler();
  if (!hiprtc.ok()) {
    GTEST_SKIP() << "NVRTC compiled " << sources.size()
                 << " sources; hiprtc: " << hiprtc.status();
  }
  const std::vector<std::string> failed =
      CompileAll(**hiprtc, "gfx90a", sources);
  EXPECT_TRUE(failed.empty()) << failed.size() << " of " << sources.size()
                              << " sources fail on hiprtc:\n"
                              << absl::StrJoin(failed, "\n");
}

INSTANTIATE_TEST_SUITE_P(
    AllGpuSolvers, GpuSolverCompile,
    ::testing::Values(kGpuDirectNaiveId, kGpuImplicitGemmId,
                      kGpuImplicitGemmStaticId, kGpuDepthwiseId,
                      kGpuTensorCoreIgemmId, kGpuIm2colGemmBlasId,
                      kGpuGemm1x1BlasId, kGpuWinogradF2x3Id, kGpuDirectTiledId,
                      kGpuWinogradBlasId, kGpuTensorCorePipelinedId,
                      kGpuTensorCoreWgmmaId, kGpuFewChannelsId,
                      kGpuFewChannelsMmaId),
    [](const ::testing::TestParamInfo<uint32_t>& info) {
      return absl::StrCat("solver", info.param);
    });

TEST(GpuSolvers, IdsNamesAndDevices) {
  const std::map<uint32_t, std::string> want = {
      {101, "gpu_direct_naive"},          {102, "gpu_implicit_gemm"},
      {103, "gpu_implicit_gemm_static"},  {104, "gpu_depthwise"},
      {105, "gpu_tensor_core_igemm"},     {106, "gpu_im2col_gemm_blas"},
      {107, "gpu_gemm_1x1_blas"},         {108, "gpu_winograd_f2x3"},
      {109, "gpu_direct_tiled"},          {110, "gpu_winograd_blas"},
      {111, "gpu_tensor_core_pipelined"}, {112, "gpu_tensor_core_wgmma"},
      {113, "gpu_few_channels"},          {114, "gpu_few_channels_mma"}};
  std::map<uint32_t, std::string> got;
  for (const auto& s : MakeGpuSolvers()) {
    got[s->id()] = std::string(s->name());
    EXPECT_EQ(s->backend(), v1::GPU);
    EXPECT_EQ(s->dynamic(), s->id() != kGpuImplicitGemmStaticId) << s->name();
    EXPECT_EQ(SolverRegistry::Default().Find(s->id())->name(), s->name());
  }
  EXPECT_EQ(got, want);
  const Solver* tc = SolverRegistry::Default().Find(kGpuTensorCoreIgemmId);
  EXPECT_TRUE(tc->SupportsDevice({.backend = v1::CUDA, .arch = "sm_90"}));
  EXPECT_TRUE(tc->SupportsDevice({.backend = v1::CUDA, .arch = "sm_80"}));
  EXPECT_FALSE(tc->SupportsDevice({.backend = v1::CUDA, .arch = "sm_75"}));
  EXPECT_FALSE(tc->SupportsDevice({.backend = v1::HIP, .arch = "gfx90a"}));
  // sm_90a code runs on compute capability 9.0 alone.
  const Solver* wg = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  EXPECT_TRUE(wg->SupportsDevice({.backend = v1::CUDA, .arch = "sm_90"}));
  EXPECT_FALSE(wg->SupportsDevice({.backend = v1::CUDA, .arch = "sm_80"}));
  EXPECT_FALSE(wg->SupportsDevice({.backend = v1::CUDA, .arch = "sm_100"}));
  EXPECT_FALSE(wg->SupportsDevice({.backend = v1::HIP, .arch = "gfx90a"}));
}

TEST(GpuSolvers, ConstraintsAreNamed) {
  ConvProblem p;
  p.n = 1, p.c = 64, p.k = 64, p.in = {1, 8, 8}, p.filter = {1, 3, 3};
  const absl::Status tc =
      SolverRegistry::Default().Find(kGpuTensorCoreIgemmId)->IsApplicable(p);
  EXPECT_EQ(tc.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tc.message().find("fp16 or bf16"), std::string::npos) << tc;
  const absl::Status dw =
      SolverRegistry::Default().Find(kGpuDepthwiseId)->IsApplicable(p);
  EXPECT_EQ(dw.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(dw.message().find("C/G"), std::string::npos) << dw;
  p.groups = 64;
  EXPECT_EQ(SolverRegistry::Default().Find(kGpuDepthwiseId)->IsApplicable(p),
            absl::OkStatus());
  // 2^31 elements and more do not fit the 32-bit indices of implicit GEMM.
  p.groups = 1, p.n = 1024, p.in = {1, 256, 256};
  const absl::Status big =
      SolverRegistry::Default().Find(kGpuImplicitGemmId)->IsApplicable(p);
  EXPECT_EQ(big.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SolverRegistry::Default().Find(kGpuDirectNaiveId)->IsApplicable(p),
            absl::OkStatus());
}

TEST(GpuSolvers, BackwardWeightsSplitsIntoWorkspace) {
  ConvProblem p;
  p.n = 8, p.c = 64, p.k = 64, p.in = {1, 56, 56}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
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

TEST(GpuSolvers, WorkspaceRegionsStartOn256ByteBoundaries) {
  EXPECT_EQ(AlignWorkspace(0), 0);
  EXPECT_EQ(AlignWorkspace(1), 256);
  EXPECT_EQ(AlignWorkspace(256), 256);
  EXPECT_EQ(AlignWorkspace(257), 512);
}

// The kernels of a plan, in order.
std::vector<std::string> Kernels(const v1::ExecutionPlan& plan) {
  std::vector<std::string> out;
  for (const v1::KernelStep& step : plan.steps()) out.push_back(step.kernel());
  return out;
}

TEST(GpuSolvers, BlasSolversRunWhereABlasIsFound) {
  for (uint32_t id :
       {kGpuIm2colGemmBlasId, kGpuGemm1x1BlasId, kGpuWinogradBlasId}) {
    const Solver* s = SolverRegistry::Default().Find(id);
    EXPECT_FALSE(s->SupportsDevice({.backend = v1::CUDA, .arch = "sm_90"}))
        << s->name();
    EXPECT_TRUE(s->SupportsDevice(
        {.backend = v1::CUDA, .arch = "sm_90", .blas = "cublas13.1.0"}));
    EXPECT_TRUE(s->SupportsDevice(
        {.backend = v1::HIP, .arch = "gfx90a", .blas = "rocblas2.45.0"}));
    EXPECT_FALSE(
        SolverRegistry::Runs(*s, {.backend = v1::CPU, .arch = "x86-64-v3"}));
  }
}

TEST(GpuSolvers, Gemm1x1BlasNeedsNoLoweringAndFewSteps) {
  const Solver* s = SolverRegistry::Default().Find(kGpuGemm1x1BlasId);
  ConvProblem p;
  p.n = 8, p.c = 64, p.k = 32, p.in = {1, 14, 14};
  // One GEMM batched over the images.
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), std::vector<std::string>{gpu::kBlasGemmKernel});
  EXPECT_EQ(plan->workspace_bytes(), 0);
  EXPECT_TRUE(plan->sources().empty());
  // Grouped NCHW: the fewer of one step per group and one per image.
  p.groups = 4;
  EXPECT_EQ(s->MakePlan(p, {})->steps_size(), 4);
  p.n = 2;
  EXPECT_EQ(s->MakePlan(p, {})->steps_size(), 2);
  // NHWC: one step batched over the groups, in every direction.
  p.layout = Layout::kNHWC;
  for (Direction d : {Direction::kForward, Direction::kBackwardData,
                      Direction::kBackwardWeights}) {
    p.direction = d;
    EXPECT_EQ(s->MakePlan(p, {})->steps_size(), 1) << DirectionName(d);
  }
  // NCHW dw over a large image: one GEMM batched over the images into an
  // fp32 slot each, then the slots summed into dw.
  p.layout = Layout::kNCHW, p.n = 3, p.groups = 1;
  const std::vector<std::string> slots = {gpu::kBlasGemmKernel,
                                          "conv_f32_to_type"};
  plan = s->MakePlan(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), slots);
  EXPECT_EQ(plan->workspace_bytes(), 3 * 64 * 32 * 4);
  EXPECT_EQ(plan->steps(1).scalars(1), 3) << "slots summed";
  // NCHW dw where a slot outweighs the image (512 x 256 channels over 2x2):
  // dy and x packed channel-major, then one GEMM over the images; one chunk,
  // so even 16-bit types need no fp32 sum.
  ConvProblem q = p;
  q.c = 512, q.k = 256, q.in = {1, 2, 2};
  const std::vector<std::string> packed = {"conv_pack", "conv_pack",
                                           gpu::kBlasGemmKernel};
  EXPECT_EQ(Kernels(*s->MakePlan(q, {})), packed);
  EXPECT_EQ(s->WorkspaceBytes(q), 3 * (512 + 256) * 4 * 4);
  q.type = DataType::kBf16;
  plan = s->MakePlan(q, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), packed);
  EXPECT_EQ(plan->workspace_bytes(), 3 * (512 + 256) * 4 * 2);
  // One image: nothing to pack or sum.
  p.n = 1;
  EXPECT_EQ(s->MakePlan(p, {})->steps_size(), 1);
  EXPECT_EQ(s->WorkspaceBytes(p), 0);

  // NCHW F and B of fp16 7x7 images: packed channel-major by default, one
  // GEMM over the chunk's positions; the per-image config still runs in place.
  ConvProblem h;
  h.n = 4, h.c = 64, h.k = 32, h.in = {1, 7, 7}, h.type = DataType::kFp16;
  for (Direction d : {Direction::kForward, Direction::kBackwardData}) {
    h.direction = d;
    SCOPED_TRACE(DirectionName(d));
    EXPECT_EQ(s->DefaultConfig(h), PerfConfig{1});
    EXPECT_EQ(s->ConfigSpace(h).size(), 2u);
    plan = s->MakePlan(h, {1});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Kernels(*plan),
              (std::vector<std::string>{"conv_pack", gpu::kBlasGemmKernel,
                                        "conv_unpack"}));
    EXPECT_EQ(plan->workspace_bytes(),
              AlignWorkspace(4 * 64 * 49 * 2) + 4 * 32 * 49 * 2);
    EXPECT_EQ(Kernels(*s->MakePlan(h, {})),
              std::vector<std::string>{gpu::kBlasGemmKernel});
    // Each config's workspace is its own: the per-image GEMMs stage nothing.
    EXPECT_EQ(s->ConfigWorkspaceBytes(h, {}), 0);
  }
  // Over larger images the per-image GEMMs are the default and a find times
  // the packed one beside them; its workspace holds the chunk's x and dy.
  ConvProblem big = h;
  big.in = {1, 28, 28}, big.stride = {1, 2, 2}, big.n = 8;
  for (Direction d : {Direction::kForward, Direction::kBackwardData}) {
    big.direction = d;
    SCOPED_TRACE(DirectionName(d));
    EXPECT_EQ(s->DefaultConfig(big), PerfConfig{});
    EXPECT_EQ(s->FindConfigs(big),
              (std::vector<PerfConfig>{PerfConfig{}, PerfConfig{1}}));
    EXPECT_EQ(s->ConfigWorkspaceBytes(big, {1}),
              AlignWorkspace(8 * 64 * 196 * 2) + 8 * 32 * 196 * 2);
    EXPECT_EQ(s->ConfigWorkspaceBytes(big, {}), 8 * 64 * 196 * 2);
    EXPECT_EQ(s->WorkspaceBytes(big), s->ConfigWorkspaceBytes(big, {}));
    plan = s->MakePlan(big, {1});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Kernels(*plan),
              (std::vector<std::string>{"conv_pack", gpu::kBlasGemmKernel,
                                        "conv_unpack"}));
  }
  // NCHW W never packs this way.
  big.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : s->ConfigSpace(big)) EXPECT_NE(c, PerfConfig{1});
  // fp32 at stride 1 keeps the per-image GEMMs only.
  h.type = DataType::kFp32;
  EXPECT_EQ(s->ConfigSpace(h), std::vector<PerfConfig>{PerfConfig{}});

  // Stride 2: x gathered densely for F (and W), dx written whole after the
  // GEMM for B; per image ({}) or packed ({1}, the default at 7x7, for which
  // the workspace holds x and dy of the chunk).
  p.stride = {1, 2, 2}, p.n = 2, p.type = DataType::kFp32;
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  for (Direction d : {Direction::kForward, Direction::kBackwardData}) {
    p.direction = d;
    EXPECT_EQ(s->WorkspaceBytes(p), 2 * 64 * 49 * 4 + 2 * 32 * 49 * 4);
    for (const PerfConfig& c : {PerfConfig{}, PerfConfig{1}}) {
      const std::vector<std::string> k = Kernels(*s->MakePlan(p, c));
      EXPECT_EQ(d == Direction::kForward ? k.front() : k.back(),
                d == Direction::kForward ? "conv_pack" : "conv_unpack");
    }
  }

  // NHWC at stride 2 whose sampled rows are equally spaced (H = 2 OH): {2}
  // runs one GEMM per group batched over the output rows, on the tensors in
  // place (no workspace); B zeroes dx's unsampled positions first. It is
  // B's default; a find times it beside {}.
  ConvProblem r;
  r.n = 3, r.c = 32, r.k = 48, r.in = {1, 10, 9}, r.stride = {1, 2, 2};
  r.layout = Layout::kNHWC, r.type = DataType::kFp16, r.groups = 2;
  for (Direction d : {Direction::kForward, Direction::kBackwardData}) {
    r.direction = d;
    SCOPED_TRACE(DirectionName(d));
    const bool bwd = d == Direction::kBackwardData;
    EXPECT_EQ(s->DefaultConfig(r), bwd ? PerfConfig{2} : PerfConfig{});
    EXPECT_EQ(s->FindConfigs(r).size(), 2u);
    EXPECT_EQ(s->ConfigWorkspaceBytes(r, {2}), 0);
    EXPECT_GT(s->ConfigWorkspaceBytes(r, {}), 0);
    // What a plan with no tuned config needs: the default's.
    EXPECT_EQ(s->WorkspaceBytes(r),
              s->ConfigWorkspaceBytes(r, s->DefaultConfig(r)));
    plan = s->MakePlan(r, {2});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->workspace_bytes(), 0);
    std::vector<std::string> want(2, gpu::kBlasGemmKernel);
    if (bwd) want.insert(want.begin(), "conv_zero_unsampled");
    ASSERT_EQ(Kernels(*plan), want);
    // Group 1's GEMM: 3 * 5 output rows of 5 positions; x's rows start
    // 2 * 9 positions apart, its columns 2 positions apart, group 1 at
    // channel 16.
    const v1::KernelStep& gemm = plan->steps(plan->steps_size() - 1);
    absl::StatusOr<gpu::BlasGemm> g = gpu::DecodeBlasGemm(gemm);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->batch, 15);
    EXPECT_EQ(g->m, 5);
    const int x_buffer = bwd ? gpu::kBlasC : gpu::kBlasA;
    EXPECT_EQ(bwd ? g->ldc : g->lda, 2 * 32);
    EXPECT_EQ(bwd ? g->stride_c : g->stride_a, 2 * 9 * 32);
    EXPECT_EQ(gemm.buffers(x_buffer).role(), v1::BUFFER_X);
    EXPECT_EQ(gemm.buffers(x_buffer).offset_bytes(), 16 * 2);
  }
  // Rows not equally spaced (H = 9, 5 sampled rows), W, and depth strides
  // keep the staged configs only.
  r.in = {1, 9, 9};
  EXPECT_EQ(s->ConfigSpace(r), std::vector<PerfConfig>{PerfConfig{}});
  r.in = {1, 10, 9}, r.direction = Direction::kBackwardWeights;
  EXPECT_EQ(s->ConfigSpace(r), std::vector<PerfConfig>{PerfConfig{}});
  r.direction = Direction::kForward, r.in = {4, 10, 9}, r.stride = {2, 2, 2};
  EXPECT_EQ(s->ConfigSpace(r), std::vector<PerfConfig>{PerfConfig{}});

  p.stride = {1, 1, 1}, p.filter = {1, 3, 3};
  const absl::Status f = s->IsApplicable(p);
  EXPECT_EQ(f.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(f.message().find("filter"), std::string::npos) << f;
  p.filter = {1, 1, 1}, p.pad = {0, 1, 1};
  EXPECT_EQ(s->IsApplicable(p).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GpuSolvers, Im2colGemmBlasBoundsItsColumnMatrix) {
  const Solver* s = SolverRegistry::Default().Find(kGpuIm2colGemmBlasId);
  ConvProblem p;
  p.n = 64, p.c = 256, p.k = 256, p.in = {1, 56, 56}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  // 28.9 MB of columns per image: 8 chunks of 8 images under 256 MiB.
  const int64_t per_image = p.c * 9 * 56 * 56 * 4;
  EXPECT_EQ(s->WorkspaceBytes(p), 8 * per_image);
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> want;
  for (int i = 0; i < 8; ++i) {
    want.push_back("conv_im2col");
    want.push_back(gpu::kBlasGemmKernel);
  }
  EXPECT_EQ(Kernels(*plan), want);
  // NCHW im2col: a thread per output position of the chunk's 8 images,
  // each walking a block of the channels; 25088 positions split the 256
  // channels into 21 blocks for about 2^19 threads.
  const v1::KernelStep& im2col = plan->steps(0);
  EXPECT_EQ(im2col.scalars(im2col.scalars_size() - 1), 21);
  EXPECT_EQ(im2col.grid(0) * im2col.block(0), 21u * 8 * 56 * 56);
  // Backward data lowers after the GEMM, back into dx.
  p.direction = Direction::kBackwardData;
  EXPECT_EQ(Kernels(*s->MakePlan(p, {})).back(), "conv_col2im");
  // fp16 dw over several chunks (4 of 16 images) sums in fp32 after the
  // column matrix.
  p.direction = Direction::kBackwardWeights, p.type = DataType::kFp16,
  p.layout = Layout::kNHWC;
  plan = s->MakePlan(p, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan).back(), "conv_f32_to_type");
  EXPECT_EQ(plan->workspace_bytes(), 8 * per_image + p.w_elements() * 4);
  // One image's columns over the bound: not applicable.
  p.n = 1, p.c = 512, p.in = {1, 128, 128}, p.type = DataType::kFp32;
  const absl::Status big = s->IsApplicable(p);
  EXPECT_EQ(big.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(big.message().find("column matrix"), std::string::npos) << big;
}

// Every GEMM operand of a Winograd plan (wino_gemm or blas.gemm) lies inside
// the workspace, apart from the others.
void ExpectGemmOperandsInWorkspace(const v1::ExecutionPlan& plan) {
  const int64_t ws = plan.workspace_bytes();
  for (const v1::KernelStep& step : plan.steps()) {
    int64_t bytes[3];
    if (step.kernel() == "wino_gemm") {
      ASSERT_EQ(step.scalars_size(), 4);
      ASSERT_EQ(step.grid_size(), 3);
      const int64_t m = step.scalars(0), n = step.scalars(1),
                    r = step.scalars(2);
      const int64_t batch = step.grid(2);
      bytes[0] = batch * m * r * 4, bytes[1] = batch * r * n * 4,
      bytes[2] = batch * m * n * 4;
    } else if (step.kernel() == gpu::kBlasGemmKernel) {
      absl::StatusOr<gpu::BlasGemm> g = gpu::DecodeBlasGemm(step);
      ASSERT_TRUE(g.ok()) << g.status();
      const int64_t ab = g->ab_type == DataType::kFp32 ? 4 : 2;
      const int64_t c = g->c_type == DataType::kFp32 ? 4 : 2;
      const int64_t a_rows = g->trans_a ? g->k : g->m,
                    b_rows = g->trans_b ? g->n : g->k;
      bytes[0] = ((g->batch - 1) * g->stride_a + a_rows * g->lda) * ab;
      bytes[1] = ((g->batch - 1) * g->stride_b + b_rows * g->ldb) * ab;
      bytes[2] = ((g->batch - 1) * g->stride_c + g->m * g->ldc) * c;
    } else {
      continue;
    }
    ASSERT_EQ(step.buffers_size(), 3);
    for (int i = 0; i < 3; ++i) {
      const int64_t at = step.buffers(i).offset_bytes();
      EXPECT_EQ(step.buffers(i).role(), v1::BUFFER_WORKSPACE);
      EXPECT_LE(at + bytes[i], ws) << "operand " << i;
      for (int j = 0; j < i; ++j) {
        const int64_t other = step.buffers(j).offset_bytes();
        EXPECT_TRUE(at + bytes[i] <= other || other + bytes[j] <= at)
            << "operands " << j << " and " << i << " overlap";
      }
    }
  }
}

TEST(GpuSolvers, WinogradChunksImagesWithinItsWorkspace) {
  ConvProblem p;
  p.n = 128, p.c = 256, p.k = 256, p.in = {1, 56, 56}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  for (auto [id, d, type] :
       std::vector<std::tuple<uint32_t, Direction, DataType>>{
           {kGpuWinogradF2x3Id, Direction::kForward, DataType::kFp32},
           {kGpuWinogradF2x3Id, Direction::kBackwardData, DataType::kFp32},
           {kGpuWinogradF2x3Id, Direction::kBackwardWeights, DataType::kFp32},
           {kGpuWinogradBlasId, Direction::kForward, DataType::kFp16},
           {kGpuWinogradBlasId, Direction::kBackwardData, DataType::kFp32},
           {kGpuWinogradBlasId, Direction::kBackwardWeights,
            DataType::kFp16}}) {
    const Solver* s = SolverRegistry::Default().Find(id);
    p.direction = d, p.type = type;
    SCOPED_TRACE(absl::StrCat(s->name(), " ", DescribeProblem(p)));
    ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
    EXPECT_LE(s->WorkspaceBytes(p), kWorkspaceBudget);
    for (const PerfConfig& config : s->ConfigSpace(p)) {
      absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, config);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ExpectGemmOperandsInWorkspace(*plan);
      // The chunks' images follow each other and cover the batch; backward
      // weights adds every chunk after the first to the partial sums.
      int64_t next = 0;
      int chunks = 0;
      for (const v1::KernelStep& step : plan->steps()) {
        if (step.kernel() == "wino_input") {
          EXPECT_EQ(step.scalars(0), next);
          EXPECT_GE(step.scalars(1), 1);
          next += step.scalars(1);
          ++chunks;
        }
        // The BLAS runs fp32 F and B as F(4x4, 3x3): 36 transformed
        // positions; otherwise F(2x2, 3x3): 16.
        if (step.kernel() == gpu::kBlasGemmKernel) {
          const bool f4 =
              type == DataType::kFp32 && d != Direction::kBackwardWeights;
          EXPECT_EQ(gpu::DecodeBlasGemm(step)->batch % (f4 ? 36 : 16), 0);
          if (d != Direction::kBackwardWeights) {
            EXPECT_EQ(gpu::DecodeBlasGemm(step)->batch, f4 ? 36 : 16);
          }
        }
        // wino_gemm's last scalar and blas.gemm's beta: accumulate.
        if (step.kernel() == "wino_gemm" ||
            step.kernel() == gpu::kBlasGemmKernel) {
          EXPECT_EQ(step.scalars(step.scalars_size() - 1),
                    d == Direction::kBackwardWeights && chunks > 1 ? 1 : 0);
        }
      }
      EXPECT_EQ(next, p.n);
      EXPECT_GT(chunks, 1) << "128 such images should not fit 512 MiB at once";
    }
  }
}

TEST(GpuSolvers, WinogradConstraintsAreNamed) {
  ConvProblem p;
  p.n = 2, p.c = 64, p.k = 64, p.in = {1, 56, 56}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  const Solver* s = SolverRegistry::Default().Find(kGpuWinogradF2x3Id);
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  p.pad = {0, 3, 0};
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  const auto fails = [&](const ConvProblem& q, const std::string& field) {
    ASSERT_EQ(ValidateProblem(q), absl::OkStatus());
    const absl::Status st = s->IsApplicable(q);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << field;
    EXPECT_EQ(st.message().substr(0, field.size()), field) << st;
  };
  ConvProblem q = p;
  q.stride = {1, 2, 2};
  fails(q, "stride");
  q = p, q.filter = {1, 5, 5};
  fails(q, "filter");
  q = p, q.dilation = {1, 1, 2};
  fails(q, "dilation");
  q = p, q.spatial_dims = 3, q.in = {4, 56, 56}, q.filter = {3, 3, 3},
  q.pad = {1, 1, 1};
  fails(q, "spatial_dims");
  // One image alone needs 16 x 2048 channels x 256^2 tiles of fp32 workspace.
  q = p, q.n = 1, q.c = 1024, q.k = 1024, q.in = {1, 512, 512};
  fails(q, "workspace");
}

TEST(GpuSolvers, DirectTiledSplitsBackwardWeightsIntoWorkspace) {
  ConvProblem p;
  p.n = 8, p.c = 64, p.k = 64, p.in = {1, 56, 56}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  p.direction = Direction::kBackwardWeights;
  const Solver* s = SolverRegistry::Default().Find(kGpuDirectTiledId);
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const int64_t partial = p.w_elements() * 4;
  const int64_t ws = s->WorkspaceBytes(p);
  ASSERT_GT(ws, partial) << "a long reduction over few dw tiles is split";
  EXPECT_EQ(ws % partial, 0);
  for (const PerfConfig& config : s->ConfigSpace(p)) {
    absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, config);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->steps_size(), 2);
    EXPECT_EQ(plan->steps(0).scalars().Get(plan->steps(0).scalars_size() - 1),
              ws / partial);
    EXPECT_EQ(plan->steps(1).kernel(), "conv_tiled_reduce");
    EXPECT_EQ(plan->steps(1).scalars(0), p.w_elements());
    EXPECT_EQ(plan->steps(1).scalars(1), ws / partial);
  }
  p.direction = Direction::kForward;
  EXPECT_EQ(s->WorkspaceBytes(p), 0);
}

TEST(GpuSolvers, DirectTiledNamesAPatchTooLargeForSharedMemory) {
  ConvProblem p;
  p.n = 1, p.c = 4, p.k = 4, p.in = {1, 500, 500}, p.filter = {1, 3, 3};
  const Solver* s = SolverRegistry::Default().Find(kGpuDirectTiledId);
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  // Dilation 200 spreads the taps of even a 4x16 tile over 404 x 416 inputs.
  p.dilation = {1, 200, 200};
  ASSERT_EQ(ValidateProblem(p), absl::OkStatus());
  const absl::Status st = s->IsApplicable(p);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("shared memory"), std::string::npos) << st;
}

// A first layer (Inception v3's: 3 channels, 3x3 stride 2, 32 filters):
// F with each block all 32 channels of a tile, the tile's grid over every
// output position, the filter and stride compiled in, and a patch that
// fits shared memory for every config; W in splits of the positions summed
// from the workspace; no B, and more than 8 channels a group is refused by
// name.
TEST(GpuSolvers, FewChannelsTilesAFirstLayer) {
  const Solver* s = SolverRegistry::Default().Find(kGpuFewChannelsId);
  ConvProblem p =
      Conv(2, 128, 3, {1, 299, 299}, 32, {1, 3, 3}, {0, 0, 0}, 2, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const std::vector<PerfConfig> space = s->ConfigSpace(p);
  ASSERT_EQ(space.size(), 8u);
  EXPECT_EQ(s->DefaultConfig(p), (PerfConfig{32, 32, 8, 4}));
  EXPECT_EQ(s->FindConfigs(p).size(), 4u);
  for (const PerfConfig& c : space) {
    SCOPED_TRACE(PerfConfigString(c));
    EXPECT_EQ(c[1], 32) << "one block takes every channel";
    absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->steps_size(), 1);
    const v1::KernelStep& step = plan->steps(0);
    EXPECT_EQ(step.kernel(), "conv_few_channels");
    EXPECT_EQ(step.block(0), 256u);
    const std::vector<std::string> opts(plan->sources(0).options().begin(),
                                        plan->sources(0).options().end());
    for (const char* want : {"-DCT_C=3", "-DCT_FH=3", "-DCT_FW=3", "-DCT_SH=2",
                             "-DCT_SW=2", "-DCT_DW=1"}) {
      EXPECT_TRUE(absl::c_linear_search(opts, want)) << want;
    }
    // TH = PX * (256 * KT / KB) / TW.
    const int64_t th = c[3] * (256 * c[2] / c[1]) / c[0];
    EXPECT_EQ(step.grid(0), 128 * CeilDiv(149, th) * CeilDiv(149, c[0]));
    EXPECT_EQ(step.grid(1), 1u);
    const int64_t rows = (th - 1) * 2 + 3,
                  pitch = CeilDiv((c[0] - 1) * 2 + 3, 2) * 2;
    EXPECT_LE((3 * rows * pitch + 27 * c[1]) * 4, 48 * 1024);
  }
  // 512 filters in 4 groups: two blocks of 64 channels a group.
  ConvProblem g = p;
  g.k = 512, g.c = 12, g.groups = 4;
  ASSERT_EQ(s->IsApplicable(g), absl::OkStatus());
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(g, s->DefaultConfig(g));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->steps(0).grid(1), 4u * 2u);
  ConvProblem b = p;
  b.direction = Direction::kBackwardData;
  const absl::Status bst = s->IsApplicable(b);
  EXPECT_EQ(bst.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bst.message().find("direction"), std::string::npos) << bst;

  // W: 128 x 149 x 149 positions in 512 splits, each writing all 864 dw
  // elements to its slice; {TW, KB, KT, TH}.
  ConvProblem w = p;
  w.direction = Direction::kBackwardWeights;
  ASSERT_EQ(s->IsApplicable(w), absl::OkStatus());
  EXPECT_EQ(s->WorkspaceBytes(w), 512 * 864 * 4);
  EXPECT_EQ(s->DefaultConfig(w), (PerfConfig{32, 32, 8, 4}));
  EXPECT_EQ(s->FindConfigs(w).size(), 4u);
  for (const PerfConfig& c : s->ConfigSpace(w)) {
    SCOPED_TRACE(PerfConfigString(c));
    absl::StatusOr<v1::ExecutionPlan> wp = s->MakePlan(w, c);
    ASSERT_TRUE(wp.ok()) << wp.status();
    ASSERT_EQ(wp->steps_size(), 2);
    EXPECT_EQ(wp->steps(0).kernel(), "conv_few_channels_wrw");
    EXPECT_EQ(wp->steps(0).grid(0), 512u);
    // Owners: KB / KT channel sets times 3 x 3 filter rows, each set of
    // owners repeated over as many position subsets as 256 threads hold.
    const int64_t owners = c[1] / c[2] * 9;
    EXPECT_EQ(wp->steps(0).block(0), owners * (256 / owners));
    EXPECT_EQ(wp->steps(1).kernel(), "conv_few_channels_sum");
    EXPECT_EQ(wp->steps(1).scalars(0), 864);
    EXPECT_EQ(wp->steps(1).scalars(1), 512);
  }
  ConvProblem wide = p;
  wide.c = 16;
  const absl::Status st = s->IsApplicable(wide);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("C/G"), std::string::npos) << st;

  // The same W on the tensor cores: 32 channels by 27 taps, 2 x 4 MMA
  // tiles a lane; F and W, 16-bit alone, CUDA from compute capability 8.0.
  const Solver* m = SolverRegistry::Default().Find(kGpuFewChannelsMmaId);
  ASSERT_EQ(m->IsApplicable(w), absl::OkStatus());
  EXPECT_EQ(m->WorkspaceBytes(w), s->WorkspaceBytes(w));
  EXPECT_EQ(m->DefaultConfig(w), (PerfConfig{32, 32, 4}));
  EXPECT_EQ(m->ConfigSpace(w).size(), 5u);
  for (const PerfConfig& c : m->ConfigSpace(w)) {
    SCOPED_TRACE(PerfConfigString(c));
    absl::StatusOr<v1::ExecutionPlan> mp = m->MakePlan(w, c);
    ASSERT_TRUE(mp.ok()) << mp.status();
    ASSERT_EQ(mp->steps_size(), 2);
    EXPECT_EQ(mp->steps(0).kernel(), "conv_few_channels_mma_wrw");
    EXPECT_EQ(mp->steps(0).block(0), 128u);
    EXPECT_EQ(mp->steps(0).grid(0), 512u);
    EXPECT_TRUE(absl::c_linear_search(mp->sources(0).options(),
                                      std::string("-DCT_FC_MMA=1")));
    EXPECT_EQ(mp->steps(1).kernel(), "conv_few_channels_sum");
  }
  for (ConvProblem q : {p, w, b}) {
    if (q.direction != Direction::kBackwardData) q.type = DataType::kFp32;
    EXPECT_EQ(m->IsApplicable(q).code(), absl::StatusCode::kFailedPrecondition);
  }
  // F on the tensor cores: 16 positions a warp step by all 32 channels, 27
  // taps in 2 steps of 16; {TW, KB, TH}.
  ASSERT_EQ(m->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(m->WorkspaceBytes(p), 0);
  EXPECT_EQ(m->DefaultConfig(p), (PerfConfig{32, 32, 4}));
  for (const PerfConfig& c : m->ConfigSpace(p)) {
    SCOPED_TRACE(PerfConfigString(c));
    EXPECT_EQ(c[1], 32);
    absl::StatusOr<v1::ExecutionPlan> fp = m->MakePlan(p, c);
    ASSERT_TRUE(fp.ok()) << fp.status();
    ASSERT_EQ(fp->steps_size(), 1);
    EXPECT_EQ(fp->steps(0).kernel(), "conv_few_channels_mma");
    EXPECT_EQ(fp->steps(0).block(0), 128u);
    EXPECT_EQ(fp->steps(0).grid(0),
              128 * CeilDiv(149, c[2]) * CeilDiv(149, c[0]));
    EXPECT_EQ(fp->steps(0).grid(1), 1u);
  }
  // F of 24 filters: blocks of 24 channels (3 MMAs of 8 a step).
  ConvProblem f24 = p;
  f24.k = 24;
  EXPECT_EQ(m->DefaultConfig(f24)[1], 24);
  // F of a 7x7 filter (147 taps, 10 steps of 16) fits, of 11x11 (363) not.
  ConvProblem f7 = p;
  f7.filter = {1, 7, 7}, f7.pad = {0, 3, 3}, f7.k = 64;
  ASSERT_EQ(m->IsApplicable(f7), absl::OkStatus());
  EXPECT_EQ(m->DefaultConfig(f7)[1], 64);
  f7.filter = {1, 11, 11}, f7.pad = {0, 5, 5};
  const absl::Status f11 = m->IsApplicable(f7);
  EXPECT_EQ(f11.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(f11.message().find("363"), std::string::npos) << f11;
  // 48 filters of 5x5 (75 taps, 10 tiles of 8): blocks of 16 channels.
  ConvProblem mid = w;
  mid.k = 48, mid.filter = {1, 5, 5}, mid.pad = {0, 2, 2};
  ASSERT_EQ(m->IsApplicable(mid), absl::OkStatus());
  EXPECT_EQ(m->DefaultConfig(mid)[1], 16);
  // A 7x7 filter's 147 taps leave no channel block whose sums fit a lane.
  ConvProblem big = w;
  big.filter = {1, 7, 7}, big.pad = {0, 3, 3};
  EXPECT_EQ(m->IsApplicable(big).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m->SupportsDevice({.backend = v1::CUDA, .arch = "sm_80"}));
  EXPECT_FALSE(m->SupportsDevice({.backend = v1::CUDA, .arch = "sm_75"}));
  EXPECT_FALSE(m->SupportsDevice({.backend = v1::HIP, .arch = "gfx90a"}));
}

// Depthwise NCHW: the row kernels come first, a find times every one, and
// each compiles in the stride, padding and the vectors its rows allow.
TEST(GpuSolvers, DepthwiseRowsReadWholeVectors) {
  const Solver* dw = SolverRegistry::Default().Find(kGpuDepthwiseId);
  ConvProblem p =
      Conv(2, 2, 88, {1, 28, 28}, 88, {1, 3, 3}, {0, 1, 1}, 1, 1, 88);
  p.type = DataType::kFp16;
  ASSERT_EQ(dw->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 1}));
  // F and B also load every filter row's window first ({0, V, 2}) where
  // the three rows' windows fit 96 values: 36, 48 and 18 here.
  EXPECT_EQ(
      dw->FindConfigs(p),
      (std::vector<PerfConfig>{
          {0, 4, 1}, {0, 8, 1}, {0, 2, 1}, {0, 4, 2}, {0, 8, 2}, {0, 2, 2}}));
  const auto options = [&](const PerfConfig& c) {
    absl::StatusOr<v1::ExecutionPlan> plan = dw->MakePlan(p, c);
    EXPECT_TRUE(plan.ok()) << plan.status();
    std::vector<std::string> out;
    if (plan.ok()) {
      EXPECT_EQ(Kernels(*plan).front(),
                p.direction == Direction::kBackwardWeights
                    ? "conv_depthwise_rows_wrw"
                    : "conv_depthwise_rows");
      for (const std::string& o : plan->sources(0).options()) {
        if (o.rfind("-DCT_R", 0) == 0) out.push_back(o);
      }
    }
    return out;
  };
  // 28-wide rows of fp16: 4 outputs a thread read 8-byte vectors and store
  // one; 8 outputs read 8-byte vectors too (28 is no multiple of 8) and
  // store element by element.
  EXPECT_EQ(options({0, 4, 1}), (std::vector<std::string>{
                                    "-DCT_RFH=3", "-DCT_RFW=3", "-DCT_RV=4",
                                    "-DCT_RSW=1", "-DCT_RDW=1", "-DCT_RSH=1",
                                    "-DCT_RPW=1", "-DCT_RVL=4", "-DCT_RVS=1"}));
  EXPECT_EQ(options({0, 8, 1}),
            (std::vector<std::string>{"-DCT_RFH=3", "-DCT_RFW=3", "-DCT_RV=8",
                                      "-DCT_RSW=1", "-DCT_RDW=1", "-DCT_RSH=1",
                                      "-DCT_RPW=1", "-DCT_RVL=4"}));
  EXPECT_EQ(
      options({0, 8, 2}),
      (std::vector<std::string>{"-DCT_RFH=3", "-DCT_RFW=3", "-DCT_RV=8",
                                "-DCT_RSW=1", "-DCT_RDW=1", "-DCT_RSH=1",
                                "-DCT_RPW=1", "-DCT_RVL=4", "-DCT_RPRE=1"}));
  // Backward data at stride 2 gathers from 14-wide dy rows: a thread of 4
  // outputs starts 2 columns on from the last, so 4-byte vectors.
  p.direction = Direction::kBackwardData, p.stride = {1, 2, 2};
  EXPECT_EQ(options({0, 4, 1}), (std::vector<std::string>{
                                    "-DCT_RFH=3", "-DCT_RFW=3", "-DCT_RV=4",
                                    "-DCT_RSW=2", "-DCT_RDW=1", "-DCT_RSH=2",
                                    "-DCT_RPW=1", "-DCT_RVL=2", "-DCT_RVS=1"}));
  // At stride 3 no row config's outputs are a multiple of the stride: the
  // tiles remain.
  p.stride = {1, 3, 3};
  EXPECT_EQ(dw->DefaultConfig(p).size(), 3u);
  EXPECT_NE(dw->DefaultConfig(p)[0], 0);
  // W keeps V positions a lane too, fp32 in 16-byte vectors, and has no
  // configs that load every row first.
  p.direction = Direction::kBackwardWeights, p.stride = {1, 1, 1};
  p.type = DataType::kFp32;
  EXPECT_EQ(dw->FindConfigs(p),
            (std::vector<PerfConfig>{{0, 4, 1}, {0, 8, 1}, {0, 2, 1}}));
  EXPECT_EQ(options({0, 4, 1}), (std::vector<std::string>{
                                    "-DCT_RFH=3", "-DCT_RFW=3", "-DCT_RV=4",
                                    "-DCT_RSW=1", "-DCT_RDW=1", "-DCT_RSH=1",
                                    "-DCT_RPW=1", "-DCT_RVL=4", "-DCT_RVS=1"}));
  // A window past 40 columns leaves a row config out: 7 taps 6 apart take
  // 44 and 48 columns in vectors of 4 at 4 and 8 outputs a thread, 38 in
  // vectors of 2 at 2.
  p.filter = {1, 7, 7}, p.pad = {0, 18, 18}, p.dilation = {1, 6, 6};
  p.direction = Direction::kForward;
  ASSERT_EQ(dw->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(dw->FindConfigs(p), (std::vector<PerfConfig>{{0, 2, 1}}));
}

// Depthwise channels-last: the vector kernels come first and are the
// default, split the channels evenly over blocks, keep their sums within
// the registers, and every config compiles.
TEST(GpuSolvers, DepthwiseChannelsLastHasVectorKernels) {
  const Solver* dw = SolverRegistry::Default().Find(kGpuDepthwiseId);
  ConvProblem p =
      Conv(2, 2, 88, {1, 28, 28}, 88, {1, 3, 3}, {0, 1, 1}, 1, 1, 88);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(dw->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 16, 8}));
  absl::StatusOr<v1::ExecutionPlan> plan =
      dw->MakePlan(p, dw->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(Kernels(*plan), std::vector<std::string>{"conv_depthwise_nhwc"});
  // 11 vectors of 8 channels in 2 blocks of 6; 42 lanes of 6 threads.
  const v1::KernelStep& step = plan->steps(0);
  EXPECT_EQ(step.scalars(step.scalars_size() - 1), 6);
  EXPECT_EQ(step.grid(1), 2u);
  EXPECT_EQ(step.block(0), 42u * 6);
  EXPECT_EQ(step.grid(0), 10u);  // 2 x 28 rows of 7 four-wide blocks
  EXPECT_EQ(step.shared_bytes(), 9u * 6 * 8 * 4);
  // A find times 16-vector blocks, capped ones and 8 positions a thread too.
  EXPECT_EQ(dw->FindConfigs(p), (std::vector<PerfConfig>{{0, 4, 16, 8},
                                                         {0, 4, 16, 16},
                                                         {3, 4, 16, 8},
                                                         {3, 4, 16, 16},
                                                         {0, 8, 16, 8}}));
  // W: 56 rows of 7 items in chunks that leave each of the 42 lanes 2 items
  // or more, its 9 taps added up 5 at a time (256 threads / 48 channels).
  p.direction = Direction::kBackwardWeights;
  plan = dw->MakePlan(p, dw->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(Kernels(*plan),
            (std::vector<std::string>{"conv_depthwise_nhwc_wrw",
                                      "conv_depthwise_reduce"}));
  EXPECT_EQ(plan->steps(0).grid(0), 4u);
  EXPECT_EQ(plan->steps(0).grid(1), 2u);
  EXPECT_EQ(plan->steps(0).shared_bytes(), 252u * 8 * 5 * 4);
  const auto& options = plan->sources(0).options();
  EXPECT_NE(std::find(options.begin(), options.end(), "-DCT_WT=5"),
            options.end());
  EXPECT_GE(dw->WorkspaceBytes(p), 4 * p.w_elements() * 4);
  // A find times 16-vector blocks too, and blocks capped at 2 and 3 a
  // multiprocessor.
  EXPECT_EQ(dw->FindConfigs(p),
            (std::vector<PerfConfig>{
                {0, 4, 16, 8}, {0, 4, 16, 16}, {2, 4, 8, 16}, {3, 4, 8, 16}}));
  // Strided along w, F and W take 2 outputs a thread, B keeps 4; F and B
  // cap their registers for 3 blocks a multiprocessor by default.
  p.stride = {1, 2, 2};
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 2, 16, 8}));
  p.direction = Direction::kForward;
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{3, 2, 16, 16}));
  EXPECT_EQ(dw->FindConfigs(p), (std::vector<PerfConfig>{{3, 2, 16, 16},
                                                         {3, 2, 16, 8},
                                                         {0, 2, 16, 8},
                                                         {2, 2, 16, 16},
                                                         {3, 4, 8, 16}}));
  plan = dw->MakePlan(p, dw->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& f_options = plan->sources(0).options();
  EXPECT_NE(std::find(f_options.begin(), f_options.end(), "-DCT_MINB=3"),
            f_options.end());
  p.direction = Direction::kBackwardData;
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{3, 4, 16, 16}));
  // W caps its registers at M blocks a multiprocessor only where its 9 sums
  // a channel, V positions of dy and a column of x fit (200 values / M):
  // 4 channels a thread at 2 or 3 blocks, 8 channels at 2 positions and 2
  // blocks, never 8 channels at 3 blocks.
  p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : {PerfConfig{2, 4, 8, 16}, PerfConfig{3, 4, 8, 16},
                              PerfConfig{2, 2, 16, 16}}) {
    EXPECT_TRUE(dw->ValidateConfig(p, c).ok()) << PerfConfigString(c);
  }
  for (const PerfConfig& c : {PerfConfig{3, 4, 16, 8}, PerfConfig{3, 2, 16, 16},
                              PerfConfig{4, 4, 16, 16}}) {
    EXPECT_FALSE(dw->ValidateConfig(p, c).ok()) << PerfConfigString(c);
  }
  // Its chunks make about M blocks a multiprocessor on a layer with rows
  // enough: ShuffleNet's c176 28x28 at batch 128, 2 channel blocks.
  {
    ConvProblem big = p;
    big.n = 128, big.c = big.k = big.groups = 176, big.stride = {1, 1, 1};
    big.in = {1, 28, 28};
    const auto blocks = [&](const PerfConfig& c) {
      absl::StatusOr<v1::ExecutionPlan> bp = dw->MakePlan(big, c);
      EXPECT_TRUE(bp.ok()) << bp.status();
      return bp.ok() ? bp->steps(0).grid(0) * bp->steps(0).grid(1) : 0u;
    };
    EXPECT_EQ(blocks({0, 4, 16, 16}), 132u);
    EXPECT_EQ(blocks({3, 4, 8, 16}), 396u);
    absl::StatusOr<v1::ExecutionPlan> bp = dw->MakePlan(big, {3, 4, 8, 16});
    ASSERT_TRUE(bp.ok()) << bp.status();
    EXPECT_EQ(bp->steps(1).scalars(1), 132);  // the reduce's slices
    EXPECT_GE(dw->WorkspaceBytes(big), 132 * big.w_elements() * 4);
  }
  p.direction = Direction::kBackwardData;
  p.type = DataType::kFp32;
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 16, 8}));
  p.type = DataType::kFp16;
  p.direction = Direction::kForward, p.stride = {1, 1, 1};
  // Odd channels take 2-byte vectors; NCHW and a multiplier have none.
  p.c = p.k = p.groups = 13;
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 2, 32}));
  p.type = DataType::kFp32;
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 4, 32}));
  p.layout = Layout::kNCHW;
  EXPECT_EQ(dw->DefaultConfig(p).size(), 3u);
  p.layout = Layout::kNHWC, p.k = 26;
  EXPECT_EQ(dw->DefaultConfig(p).size(), 3u);
  // Backward weights on 7x7 keeps 49 sums of at most 2 channels.
  p = Conv(2, 2, 32, {1, 20, 20}, 32, {1, 7, 7}, {0, 3, 3}, 1, 1, 32);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : dw->ConfigSpace(p)) {
    if (c.size() == 4) EXPECT_LE(c[2], 4) << PerfConfigString(c);
  }
  EXPECT_EQ(dw->DefaultConfig(p), (PerfConfig{0, 4, 4, 32}));

  // Every config of fp16 on a strided 5x5 layer (B gathers), the default of
  // every type elsewhere.
  SourceSet sources;
  const ConvProblem bases[] = {
      Conv(2, 2, 24, {1, 13, 11}, 24, {1, 5, 5}, {0, 2, 2}, 2, 1, 24),
      Conv(2, 2, 40, {1, 9, 10}, 40, {1, 3, 3}, {0, 1, 1}, 1, 1, 40),
      Conv(2, 2, 16, {1, 20, 20}, 16, {1, 7, 7}, {0, 6, 6}, 1, 2, 16)};
  for (const ConvProblem& base : bases) {
    for (Direction d : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
      for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
        ConvProblem q = base;
        q.direction = d, q.type = t, q.layout = Layout::kNHWC;
        ASSERT_EQ(dw->IsApplicable(q), absl::OkStatus()) << DescribeProblem(q);
        std::vector<PerfConfig> vec;
        for (const PerfConfig& c : dw->ConfigSpace(q)) {
          if (c.size() == 4) vec.push_back(c);
        }
        EXPECT_GE(vec.size(), 2u) << DescribeProblem(q);
        if (&base != &bases[0] || t != DataType::kFp16) {
          vec = {dw->DefaultConfig(q)};
        }
        for (const PerfConfig& c : vec) {
          absl::StatusOr<v1::ExecutionPlan> qp = dw->MakePlan(q, c);
          ASSERT_TRUE(qp.ok()) << qp.status();
          CheckPlan(*dw, q, *qp);
          for (const v1::KernelSource& s : qp->sources()) {
            sources.emplace(SourceKey{s.file(),
                                      {s.options().begin(), s.options().end()},
                                      s.arch_suffix()},
                            DescribeProblem(q));
          }
        }
      }
    }
  }
  ExpectCompilesOnNvrtc(sources);
}

TEST(GpuSolvers, TensorCoreWgmmaFoldsTheFilterWidthOfFewChannels) {
  const Solver* wg = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  const Solver* tc = SolverRegistry::Default().Find(kGpuTensorCorePipelinedId);
  // The first layer: 3 channels, 7x7, stride 2.
  ConvProblem p;
  p.n = 2, p.c = 3, p.k = 64, p.in = {1, 230, 230}, p.filter = {1, 7, 7},
  p.stride = {1, 2, 2};
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(wg->IsApplicable(p), absl::OkStatus());
  absl::StatusOr<v1::ExecutionPlan> plan =
      wg->MakePlan(p, wg->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"tc_pack_filter_rows", "tc_pack_rows",
                                      "conv_tc"}));
  // A row of 7 taps x 3 channels padded to 32, over a source 112 wide.
  const v1::KernelStep& conv = plan->steps(2);
  EXPECT_EQ(conv.scalars(2), 112);  // source width
  EXPECT_EQ(conv.scalars(4), 32);   // channels
  EXPECT_EQ(conv.scalars(8), 7);    // filter height
  EXPECT_EQ(conv.scalars(9), 1);    // filter width
  EXPECT_EQ(conv.scalars(11), 0);   // width padding
  EXPECT_EQ(conv.scalars(13), 1);   // width stride
  EXPECT_EQ(plan->workspace_bytes(),
            AlignWorkspace(64 * 7 * 32 * 2) + 2 * 230 * 112 * 32 * 2);
  EXPECT_LT(wg->EstimatedFlops(p), tc->EstimatedFlops(p) / 4);
  // Each tap's channels padded on their own where that costs little, and in
  // the other directions.
  plan = tc->MakePlan(p, tc->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), (std::vector<std::string>{
                                "tc_pack_filter", "tc_pack_act", "conv_tc"}));
  p.c = 8;  // 56 folded into 64, against 7 x 32
  plan = wg->MakePlan(p, wg->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan).front(), "tc_pack_filter_rows");
  p.c = 16;  // 112 folded into 128: not half of 7 x 32
  plan = wg->MakePlan(p, wg->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan).front(), "tc_pack_filter");
  p.c = 32;
  plan = wg->MakePlan(p, wg->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), std::vector<std::string>{"conv_tc"});
  p.c = 3, p.stride = {1, 1, 1}, p.direction = Direction::kBackwardData;
  plan = wg->MakePlan(p, wg->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan).front(), "tc_pack_filter_t");
  // Backward weights (the pipelined solver's): x folded the same way, the
  // partial sums of R x 32 columns unfolded into dw.
  p.stride = {1, 2, 2}, p.direction = Direction::kBackwardWeights;
  plan = tc->MakePlan(p, tc->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"tc_pack_rows", "conv_tc_wrw",
                                      "tc_wrw_reduce_rows"}));
  EXPECT_EQ(plan->steps(1).scalars(2), 112);  // x width
  EXPECT_EQ(plan->steps(1).scalars(4), 32);   // channels
  EXPECT_EQ(plan->steps(1).scalars(10), 1);   // filter width
  EXPECT_EQ(plan->steps(1).scalars(14), 1);   // width stride
  EXPECT_EQ(plan->steps(2).scalars(0), 64);   // K
}

TEST(GpuSolvers, TensorCorePipelinedPacksOnlyWhatIsNotChannelLast) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCorePipelinedId);
  ConvProblem p;
  p.n = 4, p.c = 64, p.k = 128, p.in = {1, 28, 28}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  p.type = DataType::kFp16;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const int64_t filter = 128 * 9 * 64 * 2;
  // NCHW: the filter and x packed channel-last, then the GEMM writes y.
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), (std::vector<std::string>{
                                "tc_pack_filter", "tc_pack_act", "conv_tc"}));
  EXPECT_EQ(plan->workspace_bytes(),
            AlignWorkspace(filter) + 4 * 28 * 28 * 64 * 2);
  // Every config's stage ring (or output tile) is its dynamic shared memory.
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    plan = s->MakePlan(p, c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const v1::KernelStep& conv = plan->steps(2);
    EXPECT_EQ(conv.block(0), c[3] * c[4] * 32);
    EXPECT_EQ(conv.shared_bytes(),
              std::max(c[5] * (c[0] + c[1]) * c[2] * 2, c[1] * (c[0] + 8) * 2));
    EXPECT_EQ(conv.grid(0),
              (4 * 28 * 28 + c[0] - 1) / c[0] * ((128 + c[1] - 1) / c[1]));
  }
  // Grouped: a group's tiles along x, the groups along y.
  {
    ConvProblem grouped = p;
    grouped.c = 128, grouped.k = 256, grouped.groups = 2;
    ASSERT_EQ(s->IsApplicable(grouped), absl::OkStatus());
    for (const PerfConfig& c : s->ConfigSpace(grouped)) {
      plan = s->MakePlan(grouped, c);
      ASSERT_TRUE(plan.ok()) << plan.status();
      const v1::KernelStep& conv = plan->steps(plan->steps_size() - 1);
      ASSERT_EQ(conv.kernel(), "conv_tc");
      EXPECT_EQ(conv.grid(0),
                (4 * 28 * 28 + c[0] - 1) / c[0] * ((128 + c[1] - 1) / c[1]));
      EXPECT_EQ(conv.grid(1), 2u);
    }
  }
  // NHWC with 64 channels: x and the forward filter are read in place.
  p.layout = Layout::kNHWC;
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), std::vector<std::string>{"conv_tc"});
  EXPECT_EQ(plan->workspace_bytes(), 0);
  // Backward data turns the filter (K and C swapped; 128 channels reduced)
  // in 32x32 tiles: 128/32 reduced by 64/32 out, for each of 9 taps.
  p.direction = Direction::kBackwardData;
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"tc_pack_filter_t", "conv_tc"}));
  EXPECT_EQ(plan->workspace_bytes(), 64 * 9 * 128 * 2);
  EXPECT_EQ(plan->steps(0).scalars(5), 1) << "flipped";
  EXPECT_EQ(plan->steps(0).grid(0), 4u);
  EXPECT_EQ(plan->steps(0).grid(1), 2u);
  EXPECT_EQ(plan->steps(0).grid(2), 9u);
  // Four channels per group are padded to 32 in the packed x.
  p.direction = Direction::kForward, p.groups = 16;
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan), (std::vector<std::string>{
                                "tc_pack_filter", "tc_pack_act", "conv_tc"}));
  EXPECT_EQ(plan->workspace_bytes(),
            AlignWorkspace(128 * 9 * 32 * 2) + 4 * 28 * 28 * 16 * 32 * 2);
  // 64-channel steps need the padded channels to be a multiple of 64.
  for (const PerfConfig& c : s->ConfigSpace(p)) EXPECT_EQ(c[2], 32);
  p.groups = 1;
  int64_t wide = 0;
  for (const PerfConfig& c : s->ConfigSpace(p)) wide += c[2] == 64;
  EXPECT_GT(wide, 0);
  // Images go through in chunks that keep the packed x within 512 MiB.
  p.layout = Layout::kNCHW, p.groups = 1, p.n = 512, p.in = {1, 112, 112};
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t image = 112 * 112 * 64 * 2;
  const int64_t chunk = (kWorkspaceBudget - AlignWorkspace(filter)) / image;
  EXPECT_LE(plan->workspace_bytes(), kWorkspaceBudget);
  ASSERT_EQ(plan->steps_size(), 1 + 2 * ((512 + chunk - 1) / chunk));
  ASSERT_GT(plan->steps_size(), 3);
  EXPECT_EQ(plan->steps(4).buffers(2).offset_bytes(),
            chunk * 128 * 112 * 112 * 2);
  EXPECT_EQ(plan->steps(3).scalars(0), chunk) << "n0 of the second chunk";
}

TEST(GpuSolvers, TensorCorePipelinedSplitsBackwardWeightsIntoPartialSums) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCorePipelinedId);
  ConvProblem p;
  p.n = 4, p.c = 64, p.k = 128, p.in = {1, 28, 28}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  p.type = DataType::kFp16, p.direction = Direction::kBackwardWeights;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  // 1 x 5 tiles of 128 x 128 over 128 output channels and 9 * 64 filter
  // columns; 3136 positions give 3 splits of at least 1024.
  const int64_t partials = 3 * 128 * 9 * 64 * 4;
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"tc_pack_act", "tc_pack_act",
                                      "conv_tc_wrw", "tc_wrw_reduce"}));
  const v1::KernelStep& wrw = plan->steps(2);
  EXPECT_EQ(wrw.grid(2), 3) << "splits";
  EXPECT_EQ(wrw.buffers(2).offset_bytes(), 0) << "partial sums first";
  EXPECT_EQ(wrw.scalars(wrw.scalars_size() - 1), 0) << "the first chunk writes";
  EXPECT_EQ(plan->steps(3).scalars(6), 3);
  const int64_t x_at = AlignWorkspace(partials);
  EXPECT_EQ(wrw.buffers(0).offset_bytes(), x_at);
  EXPECT_EQ(
      plan->workspace_bytes(),
      AlignWorkspace(x_at + 4 * 28 * 28 * 64 * 2) + 4 * 28 * 28 * 128 * 2);
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    EXPECT_EQ(c[2], 32) << "W steps over 32 positions";
    plan = s->MakePlan(p, c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->steps(2).shared_bytes(), c[5] * (c[0] + c[1]) * 32 * 2);
  }
  // NHWC with channels that need no padding: x and dy are read in place.
  p.layout = Layout::kNHWC;
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"conv_tc_wrw", "tc_wrw_reduce"}));
  EXPECT_EQ(plan->workspace_bytes(), x_at);
  // More images than the packed operands' budget: later chunks add to the sums.
  p.layout = Layout::kNCHW, p.n = 512, p.in = {1, 112, 112};
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->workspace_bytes(), kWorkspaceBudget);
  ASSERT_GT(plan->steps_size(), 4);
  EXPECT_EQ(plan->steps(5).kernel(), "conv_tc_wrw");
  EXPECT_EQ(plan->steps(5).scalars(plan->steps(5).scalars_size() - 1), 1)
      << "adds";
}

TEST(GpuSolvers, TensorCoreWgmmaSplitsBackwardWeightsIntoWholeWaves) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // ResNet-50's 28x28 3x3 layer of 128 channels, channels-last: read in
  // place.
  ConvProblem p;
  p.n = 128, p.c = 128, p.k = 128, p.in = {1, 28, 28}, p.filter = {1, 3, 3},
  p.pad = {0, 1, 1};
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardWeights;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  // Through the tensor maps (the seventh entry).
  const PerfConfig config = s->DefaultConfig(p);
  EXPECT_EQ(config, (PerfConfig{128, 128, 32, 8, 1, 6, 1}));
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->sources(0).arch_suffix(), "a");
  EXPECT_EQ(Kernels(*plan),
            (std::vector<std::string>{"conv_tc_wrw", "tc_wrw_reduce"}));
  // 1 x 9 tiles of 128 x 128; two blocks a multiprocessor make a wave of
  // 264 on 132, which 29 splits fill with 261 blocks (58 would fill two
  // no better).
  const v1::KernelStep& wrw = plan->steps(0);
  EXPECT_EQ(wrw.grid(0), 9);
  EXPECT_EQ(wrw.grid(2), 29) << "splits";
  EXPECT_EQ(wrw.shared_bytes(), 6 * (128 + 128) * 32 * 2 + 1024 + 6 * 8);
  EXPECT_EQ(wrw.tensor_maps_size(), 2);
  EXPECT_EQ(plan->workspace_bytes(),
            AlignWorkspace(int64_t{29} * 128 * 9 * 128 * 4));
  EXPECT_EQ(s->ConfigWorkspaceBytes(p, config), plan->workspace_bytes());
  // The 64 x 64 tile: 2 x 18 tiles, three blocks a multiprocessor (396 on
  // 132): 11 splits.
  plan = s->MakePlan(p, {64, 64, 64, 4, 1, 4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->steps(0).grid(0), 36);
  EXPECT_EQ(plan->steps(0).grid(2), 11);
  EXPECT_EQ(s->ConfigWorkspaceBytes(p, {64, 64, 64, 4, 1, 4}),
            AlignWorkspace(int64_t{11} * 128 * 9 * 128 * 4));
  // 64 output channels: a 128-row tile would be half padding.
  p.k = 64;
  EXPECT_EQ(s->DefaultConfig(p)[0], 64);
  // Where one split nearly fills a wave (16 x 16 tiles of a 2048-channel
  // 1x1 layer), more would only add partial sums: one split.
  p.n = 256, p.c = 2048, p.k = 2048, p.in = {1, 14, 14}, p.filter = {1, 1, 1},
  p.pad = {0, 0, 0};
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->steps(0).grid(0), 256);
  EXPECT_EQ(plan->steps(0).grid(2), 1);
  EXPECT_EQ(plan->workspace_bytes(), AlignWorkspace(int64_t{2048} * 2048 * 4));
}

// The GPU suite's "W empty last split" case: every W config of the
// warpgroup solver splits its positions so that the last split has none,
// which the kernel must still write (zeros) for the reduction to add.
TEST(GpuSolvers, TensorCoreWgmmaLeavesTheLastSplitEmpty) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  ConvProblem p;
  p.n = 3, p.c = 32, p.k = 16, p.in = {1, 151, 151}, p.filter = {1, 1, 1};
  p.type = DataType::kFp16;
  p.direction = Direction::kBackwardWeights;
  for (Layout l : {Layout::kNCHW, Layout::kNHWC}) {
    p.layout = l;
    ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
    for (const PerfConfig& c : s->ConfigSpace(p)) {
      absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, c);
      ASSERT_TRUE(plan.ok()) << plan.status();
      const v1::KernelStep* wrw = nullptr;
      for (const v1::KernelStep& step : plan->steps())
        if (step.kernel() == "conv_tc_wrw") wrw = &step;
      ASSERT_NE(wrw, nullptr);
      // As conv_tc_wrw divides them: whole steps of BK positions a split.
      const int64_t positions = 3 * 151 * 151, splits = wrw->grid(2);
      const int64_t per = CeilDiv(CeilDiv(positions, splits), c[2]) * c[2];
      EXPECT_GT(splits, 1) << PerfConfigString(c);
      EXPECT_GE((splits - 1) * per, positions) << PerfConfigString(c);
    }
  }
}

// F and stride-1 B over channels-last tensors have halo configs: blocks of
// a 2-D tile of output positions whose source halo is staged once a channel
// block and read by the MMA at each tap's offset, on the copy ring and
// through the tensor maps. A find times those that pad the fewest columns;
// they compile for sm_90a in both 16-bit types.
TEST(GpuSolvers, TensorCoreWgmmaStagesHaloTiles) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  ConvProblem p =
      Conv(2, 2, 64, {1, 20, 22}, 64, {1, 3, 3}, {0, 1, 1}, 1, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  const auto halo = [](const PerfConfig& c) { return c.size() == 8; };
  const PerfConfig square = {128, 128, 64, 8, 1, 4, 0, 8};
  SourceSet sources;
  for (Direction d : {Direction::kForward, Direction::kBackwardData}) {
    p.direction = d;
    ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
    const std::vector<PerfConfig> space = s->ConfigSpace(p);
    const std::vector<PerfConfig> find = s->FindConfigs(p);
    int halos = 0;
    for (const PerfConfig& c : space) {
      if (!halo(c)) continue;
      ++halos;
      // A find times those padding the 64 output channels least, the
      // 64-column tiles, through the maps.
      EXPECT_EQ(std::find(find.begin(), find.end(), c) != find.end(),
                c[1] == 64 && c[6] == 1)
          << PerfConfigString(c);
      for (DataType t : {DataType::kFp16, DataType::kBf16}) {
        ConvProblem q = p;
        q.type = t;
        absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(q, c);
        ASSERT_TRUE(plan.ok()) << plan.status();
        CheckPlan(*s, q, *plan);
        for (const v1::KernelSource& src : plan->sources()) {
          sources.emplace(
              SourceKey{src.file(),
                        {src.options().begin(), src.options().end()},
                        src.arch_suffix()},
              DescribeProblem(q));
        }
      }
    }
    // All ten tiles, each on the ring and through the maps: 64 channels
    // take both channel steps, and the halos fit.
    EXPECT_EQ(halos, 20) << DescribeProblem(p);
    absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, square);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const v1::KernelStep& step = plan->steps(plan->steps_size() - 1);
    ASSERT_EQ(step.kernel(), "conv_tc");
    // 2 images of 2 x 3 tiles of 16 x 8 outputs, one column tile.
    EXPECT_EQ(step.grid(0), 12u);
    EXPECT_EQ(step.block(0), 256u);
    // Four 128-row filter stages and two 18 x 10 pixel halos (22.5 KiB,
    // kept in whole KiB), larger than the 128 x 136 output tile.
    EXPECT_EQ(step.shared_bytes(), 4 * 128 * 128 + 2 * 23 * 1024 + 1024);
    for (const char* o : {"-DCT_HALO=1", "-DCT_HALO_TW=8", "-DCT_HALO_EH=2",
                          "-DCT_HALO_EW=2"}) {
      EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), o)) << o;
    }
    EXPECT_EQ(step.tensor_maps_size(), 0);
    // Through the maps: the halo a tiled box of 64 channels by 10 pixels by
    // 18 rows at a time, the filter boxes as the im2col tiles', and the
    // four stages' barriers.
    PerfConfig mapped = square;
    mapped[6] = 1;
    plan = s->MakePlan(p, mapped);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const v1::KernelStep& by_maps = plan->steps(plan->steps_size() - 1);
    EXPECT_EQ(by_maps.shared_bytes(), step.shared_bytes() + 4 * 8);
    EXPECT_TRUE(
        absl::c_linear_search(plan->sources(0).options(), "-DCT_TMA=1"));
    ASSERT_EQ(by_maps.tensor_maps_size(), 2);
    const v1::TensorMap& halo_map = by_maps.tensor_maps(0);
    EXPECT_EQ(halo_map.mode(), v1::TensorMap::TILED);
    EXPECT_EQ(
        std::vector<uint64_t>(halo_map.dims().begin(), halo_map.dims().end()),
        (std::vector<uint64_t>{64, 22, 20, 2}));
    EXPECT_EQ(
        std::vector<uint32_t>(halo_map.box().begin(), halo_map.box().end()),
        (std::vector<uint32_t>{64, 10, 18, 1}));
    EXPECT_EQ(halo_map.swizzle_bytes(), 128u);
    EXPECT_EQ(by_maps.tensor_maps(1).mode(), v1::TensorMap::TILED);
  }
  // A dilated 3x5 filter reaches 4 rows and 8 columns past the tile.
  ConvProblem dilated = p;
  dilated.direction = Direction::kForward;
  dilated.filter = {1, 3, 5}, dilated.pad = {0, 2, 4};
  dilated.dilation = {1, 2, 2};
  ASSERT_EQ(s->IsApplicable(dilated), absl::OkStatus());
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(dilated, square);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const char* o : {"-DCT_HALO_EH=4", "-DCT_HALO_EW=8"}) {
    EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), o)) << o;
  }
  // No halo where the kernel has none: NCHW output, a strided F or B pass,
  // a single tap.
  std::vector<ConvProblem> without;
  ConvProblem q = p;
  q.direction = Direction::kForward, q.layout = Layout::kNCHW;
  without.push_back(q);
  q.layout = Layout::kNHWC, q.stride = {1, 2, 2};
  without.push_back(q);
  q.direction = Direction::kBackwardData;
  without.push_back(q);
  q = p;
  q.direction = Direction::kForward, q.filter = {1, 1, 1}, q.pad = {0, 0, 0};
  without.push_back(q);
  for (const ConvProblem& r : without) {
    ASSERT_EQ(s->IsApplicable(r), absl::OkStatus()) << DescribeProblem(r);
    for (const PerfConfig& c : s->ConfigSpace(r))
      EXPECT_FALSE(halo(c)) << DescribeProblem(r) << " " << PerfConfigString(c);
    EXPECT_FALSE(s->ValidateConfig(r, square).ok()) << DescribeProblem(r);
  }
  ExpectCompilesOnNvrtc(sources);
}

// F and B on the warpgroup MMA have configs whose tiles the tensor memory
// accelerator copies; their steps carry the two tensor maps conv_tc takes.
TEST(GpuSolvers, TensorCoreWgmmaCopiesThroughTensorMaps) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // NHWC 3x3, padding 1 by 2, stride 2 by 1: x read in place.
  ConvProblem p =
      Conv(2, 3, 64, {1, 15, 12}, 96, {1, 3, 3}, {0, 1, 2}, 1, 1, 1);
  p.stride = {1, 2, 1};
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const PerfConfig tma = {128, 64, 64, 8, 1, 4, 1};
  std::vector<PerfConfig> space = s->ConfigSpace(p);
  ASSERT_NE(std::find(space.begin(), space.end(), tma), space.end());
  // The default copies through tensor maps; a find also times the tiles
  // that were fastest on ResNet-50's and VGG-16's 3x3 layers.
  const std::vector<PerfConfig> find = s->FindConfigs(p);
  ASSERT_GE(find.size(), 3u);
  EXPECT_EQ(find[0].size(), 7u);
  for (const PerfConfig& c : {PerfConfig{128, 64, 64, 8, 1, 3, 1},
                              PerfConfig{128, 128, 64, 8, 1, 3, 1},
                              PerfConfig{128, 256, 64, 8, 1, 4, 1}}) {
    EXPECT_NE(std::find(find.begin(), find.end(), c), find.end());
  }
  // The default for 96 output channels is the 96-column tile.
  EXPECT_EQ(find[0], (PerfConfig{128, 96, 64, 8, 1, 3, 1}));
  const PerfConfig ring = {128, 64, 64, 8, 1, 4};
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, tma);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // A copy: the plan is replaced below.
  const v1::KernelStep step = plan->steps(plan->steps_size() - 1);
  ASSERT_EQ(step.kernel(), "conv_tc");
  EXPECT_EQ(step.block(0), 256u);
  ASSERT_EQ(step.tensor_maps_size(), 2);
  // Output 8x14: the first tap's pixels run from row -1 by 2 to 13 (1
  // before the last, 14) and from column -2 to 11 (the last).
  const v1::TensorMap& src = step.tensor_maps(0);
  EXPECT_EQ(src.mode(), v1::TensorMap::IM2COL);
  EXPECT_EQ(src.buffer(), 0);
  EXPECT_EQ(std::vector<uint64_t>(src.dims().begin(), src.dims().end()),
            (std::vector<uint64_t>{64, 12, 15, 3}));
  EXPECT_EQ(std::vector<uint64_t>(src.strides().begin(), src.strides().end()),
            (std::vector<uint64_t>{128, 12 * 128, 15 * 12 * 128}));
  EXPECT_EQ(std::vector<uint32_t>(src.element_strides().begin(),
                                  src.element_strides().end()),
            (std::vector<uint32_t>{1, 1, 2, 1}));
  EXPECT_EQ(std::vector<int32_t>(src.lower_corner().begin(),
                                 src.lower_corner().end()),
            (std::vector<int32_t>{-2, -1}));
  EXPECT_EQ(std::vector<int32_t>(src.upper_corner().begin(),
                                 src.upper_corner().end()),
            (std::vector<int32_t>{0, -1}));
  EXPECT_EQ(src.channels_per_pixel(), 64u);
  EXPECT_EQ(src.pixels_per_column(), 128u);
  EXPECT_EQ(src.swizzle_bytes(), 128u);
  // The forward filter read in place: [K][taps][C], boxes of 64 rows.
  const v1::TensorMap& filt = step.tensor_maps(1);
  EXPECT_EQ(filt.mode(), v1::TensorMap::TILED);
  EXPECT_EQ(filt.buffer(), 1);
  EXPECT_EQ(step.buffers(1).role(), v1::BUFFER_W);
  EXPECT_EQ(std::vector<uint64_t>(filt.dims().begin(), filt.dims().end()),
            (std::vector<uint64_t>{64, 9, 96, 1}));
  EXPECT_EQ(std::vector<uint32_t>(filt.box().begin(), filt.box().end()),
            (std::vector<uint32_t>{64, 1, 64, 1}));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gpu::CheckTensorMap(step, i, step.buffers_size()),
              absl::OkStatus());
  }
  // The stage barriers after the larger of the ring and the output tile.
  EXPECT_EQ(step.shared_bytes(), 4 * (128 + 64) * 128 + 1024 + 4 * 8);
  EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), "-DCT_TMA=1"));
  // The copy ring's configs carry no maps.
  plan = s->MakePlan(p, ring);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->steps(plan->steps_size() - 1).tensor_maps_size(), 0);

  // Backward data reads dy through the turned filter, packed; its 96
  // channels take BK 32.
  p.direction = Direction::kBackwardData, p.stride = {1, 1, 1};
  space = s->ConfigSpace(p);
  const auto first_tma =
      std::find_if(space.begin(), space.end(),
                   [](const PerfConfig& c) { return c.size() == 7; });
  ASSERT_NE(first_tma, space.end());
  EXPECT_EQ((*first_tma)[2], 32);
  plan = s->MakePlan(p, *first_tma);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const v1::KernelStep& bwd = plan->steps(plan->steps_size() - 1);
  ASSERT_EQ(bwd.tensor_maps_size(), 2);
  EXPECT_EQ(bwd.buffers(1).role(), v1::BUFFER_WORKSPACE);
  EXPECT_EQ(bwd.tensor_maps(1).dims(2), 64u) << "c rows of the turned filter";

  // Padding past the corners' 8-bit range: no tensor-map configs (the halo
  // tiles, which copy on the ring, still apply to F).
  p.direction = Direction::kForward, p.pad = {0, 130, 1}, p.in = {1, 15, 12};
  p.filter = {1, 3, 3};
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  for (const PerfConfig& c : s->ConfigSpace(p)) EXPECT_NE(c.size(), 7u);
  const std::vector<PerfConfig> unmapped = s->FindConfigs(p);
  EXPECT_EQ(std::count_if(unmapped.begin(), unmapped.end(),
                          [](const PerfConfig& c) { return c.size() != 8; }),
            1);
  p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : s->ConfigSpace(p)) EXPECT_EQ(c.size(), 6u);
  // Taps 256 apart (3x3, dilation 128, padding 128): past a 4-D map's 8-bit
  // tap offsets, though its corners (-128) are in range; 254 apart is not.
  p.direction = Direction::kForward, p.in = {1, 16, 16};
  p.pad = {0, 128, 128}, p.dilation = {1, 128, 128};
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  for (const PerfConfig& c : s->ConfigSpace(p)) EXPECT_EQ(c.size(), 6u);
  p.pad = {0, 127, 127}, p.dilation = {1, 127, 127};
  space = s->ConfigSpace(p);
  EXPECT_TRUE(std::any_of(space.begin(), space.end(),
                          [](const PerfConfig& c) { return c.size() == 7; }));
  p.pad = {0, 1, 1}, p.dilation = {1, 1, 1}, p.in = {1, 15, 12};

  // CheckTensorMap names the field it refuses.
  v1::KernelStep bad = step;
  bad.mutable_tensor_maps(0)->set_pixels_per_column(2048);
  EXPECT_TRUE(absl::StrContains(
      gpu::CheckTensorMap(bad, 0, bad.buffers_size()).message(),
      "pixels_per_column"));
  bad = step;
  bad.mutable_tensor_maps(1)->set_buffer(7);
  EXPECT_TRUE(absl::StrContains(
      gpu::CheckTensorMap(bad, 1, bad.buffers_size()).message(), "buffer: 7"));
  bad = step;
  bad.mutable_tensor_maps(1)->add_box(1);
  EXPECT_TRUE(absl::StrContains(
      gpu::CheckTensorMap(bad, 1, bad.buffers_size()).message(), "box:"));
}

TEST(GpuSolvers, TensorCoreWgmmaRunsClusterPairsOverEvenColumnTiles) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // 256 output channels: two 128-column tiles, four 64-column ones.
  ConvProblem p = Conv(2, 3, 64, {1, 9, 7}, 256, {1, 3, 3}, {0, 1, 1}, 1, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  std::vector<PerfConfig> space = s->ConfigSpace(p);
  const PerfConfig pair = {128, 128, 64, 8, 1, 3, 2};
  ASSERT_NE(std::find(space.begin(), space.end(), pair), space.end());
  // 256 columns make one tile: no pairs of it.
  EXPECT_EQ(std::find(space.begin(), space.end(),
                      PerfConfig{128, 256, 64, 8, 1, 4, 2}),
            space.end());
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, pair);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(
      absl::c_linear_search(plan->sources(0).options(), "-DCT_CLUSTER=2"));
  EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), "-DCT_TMA=1"));
  const v1::KernelStep& step = plan->steps(plan->steps_size() - 1);
  ASSERT_EQ(step.kernel(), "conv_tc");
  // 189 positions: two row tiles by two column tiles, an even grid.
  EXPECT_EQ(step.grid(0), 4u);
  ASSERT_EQ(step.tensor_maps_size(), 2);
  // Each block of a pair copies half the source tile's rows.
  EXPECT_EQ(step.tensor_maps(0).pixels_per_column(), 64u);
  EXPECT_EQ(step.tensor_maps(1).box(2), 128u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gpu::CheckTensorMap(step, i, step.buffers_size()),
              absl::OkStatus());
  }
  // 48 output channels: one column tile of every width: no pairs.
  p.k = 48;
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    EXPECT_FALSE(c.size() == 7 && c[6] == 2) << PerfConfigString(c);
  }
  // W has no pairs.
  p.k = 256, p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    EXPECT_FALSE(c.size() == 7 && c[6] == 2) << PerfConfigString(c);
  }
}

TEST(GpuSolvers, TensorCoreWgmmaFindsNarrowTilesWhereTheyPadLess) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // F with 32 output channels: a 32-column tile, its filter boxes 32 rows.
  ConvProblem p =
      Conv(2, 3, 64, {1, 21, 19}, 32, {1, 3, 3}, {0, 1, 1}, 1, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const PerfConfig narrow = {128, 32, 64, 8, 1, 4, 1};
  EXPECT_EQ(s->DefaultConfig(p), narrow);
  std::vector<PerfConfig> find = s->FindConfigs(p);
  EXPECT_TRUE(Has(find, narrow));
  // One narrow config is enough where the first pads no column.
  EXPECT_FALSE(Has(find, PerfConfig{64, 32, 64, 4, 1, 4, 1}));
  EXPECT_TRUE(Has(s->ConfigSpace(p), PerfConfig{64, 32, 64, 4, 1, 4, 1}));
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, narrow);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), "-DBN=32"));
  const v1::KernelStep& step = plan->steps(plan->steps_size() - 1);
  ASSERT_EQ(step.kernel(), "conv_tc");
  ASSERT_EQ(step.tensor_maps_size(), 2);
  EXPECT_EQ(step.tensor_maps(1).box(2), 32u);
  // 3 x 21 x 19 positions in 128-row tiles, one column tile each.
  EXPECT_EQ(step.grid(0), static_cast<uint32_t>(CeilDiv(3 * 21 * 19, 128)));
  // B into 80 input channels (padded to 96): the 96-column tile, which
  // pads none; BK 32, as 96 channels of dy are not whole 64-channel boxes.
  p.c = 80, p.k = 96, p.direction = Direction::kBackwardData;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  EXPECT_EQ(s->DefaultConfig(p), (PerfConfig{128, 96, 32, 8, 1, 6, 1}));
  find = s->FindConfigs(p);
  EXPECT_TRUE(Has(find, PerfConfig{128, 96, 32, 8, 1, 6, 1}));
  EXPECT_FALSE(Has(find, PerfConfig{128, 32, 32, 8, 1, 6, 1}));
  // 48 columns: the wider pick stands.
  p.c = 48;
  EXPECT_NE(s->DefaultConfig(p)[1], 32);
  EXPECT_NE(s->DefaultConfig(p)[1], 96);
  // 256 output channels: the wide tiles pad none, and no narrow one is
  // timed.
  p.c = 64, p.k = 256, p.direction = Direction::kForward;
  for (const PerfConfig& c : s->FindConfigs(p)) {
    EXPECT_TRUE(c[1] != 32 && c[1] != 96) << PerfConfigString(c);
  }
  // W's atoms are 64 columns: no narrow tiles.
  p.k = 32, p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    EXPECT_TRUE(c[1] % 64 == 0) << PerfConfigString(c);
  }
}

// W into 192 output channels (Inception v3's 80 to 192 3x3): the default's
// 128-row tile pads them to 256, so a find also times the 64 x 128 tiles on
// the copy ring; into 256 it does not.
TEST(GpuSolvers, TensorCoreWgmmaWeightsTime64RowTilesWhereTheyPadLess) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  ConvProblem p =
      Conv(2, 2, 80, {1, 73, 73}, 192, {1, 3, 3}, {0, 0, 0}, 1, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardWeights;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  std::vector<PerfConfig> find = s->FindConfigs(p);
  EXPECT_EQ(find.front()[0], 128);
  for (const PerfConfig& c :
       {PerfConfig{64, 128, 32, 4, 1, 6}, PerfConfig{64, 128, 64, 4, 1, 4},
        PerfConfig{192, 128, 32, 12, 1, 6},
        PerfConfig{192, 128, 64, 12, 1, 4}}) {
    EXPECT_TRUE(Has(find, c)) << PerfConfigString(c);
    EXPECT_EQ(s->ValidateConfig(p, c), absl::OkStatus());
  }
  {
    // Three warpgroups: 384 threads, one block of 192 output channels by
    // 128 of the 720 columns.
    absl::StatusOr<v1::ExecutionPlan> rows192 =
        s->MakePlan(p, PerfConfig{192, 128, 32, 12, 1, 6});
    ASSERT_TRUE(rows192.ok()) << rows192.status();
    EXPECT_EQ(rows192->steps(0).block(0), 384u);
    EXPECT_EQ(rows192->steps(0).grid(0), CeilDiv(9 * 80, 128));
  }
  // W reads x's 80 channels in place: a tap's 720 columns unpadded.
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, find.front());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->steps(0).kernel(), "conv_tc_wrw");
  EXPECT_EQ(plan->steps(0).grid(0), CeilDiv(192, 128) * CeilDiv(9 * 80, 128));
  EXPECT_EQ(plan->steps(0).buffers(0).role(), v1::BUFFER_X);
  // F, whose reduction is over channels, pads them to 96 for the copy ring,
  // a thread for each run of 8.
  p.direction = Direction::kForward;
  plan = s->MakePlan(p, s->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto pack = absl::c_find_if(plan->steps(), [](const auto& step) {
    return step.kernel() == "tc_pack_act";
  });
  ASSERT_NE(pack, plan->steps().end());
  EXPECT_EQ(pack->grid(0), CeilDiv(2 * 73 * 73 * 96 / 8, 256));
  p.direction = Direction::kBackwardWeights;
  p.k = 256;
  find = s->FindConfigs(p);
  EXPECT_FALSE(Has(find, PerfConfig{64, 128, 32, 4, 1, 6}));
  EXPECT_FALSE(Has(find, PerfConfig{64, 128, 64, 4, 1, 4}));
  EXPECT_FALSE(Has(find, PerfConfig{192, 128, 32, 12, 1, 6}));
}

TEST(GpuSolvers, TensorCoreWgmmaTurnsTheMmaForFewColumns) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // B into 64 input channels: a find times the turned tiles 64 wide.
  ConvProblem p =
      Conv(2, 3, 64, {1, 21, 19}, 128, {1, 3, 3}, {0, 1, 1}, 1, 1, 1);
  p.type = DataType::kFp16, p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardData;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const PerfConfig turned = {256, 64, 64, 1, 4, 3, 1};
  std::vector<PerfConfig> find = s->FindConfigs(p);
  EXPECT_TRUE(Has(find, turned));
  EXPECT_TRUE(Has(find, PerfConfig{192, 64, 64, 1, 4, 3, 1}));
  EXPECT_FALSE(Has(find, PerfConfig{256, 128, 64, 1, 8, 3, 1}));
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, turned);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const char* option : {"-DWM=1", "-DWN=4", "-DCT_TMA=1"}) {
    EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), option))
        << option;
  }
  const v1::KernelStep& step = plan->steps(plan->steps_size() - 1);
  ASSERT_EQ(step.kernel(), "conv_tc");
  // One warpgroup a block, 256 positions by 64 channels.
  EXPECT_EQ(step.block(0), 128u);
  EXPECT_EQ(step.grid(0), static_cast<uint32_t>(CeilDiv(3 * 21 * 19, 256)));
  EXPECT_EQ(step.tensor_maps(0).pixels_per_column(), 256u);
  EXPECT_EQ(step.tensor_maps(1).box(2), 64u);
  // 128 columns: the 128-wide turned tile too; 256: none, the MMA runs 256
  // wide already.
  p.c = 128;
  EXPECT_TRUE(Has(s->FindConfigs(p), PerfConfig{256, 128, 64, 1, 8, 3, 1}));
  p.c = 256;
  for (const PerfConfig& c : s->FindConfigs(p)) {
    EXPECT_FALSE(c[3] == 1 && c[4] > 1) << PerfConfigString(c);
  }
  // Not for W.
  p.c = 64, p.direction = Direction::kBackwardWeights;
  for (const PerfConfig& c : s->ConfigSpace(p)) {
    EXPECT_FALSE(c[3] == 1 && c[4] > 1) << PerfConfigString(c);
  }
}

TEST(GpuSolvers, TensorCoreWgmmaWeightsCopyThroughTensorMaps) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  // NHWC 3x3 W, stride 2 by 1, 128 input and 64 output channels in place.
  ConvProblem p =
      Conv(2, 3, 128, {1, 15, 12}, 64, {1, 3, 3}, {0, 1, 1}, 1, 1, 1);
  p.stride = {1, 2, 1};
  p.type = DataType::kBf16, p.layout = Layout::kNHWC;
  p.direction = Direction::kBackwardWeights;
  ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
  const PerfConfig tma = {128, 128, 32, 8, 1, 6, 1};
  const std::vector<PerfConfig> space = s->ConfigSpace(p);
  ASSERT_NE(std::find(space.begin(), space.end(), tma), space.end());
  const size_t twins = std::count_if(
      space.begin(), space.end(),
      [](const PerfConfig& c) { return c.size() == 7 && c[6] == 1; });
  const PerfConfig wide = {128, 256, 64, 8, 1, 3, 1};
  EXPECT_TRUE(Has(space, wide));
  EXPECT_EQ((twins - 1) * 2 + 1 + 2, space.size())
      << "each W config and its twin, the 128 x 256 tile through the maps, "
         "and the two 192-row tiles";
  // The default goes through the maps; a find also times the 128 x 128 tile
  // of 64 positions, and not the 128 x 256 one, which pads 64 output
  // channels to 128.
  const std::vector<PerfConfig> find = s->FindConfigs(p);
  ASSERT_EQ(find.size(), 2u);
  EXPECT_EQ(find[0], s->DefaultConfig(p));
  EXPECT_EQ(find[0].size(), 7u);
  EXPECT_EQ(find[1], (PerfConfig{128, 128, 64, 8, 1, 3, 1}));
  {
    // 256 output channels and 9 * 128 columns (1280 in 256s, 1152 in
    // 128s): the 128 x 256 tile too; 64 input channels (768 against 640):
    // not.
    ConvProblem q = p;
    q.k = 256;
    EXPECT_TRUE(Has(s->FindConfigs(q), wide));
    EXPECT_EQ(s->ValidateConfig(q, wide), absl::OkStatus());
    absl::StatusOr<v1::ExecutionPlan> wide_plan = s->MakePlan(q, wide);
    ASSERT_TRUE(wide_plan.ok()) << wide_plan.status();
    q.c = 64;
    EXPECT_FALSE(Has(s->FindConfigs(q), wide));
  }
  absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, tma);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(absl::c_linear_search(plan->sources(0).options(), "-DCT_TMA=1"));
  const v1::KernelStep* step = nullptr;
  for (const v1::KernelStep& st : plan->steps()) {
    if (st.kernel() == "conv_tc_wrw") step = &st;
  }
  ASSERT_NE(step, nullptr);
  ASSERT_EQ(step->tensor_maps_size(), 2);
  EXPECT_EQ(step->buffers(0).role(), v1::BUFFER_X);
  EXPECT_EQ(step->buffers(1).role(), v1::BUFFER_Y);
  // x: columns of 32 positions' pixels, 64 channels each; output 8x12, the
  // first tap's pixels from row -1 by 2 to 13 (1 before the last, 14) and
  // from column -1 to 10.
  const v1::TensorMap& x = step->tensor_maps(0);
  EXPECT_EQ(x.mode(), v1::TensorMap::IM2COL);
  EXPECT_EQ(std::vector<uint64_t>(x.dims().begin(), x.dims().end()),
            (std::vector<uint64_t>{128, 12, 15, 3}));
  EXPECT_EQ(std::vector<uint32_t>(x.element_strides().begin(),
                                  x.element_strides().end()),
            (std::vector<uint32_t>{1, 1, 2, 1}));
  EXPECT_EQ(
      std::vector<int32_t>(x.lower_corner().begin(), x.lower_corner().end()),
      (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(
      std::vector<int32_t>(x.upper_corner().begin(), x.upper_corner().end()),
      (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(x.channels_per_pixel(), 64u);
  EXPECT_EQ(x.pixels_per_column(), 32u);
  EXPECT_EQ(x.swizzle_bytes(), 128u);
  // dy: boxes of 64 channels by 32 of the 3 * 8 * 12 positions.
  const v1::TensorMap& dy = step->tensor_maps(1);
  EXPECT_EQ(dy.mode(), v1::TensorMap::TILED);
  EXPECT_EQ(std::vector<uint64_t>(dy.dims().begin(), dy.dims().end()),
            (std::vector<uint64_t>{64, 3 * 8 * 12, 1, 1}));
  EXPECT_EQ(std::vector<uint32_t>(dy.box().begin(), dy.box().end()),
            (std::vector<uint32_t>{64, 32, 1, 1}));
  EXPECT_EQ(dy.swizzle_bytes(), 128u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(gpu::CheckTensorMap(*step, i, step->buffers_size()),
              absl::OkStatus());
  }
  // The ring, the alignment and the stage barriers.
  EXPECT_EQ(step->shared_bytes(), 6u * (128 + 128) * 32 * 2 + 1024 + 6 * 8);

  // 32 input channels: each tap's 64-channel box reads 32 past x's row as
  // zeros, its columns padded to 64. The default keeps to the copy ring; a
  // find also times its tile through the maps, and the wide one.
  p.c = 32;
  const PerfConfig ring = s->DefaultConfig(p);
  EXPECT_EQ(ring.size(), 6u);
  PerfConfig mapped = ring;
  mapped.push_back(1);
  EXPECT_EQ(s->FindConfigs(p), (std::vector<PerfConfig>{
                                   ring, mapped, {128, 128, 64, 8, 1, 3, 1}}));
  for (const PerfConfig& c : {ring, mapped}) {
    plan = s->MakePlan(p, c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const int64_t columns = 9 * (c.size() == 7 ? 64 : 32);
    for (const v1::KernelStep& st : plan->steps()) {
      if (st.kernel() == "conv_tc_wrw") {
        EXPECT_EQ(st.grid(0), CeilDiv(64, c[0]) * CeilDiv(columns, c[1]))
            << PerfConfigString(c);
        EXPECT_EQ(st.scalars(4), 32) << "x's channels a group";
      }
      // The partial sums' pitch a tap.
      if (st.kernel() == "tc_wrw_reduce") {
        EXPECT_EQ(st.scalars(3), columns / 9) << PerfConfigString(c);
      }
    }
  }
}

// Strided backward data: the plan's passes, replayed on the host, add up
// each product dy[oh] * w[r] into dx[oh * stride - pad + r] exactly once.
TEST(GpuSolvers, TensorCoreStridedBackwardDataCoversEachProductOnce) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  struct Case {
    int64_t h, w, r, sf, ph, pw, sh, sw;
  };
  for (const Case& c : {Case{15, 15, 3, 3, 1, 1, 2, 2},     // ResNet's 3x3 s2
                        Case{35, 35, 3, 3, 0, 0, 2, 2},     // Inception's
                        Case{17, 12, 5, 3, 2, 0, 3, 2},     // odd everything
                        Case{9, 9, 7, 7, 3, 3, 2, 2},       // 7x7 s2
                        Case{8, 10, 4, 2, 1, 1, 2, 2},      // even taps
                        Case{15, 13, 3, 3, 2, 2, 2, 2}}) {  // pass pad -1
    ConvProblem p;
    p.n = 2, p.c = 64, p.k = 96, p.in = {1, c.h, c.w},
    p.filter = {1, c.r, c.sf}, p.pad = {0, c.ph, c.pw},
    p.stride = {1, c.sh, c.sw};
    p.direction = Direction::kBackwardData;
    p.type = DataType::kFp16, p.layout = Layout::kNHWC;
    SCOPED_TRACE(testing::Message()
                 << c.h << "x" << c.w << " " << c.r << "x" << c.sf << " stride "
                 << c.sh << "x" << c.sw);
    ASSERT_EQ(s->IsApplicable(p), absl::OkStatus());
    const int64_t oh = p.out(1), ow = p.out(2);
    absl::StatusOr<v1::ExecutionPlan> plan =
        s->MakePlan(p, s->DefaultConfig(p));
    ASSERT_TRUE(plan.ok()) << plan.status();
    // (dx row, dx column, dy row, dy column, filter row, filter column).
    std::map<std::array<int64_t, 6>, int> seen;
    // How often each dx pixel is written: once, products or none.
    std::map<std::pair<int64_t, int64_t>, int> written;
    int64_t filter_elements = 0;
    for (const v1::KernelStep& pack : plan->steps()) {
      if (pack.kernel() != "tc_pack_filter_t") continue;
      ASSERT_EQ(pack.scalars_size(), 13);
      const int64_t jr = pack.scalars(7), js = pack.scalars(8);
      const int64_t qr = pack.scalars(9), qs = pack.scalars(10);
      filter_elements += 64 * jr * js * 96;
      EXPECT_EQ(pack.grid(2), static_cast<uint32_t>(jr * js));
      for (const v1::KernelStep& conv : plan->steps()) {
        if (conv.kernel() != "conv_tc" ||
            conv.buffers(1).offset_bytes() != pack.buffers(1).offset_bytes())
          continue;
        ASSERT_EQ(conv.scalars_size(), 22);
        EXPECT_EQ(conv.scalars(8), jr);
        EXPECT_EQ(conv.scalars(9), js);
        EXPECT_EQ(conv.scalars(12), 1);  // stride-1 passes
        EXPECT_EQ(conv.scalars(16), c.h);
        EXPECT_EQ(conv.scalars(17), c.w);
        const int64_t ph = conv.scalars(10), pw = conv.scalars(11);
        for (int64_t u = 0; u < conv.scalars(6); ++u) {
          for (int64_t v = 0; v < conv.scalars(7); ++v) {
            const int64_t ih = u * conv.scalars(18) + conv.scalars(20);
            const int64_t iw = v * conv.scalars(19) + conv.scalars(21);
            ++written[{ih, iw}];
            for (int64_t j = 0; j < jr; ++j) {
              for (int64_t l = 0; l < js; ++l) {
                const int64_t yh = u - ph + j, yw = v - pw + l;
                if (yh < 0 || yh >= oh || yw < 0 || yw >= ow) continue;
                ++seen[{ih, iw, yh, yw, qr + c.sh * (jr - 1 - j),
                        qs + c.sw * (js - 1 - l)}];
              }
            }
          }
        }
      }
    }
    EXPECT_EQ(filter_elements * 2, plan->workspace_bytes());
    int64_t expected = 0;
    for (int64_t yh = 0; yh < oh; ++yh) {
      for (int64_t yw = 0; yw < ow; ++yw) {
        for (int64_t r = 0; r < c.r; ++r) {
          for (int64_t q = 0; q < c.sf; ++q) {
            const int64_t ih = yh * c.sh - c.ph + r, iw = yw * c.sw - c.pw + q;
            if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
            ++expected;
            const auto it = seen.find({ih, iw, yh, yw, r, q});
            ASSERT_NE(it, seen.end())
                << "dx " << ih << "," << iw << " misses dy " << yh << "," << yw
                << " tap " << r << "," << q;
            EXPECT_EQ(it->second, 1);
          }
        }
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), expected);
    EXPECT_EQ(static_cast<int64_t>(written.size()), c.h * c.w);
    for (const auto& [pixel, times] : written) {
      EXPECT_TRUE(pixel.first >= 0 && pixel.first < c.h && pixel.second >= 0 &&
                  pixel.second < c.w)
          << pixel.first << "," << pixel.second;
      EXPECT_EQ(times, 1) << pixel.first << "," << pixel.second;
    }
  }
}

TEST(GpuSolvers, TensorCorePipelinedConstraintsAreNamed) {
  const Solver* s = SolverRegistry::Default().Find(kGpuTensorCorePipelinedId);
  EXPECT_TRUE(s->SupportsDevice({.backend = v1::CUDA, .arch = "sm_90"}));
  EXPECT_FALSE(s->SupportsDevice({.backend = v1::CUDA, .arch = "sm_75"}));
  EXPECT_FALSE(s->SupportsDevice({.backend = v1::HIP, .arch = "gfx90a"}));
  ConvProblem p;
  p.n = 2, p.c = 64, p.k = 64, p.in = {1, 14, 14}, p.filter = {1, 3, 3};
  const auto expect_named = [&](absl::string_view field) {
    const absl::Status st = s->IsApplicable(p);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StartsWith(st.message(), field)) << st;
  };
  expect_named("type:");
  p.type = DataType::kBf16;
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  // Strided backward data runs a pass for each phase of the stride: every
  // phase needs a tap, and undilated ones.
  p.direction = Direction::kBackwardData, p.stride = {1, 2, 2};
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  p.filter = {1, 1, 1};
  expect_named("stride:");
  p.filter = {1, 3, 3}, p.dilation = {1, 2, 2};
  expect_named("dilation:");
  p.dilation = {1, 1, 1};
  p.direction = Direction::kForward;
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  // A bit for each filter row and column: 32 of each at most.
  p.in = {1, 40, 40}, p.filter = {1, 32, 3};
  EXPECT_EQ(s->IsApplicable(p), absl::OkStatus());
  p.filter = {1, 3, 33};
  expect_named("filter:");
  p.filter = {1, 33, 3};
  expect_named("filter:");
  p.spatial_dims = 3, p.in = {4, 14, 14}, p.filter = {3, 3, 3},
  p.stride = {1, 1, 1};
  expect_named("spatial_dims:");
}

}  // namespace
}  // namespace convtune
