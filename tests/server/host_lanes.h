// Host lanes: a kernel source of kernels/gpu run on the CPU, one std::thread
// per GPU thread of a block and the blocks one after another, with
// __syncthreads a barrier of the block's threads and a warp shuffle an
// exchange through memory between two barriers of the warp's threads (warps
// of 32). It defines the names the CUDA and HIP compilers would; a source
// built on it takes the HIP path of the prelude (no inline PTX), so what it
// checks is the kernels' indexing and arithmetic, not the CUDA-only copies.
// Every thread of a warp must reach its shuffles, as on the GPU.
#ifndef CONVTUNE_TESTS_SERVER_HOST_LANES_H_
#define CONVTUNE_TESTS_SERVER_HOST_LANES_H_

#include <algorithm>
#include <barrier>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/gpu/launch_args.h"
#include "kernels/reference.h"

namespace convtune::lanes {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local Dim3 thread_index, block_index;
inline Dim3 block_dim, grid_dim;
inline thread_local std::barrier<>* block_barrier = nullptr;
inline constexpr unsigned kWarp = 32;

// The calling thread's warp: its barrier, one slot a lane, the lane and how
// many lanes the warp has.
struct WarpOf {
  std::barrier<>* barrier = nullptr;
  float* slots = nullptr;
  unsigned lane = 0, width = kWarp;
};
inline thread_local WarpOf warp;

// The value lane `src` of the warp passes; v where src is past the warp.
inline float Shuffle(float v, unsigned src) {
  warp.slots[warp.lane] = v;
  warp.barrier->arrive_and_wait();
  const float out = src < warp.width ? warp.slots[src] : v;
  warp.barrier->arrive_and_wait();
  return out;
}

// Runs `lane` for every thread of every block of `grid`, blocks of `block`
// threads (x fastest); `shared_bytes` of NaN-filled memory for each block is
// passed to `lane`.
inline void RunGrid(Dim3 grid, Dim3 block, size_t shared_bytes,
                    const std::function<void(float*)>& lane) {
  block_dim = block;
  grid_dim = grid;
  const unsigned threads = block.x * block.y * block.z;
  const unsigned warps = (threads + kWarp - 1) / kWarp;
  std::vector<float> shared(shared_bytes / sizeof(float) + 4);
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        FillNaN(shared.data(), DataType::kFp32,
                static_cast<int64_t>(shared.size()));
        std::barrier<> barrier(threads);
        std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
        for (unsigned i = 0; i < warps; ++i) {
          warp_barriers.push_back(std::make_unique<std::barrier<>>(
              std::min(kWarp, threads - i * kWarp)));
        }
        std::vector<float> slots(warps * kWarp);
        std::vector<std::thread> lanes;
        lanes.reserve(threads);
        for (unsigned t = 0; t < threads; ++t) {
          lanes.emplace_back([&, t] {
            thread_index = {t % block.x, t / block.x % block.y,
                            t / (block.x * block.y)};
            block_index = {x, y, z};
            block_barrier = &barrier;
            warp = {warp_barriers[t / kWarp].get(), &slots[t / kWarp * kWarp],
                    t % kWarp, std::min(kWarp, threads - t / kWarp * kWarp)};
            lane(shared.data());
          });
        }
        for (std::thread& th : lanes) th.join();
      }
    }
  }
}

// One launch of a plan step: its geometry, its buffers resolved to pointers
// and its scalars.
struct Launch {
  Dim3 grid, block;
  size_t shared_bytes = 0;
  std::vector<void*> buffers;
  std::vector<int64_t> scalars;
};
using KernelRunner = std::function<absl::Status(const Launch&)>;

// Sets a source's dynamic shared memory (CT_EXTERN_SHARED) for the calling
// thread; null for sources without one.
using SetShared = void (*)(float*);

namespace internal {
// How many of the first `i` entries of `pointer` equal `kind`: a kernel
// parameter's index among the step's buffers (pointers) or scalars.
template <size_t N>
constexpr size_t CountBefore(const bool (&pointer)[N], size_t i, bool kind) {
  size_t count = 0;
  for (size_t j = 0; j < i; ++j) count += pointer[j] == kind;
  return count;
}
template <typename... A, size_t... I>
void Call(void (*fn)(A...), const Launch& l, std::index_sequence<I...>) {
  constexpr bool kPointer[] = {std::is_pointer_v<A>..., false};
  auto arg = [&]<typename T, size_t J>() -> T {
    if constexpr (std::is_pointer_v<T>) {
      return static_cast<T>(l.buffers[CountBefore(kPointer, J, true)]);
    } else {
      return static_cast<T>(l.scalars[CountBefore(kPointer, J, false)]);
    }
  };
  fn(arg.template operator()<A, I>()...);
}
}  // namespace internal

// A kernel of a host-lanes build as a step runner: its pointer parameters
// take the step's buffers in order, its integer parameters the scalars.
// InvalidArgument where the step has a different count of either.
template <typename... A>
KernelRunner Kernel(void (*fn)(A...), SetShared set_shared = nullptr) {
  return [fn, set_shared](const Launch& l) -> absl::Status {
    constexpr size_t kPointers = (size_t{std::is_pointer_v<A>} + ... + 0);
    constexpr size_t kScalars = sizeof...(A) - kPointers;
    if (l.buffers.size() != kPointers || l.scalars.size() != kScalars) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the step has ", l.buffers.size(), " buffers and ", l.scalars.size(),
          " scalars; the kernel takes ", kPointers, " and ", kScalars));
    }
    RunGrid(l.grid, l.block, l.shared_bytes, [&](float* shared) {
      if (set_shared != nullptr) set_shared(shared);
      internal::Call(fn, l, std::index_sequence_for<A...>{});
    });
    return absl::OkStatus();
  };
}

// A kernel source built on host lanes with one set of options.
struct Variant {
  std::string file;     // e.g. "conv_winograd.cu"
  std::string options;  // its -D options, space-separated, sorted
  std::map<std::string, KernelRunner> kernels;
};
inline std::vector<Variant>& Variants() {
  static std::vector<Variant> variants;
  return variants;
}
inline bool Register(Variant variant) {
  Variants().push_back(std::move(variant));
  return true;
}

// Runs every step of `plan` on the host-lanes build of its source, over the
// tensors and workspace at x, w, y and ws. NotFound names a source (file and
// options) or kernel without a build; a step's own error names the step.
inline absl::Status RunPlan(const v1::ExecutionPlan& plan, void* x, void* w,
                            void* y, void* ws) {
  for (const v1::KernelStep& step : plan.steps()) {
    if (step.source_index() < 0 || step.source_index() >= plan.sources_size()) {
      return absl::NotFoundError(
          absl::StrCat("step ", step.kernel(), ": no GPU source"));
    }
    const v1::KernelSource& source = plan.sources(step.source_index());
    std::vector<std::string> sorted(source.options().begin(),
                                    source.options().end());
    std::sort(sorted.begin(), sorted.end());
    const std::string options = absl::StrJoin(sorted, " ");
    const auto variant = std::find_if(
        Variants().begin(), Variants().end(), [&](const Variant& v) {
          return v.file == source.file() && v.options == options;
        });
    if (variant == Variants().end()) {
      return absl::NotFoundError(absl::StrCat(
          "no host-lanes build of ", source.file(), " with ", options,
          " (add it to the list in tests/server/CMakeLists.txt)"));
    }
    const auto kernel = variant->kernels.find(step.kernel());
    if (kernel == variant->kernels.end()) {
      return absl::NotFoundError(absl::StrCat(
          step.kernel(), " is not in the host-lanes build of ", source.file()));
    }
    absl::StatusOr<gpu::LaunchGeometry> g = gpu::StepGeometry(step);
    if (!g.ok()) return g.status();
    Launch l;
    l.grid = {g->grid[0], g->grid[1], g->grid[2]};
    l.block = {g->block[0], g->block[1], g->block[2]};
    l.shared_bytes = g->shared_bytes;
    for (const v1::BufferRef& b : step.buffers()) {
      void* base = b.role() == v1::BUFFER_X   ? x
                   : b.role() == v1::BUFFER_W ? w
                   : b.role() == v1::BUFFER_Y ? y
                                              : ws;
      l.buffers.push_back(static_cast<char*>(base) + b.offset_bytes());
    }
    l.scalars.assign(step.scalars().begin(), step.scalars().end());
    if (absl::Status s = kernel->second(l); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("step ", step.kernel(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace convtune::lanes

// The names a kernel source uses.
#define threadIdx ::convtune::lanes::thread_index
#define blockIdx ::convtune::lanes::block_index
#define blockDim ::convtune::lanes::block_dim
#define gridDim ::convtune::lanes::grid_dim
#define __syncthreads() ::convtune::lanes::block_barrier->arrive_and_wait()
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define CT_EXTERN_SHARED(type, name) thread_local type* name = nullptr
// The device library's min and max.
using std::max;
using std::min;
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
// HIP's shuffles (no mask argument), on warps of 32.
#define __AMDGCN_WAVEFRONT_SIZE 32
inline float __shfl_down(float v, int delta) {
  return ::convtune::lanes::Shuffle(v, ::convtune::lanes::warp.lane + delta);
}
inline float __shfl_xor(float v, int mask) {
  return ::convtune::lanes::Shuffle(v, ::convtune::lanes::warp.lane ^ mask);
}
inline float __shfl(float v, int lane) {
  return ::convtune::lanes::Shuffle(
      v, static_cast<unsigned>(lane) % ::convtune::lanes::kWarp);
}

#endif  // CONVTUNE_TESTS_SERVER_HOST_LANES_H_
