// The small problems every solver test runs (2-D and 3-D, grouped,
// depthwise, strided, dilated, asymmetric), and the check of one plan against
// the float64 reference on fresh random inputs with a NaN-poisoned output and
// workspace.
#ifndef CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_
#define CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/solver.h"

namespace convtune {

struct Shape {
  std::string name;
  ConvProblem p;
};

ConvProblem Conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                   int64_t fh, int64_t fw, int64_t pad, int64_t stride = 1,
                   int64_t dil = 1, int64_t groups = 1);
ConvProblem Conv3d(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w,
                   int64_t k, int64_t f, int64_t pad, int64_t stride = 1,
                   int64_t groups = 1);

std::vector<Shape> Shapes();

// Runs the plan of (solver, config) for p on host memory of `device` (a CPU
// device) and expects it to match the reference. Fails the test otherwise.
void RunAndCheck(Device& device, const ConvProblem& p, const Solver& solver,
                 const PerfConfig& config, std::mt19937_64& rng);

}  // namespace convtune

#endif  // CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_
