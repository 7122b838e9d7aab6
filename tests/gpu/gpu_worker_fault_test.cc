// Candidates measured in a worker process on a CUDA device: a real kernel
// that writes through a null pointer (an illegal address, which leaves the
// worker's context unusable) and a real kernel that never returns. Each find
// completes with the other solvers, FindDb hits from another client meanwhile
// neither fail nor stall, and convtuned keeps serving. Skips with a message
// where there is no CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cuda_device.h"
#include "tests/server/worker_fault_scenario.h"

namespace convtune {
namespace {

// $CONVTUNED (e.g. a bundled copy) wins over the build tree's binary.
std::string Convtuned() {
  const char* env = std::getenv("CONVTUNED");
  return env != nullptr && *env != '\0' ? env : CONVTUNED_PATH;
}

ConvProblem GpuProblem(int i) {
  ConvProblem p;
  p.n = 8;
  p.c = 32 + 8 * i;
  p.k = 64;
  p.in = {1, 28, 28};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

class GpuWorkerFaultTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(0);
    if (!dev.ok())
      GTEST_SKIP() << "no CUDA device here: " << dev.status().message();
  }
};

TEST_P(GpuWorkerFaultTest, FindCompletesAndOtherClientsAreServed) {
  // The floor leaves room for a fresh worker's first cuDNN call.
  testing::RunWorkerFaultScenario({.convtuned = Convtuned(),
                                   .backend = "cuda",
                                   .fault = GetParam(),
                                   .bound_ms = 8000,
                                   .problem = GpuProblem,
                                   .start_timeout_ms = 60000});
}

INSTANTIATE_TEST_SUITE_P(Faults, GpuWorkerFaultTest,
                         ::testing::Values("crash", "hang"));

}  // namespace
}  // namespace convtune
