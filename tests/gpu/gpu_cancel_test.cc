// Callers who leave, on the GPU: a real convtuned on CUDA given a thousand
// finds whose deadlines pass mid-tuning stops their runs and is left with no
// run, queued task, thread, host memory or device memory of theirs (device
// memory in use read with cuMemGetInfo from this process). Skips with a
// message where there is no CUDA device.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/cuda_device.h"
#include "kernels/problem.h"
#include "kernels/problem_proto.h"
#include "tests/server/leaving_callers.h"

namespace convtune {
namespace {

// $CONVTUNED (e.g. a bundled copy) wins over the build tree's binary.
std::string Convtuned() {
  const char* env = std::getenv("CONVTUNED");
  return env != nullptr && *env != '\0' ? env : CONVTUNED_PATH;
}

// Device 0's memory in use (total - free), through the driver's primary
// context, which this process holds from the first call on; -1 on failure.
int64_t DeviceUsedBytes() {
  using Fn0 = int (*)(unsigned);
  using FnGet = int (*)(int*, int);
  using FnRetain = int (*)(void**, int);
  using FnSet = int (*)(void*);
  using FnInfo = int (*)(size_t*, size_t*);
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  static void* ctx = [] {
    auto init = reinterpret_cast<Fn0>(dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<FnGet>(dlsym(lib, "cuDeviceGet"));
    auto retain =
        reinterpret_cast<FnRetain>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    int device = 0;
    void* c = nullptr;
    if (init == nullptr || get == nullptr || retain == nullptr ||
        init(0) != 0 || get(&device, 0) != 0 || retain(&c, device) != 0) {
      return static_cast<void*>(nullptr);
    }
    return c;
  }();
  auto set = reinterpret_cast<FnSet>(dlsym(lib, "cuCtxSetCurrent"));
  auto info = reinterpret_cast<FnInfo>(dlsym(lib, "cuMemGetInfo_v2"));
  size_t free = 0, total = 0;
  if (ctx == nullptr || set == nullptr || info == nullptr || set(ctx) != 0 ||
      info(&free, &total) != 0) {
    return -1;
  }
  return static_cast<int64_t>(total - free);
}

// Sizes that the GPU solvers tune in tens of milliseconds, each caller's
// its own.
v1::ConvProblem Problem(int i) {
  ConvProblem p;
  p.n = 16;
  p.c = 16 + i % 40;
  p.k = 16 + (i / 40) % 25;
  p.in = {1, 56, 56};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  v1::ConvProblem wire;
  ProblemToProto(p, &wire);
  return wire;
}

TEST(GpuCancelTest, AThousandCallersWhoLeaveMidTuningLeaveNoDeviceMemory) {
  absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(0);
  if (!dev.ok()) {
    GTEST_SKIP() << "no CUDA device here: " << dev.status().message();
  }
  dev->reset();
  ASSERT_GE(DeviceUsedBytes(), 0);
  testing::LeavingCallers c;
  c.convtuned = Convtuned();
  c.backend = {"--backend", "cuda"};
  c.problem = Problem;
  c.device_used_bytes = DeviceUsedBytes;
  // Two bursts of the same shapes. Their kernels are compiled and their
  // cuDNN plans built once and kept (bounded caches, tens of MiB), and on a
  // machine of many cores gRPC's pools may grow more under the first; a
  // leaked benchmark session per run would hold about 30 MiB of host memory
  // and as much of the device's.
  c.bursts = 2;
  c.thread_slack = 48;
  c.rss_slack_kb = 384 * 1024;
  testing::CheckLeavingCallersLeaveNothing(c);
}

}  // namespace
}  // namespace convtune
