// Every GPU solver (cuDNN's among them), in every direction and type, on a CUDA
// device against the float64 reference: layers from the MIOpen perf-model lists
// (batch cut to at most 2; grouped and depthwise among them) plus small 3-D and
// NHWC problems; each kernel a tunable solver's configs compile to (its own
// kernels, not a library's) on one case at least. Fresh random inputs,
// NaN-poisoned outputs and workspace. Skips where no CUDA device is present.
#include "server/solvers/gpu_solvers.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/cuda_device.h"
#include "kernels/driver_line.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/cudnn_graph.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/kernel_builder.h"
#include "server/solver_registry.h"
#include "storage/store.h"
#include "tests/server/solver_check.h"
#include "tests/storage/storage_test_util.h"

namespace convtune {
namespace {

constexpr int kSamples = 256;
constexpr int64_t kMaxBatch = 2;

// Lines picked by what they exercise: {file, 1-based line}.
struct PerfLine {
  const char* file;
  int line;
};
constexpr PerfLine kPerfLines[] = {
    {"Resnet50_v1_FP32_BS128.txt", 1},  {"Resnet50_v1_FP32_BS128.txt", 5},
    {"Alexnet_v1_FP32_BS4.txt", 1},     {"Inception3_v1_FP32_BS128.txt", 20},
    {"Googlenet_v1_FP32_BS128.txt", 3}, {"VGG16_v1_FP32_BS4.txt", 2},
    {"Mobilenet_v1_FP32_BS4.txt", 2},   {"SSD_v1_FP32_BS128.txt", 4},
};
// Shufflenet's grouped and depthwise layers, found by their group count.
constexpr int kGroupedLines = 4;

std::string SharedDir() {
  const char* env = std::getenv("CONVTUNE_SHARED_DIR");
  return env != nullptr ? env : CONVTUNE_SHARED_DIR;
}

std::vector<std::string> ReadLines(const std::string& file) {
  std::ifstream in(SharedDir() + "/problems/miopen-perf-models/" + file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) lines.push_back(l);
  }
  return lines;
}

// The forward problem of a driver line with the batch cut down.
std::optional<ConvProblem> FromLine(const std::string& line) {
  absl::StatusOr<std::vector<ConvProblem>> ps = ParseDriverLine(line);
  if (!ps.ok() || ps->empty()) return std::nullopt;
  ConvProblem p = ps->front();
  p.n = std::min(p.n, kMaxBatch);
  return p;
}

ConvProblem Small(int dims, int64_t c, std::array<int64_t, 3> in, int64_t k,
                  int64_t f, int64_t stride, int64_t groups, Layout layout) {
  ConvProblem p;
  p.spatial_dims = dims;
  p.n = 2, p.c = c, p.k = k, p.groups = groups, p.layout = layout;
  p.in = in;
  p.filter = {dims == 3 ? f : 1, f, f};
  p.pad = {dims == 3 ? f / 2 : 0, f / 2, f / 2};
  p.stride = {dims == 3 ? stride : 1, stride, stride};
  return p;
}

struct Case {
  std::string name;
  ConvProblem p;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const PerfLine& pl : kPerfLines) {
    const std::vector<std::string> lines = ReadLines(pl.file);
    if (static_cast<int>(lines.size()) < pl.line) continue;
    if (auto p = FromLine(lines[pl.line - 1])) {
      cases.push_back({absl::StrCat(pl.file, ":", pl.line), *p});
    }
  }
  int grouped = 0;
  const std::vector<std::string> shuffle =
      ReadLines("Shufflenet_v2_FP16_BS128.txt");
  for (size_t i = 0; i < shuffle.size() && grouped < kGroupedLines; ++i) {
    auto p = FromLine(shuffle[i]);
    if (p && p->groups > 1) {
      p->type = DataType::kFp32;
      cases.push_back(
          {absl::StrCat("Shufflenet_v2_FP16_BS128.txt:", i + 1), *p});
      ++grouped;
    }
  }
  // Every other perf-model layer also in NHWC.
  for (size_t i = 0, n = cases.size(); i < n; i += 2) {
    Case c = cases[i];
    c.name += " NHWC";
    c.p.layout = Layout::kNHWC;
    cases.push_back(c);
  }
  for (Layout l : {Layout::kNCHW, Layout::kNHWC}) {
    const std::string suffix = l == Layout::kNHWC ? " NHWC" : " NCHW";
    cases.push_back(
        {"3d 3x3x3" + suffix, Small(3, 8, {5, 9, 8}, 12, 3, 1, 1, l)});
    cases.push_back(
        {"3d stride2 grouped" + suffix, Small(3, 8, {6, 7, 7}, 8, 3, 2, 4, l)});
    cases.push_back(
        {"3d depthwise" + suffix, Small(3, 6, {4, 6, 6}, 6, 3, 1, 6, l)});
    cases.push_back(
        {"odd channels" + suffix, Small(2, 13, {1, 11, 9}, 19, 3, 1, 1, l)});
    cases.push_back(
        {"multiplier 2" + suffix, Small(2, 8, {1, 10, 10}, 16, 5, 2, 8, l)});
    // Depthwise with dilation, its backward-weights rows long enough to be
    // split into chunks (gpu_depthwise's workspace and reduction).
    ConvProblem dilated = Small(2, 8, {1, 40, 40}, 8, 3, 1, 8, l);
    dilated.dilation = {1, 2, 2};
    cases.push_back({"depthwise dilation 2" + suffix, dilated});
    // Dense, dilated, a 3x5 filter with uneven padding: taps fall outside
    // the source on every side.
    ConvProblem wide = Small(2, 40, {1, 13, 17}, 24, 3, 1, 1, l);
    wide.filter = {1, 3, 5}, wide.pad = {0, 2, 1}, wide.dilation = {1, 2, 2};
    cases.push_back({"dilated 3x5" + suffix, wide});
    // 3 x 151 x 151 positions, which the warpgroup solver's W splits so
    // that the last split has none (the compile test
    // TensorCoreWgmmaLeavesTheLastSplitEmpty checks its plans).
    ConvProblem empty_split = Small(2, 32, {1, 151, 151}, 16, 1, 1, 1, l);
    empty_split.n = 3;
    cases.push_back({"W empty last split" + suffix, empty_split});
    // 64 channels each way, 3x3 stride 2: the warpgroup solver's W copies
    // through tensor maps, a 128-column tile spanning two taps, 126
    // positions (the last step partly past them).
    ConvProblem w_maps = Small(2, 64, {1, 13, 11}, 64, 3, 2, 1, l);
    w_maps.n = 3;
    cases.push_back({"W tensor maps" + suffix, w_maps});
    // Channels in eights but not 32s, two groups: W on the tensor cores
    // reads NHWC x and dy in place, a tap's 40 columns unpadded, so column
    // tiles span taps at 8-channel boundaries.
    cases.push_back({"W channels in eights" + suffix,
                     Small(2, 80, {1, 11, 10}, 48, 3, 1, 2, l)});
    // 256 output channels: two to four column tiles, so the warpgroup
    // solver's F and B run in clusters of two; 189 positions, so the last
    // row tile's second half lies wholly past them.
    ConvProblem pairs = Small(2, 64, {1, 9, 7}, 256, 3, 1, 1, l);
    pairs.n = 3;
    cases.push_back({"cluster pairs" + suffix, pairs});
    // Depthwise with channels in vectors of 8 split over blocks (40), odd
    // sizes, 5x5 stride 2 (backward data gathers), and 3x3 stride 1.
    cases.push_back({"depthwise 5x5 stride 2" + suffix,
                     Small(2, 40, {1, 13, 11}, 40, 5, 2, 40, l)});
    cases.push_back({"depthwise 3x3 odd channels" + suffix,
                     Small(2, 13, {1, 9, 12}, 13, 3, 1, 13, l)});
    // Depthwise 3x3 stride 2 on rows of 16: NCHW's row kernels read x, and
    // B's 8-wide dy rows, in whole vectors and write whole runs.
    cases.push_back({"depthwise 3x3 stride 2 rows of 16" + suffix,
                     Small(2, 24, {1, 12, 16}, 24, 3, 2, 24, l)});
    // Grouped 1x1 stride 1 (BLAS 1x1), 2-D and 3-D.
    cases.push_back(
        {"grouped 1x1" + suffix, Small(2, 12, {1, 7, 9}, 18, 1, 1, 3, l)});
    cases.push_back(
        {"3d grouped 1x1" + suffix, Small(3, 6, {3, 5, 4}, 9, 1, 1, 3, l)});
    // Strided 1x1 (BLAS 1x1 gathers x, writes dx whole), 2-D and 3-D,
    // grouped, and more images for dw's one GEMM over them.
    ConvProblem strided = Small(2, 12, {1, 9, 8}, 10, 1, 2, 1, l);
    strided.n = 5;
    cases.push_back({"1x1 stride 2 n5" + suffix, strided});
    // Channels in whole 16-byte vectors: the NHWC gather and scatter move
    // vectors.
    cases.push_back({"1x1 stride 2 c16 k24" + suffix,
                     Small(2, 16, {1, 9, 10}, 24, 1, 2, 1, l)});
    cases.push_back({"grouped 1x1 stride 2" + suffix,
                     Small(2, 12, {1, 7, 9}, 18, 1, 2, 3, l)});
    // Sampled rows equally spaced (H = 2 OH): NHWC F and B batch the BLAS
    // 1x1 GEMM over the output rows in place, B zeroing the rest of dx.
    cases.push_back({"1x1 stride 2 whole rows c16 k24" + suffix,
                     Small(2, 16, {1, 10, 9}, 24, 1, 2, 1, l)});
    cases.push_back({"grouped 1x1 stride 2 whole rows" + suffix,
                     Small(3, 12, {1, 8, 7}, 18, 1, 2, 3, l)});
    cases.push_back(
        {"3d 1x1 stride 2" + suffix, Small(3, 6, {5, 5, 4}, 9, 1, 2, 3, l)});
    // 3x3 stride 1 (Winograd): grouped with odd sizes, and unequal pads,
    // which backward data turns into 0 and 2.
    cases.push_back(
        {"grouped 3x3" + suffix, Small(2, 16, {1, 9, 11}, 24, 3, 1, 4, l)});
    // A first layer: 3 channels, 7x7 stride 2 (the tensor-core solvers fold
    // its filter width into the channels).
    cases.push_back({"3 channels 7x7 stride 2" + suffix,
                     Small(2, 3, {1, 37, 35}, 16, 7, 2, 1, l)});
    // A first layer of 3x3 stride 2 without padding, 32 filters; its last
    // input row and column are read by no output.
    ConvProblem first = Small(2, 3, {1, 38, 36}, 32, 3, 2, 1, l);
    first.pad = {0, 0, 0};
    cases.push_back({"3 channels 3x3 stride 2 k32" + suffix, first});
    ConvProblem pads = Small(2, 6, {1, 7, 9}, 10, 3, 1, 1, l);
    pads.pad = {0, 2, 0};
    cases.push_back({"3x3 pads 2,0" + suffix, pads});
    // 3x3 stride 2 without padding, odd sizes: the tensor-core solvers'
    // backward data runs four phases of one and two taps a side.
    ConvProblem unpadded = Small(2, 32, {1, 15, 13}, 40, 3, 2, 1, l);
    unpadded.pad = {0, 0, 0};
    cases.push_back({"3x3 stride 2 unpadded" + suffix, unpadded});
    // Padding 2: a phase's pass is padded by -1 (its first output reads
    // the source's second row), the im2col map's lower corner positive.
    ConvProblem wide_pad = unpadded;
    wide_pad.pad = {0, 2, 2};
    cases.push_back({"3x3 stride 2 padding 2" + suffix, wide_pad});
  }
  return cases;
}

class GpuSolverCorrectness : public ::testing::TestWithParam<Combo> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GpuDevice>> device = CudaDevice::Open(0);
    if (!device.ok()) {
      ASSERT_EQ(device.status().code(), absl::StatusCode::kUnavailable)
          << device.status();
      GTEST_SKIP() << "no CUDA device here: " << device.status().message();
    }
    device_ = *std::move(device);
    absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
    ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
    compiler_ = *std::move(nvrtc);
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRocksDbStore(dir_.db());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    builder_ = std::make_unique<KernelBuilder>(device_.get(), *compiler_,
                                               *store_, device_->info().arch);
    registry_ = SolverRegistry::WithLibraries(*device_);
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Upload(
      const std::vector<char>& host) {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> buf,
                     device_->Allocate(std::max<int64_t>(host.size(), 1)));
    RETURN_IF_ERROR(device_->CopyToDevice(buf.get(), host.data(), host.size()));
    return buf;
  }

  void RunAndCheck(const ConvProblem& p, const Solver& solver,
                   const PerfConfig& config, std::mt19937_64& rng);

  storage::testing::TempDir dir_;
  std::unique_ptr<GpuDevice> device_;
  std::unique_ptr<KernelCompiler> compiler_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<KernelBuilder> builder_;
  std::unique_ptr<SolverRegistry> registry_;
};

// NaN in each element of x that no output position reads: the input past
// the last window along a spatial axis, or under a dilated filter's gaps.
// Backward weights must ignore it (its dw is finite), as for the
// few-channel kernels, which stage whole input tiles and multiply them by
// the zero dy past the output edge.
void PoisonUnreadInput(const ConvProblem& p, std::vector<char>* x) {
  std::array<std::vector<bool>, 3> read;
  for (int a = 0; a < 3; ++a) {
    read[a].assign(p.in[a], false);
    for (int64_t o = 0; o < p.out(a); ++o) {
      for (int64_t r = 0; r < p.filter[a]; ++r) {
        const int64_t i = o * p.stride[a] - p.pad[a] + r * p.dilation[a];
        if (i >= 0 && i < p.in[a]) read[a][i] = true;
      }
    }
  }
  const Strides s = XStrides(p);
  const int64_t es = ElementBytes(p.type);
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t c = 0; c < p.c; ++c) {
      for (int64_t d = 0; d < p.in[0]; ++d) {
        for (int64_t h = 0; h < p.in[1]; ++h) {
          for (int64_t w = 0; w < p.in[2]; ++w) {
            if (read[0][d] && read[1][h] && read[2][w]) continue;
            const int64_t at =
                n * s[0] + c * s[1] + d * s[2] + h * s[3] + w * s[4];
            FillNaN(x->data() + at * es, p.type, 1);
          }
        }
      }
    }
  }
}

void GpuSolverCorrectness::RunAndCheck(const ConvProblem& p,
                                       const Solver& solver,
                                       const PerfConfig& config,
                                       std::mt19937_64& rng) {
  SCOPED_TRACE(absl::StrCat("config [", PerfConfigString(config), "]"));
  const int64_t es = ElementBytes(p.type);
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  FillRandom(y.data(), p.type, p.y_elements(), rng);
  if (p.direction == Direction::kBackwardWeights &&
      (solver.id() == kGpuFewChannelsId ||
       solver.id() == kGpuFewChannelsMmaId)) {
    PoisonUnreadInput(p, &x);
  }
  std::vector<char>* out = &ByTensor(p.output(), x, w, y);
  FillNaN(out->data(), p.type, out->size() / es);

  absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->workspace_bytes(), solver.ConfigWorkspaceBytes(p, config));
  // A GPU solver's plan runs on whichever GPU backend builds it.
  plan->set_backend(device_->info().backend);
  ASSERT_EQ(builder_->BuildPlan(&*plan), absl::OkStatus());

  std::vector<char> ws(plan->workspace_bytes());
  FillNaN(ws.data(), DataType::kFp32, ws.size() / sizeof(float));
  auto dx = Upload(x), dw = Upload(w), dy = Upload(y), dws = Upload(ws);
  for (auto* b : {&dx, &dw, &dy, &dws}) ASSERT_TRUE(b->ok()) << b->status();
  PlanBuffers buffers{(*dx)->data(), (*dw)->data(), (*dy)->data(),
                      ws.empty() ? nullptr : (*dws)->data(),
                      plan->workspace_bytes()};
  ASSERT_EQ(ExecutePlan(*device_, *plan, buffers), absl::OkStatus());
  ASSERT_EQ(device_->Synchronize(), absl::OkStatus());
  const DeviceBuffer& result = **ByTensor(p.output(), dx, dw, dy);
  std::vector<char> got(out->size());
  ASSERT_EQ(device_->CopyFromDevice(got.data(), result, got.size()),
            absl::OkStatus());
  EXPECT_EQ(CheckOutput(p, HostTensors{x.data(), w.data(), y.data()},
                        got.data(), kSamples, rng),
            absl::OkStatus());
}

// The kernels the plan of `config` compiles for p, as one string: each
// source's file, options and arch suffix. Empty where the plan compiles
// nothing (a library's engines, whose configs are the problem's own).
std::string CompiledKernels(const Solver& solver, const ConvProblem& p,
                            const PerfConfig& config) {
  const absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
  if (!plan.ok()) return "";
  std::string out;
  for (const v1::KernelSource& s : plan->sources()) {
    absl::StrAppend(&out, s.file(), " ", absl::StrJoin(s.options(), " "), " ",
                    s.arch_suffix(), ";");
  }
  return out;
}

TEST_P(GpuSolverCorrectness, MatchesReference) {
  const Combo combo = GetParam();
  const Solver* solver = registry_->Find(combo.solver_id);
  if (solver == nullptr && combo.solver_id == gpu::kCudnnSolverId) {
    GTEST_SKIP() << "no cuDNN 9 on " << device_->info().Key();
  }
  ASSERT_NE(solver, nullptr);
  if (!SolverRegistry::Runs(*solver, device_->info())) {
    GTEST_SKIP() << solver->name() << " does not run on "
                 << device_->info().arch;
  }
  std::random_device seeds;
  int applicable = 0, grouped = 0;
  // Kernels (CompiledKernels) of this solver already run on a case.
  std::set<std::string> checked;
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 20u)
      << "perf-model lists not found under " << SharedDir();
  for (const Case& c : cases) {
    ConvProblem p = c.p;
    p.direction = combo.direction;
    p.type = combo.type;
    ASSERT_EQ(ValidateProblem(p), absl::OkStatus()) << c.name;
    const absl::Status applies = solver->IsApplicable(p);
    if (!applies.ok()) {
      EXPECT_EQ(applies.code(), absl::StatusCode::kFailedPrecondition)
          << applies;
      continue;
    }
    ++applicable;
    grouped += p.groups > 1;
    const uint64_t seed = (uint64_t{seeds()} << 32) | seeds();
    std::mt19937_64 rng(seed);
    SCOPED_TRACE(
        absl::StrCat(c.name, ": ", DescribeProblem(p), " seed ", seed));
    // The default, and the first, middle and last configs of dynamic
    // solvers, then each config of the space whose kernels (as compiled for
    // this case: filter, stride and vector widths compiled in) no earlier
    // case ran, so that every kernel a config compiles to is checked once at
    // least. Every config of every case for the warpgroup-MMA one.
    std::vector<PerfConfig> configs = {solver->DefaultConfig(p)};
    const std::vector<PerfConfig> space = solver->ConfigSpace(p);
    if (solver->id() == kGpuTensorCoreWgmmaId) {
      configs = space;
    } else if (solver->dynamic()) {
      std::vector<PerfConfig> extras = {space.front(), space[space.size() / 2],
                                        space.back()};
      for (const PerfConfig& cfg : space) {
        const std::string kernels = CompiledKernels(*solver, p, cfg);
        if (!kernels.empty() && checked.count(kernels) == 0) {
          extras.push_back(cfg);
        }
      }
      for (const PerfConfig& extra : extras) {
        if (std::find(configs.begin(), configs.end(), extra) == configs.end()) {
          configs.push_back(extra);
        }
      }
    }
    for (const PerfConfig& config : configs) {
      ASSERT_EQ(solver->ValidateConfig(p, config), absl::OkStatus());
      RunAndCheck(p, *solver, config, rng);
      if (HasFatalFailure()) return;
      checked.insert(CompiledKernels(*solver, p, config));
    }
  }
  EXPECT_GE(applicable, 4) << "too few problems apply to " << solver->name();
  EXPECT_GE(grouped, 2) << "too few grouped problems apply to "
                        << solver->name();
}

std::vector<Combo> AllCombos() {
  std::vector<Combo> combos = CombosOf(
      {kGpuDirectNaiveId, kGpuImplicitGemmId, kGpuImplicitGemmStaticId,
       kGpuDepthwiseId, kGpuTensorCoreIgemmId, kGpuIm2colGemmBlasId,
       kGpuGemm1x1BlasId, kGpuWinogradF2x3Id, kGpuDirectTiledId,
       kGpuWinogradBlasId, kGpuTensorCorePipelinedId, kGpuTensorCoreWgmmaId,
       kGpuFewChannelsId, kGpuFewChannelsMmaId, gpu::kCudnnSolverId});
  // The tensor-core solvers take 16-bit types only; the few-channel ones
  // run no backward data.
  combos.erase(
      std::remove_if(combos.begin(), combos.end(),
                     [](const Combo& c) {
                       return (c.type == DataType::kFp32 &&
                               (c.solver_id == kGpuTensorCoreIgemmId ||
                                c.solver_id == kGpuTensorCorePipelinedId ||
                                c.solver_id == kGpuTensorCoreWgmmaId ||
                                c.solver_id == kGpuFewChannelsMmaId)) ||
                              ((c.solver_id == kGpuFewChannelsId ||
                                c.solver_id == kGpuFewChannelsMmaId) &&
                               c.direction == Direction::kBackwardData);
                     }),
      combos.end());
  return combos;
}

INSTANTIATE_TEST_SUITE_P(AllSolvers, GpuSolverCorrectness,
                         ::testing::ValuesIn(AllCombos()), ComboName);

}  // namespace
}  // namespace convtune
