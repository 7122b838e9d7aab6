// The float64 reference convolution, computed straight from the definition
// one output element at a time, reading inputs through the problem's strides
// and storage type. The daemon checks sampled outputs of every timed solver
// with it; the tests check whole tensors. Stateless; thread-safe.
#ifndef CONVTUNE_KERNELS_REFERENCE_H_
#define CONVTUNE_KERNELS_REFERENCE_H_

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/problem.h"

namespace convtune {

// Host tensors of one problem: x (N,C,D,H,W), w (K,C/G,FD,FH,FW), y (N,K,...).
struct HostTensors {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* y = nullptr;
};

// Element `index` of the output in the problem's dense layout, and the sum of
// |a*b| over its terms (the scale its rounding error is relative to).
struct ReferenceValue {
  double value = 0;
  double abs_sum = 0;
};
ReferenceValue ReferenceElement(const ConvProblem& p, const HostTensors& t,
                                int64_t index);

// Reads element `index` of a tensor stored in `type`.
double LoadElement(const void* data, DataType type, int64_t index);
// Writes `v` rounded to `type`.
void StoreElement(void* data, DataType type, int64_t index, double v);

// Fills `count` elements uniformly in [-1, 1], none of them zero.
void FillRandom(void* data, DataType type, int64_t count, std::mt19937_64& rng);
// Fills with NaN, so an output element a kernel forgets to write is caught.
void FillNaN(void* data, DataType type, int64_t count);
// The bits of the quiet NaN FillNaN writes, in the type's width (a device
// fill pattern).
uint32_t NaNBits(DataType type);

// Relative tolerance for `type` against ReferenceValue::abs_sum.
double Tolerance(DataType type);

// Compares `samples` output elements (all of them if samples <= 0 or the
// output is smaller) with the reference. Returns the first mismatch as
// Internal naming the element, or OK.
absl::Status CheckOutput(const ConvProblem& p, const HostTensors& t,
                         const void* output, int samples, std::mt19937_64& rng);

// The same check split in two, for many runs on the same inputs: the float64
// reference of `samples` (> 0) output elements is computed once (the first
// and the last element of the output among them, the rest random), and each
// run's values of those elements, fetched by the caller, are compared with
// it. CheckSamples compares values[i] with element samples[i].index.
struct ReferenceSample {
  int64_t index = 0;
  ReferenceValue ref;
};
std::vector<ReferenceSample> SampleReference(const ConvProblem& p,
                                             const HostTensors& t, int samples,
                                             std::mt19937_64& rng);
absl::Status CheckSamples(const ConvProblem& p,
                          const std::vector<ReferenceSample>& samples,
                          const std::vector<double>& values);

// Every element of the output, in the problem's dense layout.
// Taken before a run, it is immune to a kernel that overwrites its inputs.
std::vector<ReferenceValue> ReferenceOutput(const ConvProblem& p,
                                            const HostTensors& t);

// Compares the whole `output` with `ref` (from ReferenceOutput), each element
// within Tolerance(p.type) * abs_sum: tighter than CheckOutput, which also
// allows for the output's own rounding. Returns Internal saying how many
// elements are off and naming the worst, or OK.
absl::Status CompareOutput(const ConvProblem& p,
                           const std::vector<ReferenceValue>& ref,
                           const void* output);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_REFERENCE_H_
