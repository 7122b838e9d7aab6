// The GPU runtime pieces that need no GPU: embedded sources, the code object
// hash, NVRTC and hiprtc compiling every embedded source for a named arch,
// the kernel builder over a real RocksDB kernel cache, the compile-only tool,
// and device opening failing cleanly where there is no device.
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu_device.h"
#include "kernels/cuda_device.h"
#include "kernels/driver_line.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/cudnn_graph.h"
#include "kernels/gpu/sha256.h"
#include "kernels/gpu/sources.h"
#include "kernels/hip_device.h"
#include "kernels/plan_args.h"
#include "server/backend.h"
#include "server/kernel_builder.h"
#include "server/solver_registry.h"
#include "server/solvers/gpu_solvers.h"
#include "storage/store.h"
#include "tests/storage/storage_test_util.h"

namespace convtune {
namespace {

using storage::testing::TempDir;

std::string RandomDefine() {
  std::mt19937 rng(std::random_device{}());
  return absl::StrCat("-DCT_TEST_SALT=", rng() % 1000000000);
}

bool IsElf(const std::string& code) {
  return code.size() > 64 && code.compare(0, 4,
                                          "\x7f"
                                          "ELF") == 0;
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the length no longer fits the first padded block.
  EXPECT_EQ(
      Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CodeObjectHashTest, EveryFieldCounts) {
  const std::string base =
      CodeObjectHash(v1::CUDA, "sm_90", "src", {"-DA=1"}, "nvrtc13.0");
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base,
            CodeObjectHash(v1::CUDA, "sm_90", "src", {"-DA=1"}, "nvrtc13.0"));
  EXPECT_NE(base,
            CodeObjectHash(v1::HIP, "sm_90", "src", {"-DA=1"}, "nvrtc13.0"));
  EXPECT_NE(base,
            CodeObjectHash(v1::CUDA, "sm_80", "src", {"-DA=1"}, "nvrtc13.0"));
  EXPECT_NE(base,
            CodeObjectHash(v1::CUDA, "sm_90", "src2", {"-DA=1"}, "nvrtc13.0"));
  EXPECT_NE(base,
            CodeObjectHash(v1::CUDA, "sm_90", "src", {"-DA=2"}, "nvrtc13.0"));
  EXPECT_NE(base,
            CodeObjectHash(v1::CUDA, "sm_90", "src", {"-DA=1"}, "nvrtc13.1"));
  // Field boundaries are part of the hash.
  EXPECT_NE(CodeObjectHash(v1::CUDA, "sm_90", "s", {"ab"}, "v"),
            CodeObjectHash(v1::CUDA, "sm_90", "s", {"a", "b"}, "v"));
  EXPECT_NE(CodeObjectHash(v1::CUDA, "sm_9", "0s", {}, "v"),
            CodeObjectHash(v1::CUDA, "sm_90", "s", {}, "v"));
}

TEST(SourceArchTest, SuffixAOnlyOnCudaDevices) {
  EXPECT_EQ(SourceArch("sm_90", "").value_or(""), "sm_90");
  EXPECT_EQ(SourceArch("gfx90a", "").value_or(""), "gfx90a");
  EXPECT_EQ(SourceArch("sm_90", "a").value_or(""), "sm_90a");
  EXPECT_EQ(SourceArch("sm_90a", "a").value_or(""), "sm_90a");
  const absl::StatusOr<std::string> hip = SourceArch("gfx90a", "a");
  EXPECT_EQ(hip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(hip.status().message(), "arch_suffix: "))
      << hip.status();
  const absl::StatusOr<std::string> other =
      SourceArch("sm_90", std::string(100, 'f'));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(other.status().message(), "arch_suffix: "));
  EXPECT_LT(other.status().message().size(), 60u) << "quotes a prefix only";
}

TEST(KernelSourcesTest, PreludePerBackend) {
  const std::vector<std::string> files = KernelSourceFiles();
  ASSERT_NE(std::find(files.begin(), files.end(), "fill_test.cu"), files.end());
  absl::StatusOr<std::string> cuda = KernelSourceText("fill_test.cu", v1::CUDA);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_TRUE(absl::StartsWith(*cuda, "#define CONVTUNE_BACKEND_CUDA 1\n"));
  EXPECT_TRUE(absl::StrContains(*cuda, "CT_KERNEL void fill_i64"));
  absl::StatusOr<std::string> hip = KernelSourceText("fill_test.cu", v1::HIP);
  ASSERT_TRUE(hip.ok()) << hip.status();
  EXPECT_TRUE(absl::StartsWith(*hip, "#define CONVTUNE_BACKEND_HIP 1\n"));
  EXPECT_EQ(KernelSourceText("no_such.cu", v1::CUDA).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(KernelSourceText("fill_test.cu", v1::CPU).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeCompiler(v1::CPU).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Compiles every embedded source for `arch`; a broken source must give
// Internal with the compiler's log, an unknown arch InvalidArgument.
void CompileEverything(const KernelCompiler& compiler, const std::string& arch,
                       const std::string& wrong_arch) {
  for (const std::string& file : KernelSourceFiles()) {
    CompileRequest req{file,
                       *KernelSourceText(file, compiler.backend()),
                       {RandomDefine()},
                       arch};
    absl::StatusOr<std::string> code = compiler.Compile(req);
    // Every embedded source must compile with no options (compile-only mode
    // and convtune-compile rely on it), so its tunables need defaults.
    EXPECT_TRUE(code.ok()) << file << " for " << arch << ": " << code.status();
    if (!code.ok()) continue;
    EXPECT_TRUE(IsElf(*code))
        << file << ": " << code->size() << " bytes, not an ELF code object";
  }
  std::string broken = *KernelSourceText("fill_test.cu", compiler.backend());
  broken +=
      "\nCT_KERNEL void broken(float* out) { out[0] = undeclared_name_xyz; }\n";
  absl::StatusOr<std::string> bad =
      compiler.Compile({"broken.cu", broken, {}, arch});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "undeclared_name_xyz"))
      << bad.status();

  CompileRequest req{"fill_test.cu",
                     *KernelSourceText("fill_test.cu", compiler.backend()),
                     {},
                     wrong_arch};
  EXPECT_EQ(compiler.Compile(req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NvrtcTest, CompilesEveryEmbeddedSourceForSm90) {
  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
  EXPECT_EQ((*nvrtc)->backend(), v1::CUDA);
  EXPECT_TRUE(absl::StartsWith((*nvrtc)->version(), "nvrtc"))
      << (*nvrtc)->version();
  CompileEverything(**nvrtc, "sm_90", "gfx90a");
  CompileRequest req{
      "fill_test.cu", *KernelSourceText("fill_test.cu", v1::CUDA), {}, "sm_7"};
  EXPECT_EQ((*nvrtc)->Compile(req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HiprtcTest, CompilesEveryEmbeddedSourceForGfx90aWithoutADevice) {
  absl::StatusOr<std::unique_ptr<KernelCompiler>> hiprtc = MakeHiprtcCompiler();
  ASSERT_TRUE(hiprtc.ok()) << hiprtc.status();
  EXPECT_EQ((*hiprtc)->backend(), v1::HIP);
  CompileEverything(**hiprtc, "gfx90a", "sm_90");
  CompileRequest req{"fill_test.cu",
                     *KernelSourceText("fill_test.cu", v1::HIP),
                     {},
                     "gfx90a:xnack-"};
  absl::StatusOr<std::string> code = (*hiprtc)->Compile(req);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_TRUE(IsElf(*code));
}

TEST(DeviceOpenTest, MissingGpuIsUnavailable) {
  // On a GPU machine Open succeeds; anywhere else it must fail cleanly.
  absl::StatusOr<std::unique_ptr<GpuDevice>> cuda = CudaDevice::Open(0);
  if (!cuda.ok()) {
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable)
        << cuda.status();
  }
  absl::StatusOr<std::unique_ptr<GpuDevice>> hip = HipDevice::Open(0);
  if (!hip.ok()) {
    EXPECT_EQ(hip.status().code(), absl::StatusCode::kUnavailable)
        << hip.status();
  }
  EXPECT_EQ(CudaDevice::Open(4096).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(HipDevice::Open(4096).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(BackendTest, AutoFallsBackToCpuAndSaysWhy) {
  absl::StatusOr<SelectedBackend> any = SelectBackend("auto", 0);
  ASSERT_TRUE(any.ok()) << any.status();
  if (any->device->info().backend == v1::CPU) {
    EXPECT_TRUE(absl::StrContains(any->note, "using cpu")) << any->note;
    EXPECT_TRUE(absl::StrContains(any->note, "CUDA")) << any->note;
    EXPECT_EQ(any->compiler, nullptr);
    EXPECT_EQ(SelectBackend("cuda", 0).status().code(),
              absl::StatusCode::kUnavailable);
  } else {
    EXPECT_NE(any->compiler, nullptr);
  }
  EXPECT_EQ(SelectBackend("hip", 4096).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(SelectBackend("opencl", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectBackend("cpu", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A one-step plan over fill_test.cu, with a fresh option so every test run
// really compiles.
v1::ExecutionPlan FillPlan(v1::Backend backend, const std::string& salt) {
  v1::ExecutionPlan plan;
  plan.set_backend(backend);
  v1::KernelSource* src = plan.add_sources();
  src->set_file("fill_test.cu");
  src->add_options(salt);
  v1::KernelStep* step = plan.add_steps();
  step->set_kernel("fill_i64");
  step->set_source_index(0);
  return plan;
}

// An NVRTC compiler and a fresh store in a temporary directory.
class KernelBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
    ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
    nvrtc_ = *std::move(nvrtc);
    Reopen();
  }
  // Closes the store, if open, and opens it again: a restart.
  void Reopen() {
    store_.reset();
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRocksDbStore(dir_.db());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  TempDir dir_;
  std::unique_ptr<KernelCompiler> nvrtc_;
  std::unique_ptr<storage::Store> store_;
};

TEST_F(KernelBuilderTest, CompiledOnceAcrossRestartsAndConcurrentBuilds) {
  const std::string salt = RandomDefine();
  std::string hash;
  {
    KernelBuilder builder(nullptr, *nvrtc_, *store_, "sm_90");
    std::vector<std::thread> threads;
    std::vector<v1::ExecutionPlan> plans(4, FillPlan(v1::CUDA, salt));
    std::atomic<int> failures{0};
    for (v1::ExecutionPlan& plan : plans) {
      threads.emplace_back([&] { failures += !builder.BuildPlan(&plan).ok(); });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(failures, 0);
    EXPECT_EQ(builder.stats().compiled, 1);
    EXPECT_EQ(builder.stats().memory_hits, 3);
    hash = plans[0].steps(0).code_object_hash();
    EXPECT_EQ(hash.size(), 64u);
    for (const v1::ExecutionPlan& plan : plans)
      EXPECT_EQ(plan.steps(0).code_object_hash(), hash);
    EXPECT_EQ(*storage::KernelCache(store_.get()).Count(), 1);
  }
  // A restart: a new builder on the reopened store reads, never compiles.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  KernelBuilder again(nullptr, *nvrtc_, *store_, "sm_90");
  v1::ExecutionPlan plan = FillPlan(v1::CUDA, salt);
  ASSERT_TRUE(again.BuildPlan(&plan).ok());
  EXPECT_EQ(plan.steps(0).code_object_hash(), hash);
  EXPECT_EQ(again.stats().compiled, 0);
  EXPECT_EQ(again.stats().store_hits, 1);
  // Another arch is another code object.
  KernelBuilder other_arch(nullptr, *nvrtc_, *store_, "sm_80");
  v1::ExecutionPlan plan80 = FillPlan(v1::CUDA, salt);
  ASSERT_TRUE(other_arch.BuildPlan(&plan80).ok());
  EXPECT_NE(plan80.steps(0).code_object_hash(), hash);
  EXPECT_EQ(other_arch.stats().compiled, 1);
}

TEST_F(KernelBuilderTest, RejectsBadPlans) {
  KernelBuilder builder(nullptr, *nvrtc_, *store_, "sm_90");
  v1::ExecutionPlan hip_plan = FillPlan(v1::HIP, RandomDefine());
  EXPECT_EQ(builder.BuildPlan(&hip_plan).code(),
            absl::StatusCode::kInvalidArgument);
  v1::ExecutionPlan out_of_range = FillPlan(v1::CUDA, RandomDefine());
  out_of_range.mutable_steps(0)->set_source_index(1);
  EXPECT_EQ(builder.BuildPlan(&out_of_range).code(),
            absl::StatusCode::kInvalidArgument);
  v1::ExecutionPlan missing = FillPlan(v1::CUDA, RandomDefine());
  missing.mutable_sources(0)->set_file("no_such.cu");
  EXPECT_EQ(builder.BuildPlan(&missing).code(), absl::StatusCode::kNotFound);
  v1::ExecutionPlan broken = FillPlan(v1::CUDA, "-DCT_TEST_SALT=");
  broken.mutable_sources(0)->add_options("--no-such-nvrtc-option");
  EXPECT_EQ(builder.BuildPlan(&broken).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(builder.stats().compiled, 0);
  EXPECT_EQ(*storage::KernelCache(store_.get()).Count(), 0);
}

TEST_F(KernelBuilderTest, LeavesLibraryStepsAlone) {
  KernelBuilder builder(nullptr, *nvrtc_, *store_, "sm_90");
  // A library step has no source: its source_index means nothing.
  v1::ExecutionPlan plan = FillPlan(v1::CUDA, RandomDefine());
  v1::KernelStep* gemm = plan.add_steps();
  gpu::SetBlasGemm(gpu::BlasGemm(), gemm);
  gemm->set_source_index(7);
  ASSERT_EQ(builder.BuildPlan(&plan), absl::OkStatus());
  EXPECT_EQ(plan.steps(0).code_object_hash().size(), 64u);
  EXPECT_TRUE(plan.steps(1).code_object_hash().empty());
  // A plan of library steps alone compiles nothing.
  v1::ExecutionPlan only_blas;
  only_blas.set_backend(v1::CUDA);
  gpu::SetBlasGemm(gpu::BlasGemm(), only_blas.add_steps());
  ASSERT_EQ(builder.BuildPlan(&only_blas), absl::OkStatus());
  EXPECT_TRUE(only_blas.steps(0).code_object_hash().empty());
  EXPECT_EQ(builder.stats().compiled, 1);
}

// The CPU device taking code objects as a GPU would, or refusing them as a
// lost GPU does.
class CodeObjectDevice final : public DeviceWrapper {
 public:
  CodeObjectDevice() : DeviceWrapper(&cpu_) {}
  absl::Status LoadCodeObject(const std::string& hash,
                              const std::string& binary) override {
    if (lost) return absl::InternalError("device gone (injected)");
    loaded.push_back(hash);
    return absl::OkStatus();
  }
  bool HasCodeObject(const std::string& hash) const override {
    return std::find(loaded.begin(), loaded.end(), hash) != loaded.end();
  }
  bool lost = false;
  std::vector<std::string> loaded;

 private:
  CpuDevice cpu_;
};

TEST_F(KernelBuilderTest, ADroppedDeviceNoLongerFailsBuildsForTheOthers) {
  CodeObjectDevice first, second;
  KernelBuilder builder(&first, *nvrtc_, *store_, "sm_90");
  builder.AddDevice(&second);
  v1::ExecutionPlan plan = FillPlan(v1::CUDA, RandomDefine());
  ASSERT_EQ(builder.BuildPlan(&plan), absl::OkStatus());
  EXPECT_EQ(first.loaded.size(), 1u);
  EXPECT_EQ(second.loaded.size(), 1u);
  // The second device is lost: a new kernel fails to load there...
  second.lost = true;
  v1::ExecutionPlan next = FillPlan(v1::CUDA, RandomDefine());
  EXPECT_EQ(builder.BuildPlan(&next).code(), absl::StatusCode::kInternal);
  // ...until it is dropped; the first device gets it.
  builder.DropDevice(&second);
  ASSERT_EQ(builder.BuildPlan(&next), absl::OkStatus());
  EXPECT_EQ(first.loaded.size(), 2u);
  EXPECT_EQ(second.loaded.size(), 1u);
}

TEST(BlasStepTest, RoundTripsAndChecksItsScalars) {
  gpu::BlasGemm g;
  g.trans_a = true, g.m = 5, g.n = 7, g.k = 3, g.lda = 6, g.ldb = 9, g.ldc = 8;
  g.stride_a = 100, g.stride_b = 0, g.stride_c = 8, g.batch = 4;
  g.ab_type = DataType::kBf16, g.c_type = DataType::kFp32, g.beta = 1;
  v1::KernelStep step;
  gpu::SetBlasGemm(g, &step);
  for (int i = 0; i < 3; ++i) step.add_buffers()->set_role(v1::BUFFER_X);
  EXPECT_EQ(step.kernel(), gpu::kBlasGemmKernel);
  EXPECT_TRUE(gpu::IsLibraryStep(step));
  absl::StatusOr<gpu::BlasGemm> back = gpu::DecodeBlasGemm(step);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->trans_a && !back->trans_b);
  EXPECT_EQ(back->m * 100 + back->n * 10 + back->k, 573);
  EXPECT_EQ(back->lda * 100 + back->ldb * 10 + back->ldc, 698);
  EXPECT_EQ(back->stride_a + back->stride_b + back->stride_c, 108);
  EXPECT_EQ(back->batch, 4);
  EXPECT_EQ(back->ab_type, DataType::kBf16);
  EXPECT_EQ(back->c_type, DataType::kFp32);
  EXPECT_EQ(back->beta, 1);

  // Column-major: C^T = op(B)^T op(A)^T, so the operands and m, n swap.
  const gpu::ColumnMajorGemm c = gpu::ToColumnMajor(*back);
  EXPECT_EQ(c.first_buffer, gpu::kBlasB);
  EXPECT_EQ(c.second_buffer, gpu::kBlasA);
  EXPECT_FALSE(c.trans_first);
  EXPECT_TRUE(c.trans_second);
  EXPECT_EQ(c.m, 7);
  EXPECT_EQ(c.n, 5);
  EXPECT_EQ(c.ld_first, 9);
  EXPECT_EQ(c.ld_second, 6);
  EXPECT_EQ(c.stride_first, 0);
  EXPECT_EQ(c.stride_second, 100);

  auto with = [&](int index, int64_t value) {
    v1::KernelStep bad = step;
    bad.set_scalars(index, value);
    return gpu::DecodeBlasGemm(bad).status().code();
  };
  EXPECT_EQ(with(5, 4),
            absl::StatusCode::kInvalidArgument);  // lda < m (A transposed)
  EXPECT_EQ(with(7, 6), absl::StatusCode::kInvalidArgument);  // ldc < n
  EXPECT_EQ(with(2, int64_t{1} << 31), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(11, 0), absl::StatusCode::kInvalidArgument);  // no batch
  EXPECT_EQ(with(8, -1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(13, 2),
            absl::StatusCode::kInvalidArgument);  // bf16 A, B -> fp16 C
  EXPECT_EQ(with(14, 2), absl::StatusCode::kInvalidArgument);  // beta
  v1::KernelStep two_buffers = step;
  two_buffers.mutable_buffers()->RemoveLast();
  EXPECT_EQ(gpu::DecodeBlasGemm(two_buffers).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::KernelStep fill;
  fill.set_kernel("fill_i64");
  EXPECT_FALSE(gpu::IsLibraryStep(fill));
}

int RunTool(const std::string& args) {
  const std::string cmd =
      absl::StrCat(CONVTUNE_BINARY_DIR, "/server/convtune-compile ", args,
                   " >/dev/null 2>&1");
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(CompileToolTest, FillsAKernelCacheWithoutADevice) {
  TempDir dir;
  EXPECT_EQ(RunTool(absl::StrCat("--target sm_90 --db ", dir.db(),
                                 " --file fill_test.cu")),
            0);
  EXPECT_EQ(RunTool(absl::StrCat("--target gfx90a --db ", dir.db(),
                                 " --file fill_test.cu")),
            0);
  EXPECT_EQ(RunTool(absl::StrCat("--target sm_1 --db ", dir.db(),
                                 " --file fill_test.cu")),
            1);
  EXPECT_EQ(RunTool(absl::StrCat("--target sm_90 --db ", dir.db(),
                                 " --file nope.cu")),
            1);
  EXPECT_EQ(RunTool(absl::StrCat("--target vulkan --db ", dir.db())), 2);
  EXPECT_EQ(RunTool("--target sm_90"), 2);
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(dir.db());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*storage::KernelCache(store->get()).Count(), 2);
}

// Runs convtune-compile and returns its exit code and standard output.
std::pair<int, std::string> RunToolOutput(const std::string& args) {
  const std::string cmd = absl::StrCat(
      CONVTUNE_BINARY_DIR, "/server/convtune-compile ", args, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int rc = pclose(pipe);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

TEST(CompileToolTest, Sm90aFillsTheCacheThatAnSm90DaemonReads) {
  TempDir dir;
  const std::string list = dir.path() + "/problems.txt";
  constexpr char kLine[] =
      "convfp16 -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 "
      "-F 1";
  std::ofstream(list) << kLine << "\n";
  auto [rc, out] = RunToolOutput(
      absl::StrCat("--target sm_90a --db ", dir.db(), " --problems ", list));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "gpu_tensor_core_wgmma")) << out;
  absl::StatusOr<std::vector<ConvProblem>> problems = ParseDriverLine(kLine);
  ASSERT_TRUE(problems.ok()) << problems.status();
  const ConvProblem& p = problems->front();
  const Solver* wgmma = SolverRegistry::Default().Find(kGpuTensorCoreWgmmaId);
  ASSERT_NE(wgmma, nullptr);
  absl::StatusOr<v1::ExecutionPlan> plan =
      wgmma->MakePlan(p, wgmma->DefaultConfig(p));
  ASSERT_TRUE(plan.ok()) << plan.status();
  plan->set_backend(v1::CUDA);
  ASSERT_EQ(plan->sources(0).arch_suffix(), "a");
  absl::StatusOr<std::unique_ptr<KernelCompiler>> nvrtc = MakeNvrtcCompiler();
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status();
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(dir.db());
  ASSERT_TRUE(store.ok()) << store.status();
  // A device that names itself sm_90 finds the sm_90a kernel compiled.
  KernelBuilder builder(nullptr, **nvrtc, **store, "sm_90");
  ASSERT_EQ(builder.BuildPlan(&*plan), absl::OkStatus());
  EXPECT_EQ(builder.stats().compiled, 0);
  EXPECT_GE(builder.stats().store_hits, 1);
  absl::StatusOr<v1::KernelCacheRecord> record =
      storage::KernelCache(store->get()).Get(plan->steps(0).code_object_hash());
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->arch(), "sm_90a");
  // Any other suffix is refused by name.
  plan->mutable_sources(0)->set_arch_suffix("zz");
  const absl::Status bad = builder.BuildPlan(&*plan);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "arch_suffix")) << bad;
}

TEST(CompileToolTest, CompilesTheSolversOfAProblemListOnce) {
  TempDir dir;
  const std::string list = dir.path() + "/problems.txt";
  {
    std::ofstream out(list);
    out << "# a forward and a backward-weights problem\n"
        << "convfp16 -n 2 -c 16 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v "
           "1 -F 5\n";
  }
  auto [rc, out] = RunToolOutput(absl::StrCat(
      "--target sm_90 --db ", dir.db(), " --problems ", list, " --jobs 2"));
  ASSERT_EQ(rc, 0) << out;
  // Dynamic and size-specialised solvers, and the fp16 tensor-core kernels.
  EXPECT_TRUE(absl::StrContains(out, "gpu_implicit_gemm_static")) << out;
  EXPECT_TRUE(absl::StrContains(out, "gpu_tensor_core_igemm")) << out;
  EXPECT_FALSE(absl::StrContains(out, " 0 compiled")) << out;
  int64_t cached = 0;
  {
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::OpenRocksDbStore(dir.db());
    ASSERT_TRUE(store.ok()) << store.status();
    cached = *storage::KernelCache(store->get()).Count();
    EXPECT_GT(cached, 2);
  }
  // Everything is cached now: nothing is compiled again.
  std::tie(rc, out) = RunToolOutput(
      absl::StrCat("--target sm_90 --db ", dir.db(), " --problems ", list));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, " 0 compiled, ")) << out;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(dir.db());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*storage::KernelCache(store->get()).Count(), cached);

  // Bad input names the flag or the line.
  {
    std::ofstream out(list);
    out << "conv -n 2 -c 16\nconv -n 0 -c 16\n";
  }
  std::tie(rc, out) = RunToolOutput(absl::StrCat(
      "--target sm_90 --db ", dir.path(), "/other --problems ", list));
  EXPECT_EQ(rc, 1);
  EXPECT_TRUE(absl::StrContains(out, "problems.txt:2")) << out;
  EXPECT_EQ(
      RunTool(absl::StrCat("--target sm_90 --db ", dir.db(), " --all-configs")),
      2);
  EXPECT_EQ(
      RunTool(absl::StrCat("--target sm_90 --db ", dir.db(), " --jobs 0")), 2);
}

// The cudnn.conv step round-trips the problem, the daemon's workspace and
// the engine config, and refuses steps that do not say them consistently.
TEST(CudnnStepTest, RoundTripsAndRefusesInconsistentSteps) {
  ConvProblem p;
  p.n = 2, p.c = 8, p.k = 16;
  p.in = {1, 9, 9};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  p.layout = Layout::kNHWC;
  p.type = DataType::kFp16;
  const gpu::CudnnEngineConfig c{7, {{2, 3}, {13, 1}}};
  const v1::KernelStep step = gpu::MakeCudnnConvStep(p, c, 4096);
  EXPECT_TRUE(gpu::IsLibraryStep(step));
  absl::StatusOr<gpu::CudnnConvStep> back = gpu::DecodeCudnnConvStep(step);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ProblemKey(back->problem), ProblemKey(p));
  EXPECT_EQ(back->config, c);
  EXPECT_EQ(back->workspace_bytes, 4096);
  EXPECT_EQ(gpu::DecodeEngineConfig(gpu::EncodeEngineConfig(c)).value(), c);

  const v1::KernelStep none = gpu::MakeCudnnConvStep(p, c, 0);
  EXPECT_EQ(none.buffers_size(), 3);
  ASSERT_TRUE(gpu::DecodeCudnnConvStep(none).ok());

  v1::KernelStep lying = step;  // a workspace buffer, but no workspace
  lying.set_scalars(kProblemScalars, 0);
  EXPECT_EQ(gpu::DecodeCudnnConvStep(lying).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::KernelStep odd = step;  // a knob type without its value
  odd.add_scalars(5);
  EXPECT_EQ(gpu::DecodeCudnnConvStep(odd).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(gpu::DecodeEngineConfig({}).ok());
  EXPECT_FALSE(gpu::DecodeEngineConfig({-1}).ok());
}

}  // namespace
}  // namespace convtune
