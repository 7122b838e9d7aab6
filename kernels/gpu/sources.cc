#include "kernels/gpu/sources.h"

#include "absl/strings/str_cat.h"
#include "common/vocabulary.h"
#include "kernels/gpu/embedded.h"

namespace convtune {

absl::StatusOr<std::string> KernelSourceText(absl::string_view file,
                                             v1::Backend backend) {
  absl::string_view define;
  if (backend == v1::CUDA) {
    define = "#define CONVTUNE_BACKEND_CUDA 1\n";
  } else if (backend == v1::HIP) {
    define = "#define CONVTUNE_BACKEND_HIP 1\n";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("backend: no GPU kernel sources for '",
                     BackendName(backend), "' (expected cuda or hip)"));
  }
  for (int i = 0; i < gpu_embedded::kNumSources; ++i) {
    const gpu_embedded::EmbeddedSource& s = gpu_embedded::kSources[i];
    if (file == s.name) {
      // The #line resets messages to the kernel file's own line numbers.
      return absl::StrCat(define, gpu_embedded::kPrelude, "\n#line 1 \"",
                          s.name, "\"\n", s.text);
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no embedded kernel source named '", file, "'"));
}

std::vector<std::string> KernelSourceFiles() {
  std::vector<std::string> names;
  names.reserve(gpu_embedded::kNumSources);
  for (int i = 0; i < gpu_embedded::kNumSources; ++i)
    names.emplace_back(gpu_embedded::kSources[i].name);
  return names;
}

}  // namespace convtune
