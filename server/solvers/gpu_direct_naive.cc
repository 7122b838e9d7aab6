// gpu_direct_naive: one thread per output element straight from the
// definition, 64-bit indices, every problem. The correctness baseline of the
// GPU backends.
#include <algorithm>

#include "kernels/reference.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

constexpr int64_t kBlock = 256;
// Blocks stride over larger outputs rather than growing the grid without end.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

class GpuDirectNaive final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuDirectNaiveId; }
  absl::string_view name() const override { return "gpu_direct_naive"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override { return 0; }
  // Every term is read from memory; no reuse through shared memory.
  double Efficiency(const ConvProblem& p) const override { return 0.01; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    const int source = AddSource(&plan, "conv_direct.cu", ProblemOptions(p));
    const int64_t blocks =
        std::min((p.output_elements() + kBlock - 1) / kBlock, kMaxBlocks);
    AddConvArgs(
        p, AddGpuStep(&plan, "conv_naive", source, {blocks, 1, 1}, kBlock));
    return plan;
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuDirectNaiveSolver() {
  return std::make_unique<GpuDirectNaive>();
}

}  // namespace convtune
