// convtuned end to end on the GPU: find, store, restart, hit; and the client
// running the daemon's GPU solutions on its own device memory. Skips with a
// message where there is no CUDA device.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_join.h"
#include "client/client.h"
#include "client/convtune.h"
#include "common/defaults.h"
#include "common/status_macros.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/cuda_device.h"
#include "kernels/gpu/cudnn_graph.h"
#include "kernels/problem_proto.h"
#include "kernels/reference.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

// $CONVTUNED (e.g. a bundled copy) wins over the build tree's binary.
std::string Convtuned() {
  const char* env = std::getenv("CONVTUNED");
  return env != nullptr && *env != '\0' ? env : CONVTUNED_PATH;
}

class GpuDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(0);
    if (!dev.ok())
      GTEST_SKIP() << "no CUDA device here: " << dev.status().message();
    dir_ = testing::MakeTempDir("convtune-gpu-daemon");
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  v1::FindResponse Find(const std::string& socket, v1::DataType type) {
    ConvProblem p;
    p.n = 8;
    p.c = 64;
    p.k = 64;
    p.in = {1, 28, 28};
    p.filter = {1, 3, 3};
    p.pad = {0, 1, 1};
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    req.mutable_problem()->set_data_type(type);
    auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(300));
    v1::FindResponse resp;
    grpc::Status s = stub->Find(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  std::string dir_;
};

TEST_F(GpuDaemonTest, FindStoreRestartHit) {
  const std::string socket = dir_ + "/d.sock", db = dir_ + "/db";
  std::vector<v1::FindResponse> first;
  {
    DaemonProcess d;
    ASSERT_TRUE(d.Start(Convtuned(),
                        {"--backend", "cuda", "--socket", socket, "--db", db},
                        dir_ + "/1.log"));
    ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
    EXPECT_THAT(d.log(), HasSubstr("device cuda-sm_"));
    for (v1::DataType t : {v1::FP32, v1::FP16}) {
      first.push_back(Find(socket, t));
      EXPECT_FALSE(first.back().from_db());
      ASSERT_GT(first.back().results_size(), 0);
      EXPECT_GE(first.back().results(0).solver_id(), 100u);  // a GPU solver
    }
    EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
  }
  DaemonProcess d;
  ASSERT_TRUE(d.Start(Convtuned(),
                      {"--backend", "cuda", "--socket", socket, "--db", db},
                      dir_ + "/2.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  int i = 0;
  for (v1::DataType t : {v1::FP32, v1::FP16}) {
    v1::FindResponse again = Find(socket, t);
    EXPECT_TRUE(again.from_db());
    ASSERT_EQ(again.results_size(), first[i].results_size());
    EXPECT_EQ(again.results(0).solver_id(), first[i].results(0).solver_id());
    ++i;
  }
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

// Immediate mode with a GPU daemon: every solution of each direction is
// compiled by the daemon and run by the client on device memory, and the
// output matches the float64 reference.
TEST_F(GpuDaemonTest, ClientRunsEverySolutionOnDeviceMemory) {
  const std::string socket = dir_ + "/d.sock";
  DaemonProcess d;
  ASSERT_TRUE(
      d.Start(Convtuned(),
              {"--backend", "cuda", "--socket", socket, "--db", dir_ + "/db",
               // A background find may retune a library solver's config,
               // and its workspace, between this test's calls.
               "--background-tune", "off"},
              dir_ + "/immediate.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(socket);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(0);
  ASSERT_TRUE(dev.ok()) << dev.status();
  std::mt19937_64 rng(20261129);
  int runs = 0, cudnn_runs = 0;
  for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
    ConvProblem p;
    p.direction = dir;
    p.n = 2;
    p.c = 16;
    p.k = 24;
    p.in = {1, 14, 14};
    p.filter = {1, 3, 3};
    p.pad = {0, 1, 1};
    absl::StatusOr<v1::GetSolutionsResponse> solutions =
        (*client)->GetSolutions(p);
    ASSERT_TRUE(solutions.ok()) << solutions.status();
    ASSERT_GT(solutions->solutions_size(), 1);
    std::vector<float> x(p.x_elements()), w(p.w_elements()), y(p.y_elements());
    FillRandom(x.data(), p.type, x.size(), rng);
    FillRandom(w.data(), p.type, w.size(), rng);
    FillRandom(y.data(), p.type, y.size(), rng);
    std::vector<float>& out = ByTensor(OutputTensor(dir), x, w, y);
    for (const v1::Solution& s : solutions->solutions()) {
      SCOPED_TRACE(
          absl::StrCat(DirectionName(dir), " solution ", s.solution_id()));
      absl::StatusOr<v1::CompileSolutionResponse> compiled =
          (*client)->CompileSolution(p, s.solution_id());
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      EXPECT_EQ(compiled->plan().backend(), v1::CUDA);
      absl::StatusOr<int64_t> ws =
          (*client)->GetSolutionWorkspaceSize(p, s.solution_id());
      ASSERT_TRUE(ws.ok()) << ws.status();
      auto dx = (*dev)->Allocate(x.size() * 4);
      auto dw = (*dev)->Allocate(w.size() * 4);
      auto dy = (*dev)->Allocate(y.size() * 4);
      auto dws = (*dev)->Allocate(std::max<int64_t>(*ws, 4));
      ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok() && dws.ok());
      std::vector<float> poisoned(out.size());
      FillNaN(poisoned.data(), p.type, poisoned.size());
      for (auto [buf, host] :
           {std::pair{dx->get(), &x}, {dw->get(), &w}, {dy->get(), &y}}) {
        const void* src = host == &out ? poisoned.data() : host->data();
        ASSERT_TRUE((*dev)->CopyToDevice(buf, src, host->size() * 4).ok());
      }
      const ClientCounters before = (*client)->counters();
      PlanBuffers b{(*dx)->data(), (*dw)->data(), (*dy)->data(), (*dws)->data(),
                    *ws};
      absl::Status run = (*client)->RunImmediate(p, s.solution_id(), b);
      ASSERT_TRUE(run.ok()) << run;
      // Compiled before: neither a plan nor a code object is fetched now.
      const ClientCounters after = (*client)->counters();
      EXPECT_EQ(after.plan_rpcs, before.plan_rpcs);
      EXPECT_EQ(after.code_object_rpcs, before.code_object_rpcs);
      std::vector<float> result(out.size());
      DeviceBuffer* out_buf = ByTensor(OutputTensor(dir), dx, dw, dy)->get();
      ASSERT_TRUE(
          (*dev)
              ->CopyFromDevice(result.data(), *out_buf, result.size() * 4)
              .ok());
      HostTensors t{x.data(), w.data(), y.data()};
      EXPECT_TRUE(CheckOutput(p, t, result.data(), 0, rng).ok())
          << CheckOutput(p, t, result.data(), 0, rng);
      ++runs;
      cudnn_runs += s.solution_id() == gpu::kCudnnSolverId;
    }
  }
  EXPECT_GE(runs, 6);
  // With cuDNN on the node, its solution runs here in every direction.
  if (!(*dev)->info().libraries.empty()) EXPECT_EQ(cudnn_runs, 3);
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

// The C API runs the cuDNN solution on the caller's own device memory.
TEST_F(GpuDaemonTest, CApiRunsTheCudnnSolutionOnDeviceMemory) {
  absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(0);
  ASSERT_TRUE(dev.ok()) << dev.status();
  if ((*dev)->info().libraries.empty()) {
    GTEST_SKIP() << "no cuDNN 9 on " << (*dev)->info().Key();
  }
  const std::string socket = dir_ + "/c.sock";
  DaemonProcess d;
  ASSERT_TRUE(
      d.Start(Convtuned(),
              {"--backend", "cuda", "--socket", socket, "--db", dir_ + "/db",
               // A background find may retune a library solver's config,
               // and its workspace, between this test's calls.
               "--background-tune", "off"},
              dir_ + "/capi.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  convtuneHandle_t h = nullptr;
  ASSERT_EQ(convtuneCreateWithAddress(&h, socket.c_str()),
            convtuneStatusSuccess);
  const int n = 4, c = 32, hw = 28, k = 48;
  convtuneTensorDescriptor_t xd, wd, yd;
  convtuneConvolutionDescriptor_t cd;
  convtuneCreateTensorDescriptor(&xd);
  convtuneCreateTensorDescriptor(&wd);
  convtuneCreateTensorDescriptor(&yd);
  convtuneCreateConvolutionDescriptor(&cd);
  ASSERT_EQ(convtuneSet4dTensorDescriptor(xd, convtuneFloat, n, c, hw, hw), 0);
  ASSERT_EQ(convtuneSet4dTensorDescriptor(wd, convtuneFloat, k, c, 3, 3), 0);
  ASSERT_EQ(convtuneSet4dTensorDescriptor(yd, convtuneFloat, n, k, hw, hw), 0);
  ASSERT_EQ(convtuneInitConvolutionDescriptor(cd, convtuneConvolution, 1, 1, 1,
                                              1, 1, 1),
            0);
  ConvProblem p;
  p.n = n, p.c = c, p.k = k;
  p.in = {1, hw, hw};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  std::mt19937_64 rng(7);
  std::vector<float> x(p.x_elements()), w(p.w_elements()), y(p.y_elements());
  FillRandom(x.data(), p.type, x.size(), rng);
  FillRandom(w.data(), p.type, w.size(), rng);
  FillNaN(y.data(), p.type, y.size());
  size_t ws = 0;
  ASSERT_EQ(convtuneConvolutionForwardGetSolutionWorkspaceSize(
                h, wd, xd, cd, yd, gpu::kCudnnSolverId, &ws),
            convtuneStatusSuccess)
      << convtuneGetLastError(h);
  auto dx = (*dev)->Allocate(x.size() * 4);
  auto dw = (*dev)->Allocate(w.size() * 4);
  auto dy = (*dev)->Allocate(y.size() * 4);
  auto dws = (*dev)->Allocate(std::max<int64_t>(ws, 4));
  ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok() && dws.ok());
  ASSERT_TRUE((*dev)->CopyToDevice(dx->get(), x.data(), x.size() * 4).ok());
  ASSERT_TRUE((*dev)->CopyToDevice(dw->get(), w.data(), w.size() * 4).ok());
  ASSERT_TRUE((*dev)->CopyToDevice(dy->get(), y.data(), y.size() * 4).ok());
  ASSERT_EQ(convtuneConvolutionForwardImmediate(
                h, wd, (*dw)->data(), xd, (*dx)->data(), cd, yd, (*dy)->data(),
                (*dws)->data(), ws, gpu::kCudnnSolverId),
            convtuneStatusSuccess)
      << convtuneGetLastError(h);
  std::vector<float> result(y.size());
  ASSERT_TRUE(
      (*dev)->CopyFromDevice(result.data(), **dy, result.size() * 4).ok());
  HostTensors t{x.data(), w.data(), nullptr};
  EXPECT_EQ(CheckOutput(p, t, result.data(), 0, rng), absl::OkStatus());
  convtuneDestroyTensorDescriptor(xd);
  convtuneDestroyTensorDescriptor(wd);
  convtuneDestroyTensorDescriptor(yd);
  convtuneDestroyConvolutionDescriptor(cd);
  convtuneDestroy(h);
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

// Runs the best solution of `p` through a client on `ordinal`, on that
// device's memory, against the float64 reference with a NaN-poisoned output.
absl::Status RunBestOn(const std::string& socket, int ordinal,
                       const ConvProblem& p, uint64_t seed) {
  ClientOptions options;
  options.device_ordinal = ordinal;
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(socket, options);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<GpuDevice>> dev = CudaDevice::Open(ordinal);
  if (!dev.ok()) return dev.status();
  absl::StatusOr<v1::GetSolutionsResponse> solutions =
      (*client)->GetSolutions(p);
  if (!solutions.ok()) return solutions.status();
  if (solutions->solutions_size() == 0) return absl::NotFoundError("none");
  const uint32_t id = solutions->solutions(0).solution_id();
  absl::StatusOr<int64_t> ws = (*client)->GetSolutionWorkspaceSize(p, id);
  if (!ws.ok()) return ws.status();
  std::mt19937_64 rng(seed);
  std::vector<float> x(p.x_elements()), w(p.w_elements()), y(p.y_elements());
  FillRandom(x.data(), p.type, x.size(), rng);
  FillRandom(w.data(), p.type, w.size(), rng);
  FillNaN(y.data(), p.type, y.size());
  auto dx = (*dev)->Allocate(x.size() * 4);
  auto dw = (*dev)->Allocate(w.size() * 4);
  auto dy = (*dev)->Allocate(y.size() * 4);
  auto dws = (*dev)->Allocate(std::max<int64_t>(*ws, 4));
  if (!dx.ok() || !dw.ok() || !dy.ok() || !dws.ok()) {
    return absl::ResourceExhaustedError("device memory");
  }
  RETURN_IF_ERROR((*dev)->CopyToDevice(dx->get(), x.data(), x.size() * 4));
  RETURN_IF_ERROR((*dev)->CopyToDevice(dw->get(), w.data(), w.size() * 4));
  RETURN_IF_ERROR((*dev)->CopyToDevice(dy->get(), y.data(), y.size() * 4));
  PlanBuffers b{(*dx)->data(), (*dw)->data(), (*dy)->data(), (*dws)->data(),
                *ws};
  RETURN_IF_ERROR((*client)->RunImmediate(p, id, b));
  std::vector<float> result(y.size());
  RETURN_IF_ERROR(
      (*dev)->CopyFromDevice(result.data(), **dy, result.size() * 4));
  HostTensors t{x.data(), w.data(), nullptr};
  return CheckOutput(p, t, result.data(), 0, rng);
}

// Every GPU of the node in one daemon (--devices 0,...,N-1): each listed
// with its key, timed on where a find names it, records shared by all of
// them, distinct cold finds spread over them, and a client on each running
// its plan there, all at once. One GPU is a list of one.
TEST_F(GpuDaemonTest, EveryGpuIsListedTimedOnSharedAndRunOn) {
  int count = 1;
  while (count < 8 && CudaDevice::Open(count).ok()) ++count;
  std::vector<std::string> ordinals;
  for (int i = 0; i < count; ++i) ordinals.push_back(absl::StrCat(i));
  const std::string socket = dir_ + "/m.sock";
  DaemonProcess d;
  ASSERT_TRUE(d.Start(
      Convtuned(),
      {"--backend", "cuda", "--socket", socket, "--db", dir_ + "/db",
       "--background-tune", "off", "--devices", absl::StrJoin(ordinals, ",")},
      dir_ + "/devices.log"));
  ASSERT_TRUE(d.WaitServing(socket, 60000)) << d.log();
  auto stub = v1::ConvTune::NewStub(grpc::CreateChannel(
      UnixTarget(socket), grpc::InsecureChannelCredentials()));
  const auto status = [&] {
    grpc::ClientContext ctx;
    v1::GetStatusResponse resp;
    EXPECT_TRUE(stub->GetStatus(&ctx, {}, &resp).ok());
    return resp;
  };
  const auto problem = [](int64_t c) {
    ConvProblem p;
    p.n = 8, p.c = c, p.k = 32;
    p.in = {1, 28, 28};
    p.filter = {1, 3, 3};
    p.pad = {0, 1, 1};
    return p;
  };
  const auto find = [&](const ConvProblem& p, std::optional<int> tune_on,
                        std::optional<int> device) {
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    if (tune_on) req.set_tune_on_device(*tune_on);
    if (device) req.set_device(*device);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(300));
    v1::FindResponse resp;
    grpc::Status s = stub->Find(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };

  v1::GetStatusResponse st = status();
  ASSERT_EQ(st.devices_size(), count) << st.DebugString();
  EXPECT_THAT(st.device_key(), HasSubstr("cuda-sm_"));
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(st.devices(i).ordinal(), i);
    EXPECT_THAT(st.devices(i).device_key(), HasSubstr("cuda-sm_"));
    EXPECT_EQ(st.devices(i).state(), "idle");
  }
  EXPECT_EQ(st.devices(0).device_key(), st.device_key());
  // Devices of the first one's key (all of them on a node of one model).
  std::vector<int> same_key;
  for (int i = 0; i < count; ++i) {
    if (st.devices(i).device_key() == st.device_key()) same_key.push_back(i);
  }
  // A cold problem timed on each device by name.
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(find(problem(16 + 8 * i), i, std::nullopt).source(), "tuned");
  }
  st = status();
  for (int i = 0; i < count; ++i) {
    EXPECT_GE(st.devices(i).jobs_done(), 1) << i;
    EXPECT_GT(st.devices(i).busy_ms(), 0) << i;
  }
  // The record is the key's: tuned on device 0, it answers a client on the
  // last device of that key, and is that key's.
  const v1::FindResponse shared =
      find(problem(16), std::nullopt, same_key.back());
  EXPECT_TRUE(shared.from_db());
  EXPECT_EQ(shared.device_key(), st.device_key());
  // Distinct cold problems at once, no device named: the first key's, and
  // each of its devices times some.
  if (same_key.size() > 1) {
    std::vector<int64_t> before;
    for (int i = 0; i < count; ++i) before.push_back(st.devices(i).jobs_done());
    std::vector<std::thread> finds;
    for (size_t j = 0; j < 2 * same_key.size(); ++j) {
      finds.emplace_back(
          [&, j] { find(problem(64 + 8 * j), std::nullopt, std::nullopt); });
    }
    for (std::thread& t : finds) t.join();
    st = status();
    for (int i : same_key) {
      EXPECT_GT(st.devices(i).jobs_done(), before[i]) << i;
    }
  }
  // A client on each device runs its plan there, all at once.
  std::vector<absl::Status> runs(count);
  std::vector<std::thread> clients;
  for (int i = 0; i < count; ++i) {
    clients.emplace_back([&, i] {
      runs[i] = RunBestOn(socket, i, problem(16 + 8 * i), 100 + i);
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < count; ++i)
    EXPECT_TRUE(runs[i].ok()) << i << ": " << runs[i];
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

}  // namespace
}  // namespace convtune
