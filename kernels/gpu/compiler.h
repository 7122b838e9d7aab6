// Run-time kernel compilers for the GPU backends: NVRTC (cuda) and hiprtc
// (hip). They need no device, so a CPU machine can compile for a named arch
// (compile-only mode). Kernel sources are embedded at build time (sources.h).
// Implementations are thread-safe.
#ifndef CONVTUNE_KERNELS_GPU_COMPILER_H_
#define CONVTUNE_KERNELS_GPU_COMPILER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/problem.pb.h"

namespace convtune {

struct CompileRequest {
  std::string file;                  // embedded source name, for messages
  std::string source;                // full text, prelude included
  std::vector<std::string> options;  // e.g. "-DTILE_M=64"
  std::string arch;                  // "sm_90", "gfx90a"
};

class KernelCompiler {
 public:
  virtual ~KernelCompiler() = default;

  virtual v1::Backend backend() const = 0;  // CUDA or HIP
  // The compiler's version, part of every code object's hash ("nvrtc13.0").
  virtual const std::string& version() const = 0;

  // The code object (cubin for cuda, a code object for hip) for req.arch.
  // InvalidArgument for an arch the compiler does not know; Internal with
  // the compiler's log when the source does not compile.
  virtual absl::StatusOr<std::string> Compile(
      const CompileRequest& req) const = 0;
};

// Unavailable (naming the library) when the compiler library cannot be loaded.
absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeNvrtcCompiler();
absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeHiprtcCompiler();
// InvalidArgument for a backend other than CUDA and HIP.
absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeCompiler(
    v1::Backend backend);

// The arch a source with `arch_suffix` (KernelSource.arch_suffix) is compiled
// for on a device of `device_arch`: the device's arch for "", its
// architecture-specific target for "a" ("sm_90" -> "sm_90a"; CUDA only).
// InvalidArgument naming the field for any other suffix or a device without
// such a target.
absl::StatusOr<std::string> SourceArch(absl::string_view device_arch,
                                       absl::string_view arch_suffix);

// The kernel cache key: a hex digest of everything a code object depends on.
std::string CodeObjectHash(v1::Backend backend, absl::string_view arch,
                           absl::string_view source,
                           const std::vector<std::string>& options,
                           absl::string_view compiler_version);

}  // namespace convtune

#endif  // CONVTUNE_KERNELS_GPU_COMPILER_H_
