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
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// Runs `lane` for every thread of every block of a gx x gy grid of blocks of
// bx threads; `shared_bytes` of NaN-filled memory for each block is passed
// to `lane`.
inline void RunGrid(unsigned gx, unsigned gy, unsigned bx, size_t shared_bytes,
                    const std::function<void(float*)>& lane) {
  block_dim = {bx, 1, 1};
  grid_dim = {gx, gy, 1};
  std::vector<float> shared(shared_bytes / sizeof(float) + 4);
  for (unsigned y = 0; y < gy; ++y) {
    for (unsigned x = 0; x < gx; ++x) {
      FillNaN(shared.data(), DataType::kFp32,
              static_cast<int64_t>(shared.size()));
      std::barrier<> barrier(bx);
      const unsigned warps = (bx + kWarp - 1) / kWarp;
      std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
      for (unsigned i = 0; i < warps; ++i) {
        warp_barriers.push_back(
            std::make_unique<std::barrier<>>(std::min(kWarp, bx - i * kWarp)));
      }
      std::vector<float> slots(warps * kWarp);
      std::vector<std::thread> threads;
      threads.reserve(bx);
      for (unsigned t = 0; t < bx; ++t) {
        threads.emplace_back([&, t] {
          thread_index = {t, 0, 0};
          block_index = {x, y, 0};
          block_barrier = &barrier;
          warp = {warp_barriers[t / kWarp].get(), &slots[t / kWarp * kWarp],
                  t % kWarp, std::min(kWarp, bx - t / kWarp * kWarp)};
          lane(shared.data());
        });
      }
      for (std::thread& th : threads) th.join();
    }
  }
}

// A source compiled on host lanes with one set of options: runs the plan
// step named `kernel` (false where the source has no such kernel).
using RunStep = bool (*)(const std::string& kernel, unsigned gx, unsigned gy,
                         unsigned bx, size_t shared_bytes,
                         const std::vector<int64_t>& scalars, void* x, void* w,
                         void* y, float* workspace);
struct Variant {
  std::string options;  // the -D options, space-separated, sorted
  RunStep run;
};
inline std::vector<Variant>& Variants() {
  static std::vector<Variant> variants;
  return variants;
}
inline bool Register(std::string options, RunStep run) {
  Variants().push_back({std::move(options), run});
  return true;
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
