// The cuda backend on a real GPU: device key, kernels compiled through the
// kernel builder and run by the plan executor, cuBLAS library steps, event
// timing, and recovery from a faulting kernel. Skips where no CUDA device is
// present.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda_device.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/kernel_builder.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune {
namespace {

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GpuDevice>> device = CudaDevice::Open(0);
    if (!device.ok()) {
      ASSERT_EQ(device.status().code(), absl::StatusCode::kUnavailable)
          << device.status();
      GTEST_SKIP() << "no CUDA device here: " << device.status().message();
    }
    device_ = *std::move(device);
    absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
    ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
    compiler_ = *std::move(nvrtc);
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRocksDbStore(dir_.db());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    builder_ = std::make_unique<KernelBuilder>(device_.get(), *compiler_,
                                               *store_, device_->info().arch);
  }

  // One step of fill_test.cu over the y buffer, n elements, 1-D launch.
  v1::ExecutionPlan Plan(const std::string& kernel, int64_t n,
                         std::vector<int64_t> extra) {
    v1::ExecutionPlan plan;
    plan.set_backend(v1::CUDA);
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
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> y =
        device_->Allocate(n * sizeof(float));
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<float> host(n, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(
        device_->CopyToDevice(y->get(), host.data(), n * sizeof(float)).ok());
    PlanBuffers b;
    b.y = (*y)->data();
    absl::Status run = ExecutePlan(*device_, plan, b);
    ASSERT_TRUE(run.ok()) << run;
    ASSERT_TRUE(device_->Synchronize().ok());
    ASSERT_TRUE(
        device_->CopyFromDevice(host.data(), **y, n * sizeof(float)).ok());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(host[i], static_cast<float>(value) + static_cast<float>(i))
          << "at " << i;
    }
  }

  storage::testing::TempDir dir_;
  std::mt19937 rng_{std::random_device{}()};
  std::unique_ptr<GpuDevice> device_;
  std::unique_ptr<KernelCompiler> compiler_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<KernelBuilder> builder_;
};

TEST_F(CudaDeviceTest, DeviceKeyIsSane) {
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.backend, v1::CUDA);
  EXPECT_TRUE(absl::StartsWith(info.arch, "sm_")) << info.arch;
  EXPECT_GT(info.compute_units, 0);
  EXPECT_GT(info.memory_bytes, int64_t{1} << 30);
  EXPECT_FALSE(info.driver_version.empty());
  EXPECT_EQ(info.compiler_version, compiler_->version());
  EXPECT_GT(info.peak_gflops, 1000);
  EXPECT_GT(info.memory_gbps, 100);
  EXPECT_TRUE(
      absl::StartsWith(info.Key(), absl::StrCat("cuda-", info.arch, "-cu")))
      << info.Key();
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
  absl::StatusOr<double> ms =
      device_->TimeMs([&] { return ExecutePlan(*device_, plan, b); });
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
  EXPECT_EQ(device_->Launch(unloaded, {(*y)->data()}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(device_->LoadCodeObject("bad", "not a cubin").code(),
            absl::StatusCode::kInvalidArgument);
}

// Elements of a strided-batched operand: `batch` matrices of `rows` rows of
// ld elements, `stride` apart.
int64_t OperandElements(int64_t batch, int64_t stride, int64_t rows,
                        int64_t ld) {
  return (batch - 1) * stride + rows * ld;
}

// C as the step defines it, from the host copies, and the scale of each
// element's rounding error (the sum of |products|, plus |C| for beta 1).
std::vector<std::pair<double, double>> HostGemm(const gpu::BlasGemm& g,
                                                const void* a, const void* b,
                                                const void* c0) {
  std::vector<std::pair<double, double>> out(g.batch * g.m * g.n);
  for (int64_t t = 0; t < g.batch; ++t) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0, scale = 0;
        for (int64_t l = 0; l < g.k; ++l) {
          const int64_t ai =
              t * g.stride_a + (g.trans_a ? l * g.lda + i : i * g.lda + l);
          const int64_t bi =
              t * g.stride_b + (g.trans_b ? j * g.ldb + l : l * g.ldb + j);
          const double prod =
              LoadElement(a, g.ab_type, ai) * LoadElement(b, g.ab_type, bi);
          sum += prod;
          scale += std::fabs(prod);
        }
        if (g.beta == 1) {
          const double c =
              LoadElement(c0, g.c_type, t * g.stride_c + i * g.ldc + j);
          sum += c;
          scale += std::fabs(c);
        }
        out[(t * g.m + i) * g.n + j] = {sum, scale};
      }
    }
  }
  return out;
}

// One "blas.gemm" step through the kernel builder and the plan executor, on
// random matrices with padded leading dimensions and gaps between the batch's
// matrices, against a float64 GEMM on the host: every type pair, transpose
// and beta. Elements of C outside its matrices must stay untouched.
TEST_F(CudaDeviceTest, BlasGemmMatchesAHostGemm) {
  const DeviceInfo& info = device_->info();
  ASSERT_TRUE(absl::StartsWith(info.blas, "cublas"))
      << "cuBLAS not found (libcublas.so.13): the BLAS solvers cannot run on "
      << info.Key();
  std::mt19937_64 rng(std::random_device{}());
  const std::pair<DataType, DataType> types[] = {
      {DataType::kFp32, DataType::kFp32},
      {DataType::kFp16, DataType::kFp16},
      {DataType::kBf16, DataType::kBf16},
      {DataType::kFp16, DataType::kFp32},
      {DataType::kBf16, DataType::kFp32}};
  for (const auto& [ab_type, c_type] : types) {
    for (int variant = 0; variant < 8; ++variant) {
      gpu::BlasGemm g;
      g.trans_a = variant & 1, g.trans_b = (variant >> 1) & 1,
      g.beta = (variant >> 2) & 1;
      g.m = 37, g.n = 29, g.k = 53, g.batch = 3;
      g.ab_type = ab_type, g.c_type = c_type;
      const int64_t a_rows = g.trans_a ? g.k : g.m,
                    b_rows = g.trans_b ? g.n : g.k;
      g.lda = (g.trans_a ? g.m : g.k) + 3;
      g.ldb = (g.trans_b ? g.k : g.n) + 2;
      g.ldc = g.n + 5;
      g.stride_a = a_rows * g.lda + 7, g.stride_b = b_rows * g.ldb,
      g.stride_c = g.m * g.ldc + 11;
      SCOPED_TRACE(absl::StrCat(DataTypeName(ab_type), " -> ",
                                DataTypeName(c_type), " trans ", g.trans_a,
                                g.trans_b, " beta ", g.beta));
      const int64_t na = OperandElements(g.batch, g.stride_a, a_rows, g.lda);
      const int64_t nb = OperandElements(g.batch, g.stride_b, b_rows, g.ldb);
      const int64_t nc = OperandElements(g.batch, g.stride_c, g.m, g.ldc);
      std::vector<char> a(na * ElementBytes(ab_type)),
          b(nb * ElementBytes(ab_type));
      std::vector<char> c(nc * ElementBytes(c_type));
      FillRandom(a.data(), ab_type, na, rng);
      FillRandom(b.data(), ab_type, nb, rng);
      // With beta 0 the BLAS must not read C: NaN there must not show.
      if (g.beta == 1) {
        FillRandom(c.data(), c_type, nc, rng);
      } else {
        FillNaN(c.data(), c_type, nc);
      }
      const std::vector<std::pair<double, double>> want =
          HostGemm(g, a.data(), b.data(), c.data());

      v1::ExecutionPlan plan;
      plan.set_backend(v1::CUDA);
      v1::KernelStep* step = plan.add_steps();
      gpu::SetBlasGemm(g, step);
      step->add_buffers()->set_role(v1::BUFFER_X);
      step->add_buffers()->set_role(v1::BUFFER_W);
      step->add_buffers()->set_role(v1::BUFFER_Y);
      ASSERT_EQ(builder_->BuildPlan(&plan), absl::OkStatus());
      auto da = device_->Allocate(a.size()), db = device_->Allocate(b.size());
      auto dc = device_->Allocate(c.size());
      ASSERT_TRUE(da.ok() && db.ok() && dc.ok());
      ASSERT_EQ(device_->CopyToDevice(da->get(), a.data(), a.size()),
                absl::OkStatus());
      ASSERT_EQ(device_->CopyToDevice(db->get(), b.data(), b.size()),
                absl::OkStatus());
      ASSERT_EQ(device_->CopyToDevice(dc->get(), c.data(), c.size()),
                absl::OkStatus());
      PlanBuffers buffers;
      buffers.x = (*da)->data(), buffers.w = (*db)->data(),
      buffers.y = (*dc)->data();
      ASSERT_EQ(ExecutePlan(*device_, plan, buffers), absl::OkStatus());
      ASSERT_EQ(device_->Synchronize(), absl::OkStatus());
      std::vector<char> got(c.size());
      ASSERT_EQ(device_->CopyFromDevice(got.data(), **dc, got.size()),
                absl::OkStatus());

      const int64_t es = ElementBytes(c_type);
      const double tol = Tolerance(c_type);
      int bad = 0;
      for (int64_t idx = 0; idx < nc && bad < 5; ++idx) {
        const int64_t t = idx / g.stride_c, i = (idx % g.stride_c) / g.ldc;
        const int64_t j = (idx % g.stride_c) % g.ldc;
        if (i >= g.m || j >= g.n) {
          // Outside every matrix: bit for bit what was uploaded.
          if (std::memcmp(&got[idx * es], &c[idx * es], es) != 0) {
            ++bad;
            ADD_FAILURE() << "element " << idx
                          << " outside the matrices was written";
          }
          continue;
        }
        const auto [value, scale] = want[(t * g.m + i) * g.n + j];
        const double v = LoadElement(got.data(), c_type, idx);
        if (!(std::fabs(v - value) <=
              tol * (scale + std::fabs(value)) + 1e-30)) {
          ++bad;
          ADD_FAILURE() << "C[" << t << "][" << i << "][" << j << "] is " << v
                        << ", want " << value;
        }
      }
    }
  }
  // A step that breaks the layout's rules is refused before cuBLAS sees it.
  gpu::BlasGemm bad;
  bad.m = 4, bad.n = 4, bad.k = 4, bad.lda = 4, bad.ldb = 4, bad.ldc = 2;
  v1::KernelStep step;
  gpu::SetBlasGemm(bad, &step);
  for (int i = 0; i < 3; ++i) step.add_buffers()->set_role(v1::BUFFER_X);
  auto scratch = device_->Allocate(256);
  ASSERT_TRUE(scratch.ok());
  void* p = (*scratch)->data();
  EXPECT_EQ(device_->Launch(step, {p, p, p}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->Synchronize(), absl::OkStatus());
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
    EXPECT_TRUE(
        absl::StrContains(synced.message(), "CUDA_ERROR_ILLEGAL_ADDRESS"))
        << synced;
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
