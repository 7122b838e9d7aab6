// A vendor convolution library (oneDNN on the CPU, cuDNN on CUDA) as the
// daemon ranks it: a few methods, each one solver, whose configs are what the
// library offers for a problem, and whose plans are single library steps that
// the device runs on the caller's own tensors. A device owns its libraries;
// implementations are thread-safe.
#ifndef CONVTUNE_KERNELS_CONV_LIBRARY_H_
#define CONVTUNE_KERNELS_CONV_LIBRARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/plan.pb.h"
#include "convtune/v1/problem.pb.h"
#include "kernels/problem.h"

namespace convtune {

// One way of running the library, presented as one solver.
struct LibraryMethod {
  uint32_t solver_id = 0;  // stable, never reused
  std::string name;        // the solver's name: "cudnn", "onednn_direct"
  v1::AlgorithmFamily family = v1::DIRECT;
};

// A step the library runs, and the workspace it needs.
struct LibraryStep {
  v1::KernelStep step;
  int64_t workspace_bytes = 0;
};

class ConvLibrary {
 public:
  virtual ~ConvLibrary() = default;

  // "onednn", "cudnn".
  virtual absl::string_view name() const = 0;
  // Name and version as device keys and `convtune solvers` show them:
  // "onednn2.6.0", "cudnn9.19.0".
  virtual const std::string& version() const = 0;
  virtual const std::vector<LibraryMethod>& methods() const = 0;

  // The configs of method `solver_id` for p, the library's own first choice
  // first. FailedPrecondition saying why when it offers none for p.
  // REQUIRES: ValidateProblem(p).ok().
  virtual absl::StatusOr<std::vector<std::vector<int64_t>>> Configs(
      uint32_t solver_id, const ConvProblem& p) = 0;

  // The plan step of (p, config): buffers x, w, y and, when the workspace is
  // positive, the workspace, each at offset 0. InvalidArgument for a config
  // the library cannot run for p.
  virtual absl::StatusOr<LibraryStep> Step(
      uint32_t solver_id, const ConvProblem& p,
      const std::vector<int64_t>& config) = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_CONV_LIBRARY_H_
