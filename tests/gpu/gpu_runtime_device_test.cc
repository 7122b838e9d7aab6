// The cuda backend on a real GPU: device key, kernels compiled through the
// kernel builder and run by the plan executor, event timing, and recovery
// from a faulting kernel. Skips where no CUDA device is present.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda_device.h"
#include "kernels/gpu/compiler.h"
#include "kernels/plan_executor.h"
#include "server/kernel_builder.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Open(0);
    if (!device.ok()) {
      ASSERT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
      GTEST_SKIP() << "no CUDA device here: " << device.status().message();
    }
    device_ = *std::move(device);
    absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
    ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
    compiler_ = *std::move(nvrtc);
    absl::StatusOr<std::unique_ptr<storage::Store>> store = storage::OpenRocksDbStore(dir_.db());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    builder_ = std::make_unique<KernelBuilder>(device_.get(), *compiler_, *store_,
                                               device_->info().arch);
  }

  // One step of fill_test.cu over the y buffer, n elements, 1-D launch.
  v1::ExecutionPlan Plan(const std::string& kernel, int64_t n, std::vector<int64_t> extra) {
    v1::ExecutionPlan plan;
    plan.set_backend("cuda");
    plan.add_sources()->set_file("fill_test.cu");
    v1::KernelStep* step = plan.add_steps();
    step->set_kernel(kernel);
    step->set_source_index(0);
    step->add_grid(static_cast<uint32_t>((n + 255) / 256));
    step->add_block(256);
    step->add_buffers()->set_role(v1::BUFFER_Y);
    step->add_scalars(n);
    for (int64_t v : extra) step->add_scalars(v);
    return plan;
  }

  // Runs fill_i64 over a fresh NaN-poisoned buffer and checks every element.
  void FillAndCheck(int64_t n) {
    const int64_t value = std::uniform_int_distribution<int64_t>(1, 1000)(rng_);
    v1::ExecutionPlan plan = Plan("fill_i64", n, {value});
    ASSERT_TRUE(builder_->BuildPlan(&plan).ok());
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> y = device_->Allocate(n * sizeof(float));
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<float> host(n, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(device_->CopyToDevice(y->get(), host.data(), n * sizeof(float)).ok());
    PlanBuffers b;
    b.y = (*y)->data();
    absl::Status run = ExecutePlan(*device_, plan, b);
    ASSERT_TRUE(run.ok()) << run;
    ASSERT_TRUE(device_->Synchronize().ok());
    ASSERT_TRUE(device_->CopyFromDevice(host.data(), **y, n * sizeof(float)).ok());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(host[i], static_cast<float>(value) + static_cast<float>(i)) << "at " << i;
    }
  }

  storage::testing::TempDir dir_;
  std::mt19937 rng_{std::random_device{}()};
  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<KernelCompiler> compiler_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<KernelBuilder> builder_;
};

TEST_F(CudaDeviceTest, DeviceKeyIsSane) {
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.backend, "cuda");
  EXPECT_TRUE(absl::StartsWith(info.arch, "sm_")) << info.arch;
  EXPECT_GT(info.compute_units, 0);
  EXPECT_GT(info.memory_bytes, int64_t{1} << 30);
  EXPECT_FALSE(info.driver_version.empty());
  EXPECT_EQ(info.compiler_version, compiler_->version());
  EXPECT_GT(info.peak_gflops, 1000);
  EXPECT_GT(info.memory_gbps, 100);
  EXPECT_TRUE(absl::StartsWith(info.Key(), absl::StrCat("cuda-", info.arch, "-cu"))) << info.Key();
}

TEST_F(CudaDeviceTest, FillThroughBuilderAndExecutor) {
  FillAndCheck(std::uniform_int_distribution<int64_t>(1000, 100000)(rng_));
  EXPECT_EQ(builder_->stats().compiled, 1);
  EXPECT_EQ(builder_->stats().loaded, 1);
  // The second plan finds the code object in memory and on the device.
  FillAndCheck(777);
  EXPECT_EQ(builder_->stats().compiled, 1);
  EXPECT_EQ(builder_->stats().memory_hits, 1);
}

TEST_F(CudaDeviceTest, HalfAndBf16RoundTrip) {
  const int64_t n = 4096;
  std::vector<float> in(n);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  for (float& v : in) v = dist(rng_);
  v1::ExecutionPlan plan = Plan("round_trip_16", n, {});
  // round_trip_16(in = x, out = y, n).
  v1::KernelStep* step = plan.mutable_steps(0);
  step->clear_buffers();
  step->add_buffers()->set_role(v1::BUFFER_X);
  step->add_buffers()->set_role(v1::BUFFER_Y);
  ASSERT_TRUE(builder_->BuildPlan(&plan).ok());
  auto x = device_->Allocate(n * 4);
  auto y = device_->Allocate(2 * n * 4);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(device_->CopyToDevice(x->get(), in.data(), n * 4).ok());
  std::vector<float> out(2 * n, std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(device_->CopyToDevice(y->get(), out.data(), 2 * n * 4).ok());
  PlanBuffers b;
  b.x = (*x)->data();
  b.y = (*y)->data();
  ASSERT_TRUE(ExecutePlan(*device_, plan, b).ok());
  ASSERT_TRUE(device_->CopyFromDevice(out.data(), **y, 2 * n * 4).ok());
  for (int64_t i = 0; i < n; ++i) {
    // fp16 keeps 11 significant bits, bf16 8.
    EXPECT_NEAR(out[i], in[i], std::fabs(in[i]) * 0x1p-11f + 1e-7f) << i;
    EXPECT_NEAR(out[n + i], in[i], std::fabs(in[i]) * 0x1p-8f + 1e-7f) << i;
  }
}

TEST_F(CudaDeviceTest, TimeMsMeasuresDeviceWork) {
  const int64_t n = 1 << 24;
  v1::ExecutionPlan plan = Plan("fill_i64", n, {3});
  ASSERT_TRUE(builder_->BuildPlan(&plan).ok());
  auto y = device_->Allocate(n * sizeof(float));
  ASSERT_TRUE(y.ok()) << y.status();
  PlanBuffers b;
  b.y = (*y)->data();
  absl::StatusOr<double> ms = device_->TimeMs([&] { return ExecutePlan(*device_, plan, b); });
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GT(*ms, 0);
  EXPECT_LT(*ms, 1000);
}

TEST_F(CudaDeviceTest, ErrorsHaveTheirCodes) {
  EXPECT_EQ(device_->Allocate(int64_t{1} << 50).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::ExecutionPlan plan = Plan("no_such_entry", 16, {});
  ASSERT_TRUE(builder_->BuildPlan(&plan).ok());
  auto y = device_->Allocate(64);
  ASSERT_TRUE(y.ok());
  PlanBuffers b;
  b.y = (*y)->data();
  EXPECT_EQ(ExecutePlan(*device_, plan, b).code(), absl::StatusCode::kNotFound);
  v1::KernelStep unloaded = plan.steps(0);
  unloaded.set_code_object_hash(std::string(64, '0'));
  EXPECT_EQ(device_->Launch(unloaded, {(*y)->data()}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(device_->LoadCodeObject("bad", "not a cubin").code(),
            absl::StatusCode::kInvalidArgument);
}

// A faulting kernel must never take the process down: the fault is reported
// as Internal naming the CUDA error, and every later call on the device fails
// fast with that reason. An illegal address is sticky for the whole process
// on current drivers, so Reset() may not bring the device back; when it does
// not, it says so as an error, never a crash.
TEST_F(CudaDeviceTest, AFaultingKernelIsReportedAndNeverCrashes) {
  FillAndCheck(1024);
  {
    v1::ExecutionPlan fault = Plan("fault_null_write", 1024, {});
    ASSERT_TRUE(builder_->BuildPlan(&fault).ok());
    auto y = device_->Allocate(1024 * sizeof(float));
    ASSERT_TRUE(y.ok());
    PlanBuffers b;
    b.y = (*y)->data();
    absl::Status launched = ExecutePlan(*device_, fault, b);
    absl::Status synced = launched.ok() ? device_->Synchronize() : launched;
    EXPECT_EQ(synced.code(), absl::StatusCode::kInternal);
    EXPECT_TRUE(absl::StrContains(synced.message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << synced;
    absl::Status after = device_->Allocate(16).status();
    EXPECT_EQ(after.code(), absl::StatusCode::kInternal);
    EXPECT_TRUE(absl::StrContains(after.message(), "faulted")) << after;
    // `y` is freed here, after the fault: it must not crash.
  }
  absl::Status reset = device_->Reset();
  if (reset.ok()) {
    FillAndCheck(4096);  // the fill kernel re-loads after the reset
  } else {
    EXPECT_EQ(reset.code(), absl::StatusCode::kInternal) << reset;
    EXPECT_TRUE(absl::StrContains(reset.message(), "CUDA_ERROR")) << reset;
  }
}

}  // namespace
}  // namespace convtune
