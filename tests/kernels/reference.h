// A float64 convolution computed straight from its definition, the yardstick
// kernels are checked against. Reads tensors through the problem's strides
// in any storage type. Stateless; thread-safe.
#ifndef CONVTUNE_TESTS_KERNELS_REFERENCE_H_
#define CONVTUNE_TESTS_KERNELS_REFERENCE_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/problem.h"

namespace convtune::reference {

struct ReferenceOutput {
  // Indexed like the output tensor's storage (element offsets).
  std::vector<double> value;
  // Per output element, the sum of |a * b| over its terms: the scale that
  // rounding errors of any summation order are proportional to.
  std::vector<double> magnitude;
};

// The output of p.direction from the other two tensors: y for forward, x for
// backward data, w for backward weights. The output argument is not read.
// REQUIRES: ValidateProblem(p).ok(); tensors dense in p's layout and type.
ReferenceOutput ReferenceConv(const ConvProblem& p, const void* x,
                              const void* w, const void* y);

// Element i of a tensor stored as `type`, widened to double.
double LoadAsDouble(DataType type, const void* data, int64_t i);

// `count` elements of `type`, uniform in [-1, 1] and never exactly zero,
// as raw storage.
std::vector<char> RandomTensor(DataType type, int64_t count,
                               std::mt19937_64& rng);

// Fills a tensor with NaN so that an element a kernel forgets to write shows.
void PoisonNaN(DataType type, void* data, int64_t count);

// Allowed |error| per unit of an output's magnitude: the rounding that fp32
// accumulation plus one final rounding to `type` can explain.
double RelativeTolerance(DataType type);

// Empty when every element of `out` (the direction's output, stored as
// p.type) is within RelativeTolerance(p.type) * magnitude of the reference;
// otherwise how many are not and the worst one.
std::string CompareWithReference(const ConvProblem& p, const void* out,
                                 const ReferenceOutput& ref);

}  // namespace convtune::reference

#endif  // CONVTUNE_TESTS_KERNELS_REFERENCE_H_
