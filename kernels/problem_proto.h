// Conversion between ConvProblem and its wire form. Stateless.
#ifndef CONVTUNE_KERNELS_PROBLEM_PROTO_H_
#define CONVTUNE_KERNELS_PROBLEM_PROTO_H_

#include "absl/status/statusor.h"
#include "convtune/v1/problem.pb.h"
#include "kernels/problem.h"

namespace convtune {

void ProblemToProto(const ConvProblem& p, v1::ConvProblem* out);

// Converts and validates. InvalidArgument naming the field for a missing or
// unknown enum, spatial lists of the wrong length, or any ValidateProblem
// failure. Unset optional lists (pad, stride, dilation) take their defaults.
absl::StatusOr<ConvProblem> ProblemFromProto(const v1::ConvProblem& in,
                                             const ProblemLimits& limits = {});

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_PROBLEM_PROTO_H_
