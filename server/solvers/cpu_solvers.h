// The CPU backend's solvers: their ids, their factories and MakeCpuSolvers()
// collecting them. Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_SOLVERS_CPU_SOLVERS_H_
#define CONVTUNE_SERVER_SOLVERS_CPU_SOLVERS_H_

#include <memory>
#include <vector>

#include "server/solver.h"

namespace convtune {

// Solver ids of the CPU backend: 1-99. Never reuse an id.
inline constexpr uint32_t kCpuDirectNaiveId = 1;
inline constexpr uint32_t kCpuDirectTiledId = 2;
inline constexpr uint32_t kCpuIm2colGemmId = 3;
inline constexpr uint32_t kCpuGemm1x1Id = 4;
inline constexpr uint32_t kCpuWinogradF2x3Id = 5;

// One factory per solver above, each defined in its solver's file.
std::unique_ptr<Solver> NewCpuDirectNaiveSolver();
std::unique_ptr<Solver> NewCpuDirectTiledSolver();
std::unique_ptr<Solver> NewCpuIm2colGemmSolver();
std::unique_ptr<Solver> NewCpuGemm1x1Solver();
std::unique_ptr<Solver> NewCpuWinogradF2x3Solver();

std::vector<std::unique_ptr<Solver>> MakeCpuSolvers();

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_CPU_SOLVERS_H_
