// A solver whose kernel faults the GPU, found through the real find engine
// on a CUDA device: the solver is quarantined for the problem (on disk), and
// either the device is reset and the other solvers are timed, or the device
// is reported lost once and nothing is stored. One test per process: a
// faulted CUDA context may stay unusable for the rest of it. Skips with a
// message where there is no CUDA device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_device.h"
#include "kernels/gpu/compiler.h"
#include "server/core.h"
#include "server/kernel_builder.h"
#include "server/solvers/gpu_solver_util.h"
#include "server/solvers/gpu_solvers.h"
#include "storage/records.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kFaultId = 199;

// Writes through a null pointer (fill_test.cu's fault_null_write).
class FaultingSolver final : public GpuSolver {
 public:
  uint32_t id() const override { return kFaultId; }
  absl::string_view name() const override { return "test_faulting"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem&) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem&) const override { return 0; }
  // Estimated fastest, so it is timed first.
  double Efficiency(const ConvProblem&) const override { return 1e6; }
  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    const int source = AddSource(&plan, "fill_test.cu", {});
    const int64_t n = p.y_elements();
    v1::KernelStep* step = AddGpuStep(&plan, "fault_null_write", source,
                                      {(n + 255) / 256, 1, 1}, 256);
    v1::BufferRef* y = step->add_buffers();
    y->set_role(v1::BUFFER_Y);
    step->add_scalars(n);
    return plan;
  }
};

TEST(GpuFaultTest, FaultingSolverIsQuarantinedAndTheDeviceResetOrReportedLost) {
  absl::StatusOr<std::unique_ptr<GpuDevice>> device = CudaDevice::Open(0);
  if (!device.ok())
    GTEST_SKIP() << "no CUDA device here: " << device.status().message();
  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
  storage::testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(dir.db());
  ASSERT_TRUE(store.ok()) << store.status();
  KernelBuilder builder(device->get(), **nvrtc, **store,
                        (*device)->info().arch);
  std::vector<std::unique_ptr<Solver>> solvers;
  solvers.push_back(std::make_unique<FaultingSolver>());
  solvers.push_back(NewGpuDirectNaiveSolver());
  SolverRegistry registry(std::move(solvers));
  ThreadPool compile("compile", 2), bench("bench", 1);
  Core engine(**device, registry, **store, compile, bench, Core::Options(),
              nullptr, &builder);
  std::atomic<int> lost{0};
  engine.SetDeviceLostHandler([&](const std::string& why) {
    ++lost;
    EXPECT_THAT(why, HasSubstr("test_faulting"));
  });
  ConvProblem p;
  p.n = 2;
  p.c = 8;
  p.k = 8;
  p.in = {1, 12, 12};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  absl::StatusOr<FindOutcome> r =
      engine.find().FindBlocking(p, {.mode = v1::NORMAL});
  EXPECT_THAT(engine.quarantine().For(ProblemKey(p)), ElementsAre(kFaultId));
  EXPECT_EQ(engine.counters().device_resets, 1);
  if (r.ok()) {
    // The reset worked: the naive solver was timed on fresh buffers.
    EXPECT_EQ(lost, 0);
    ASSERT_EQ(r->record.results_size(), 1);
    EXPECT_EQ(r->record.results(0).solver_id(), kGpuDirectNaiveId);
    std::cout << "device reset after the fault; the other solver was timed\n";
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("lost"));
    EXPECT_EQ(lost, 1);
    EXPECT_EQ(engine.counters().records_stored, 0);
    std::cout << "device lost after the fault: " << r.status().message()
              << "\n";
  }
  engine.Shutdown();
  // The quarantine is on disk for the next process on this device key.
  const std::string name =
      absl::StrCat("quarantine/", (*device)->info().Key(), "/", ProblemKey(p));
  absl::StatusOr<std::string> stored = storage::Meta(store->get()).Get(name);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "199");
}

}  // namespace
}  // namespace convtune
