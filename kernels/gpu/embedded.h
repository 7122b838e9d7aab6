// The table of embedded kernel sources, generated at build time by
// embed_sources.cmake from kernels/gpu/*.cu and prelude.cuh. Internal to
// sources.cc; read-only.
#ifndef CONVTUNE_KERNELS_GPU_EMBEDDED_H_
#define CONVTUNE_KERNELS_GPU_EMBEDDED_H_

namespace convtune::gpu_embedded {

struct EmbeddedSource {
  const char* name;  // "conv_direct.cu"
  const char* text;
};

extern const char kPrelude[];
extern const EmbeddedSource kSources[];
extern const int kNumSources;

}  // namespace convtune::gpu_embedded

#endif  // CONVTUNE_KERNELS_GPU_EMBEDDED_H_
