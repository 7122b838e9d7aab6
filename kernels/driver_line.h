// Parses MIOpenDriver convolution command lines ("conv -n 1 -c 64 ... -F 1")
// into problems. Stateless; thread-safe.
#ifndef CONVTUNE_KERNELS_DRIVER_LINE_H_
#define CONVTUNE_KERNELS_DRIVER_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/problem.h"

namespace convtune {

// Parses the arguments after the driver binary: the sub-command (`conv`,
// `convfp16`, `convbfp16`) then short or long flags. `--forw`/`-F` is a
// bit mask: 1 forward, 2 backward data, 4 backward weights, 0 all three; one
// problem is returned per direction, in F, B, W order. Flags MIOpenDriver
// takes that do not change the problem (--time, --verify, ...) are accepted
// and ignored, as are depth flags on a 2-D problem. InvalidArgument naming the
// flag for an unknown flag, a missing or non-numeric value, a
// transposed-convolution mode, or an invalid problem.
absl::StatusOr<std::vector<ConvProblem>> ParseDriverArgs(
    const std::vector<std::string>& args);

// Splits a whole line on whitespace and parses it. A leading token ending in
// "MIOpenDriver" is skipped.
absl::StatusOr<std::vector<ConvProblem>> ParseDriverLine(
    absl::string_view line);

// The MIOpenDriver command for one problem (long flags), e.g. for
// `convtune find --file` round trips.
std::string FormatDriverLine(const ConvProblem& p);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_DRIVER_LINE_H_
