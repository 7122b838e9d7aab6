// The GPU solvers: kernels written once for NVRTC (cuda) and hiprtc (hip),
// compiled at run time from kernels/gpu/conv_*.cu. Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_SOLVERS_GPU_SOLVERS_H_
#define CONVTUNE_SERVER_SOLVERS_GPU_SOLVERS_H_

#include <memory>
#include <vector>

#include "server/solver.h"

namespace convtune {

// Solver ids of the GPU backends: 100-199. Never reuse an id.
inline constexpr uint32_t kGpuDirectNaiveId = 101;
inline constexpr uint32_t kGpuImplicitGemmId = 102;
inline constexpr uint32_t kGpuImplicitGemmStaticId = 103;
inline constexpr uint32_t kGpuDepthwiseId = 104;
inline constexpr uint32_t kGpuTensorCoreIgemmId = 105;
inline constexpr uint32_t kGpuIm2colGemmBlasId = 106;
inline constexpr uint32_t kGpuGemm1x1BlasId = 107;
inline constexpr uint32_t kGpuWinogradF2x3Id = 108;
inline constexpr uint32_t kGpuDirectTiledId = 109;
inline constexpr uint32_t kGpuWinogradBlasId = 110;
inline constexpr uint32_t kGpuTensorCorePipelinedId = 111;
inline constexpr uint32_t kGpuTensorCoreWgmmaId = 112;
inline constexpr uint32_t kGpuFewChannelsId = 113;
inline constexpr uint32_t kGpuFewChannelsMmaId = 114;

// One factory per solver above, each defined in its solver's file.
std::unique_ptr<Solver> NewGpuDirectNaiveSolver();
std::unique_ptr<Solver> NewGpuImplicitGemmSolver();
std::unique_ptr<Solver> NewGpuImplicitGemmStaticSolver();
std::unique_ptr<Solver> NewGpuDepthwiseSolver();
std::unique_ptr<Solver> NewGpuTensorCoreIgemmSolver();
std::unique_ptr<Solver> NewGpuIm2colGemmBlasSolver();
std::unique_ptr<Solver> NewGpuGemm1x1BlasSolver();
std::unique_ptr<Solver> NewGpuWinogradF2x3Solver();
std::unique_ptr<Solver> NewGpuDirectTiledSolver();
std::unique_ptr<Solver> NewGpuWinogradBlasSolver();
std::unique_ptr<Solver> NewGpuTensorCorePipelinedSolver();
std::unique_ptr<Solver> NewGpuTensorCoreWgmmaSolver();
std::unique_ptr<Solver> NewGpuFewChannelsSolver();
std::unique_ptr<Solver> NewGpuFewChannelsMmaSolver();

std::vector<std::unique_ptr<Solver>> MakeGpuSolvers();

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_GPU_SOLVERS_H_
