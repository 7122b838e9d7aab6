// The convention by which built-in kernels receive a problem's geometry: the
// first kProblemScalars scalars of a step encode the ConvProblem, the rest are
// the kernel's own parameters. Stateless.
#ifndef CONVTUNE_KERNELS_PLAN_ARGS_H_
#define CONVTUNE_KERNELS_PLAN_ARGS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"

namespace convtune {

inline constexpr int kProblemScalars = 23;

// Appends the encoded problem to step->scalars.
void AppendProblemScalars(const ConvProblem& p, v1::KernelStep* step);

// Decodes and validates the problem at the front of `scalars`.
// InvalidArgument if there are too few scalars or the problem is invalid.
absl::StatusOr<ConvProblem> DecodeProblemScalars(
    absl::Span<const int64_t> scalars);

// The kernel's own parameters, after the problem.
inline absl::Span<const int64_t> KernelParams(const v1::KernelStep& step) {
  absl::Span<const int64_t> all(step.scalars().data(), step.scalars().size());
  return all.size() > kProblemScalars ? all.subspan(kProblemScalars)
                                      : absl::Span<const int64_t>();
}

// Appends a reference to a buffer role at a byte offset.
void AddBuffer(v1::KernelStep* step, v1::BufferRole role,
               int64_t offset_bytes = 0);

// InvalidArgument naming the step unless its buffers are x, w, y and, when
// `with_workspace`, the workspace, in that order (the library steps' layout).
absl::Status CheckConvStepBuffers(const v1::KernelStep& step,
                                  bool with_workspace);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_PLAN_ARGS_H_
