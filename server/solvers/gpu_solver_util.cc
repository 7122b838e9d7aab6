#include "server/solvers/gpu_solver_util.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/index_math.h"
#include "kernels/plan_args.h"

namespace convtune {
namespace {

constexpr int64_t kMaxGridYZ = 65535;
// The block count a default config aims for: about one wave on a large GPU,
// whose SM count DefaultConfig does not know.
constexpr int64_t kTargetBlocks = 128;
// Backward-weights K splits, and the reduction length each must keep at least.
constexpr int64_t kSplits[] = {1, 4, 16};
constexpr int64_t kMinReductionPerSplit = 256;

// Block tiles, largest first: {BM, BN, BK, TM or WM, TN or WN}.
constexpr std::array<int64_t, 5> kFmaTiles[] = {
    {128, 128, 8, 8, 8}, {128, 64, 8, 8, 4}, {64, 128, 8, 4, 8},
    {64, 64, 8, 4, 4},   {64, 32, 16, 4, 4}, {32, 64, 16, 4, 4},
    {32, 32, 16, 4, 4}};
constexpr std::array<int64_t, 5> kMmaTiles[] = {{128, 128, 16, 2, 4},
                                                {128, 64, 16, 4, 2},
                                                {64, 128, 16, 2, 4},
                                                {64, 64, 16, 2, 2}};

int64_t MaxSplits(const ConvProblem& p) {
  if (p.direction != Direction::kBackwardWeights) return 1;
  const int64_t reduction = p.n * p.out_spatial();
  int64_t best = 1;
  for (int64_t s : kSplits) {
    if (reduction >= s * kMinReductionPerSplit) best = s;
  }
  return best;
}

int64_t Threads(const PerfConfig& c, IgemmCore core) {
  return core == IgemmCore::kMma ? c[3] * c[4] * 32
                                 : (c[0] / c[3]) * (c[1] / c[4]);
}

int64_t Blocks(const ConvProblem& p, const PerfConfig& c) {
  const IgemmShape s = IgemmGemmShape(p);
  return CeilDiv(s.rows, c[0]) * CeilDiv(s.cols, c[1]) * s.groups * c[5];
}

}  // namespace

bool CudaSmAtLeast(const DeviceInfo& device, int sm) {
  if (device.backend != v1::CUDA || !absl::StartsWith(device.arch, "sm_"))
    return false;
  return std::atoi(device.arch.c_str() + 3) >= sm;
}

std::vector<std::string> ProblemOptions(const ConvProblem& p) {
  return {absl::StrCat("-DCT_TYPE=", static_cast<int>(p.type)),
          absl::StrCat("-DCT_DIR=", static_cast<int>(p.direction)),
          absl::StrCat("-DCT_NHWC=", p.layout == Layout::kNHWC ? 1 : 0)};
}

int AddSource(v1::ExecutionPlan* plan, absl::string_view file,
              const std::vector<std::string>& options) {
  for (int i = 0; i < plan->sources_size(); ++i) {
    const v1::KernelSource& s = plan->sources(i);
    if (s.file() == file && std::equal(s.options().begin(), s.options().end(),
                                       options.begin(), options.end())) {
      return i;
    }
  }
  v1::KernelSource* s = plan->add_sources();
  s->set_file(std::string(file));
  for (const std::string& o : options) s->add_options(o);
  return plan->sources_size() - 1;
}

v1::KernelStep* AddGpuStep(v1::ExecutionPlan* plan, absl::string_view kernel,
                           int source, std::array<int64_t, 3> grid,
                           uint32_t block) {
  v1::KernelStep* step = plan->add_steps();
  step->set_kernel(std::string(kernel));
  step->set_source_index(source);
  for (int64_t g : grid) step->add_grid(static_cast<uint32_t>(g));
  step->add_block(block);
  step->add_block(1);
  step->add_block(1);
  return step;
}

void AddSumSlicesStep(v1::ExecutionPlan* plan, absl::string_view kernel,
                      int source, int64_t workspace_offset, int64_t count,
                      int64_t slices) {
  // A row of 32 threads per slice, up to 32 rows: few elements of many
  // slices (a W's chunks) still put a load of each slice in flight at once.
  constexpr int64_t kMaxRows = 32, kElementsPerBlock = 32, kMaxBlocks = 4096;
  const int64_t rows = std::clamp<int64_t>(slices, 1, kMaxRows);
  v1::KernelStep* step = AddGpuStep(
      plan, kernel, source,
      {std::clamp<int64_t>(CeilDiv(count, kElementsPerBlock), 1, kMaxBlocks), 1,
       1},
      static_cast<uint32_t>(32 * rows));
  AddBuffer(step, v1::BUFFER_WORKSPACE, workspace_offset);
  AddBuffer(step, v1::BUFFER_W);
  step->add_scalars(count);
  step->add_scalars(slices);
}

void AddConvArgs(const ConvProblem& p, v1::KernelStep* step) {
  AddBuffer(step, v1::BUFFER_X);
  AddBuffer(step, v1::BUFFER_W);
  AddBuffer(step, v1::BUFFER_Y);
  AppendProblemScalars(p, step);
}

absl::Status CheckIndex32(const ConvProblem& p, absl::string_view solver,
                          int64_t copies) {
  const int64_t largest =
      std::max({p.x_elements(), p.w_elements(), p.y_elements()});
  if (largest > kMaxIndex32 / copies) {
    return absl::FailedPreconditionError(absl::StrCat(
        solver, " indexes tensors in 32 bits: a tensor of ", largest,
        " elements", copies > 1 ? absl::StrCat(" (x", copies, ")") : "",
        " exceeds 2^31 - 1"));
  }
  return absl::OkStatus();
}

IgemmShape IgemmGemmShape(const ConvProblem& p) {
  switch (p.direction) {
    case Direction::kForward:
      return {p.n * p.out_spatial(), p.k_per_group(), p.groups};
    case Direction::kBackwardData:
      return {p.n * p.in_spatial(), p.c_per_group(), p.groups};
    case Direction::kBackwardWeights:
      return {p.k_per_group(), p.c_per_group() * p.filter_spatial(), p.groups};
  }
  return {0, 0, 0};
}

std::vector<PerfConfig> IgemmConfigSpace(const ConvProblem& p, IgemmCore core) {
  std::vector<PerfConfig> space;
  const int64_t max_splits = MaxSplits(p);
  const auto add = [&](const std::array<int64_t, 5>& t) {
    for (int64_t s : kSplits) {
      if (s <= max_splits) space.push_back({t[0], t[1], t[2], t[3], t[4], s});
    }
  };
  if (core == IgemmCore::kMma) {
    for (const auto& t : kMmaTiles) add(t);
  } else {
    for (const auto& t : kFmaTiles) add(t);
  }
  return space;
}

PerfConfig IgemmDefaultConfig(const ConvProblem& p, IgemmCore core) {
  // The largest tile (and fewest splits) that still gives a wave of blocks.
  const std::vector<PerfConfig> space = IgemmConfigSpace(p, core);
  for (const PerfConfig& c : space) {
    if (Blocks(p, c) >= kTargetBlocks) return c;
  }
  PerfConfig best = space.front();
  for (const PerfConfig& c : space) {
    if (Blocks(p, c) > Blocks(p, best)) best = c;
  }
  return best;
}

int64_t IgemmWorkspaceBytes(const ConvProblem& p) {
  const int64_t splits = MaxSplits(p);
  return splits > 1
             ? splits * p.w_elements() * static_cast<int64_t>(sizeof(float))
             : 0;
}

absl::Status IgemmApplicable(const ConvProblem& p, absl::string_view solver) {
  if (absl::Status s = CheckIndex32(p, solver, MaxSplits(p)); !s.ok()) return s;
  const IgemmShape s = IgemmGemmShape(p);
  // The smallest tiles give the largest grids; y and z are 16-bit on the GPU.
  if (CeilDiv(s.cols, 32) > kMaxGridYZ ||
      s.groups * MaxSplits(p) > kMaxGridYZ) {
    return absl::FailedPreconditionError(absl::StrCat(
        solver, " launches GEMM columns and groups on 16-bit grid axes: ",
        s.cols, " columns per group and ", s.groups, " groups are too many"));
  }
  return absl::OkStatus();
}

void AddIgemmSteps(const ConvProblem& p, const PerfConfig& c, IgemmCore core,
                   bool specialise, v1::ExecutionPlan* plan) {
  std::vector<std::string> options = ProblemOptions(p);
  const bool mma = core == IgemmCore::kMma;
  const char* names[] = {"BM", "BN", "BK", mma ? "WM" : "TM",
                         mma ? "WN" : "TN"};
  for (int i = 0; i < 5; ++i)
    options.push_back(absl::StrCat("-D", names[i], "=", c[i]));
  if (mma) options.push_back("-DCT_MMA=1");
  const int64_t splits = c[5];
  if (splits > 1) options.push_back("-DCT_WS_OUT=1");
  if (specialise) {
    options.push_back("-DCT_STATIC=1");
    const std::pair<const char*, int64_t> sizes[] = {{"N", p.n},
                                                     {"C", p.c},
                                                     {"K", p.k},
                                                     {"G", p.groups},
                                                     {"ID", p.in[0]},
                                                     {"IH", p.in[1]},
                                                     {"IW", p.in[2]},
                                                     {"FD", p.filter[0]},
                                                     {"FH", p.filter[1]},
                                                     {"FW", p.filter[2]},
                                                     {"PD", p.pad[0]},
                                                     {"PH", p.pad[1]},
                                                     {"PW", p.pad[2]},
                                                     {"SD", p.stride[0]},
                                                     {"SH", p.stride[1]},
                                                     {"SW", p.stride[2]},
                                                     {"DD", p.dilation[0]},
                                                     {"DH", p.dilation[1]},
                                                     {"DW", p.dilation[2]}};
    for (const auto& [name, v] : sizes)
      options.push_back(absl::StrCat("-DCT_S_", name, "=", v));
  }
  const int source = AddSource(plan, "conv_igemm.cu", options);
  const IgemmShape s = IgemmGemmShape(p);
  v1::KernelStep* step = AddGpuStep(
      plan, "conv_igemm", source,
      {CeilDiv(s.rows, c[0]), CeilDiv(s.cols, c[1]), s.groups * splits},
      static_cast<uint32_t>(Threads(c, core)));
  AddBuffer(step, v1::BUFFER_X);
  AddBuffer(step, v1::BUFFER_W);
  AddBuffer(step, v1::BUFFER_Y);
  if (splits > 1) AddBuffer(step, v1::BUFFER_WORKSPACE);
  AppendProblemScalars(p, step);
  step->add_scalars(splits);
  if (splits > 1) {
    AddSumSlicesStep(plan, "conv_igemm_reduce", source, 0, p.w_elements(),
                     splits);
  }
}

}  // namespace convtune
