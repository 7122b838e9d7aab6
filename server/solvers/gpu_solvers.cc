#include "server/solvers/gpu_solvers.h"

namespace convtune {

std::vector<std::unique_ptr<Solver>> MakeGpuSolvers() {
  std::vector<std::unique_ptr<Solver>> all;
  all.push_back(NewGpuDirectNaiveSolver());
  all.push_back(NewGpuImplicitGemmSolver());
  all.push_back(NewGpuImplicitGemmStaticSolver());
  all.push_back(NewGpuDepthwiseSolver());
  all.push_back(NewGpuTensorCoreIgemmSolver());
  all.push_back(NewGpuIm2colGemmBlasSolver());
  all.push_back(NewGpuGemm1x1BlasSolver());
  all.push_back(NewGpuWinogradF2x3Solver());
  all.push_back(NewGpuDirectTiledSolver());
  all.push_back(NewGpuWinogradBlasSolver());
  all.push_back(NewGpuTensorCorePipelinedSolver());
  all.push_back(NewGpuTensorCoreWgmmaSolver());
  all.push_back(NewGpuFewChannelsSolver());
  all.push_back(NewGpuFewChannelsMmaSolver());
  return all;
}

}  // namespace convtune
