// cuDNN's graph (backend) API for convtune. Two parts: the layout of a
// "cudnn.conv" plan step, always built, value types and stateless functions
// (thread-safe); and CudnnSession, which finds, builds, caches and runs cuDNN
// execution plans for a ConvProblem. The session needs the cuDNN headers to
// build (CONVTUNE_HAVE_CUDNN_HEADERS) and libcudnn.so.9 at run time; it is
// not thread-safe (see the class).
#ifndef CONVTUNE_KERNELS_GPU_CUDNN_GRAPH_H_
#define CONVTUNE_KERNELS_GPU_CUDNN_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/problem.h"

namespace convtune::gpu {

// "cudnn.conv": one convolution that cuDNN runs with an execution plan
// rebuilt from the step.
//   Buffers, in order: x, w, y (roles BUFFER_X, BUFFER_W, BUFFER_Y, offset
//   0), then BUFFER_WORKSPACE (offset 0) when the plan needs a workspace.
//   Scalars: the problem (AppendProblemScalars, kernels/plan_args.h), the
//   workspace bytes the daemon's plan of (p, c) needs, then the encoded
//   engine config (EncodeEngineConfig). A client whose cuDNN needs more
//   workspace for the same config refuses to run it.
inline constexpr char kCudnnConvKernel[] = "cudnn.conv";
// The solver id of cuDNN on CUDA devices (GPU ids are 100-199).
inline constexpr uint32_t kCudnnSolverId = 120;

// An engine config of cuDNN's graph API as data: the engine's global index
// in the operation graph and its knob choices (type, value).
struct CudnnEngineConfig {
  int64_t engine = 0;
  std::vector<std::pair<int64_t, int64_t>> knobs;
  bool operator==(const CudnnEngineConfig&) const = default;
};

// The perf config form: {engine, knob_type_1, value_1, ...}.
std::vector<int64_t> EncodeEngineConfig(const CudnnEngineConfig& c);
// InvalidArgument when empty, of even length, engine < 0, a knob type outside
// [0, 1000), or more than 64 knobs.
absl::StatusOr<CudnnEngineConfig> DecodeEngineConfig(
    absl::Span<const int64_t> v);

// A "cudnn.conv" step for (p, c); the workspace buffer is added when
// workspace_bytes > 0.
v1::KernelStep MakeCudnnConvStep(const ConvProblem& p,
                                 const CudnnEngineConfig& c,
                                 int64_t workspace_bytes);

struct CudnnConvStep {
  ConvProblem problem;
  CudnnEngineConfig config;
  int64_t workspace_bytes = 0;
};
// InvalidArgument for another kernel name, a bad problem, a missing or
// negative workspace, buffers other than those above (the workspace buffer
// present exactly when the workspace is positive), or a bad config.
absl::StatusOr<CudnnConvStep> DecodeCudnnConvStep(const v1::KernelStep& step);

// One cuDNN handle and its execution plans, on the CUDA context current on
// the calling thread when it was created. Not thread-safe: its owner (the
// CUDA device) calls it under its lock, with that context current. Every
// method but Abandon() and the destructor returns FailedPrecondition after
// Abandon(). Built without the cuDNN headers, every entry point returns
// Unavailable.
class CudnnSession {
 public:
  // Loads libcudnn.so.9 (then libcudnn.so) once per process, creates a
  // handle and binds it to `stream` (a CUstream / cudaStream_t). Unavailable
  // naming why when the library is absent or too old (< 9.0); cuDNN's own
  // error when the handle cannot be created.
  static absl::StatusOr<std::unique_ptr<CudnnSession>> Create(void* stream);
  // Destroys the plans and the handle, unless Abandon()ed.
  ~CudnnSession();
  CudnnSession(const CudnnSession&) = delete;
  CudnnSession& operator=(const CudnnSession&) = delete;

  // "cudnn9.19.0", from cudnnGetVersion(). Unavailable as for Create().
  static absl::StatusOr<std::string> Version();

  // Binds the handle to `stream` (a CUstream / cudaStream_t): later Runs
  // go there.
  absl::Status SetStream(void* stream);

  // After the CUDA context was destroyed (a fault, a reset): forgets the
  // handle and plans without calling cuDNN on them (their host memory is
  // leaked on purpose).
  void Abandon();

  // The engine configs of heuristics mode A, then mode B, then the fallback
  // list for p's operation graph: de-duplicated, first occurrence first, each
  // one finalizing into an execution plan (kept in the plan cache), at most
  // 32. For fp32 problems, engines with the numerical note TENSOR_CORE (TF32)
  // or DOWN_CONVERT_INPUTS are left out. Engines that compile at run time are
  // kept when they finalize. Cached per problem for the session's life (at
  // most 4096 problems; the cache is emptied when full).
  // InvalidArgument for an invalid problem; FailedPrecondition "cuDNN has no
  // engine for <problem> (...)" when none is left; ResourceExhausted when
  // cuDNN runs out of memory (not cached).
  absl::StatusOr<std::vector<CudnnEngineConfig>> Configs(const ConvProblem& p);

  // The workspace the execution plan of (p, c) needs; builds and caches the
  // plan (at most 256 plans; the oldest is destroyed when full).
  // InvalidArgument when the config does not finalize for p;
  // FailedPrecondition when cuDNN rejects p's operation graph.
  absl::StatusOr<int64_t> WorkspaceBytes(const ConvProblem& p,
                                         const CudnnEngineConfig& c);

  // Runs (p, c) on the handle's stream, building the plan if needed.
  // Pointers follow convtune's roles: x the input activations (written by
  // backward data), w the filter (written by backward weights), y the output
  // activations (read by both backward directions as dy). Device pointers
  // must be 16-byte aligned. InvalidArgument when workspace_bytes is below
  // the plan's need (or the workspace is null while one is needed), and as
  // for WorkspaceBytes(); Internal when the execution fails. Asynchronous,
  // like a kernel launch.
  absl::Status Run(const ConvProblem& p, const CudnnEngineConfig& c, void* x,
                   void* w, void* y, void* workspace, int64_t workspace_bytes);

  struct State;

 private:
  explicit CudnnSession(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace convtune::gpu

#endif  // CONVTUNE_KERNELS_GPU_CUDNN_GRAPH_H_
