// gpu_gemm_1x1_blas: a 1x1 convolution with stride 1 and no padding as
// strided-batched GEMMs on the vendor BLAS (cuBLAS, rocBLAS), straight on the
// tensors. With S the spatial size, per group g (row-major matrices):
//   NCHW  F  y[n,g]  (K/G x S)   = w[g] (K/G x C/G) * x[n,g] (C/G x S)
//         B  dx[n,g] (C/G x S)   = w[g]^T * dy[n,g]
//         W  dw[g]   (K/G x C/G) = sum over n of dy[n,g] * x[n,g]^T
//   NHWC  the batch is one (N*S) x C matrix, a group's channels a column block:
//         F  y[:,g]  (N*S x K/G) = x[:,g] (N*S x C/G) * w[g]^T
//         B  dx[:,g] (N*S x C/G) = dy[:,g] * w[g]
//         W  dw[g]   (K/G x C/G) = dy[:,g]^T * x[:,g]
// NCHW F and B batch over the images or over the groups, whichever takes
// fewer steps; NHWC is one step batched over the groups. NCHW W sums one
// GEMM per image into dw: in place for fp32, in an fp32 workspace converted
// at the end for fp16 and bf16 (rounding every partial sum to 16 bits would
// lose precision as the batch grows).
#include "absl/strings/str_cat.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/gpu_blas_plan.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"

namespace convtune {
namespace {

// dw is summed over more than one GEMM in an fp32 workspace.
bool SumsDwInWorkspace(const ConvProblem& p) {
  return p.direction == Direction::kBackwardWeights && p.layout == Layout::kNCHW &&
         p.type != DataType::kFp32 && p.n > 1;
}

class GpuGemm1x1Blas final : public GpuSolver {
 public:
  uint32_t id() const override { return kGpuGemm1x1BlasId; }
  absl::string_view name() const override { return "gpu_gemm_1x1_blas"; }
  AlgorithmFamily family() const override { return AlgorithmFamily::kGemm; }
  bool dynamic() const override { return true; }
  bool SupportsDevice(const DeviceInfo& device) const override { return !device.blas.empty(); }

  absl::Status IsApplicable(const ConvProblem& p) const override {
    if (p.filter_spatial() != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("filter: gpu_gemm_1x1_blas needs a 1x1 filter, got ", FilterString(p)));
    }
    for (int i = 0; i < 3; ++i) {
      if (p.pad[i] != 0) {
        return absl::FailedPreconditionError("pad: gpu_gemm_1x1_blas needs pad 0");
      }
      if (p.stride[i] != 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("stride: gpu_gemm_1x1_blas needs stride 1, got ", p.stride[i]));
      }
    }
    const int64_t rows = p.layout == Layout::kNHWC ? p.n * p.in_spatial() : p.in_spatial();
    return CheckBlasSizes(name(), {{"the GEMM rows (N*D*H*W or D*H*W)", rows},
                                   {"C", p.c},
                                   {"K", p.k},
                                   {"N", p.n}});
  }

  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return SumsDwInWorkspace(p) ? p.w_elements() * static_cast<int64_t>(sizeof(float)) : 0;
  }

  // Relative to the fp32 peak the estimate scales by: a BLAS GEMM on the
  // tensors in place reaches most of it; fp16 and bf16 run on tensor or
  // matrix cores, faster than the fp32 peak (the estimate caps this at 1).
  double Efficiency(const ConvProblem& p) const override {
    return p.type == DataType::kFp32 ? 0.7 : 1.0;
  }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(const ConvProblem& p,
                                             const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    if (p.layout == Layout::kNHWC) {
      AddNhwcSteps(p, &plan);
    } else {
      AddNchwSteps(p, &plan);
    }
    return plan;
  }

 private:
  static void AddNhwcSteps(const ConvProblem& p, v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t rows = p.n * p.in_spatial();
    const GemmOperand x{v1::BUFFER_X, 0, 0, cg, es}, y{v1::BUFFER_Y, 0, 0, kg, es};
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    switch (p.direction) {
      case Direction::kForward:
        g.m = rows, g.n = kg, g.k = cg, g.trans_b = true;
        g.lda = p.c, g.ldb = cg, g.ldc = p.k;
        AddGemmsPerImage(g, x, w, y, 1, p.groups, false, plan);
        break;
      case Direction::kBackwardData:
        g.m = rows, g.n = cg, g.k = kg;
        g.lda = p.k, g.ldb = cg, g.ldc = p.c;
        AddGemmsPerImage(g, y, w, x, 1, p.groups, false, plan);
        break;
      case Direction::kBackwardWeights:
        g.m = kg, g.n = cg, g.k = rows, g.trans_a = true;
        g.lda = p.k, g.ldb = p.c, g.ldc = cg;
        AddGemmsPerImage(g, y, x, w, 1, p.groups, false, plan);
        break;
    }
  }

  static void AddNchwSteps(const ConvProblem& p, v1::ExecutionPlan* plan) {
    const int64_t es = ElementBytes(p.type), cg = p.c_per_group(), kg = p.k_per_group();
    const int64_t s = p.in_spatial();
    const GemmOperand x{v1::BUFFER_X, 0, p.c * s, cg * s, es};
    const GemmOperand y{v1::BUFFER_Y, 0, p.k * s, kg * s, es};
    const GemmOperand w{v1::BUFFER_W, 0, 0, kg * cg, es};
    gpu::BlasGemm g;
    g.ab_type = g.c_type = p.type;
    switch (p.direction) {
      case Direction::kForward:
        g.m = kg, g.n = s, g.k = cg;
        g.lda = cg, g.ldb = s, g.ldc = s;
        AddGroupedGemms(g, w, x, y, p.n, p.groups, plan);
        break;
      case Direction::kBackwardData:
        g.m = cg, g.n = s, g.k = kg, g.trans_a = true;
        g.lda = cg, g.ldb = s, g.ldc = s;
        AddGroupedGemms(g, w, y, x, p.n, p.groups, plan);
        break;
      case Direction::kBackwardWeights: {
        g.m = kg, g.n = cg, g.k = s, g.trans_b = true;
        g.lda = s, g.ldb = s, g.ldc = cg;
        const bool in_workspace = SumsDwInWorkspace(p);
        GemmOperand dw = w;
        if (in_workspace) {
          g.c_type = DataType::kFp32;
          dw = {v1::BUFFER_WORKSPACE, 0, 0, kg * cg, sizeof(float)};
        }
        AddGemmsPerImage(g, y, x, dw, p.n, p.groups, /*sum_images=*/true, plan);
        if (in_workspace) AddDwFromFp32Step(p, 0, plan);
        break;
      }
    }
  }
};

}  // namespace

std::unique_ptr<Solver> NewGpuGemm1x1BlasSolver() { return std::make_unique<GpuGemm1x1Blas>(); }

}  // namespace convtune
