#include "server/solvers/cpu_solvers.h"

namespace convtune {

std::vector<std::unique_ptr<Solver>> MakeCpuSolvers() {
  std::vector<std::unique_ptr<Solver>> solvers;
  solvers.push_back(NewCpuDirectNaiveSolver());
  solvers.push_back(NewCpuDirectTiledSolver());
  solvers.push_back(NewCpuIm2colGemmSolver());
  solvers.push_back(NewCpuGemm1x1Solver());
  solvers.push_back(NewCpuWinogradF2x3Solver());
  return solvers;
}

}  // namespace convtune
