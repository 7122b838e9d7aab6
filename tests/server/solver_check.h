// The small problems every solver test runs (2-D and 3-D, grouped,
// depthwise, strided, dilated, asymmetric), and the check of one plan against
// the float64 reference on fresh random inputs with a NaN-poisoned output and
// workspace.
#ifndef CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_
#define CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
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

// For every shape of Shapes() in both layouts, in one direction and type: a
// problem the solver does not apply to must say FailedPrecondition; on the
// others every config of its space is validated and run with RunAndCheck, on
// fresh seeded inputs. `observe` (may be null) sees each problem with its
// applicability first. Sets *applicable to the problems it applied to and
// appends each config run to *configs (may be null).
void CheckEveryShape(
    Device& device, const Solver& solver, Direction direction, DataType type,
    int* applicable, std::vector<PerfConfig>* configs = nullptr,
    const std::function<void(const ConvProblem&, const absl::Status&)>&
        observe = nullptr);

// One parameter of the solver correctness tests.
struct Combo {
  uint32_t solver_id;
  Direction direction;
  DataType type;
};
void PrintTo(const Combo& c, std::ostream* os);
std::string ComboName(const ::testing::TestParamInfo<Combo>& info);
// Every direction and type of each solver.
std::vector<Combo> CombosOf(std::initializer_list<uint32_t> solver_ids);

}  // namespace convtune

#endif  // CONVTUNE_TESTS_SERVER_SOLVER_CHECK_H_
