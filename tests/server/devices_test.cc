// Several devices of one key: a core over two CPU devices spreads distinct
// cold problems over them, tunes an identical one once, honours the device a
// caller names and leaves one a client runs on; and a real convtuned with
// --cpu-devices 2 lists both, times on the one named, runs Execute where
// asked, and refuses devices it does not have. Devices of two keys: the
// service answers each request for the key of the device it names.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/defaults.h"
#include "convtune/v1/service.grpc.pb.h"
#include "kernels/cpu_device.h"
#include "kernels/problem_proto.h"
#include "server/access.h"
#include "server/core.h"
#include "server/service.h"
#include "server/solvers/cpu_solvers.h"
#include "server/solvers/gpu_solvers.h"
#include "storage/portable.h"
#include "storage/records.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem Problem(int64_t c) {
  ConvProblem p;
  p.n = 1, p.c = c, p.k = 8, p.in = {1, 10, 10}, p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

// Waits up to 20 s for `done`.
bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Short timings, no background tuning.
Core::Options TestCoreOptions() {
  Core::Options options;
  options.timing.min_repeats = 2;
  options.timing.budget_ms = 2;
  options.background_tuning = false;
  return options;
}

class TwoDeviceCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-devices");
    ASSERT_FALSE(dir_.empty());
    auto store = storage::OpenRocksDbStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    for (int i = 0; i < 2; ++i) {
      queues_.push_back(std::make_unique<ThreadPool>("timing", 1));
    }
    Core::Options options = TestCoreOptions();
    options.device_in_use_ms = 600000;
    core_ = std::make_unique<Core>(
        std::vector<Core::DeviceLane>{{.ordinal = 0,
                                       .device = &devices_[0],
                                       .timing_queue = queues_[0].get()},
                                      {.ordinal = 1,
                                       .device = &devices_[1],
                                       .timing_queue = queues_[1].get()}},
        SolverRegistry::Default(), *store_, compile_, options);
  }
  void TearDown() override {
    Release();
    core_.reset();
    queues_.clear();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Holds both timing queues (or one) until Release, so that jobs queue up.
  void Hold(std::optional<int> lane = std::nullopt) {
    gate_ = std::make_shared<absl::Notification>();
    for (size_t i = 0; i < queues_.size(); ++i) {
      if (lane.has_value() && *lane != static_cast<int>(i)) continue;
      queues_[i]->Schedule([gate = gate_] { gate->WaitForNotification(); });
    }
  }
  void Release() {
    if (gate_ != nullptr && !gate_->HasBeenNotified()) gate_->Notify();
  }

  int64_t Waiting(int lane) {
    return core_->timing().Status()[lane].jobs_waiting;
  }
  int64_t Done(int lane) { return core_->timing().Status()[lane].jobs_done; }

  // Starts a find; `found` is set when it is done.
  void FindAsync(const ConvProblem& p, FindParams params,
                 absl::StatusOr<FindOutcome>* out, absl::Notification* found) {
    core_->find().Find(p, params,
                       [out, found](absl::StatusOr<FindOutcome> outcome) {
                         *out = std::move(outcome);
                         found->Notify();
                       });
  }

  std::string dir_;
  CpuDevice devices_[2];
  std::unique_ptr<storage::Store> store_;
  ThreadPool compile_{"compile", 2};
  std::vector<std::unique_ptr<ThreadPool>> queues_;
  std::unique_ptr<Core> core_;
  std::shared_ptr<absl::Notification> gate_;
};

TEST_F(TwoDeviceCoreTest, DistinctColdProblemsSpreadOverTheDevices) {
  Hold();
  absl::StatusOr<FindOutcome> a, b;
  absl::Notification a_done, b_done;
  FindAsync(Problem(8), {.mode = v1::HYBRID}, &a, &a_done);
  FindAsync(Problem(16), {.mode = v1::HYBRID}, &b, &b_done);
  ASSERT_TRUE(WaitFor([&] { return Waiting(0) + Waiting(1) == 2; }));
  EXPECT_EQ(Waiting(0), 1);
  EXPECT_EQ(Waiting(1), 1);
  Release();
  a_done.WaitForNotification();
  b_done.WaitForNotification();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Done(0), 1);
  EXPECT_EQ(Done(1), 1);
  // Both are stored under the one key, and answered from the FindDb.
  auto again = core_->find().FindBlocking(Problem(16), {.mode = v1::HYBRID});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->from_db);
  EXPECT_EQ(Done(0) + Done(1), 2);
}

// A run waits for a device with nothing to do rather than queue behind
// another device's run: with device 0 held by a run named to it, two runs
// both take device 1, one after the other.
TEST_F(TwoDeviceCoreTest, RunsTakeTheDeviceThatIsFree) {
  Hold(0);
  absl::StatusOr<FindOutcome> a, b, c;
  absl::Notification a_done, b_done, c_done;
  FindAsync(Problem(8), {.mode = v1::HYBRID, .device = 0}, &a, &a_done);
  ASSERT_TRUE(WaitFor([&] { return Waiting(0) == 1; }));
  FindAsync(Problem(16), {.mode = v1::HYBRID}, &b, &b_done);
  FindAsync(Problem(24), {.mode = v1::HYBRID}, &c, &c_done);
  ASSERT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(c_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Done(1), 2);
  EXPECT_EQ(Done(0), 0);
  EXPECT_FALSE(a_done.HasBeenNotified());
  Release();
  a_done.WaitForNotification();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Done(0), 1);
}

TEST_F(TwoDeviceCoreTest, AnIdenticalProblemIsTunedOnce) {
  Hold();
  absl::StatusOr<FindOutcome> a, b;
  absl::Notification a_done, b_done;
  FindAsync(Problem(8), {.mode = v1::HYBRID}, &a, &a_done);
  FindAsync(Problem(8), {.mode = v1::HYBRID}, &b, &b_done);
  ASSERT_TRUE(WaitFor([&] { return Waiting(0) + Waiting(1) == 1; }));
  Release();
  a_done.WaitForNotification();
  b_done.WaitForNotification();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Done(0) + Done(1), 1);
  EXPECT_EQ(core_->counters().tunings, 1);
  EXPECT_EQ(core_->counters().joined, 1);
}

TEST_F(TwoDeviceCoreTest, TheNamedDeviceTimesAndOneInUseIsLeftAlone) {
  // Named: device 1, though device 0 is as free.
  auto named =
      core_->find().FindBlocking(Problem(8), {.mode = v1::HYBRID, .device = 1});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(Done(0), 0);
  EXPECT_EQ(Done(1), 1);
  // A client runs on device 0: the next run takes device 1, though both
  // are idle.
  core_->timing().MarkInUse(0);
  auto avoided = core_->find().FindBlocking(Problem(16), {.mode = v1::HYBRID});
  ASSERT_TRUE(avoided.ok()) << avoided.status();
  EXPECT_EQ(Done(0), 0);
  EXPECT_EQ(Done(1), 2);
  EXPECT_TRUE(core_->timing().Status()[0].in_use);
  EXPECT_FALSE(core_->timing().Status()[1].in_use);
  // A device there is not.
  auto missing = core_->find().FindBlocking(Problem(24),
                                            {.mode = v1::HYBRID, .device = 2});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("no device 2 here (devices: 0, 1)"));
  EXPECT_EQ(core_->executor(1).status(), absl::OkStatus());
  EXPECT_EQ(core_->executor(3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The Cpus_allowed_list of each measurement worker of `daemon`, sorted.
std::vector<std::string> WorkerCpus(pid_t daemon) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(
           absl::StrCat("/proc/", daemon, "/task"), ec)) {
    std::ifstream children(task.path() / "children");
    for (pid_t child; children >> child;) {
      std::ifstream cmd(absl::StrCat("/proc/", child, "/cmdline"));
      const std::string cmdline((std::istreambuf_iterator<char>(cmd)),
                                std::istreambuf_iterator<char>());
      if (cmdline.find("--measure-worker") == std::string::npos) continue;
      std::ifstream status(absl::StrCat("/proc/", child, "/status"));
      for (std::string line; std::getline(status, line);) {
        if (line.rfind("Cpus_allowed_list:", 0) == 0) out.push_back(line);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The CPU presented under another key (more compute units): its kernels
// are the CPU's, its records another key's, as a node's second GPU model.
class OtherKeyCpu final : public DeviceWrapper {
 public:
  OtherKeyCpu() : DeviceWrapper(&cpu_), info_(cpu_.info()) {
    info_.compute_units += 1000;
  }
  const DeviceInfo& info() const override { return info_; }

 private:
  CpuDevice cpu_;
  DeviceInfo info_;
};

// A service over two cores, device 0 of the CPU's key and device 1 of
// another, on a real in-process gRPC channel.
class TwoKeyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-two-keys");
    ASSERT_FALSE(dir_.empty());
    auto store = storage::OpenRocksDbStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Core::Options options = TestCoreOptions();
    options.shared_quotas = &quotas_;
    cores_[0] = std::make_unique<Core>(
        std::vector<Core::DeviceLane>{
            {.ordinal = 0, .device = &cpu_, .timing_queue = &timing_[0]}},
        SolverRegistry::Default(), *store_, compile_, options);
    cores_[1] = std::make_unique<Core>(
        std::vector<Core::DeviceLane>{
            {.ordinal = 1, .device = &other_, .timing_queue = &timing_[1]}},
        SolverRegistry::Default(), *store_, compile_, options);
    service_ = std::make_unique<ConvTuneService>(
        std::vector<Core*>{cores_[0].get(), cores_[1].get()}, *store_,
        store_pool_, access_, ServiceOptions());
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ConvTune::NewStub(
        server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    compile_.WaitIdle();
    for (ThreadPool& t : timing_) t.WaitIdle();
    store_pool_.WaitIdle();
    server_.reset();
    service_.reset();
    for (auto& c : cores_) c.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  grpc::Status Find(const ConvProblem& p, std::optional<int> device,
                    std::optional<int> tune_on, v1::FindResponse* resp) {
    v1::FindRequest req;
    ProblemToProto(p, req.mutable_problem());
    req.set_mode(v1::HYBRID);  // reads the FindDb
    if (device) req.set_device(*device);
    if (tune_on) req.set_tune_on_device(*tune_on);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(120));
    return stub_->Find(&ctx, req, resp);
  }

  std::string dir_;
  CpuDevice cpu_;
  OtherKeyCpu other_;
  std::unique_ptr<storage::Store> store_;
  // One find at a time waiting on tuning per tenant, over both keys.
  TuningQuotas quotas_{{.max_in_flight = 1}};
  ThreadPool compile_{"compile", 2};
  ThreadPool timing_[2] = {ThreadPool("timing0", 1), ThreadPool("timing1", 1)};
  ThreadPool store_pool_{"store", 1};
  std::unique_ptr<Core> cores_[2];
  Access access_{[] {
                   AccessPolicy p = AccessPolicy::Default();
                   p.uncredentialed = Role::kAdmin;
                   return p;
                 }(),
                 nullptr};
  std::unique_ptr<ConvTuneService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ConvTune::Stub> stub_;
};

TEST_F(TwoKeyServiceTest, EachDeviceIsAnsweredForItsOwnKey) {
  const std::string key0 = cpu_.info().Key(), key1 = other_.info().Key();
  ASSERT_NE(key0, key1);
  const ConvProblem p = Problem(8), q = Problem(16);
  v1::FindResponse r;
  // No device named: the first device's key.
  ASSERT_TRUE(Find(p, std::nullopt, std::nullopt, &r).ok());
  EXPECT_EQ(r.device_key(), key0);
  EXPECT_EQ(r.source(), "tuned");
  // The same problem for a client on device 1: tuned again, for its key.
  r.Clear();
  ASSERT_TRUE(Find(p, 1, std::nullopt, &r).ok());
  EXPECT_EQ(r.device_key(), key1);
  EXPECT_EQ(r.source(), "tuned");
  // Each key's record answers its own device; a device the service does
  // not have gets the first key's.
  for (const auto& [device, key] :
       {std::pair{0, key0}, std::pair{1, key1}, std::pair{5, key0}}) {
    r.Clear();
    ASSERT_TRUE(Find(p, device, std::nullopt, &r).ok());
    EXPECT_TRUE(r.from_db()) << device;
    EXPECT_EQ(r.device_key(), key) << device;
  }
  // Tuned on device 1 by name: that key's record, which device 0's key
  // does not have.
  r.Clear();
  ASSERT_TRUE(Find(q, std::nullopt, 1, &r).ok());
  EXPECT_EQ(r.device_key(), key1);
  EXPECT_EQ(cores_[1]->timing().Status()[0].jobs_done, 2);
  r.Clear();
  ASSERT_TRUE(Find(q, 0, std::nullopt, &r).ok());
  EXPECT_EQ(r.source(), "tuned");
  EXPECT_EQ(r.device_key(), key0);
  // Refused, naming the field and every device.
  grpc::Status refused = Find(q, std::nullopt, 5, &r);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("tune_on_device: no device 5 here (devices: 0, 1)"));

  // Immediate mode and the solver list for device 1: its key's.
  {
    v1::GetSolutionsRequest req;
    ProblemToProto(p, req.mutable_problem());
    req.set_device(1);
    grpc::ClientContext ctx;
    v1::GetSolutionsResponse resp;
    ASSERT_TRUE(stub_->GetSolutions(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.device_key(), key1);
    ASSERT_GT(resp.solutions_size(), 0);
    EXPECT_TRUE(resp.solutions(0).measured());
  }
  {
    v1::ListSolversRequest req;
    req.set_device(1);
    grpc::ClientContext ctx;
    v1::ListSolversResponse resp;
    ASSERT_TRUE(stub_->ListSolvers(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.device_key(), key1);
  }
  // Execute on device 1 runs; on device 5 it is refused.
  for (const int device : {1, 5}) {
    v1::ExecuteRequest exec;
    ProblemToProto(p, exec.mutable_problem());
    exec.set_solver_id(kCpuDirectNaiveId);
    exec.set_x(std::string(p.x_bytes(), '\x01'));
    exec.set_w(std::string(p.w_bytes(), '\x01'));
    exec.set_device(device);
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    grpc::Status s = stub_->Execute(&ctx, exec, &resp);
    if (device == 1) {
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resp.output().size(), static_cast<size_t>(p.y_bytes()));
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(s.error_message(),
                  HasSubstr("device: no device 5 here (devices: 0, 1)"));
    }
  }
  // Status counts the finds of both keys.
  grpc::ClientContext ctx;
  v1::GetStatusResponse status;
  ASSERT_TRUE(stub_->GetStatus(&ctx, {}, &status).ok());
  EXPECT_EQ(status.device_key(), key0);
  EXPECT_EQ(status.counters().at("finds"), 7);
  EXPECT_EQ(status.counters().at("tunings"), 4);
}

// An import holds each served key's records to that key's devices: a GPU
// solver's record is refused for either CPU key, and carried for a key not
// served here.
TEST_F(TwoKeyServiceTest, AnImportChecksEachKeysRecordsOnItsOwnDevice) {
  const std::string other_dir = testing::MakeTempDir("convtune-import-src");
  ASSERT_FALSE(other_dir.empty());
  std::string file;
  {
    auto source = storage::OpenRocksDbStore(other_dir);
    ASSERT_TRUE(source.ok()) << source.status();
    for (const std::string& key : {cpu_.info().Key(), other_.info().Key(),
                                   std::string("cuda-elsewhere")}) {
      v1::FindRecord r;
      r.set_device_key(key);
      r.set_problem_key(ProblemKey(Problem(8)));
      r.set_workspace_limit(-1);
      v1::PerfResult* best = r.add_results();
      best->set_solver_id(kGpuDirectNaiveId);
      best->set_solver_name("gpu_direct_naive");
      best->set_algorithm("direct");
      best->set_time_ms(0.25);
      best->set_measured(true);
      ASSERT_TRUE(storage::FindDb(source->get(), key).Put(r).ok());
    }
    absl::StatusOr<std::string> exported = storage::ExportStore(**source);
    ASSERT_TRUE(exported.ok()) << exported.status();
    file = *std::move(exported);
  }
  std::filesystem::remove_all(other_dir);
  v1::DbImportRequest req;
  req.set_file(file);
  grpc::ClientContext ctx;
  v1::DbImportResponse resp;
  grpc::Status s = stub_->DbImport(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(resp.refused(), 2);
  EXPECT_EQ(resp.imported(), 1);
  const std::string problem_key = ProblemKey(Problem(8));
  EXPECT_TRUE(
      storage::FindDb(store_.get(), "cuda-elsewhere").Get(problem_key).ok());
  for (const std::string& key : {cpu_.info().Key(), other_.info().Key()}) {
    EXPECT_FALSE(storage::FindDb(store_.get(), key).Get(problem_key).ok())
        << key;
  }
}

// A tenant's limits hold across the keys: with its one find allowed to wait
// on tuning held up on device 0, a find for device 1 is told to retry.
TEST_F(TwoKeyServiceTest, ATenantsLimitsHoldAcrossKeys) {
  absl::Notification gate;
  timing_[0].Schedule([&gate] { gate.WaitForNotification(); });
  v1::FindResponse held_response;
  grpc::Status held;
  std::thread first(
      [&] { held = Find(Problem(24), 0, std::nullopt, &held_response); });
  ASSERT_TRUE(WaitFor(
      [&] { return cores_[0]->timing().Status()[0].jobs_waiting > 0; }));
  v1::FindResponse r;
  grpc::Status refused = Find(Problem(32), 1, std::nullopt, &r);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("limits.tenant_tunings_in_flight"));
  gate.Notify();
  first.join();
  EXPECT_TRUE(held.ok()) << held.error_message();
  // Once it is done, device 1's find is taken.
  EXPECT_TRUE(Find(Problem(32), 1, std::nullopt, &r).ok());
  EXPECT_EQ(r.device_key(), other_.info().Key());
}

class CpuDevicesDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("convtune-cpudev");
    ASSERT_FALSE(dir_.empty());
    socket_ = dir_ + "/d.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Start(testing::DaemonProcess& d, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--socket",
                                     socket_,
                                     "--db",
                                     dir_ + "/db",
                                     "--backend",
                                     "cpu",
                                     "--background-tune",
                                     "off",
                                     "--device-in-use-ms",
                                     "600000"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, args, dir_ + "/d.log"));
    ASSERT_TRUE(d.WaitServing(socket_)) << d.log();
    stub_ = v1::ConvTune::NewStub(grpc::CreateChannel(
        UnixTarget(socket_), grpc::InsecureChannelCredentials()));
  }

  v1::GetStatusResponse Status() {
    grpc::ClientContext ctx;
    v1::GetStatusResponse resp;
    EXPECT_TRUE(stub_->GetStatus(&ctx, {}, &resp).ok());
    return resp;
  }

  std::string dir_, socket_;
  std::unique_ptr<v1::ConvTune::Stub> stub_;
};

TEST_F(CpuDevicesDaemonTest, TwoDevicesAreListedTimedOnAndRunOn) {
  if (std::thread::hardware_concurrency() < 2) {
    GTEST_SKIP() << "two CPU devices need two CPUs";
  }
  testing::DaemonProcess d;
  Start(d, {"--cpu-devices", "2"});
  v1::GetStatusResponse status = Status();
  ASSERT_EQ(status.devices_size(), 2) << status.DebugString();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(status.devices(i).ordinal(), i);
    EXPECT_EQ(status.devices(i).device_key(), status.device_key());
    EXPECT_EQ(status.devices(i).state(), "idle");
  }
  EXPECT_THAT(status.backend_note(), HasSubstr("2 CPU devices"));
  // Both of one key: one key listed, without a tier.
  ASSERT_EQ(status.keys_size(), 1) << status.DebugString();
  EXPECT_EQ(status.keys(0).device_key(), status.device_key());
  EXPECT_TRUE(status.keys(0).tier().empty());
  int timing_queues = 0;
  for (const v1::QueueStatus& q : status.queues()) {
    timing_queues += q.name().rfind("timing", 0) == 0;
  }
  EXPECT_EQ(timing_queues, 2);
  // A measurement worker per device, each on its own share of the CPUs.
  const std::vector<std::string> shares = WorkerCpus(d.pid());
  ASSERT_EQ(shares.size(), 2u) << d.log();
  EXPECT_NE(shares[0], shares[1]);

  v1::ConvProblem wire;
  ProblemToProto(Problem(8), &wire);
  {
    grpc::ClientContext ctx;
    v1::FindRequest req;
    *req.mutable_problem() = wire;
    req.set_mode(v1::NORMAL);
    req.set_tune_on_device(1);
    v1::FindResponse resp;
    grpc::Status s = stub_->Find(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.source(), "tuned");
  }
  status = Status();
  EXPECT_EQ(status.devices(0).jobs_done(), 0);
  EXPECT_EQ(status.devices(1).jobs_done(), 1);
  EXPECT_GT(status.devices(1).busy_ms(), 0);
  EXPECT_EQ(status.devices(1).state(), "idle");

  // Asked to tune on device 5: refused, naming the field and the devices
  // there are. A caller that runs on device 5 is no one's concern.
  for (const bool tune : {true, false}) {
    grpc::ClientContext ctx;
    v1::FindRequest req;
    ProblemToProto(Problem(16), req.mutable_problem());
    req.set_mode(v1::NORMAL);
    if (tune) {
      req.set_tune_on_device(5);
    } else {
      req.set_device(5);
    }
    v1::FindResponse resp;
    grpc::Status s = stub_->Find(&ctx, req, &resp);
    if (tune) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(
          s.error_message(),
          HasSubstr("tune_on_device: no device 5 here (devices: 0, 1)"));
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
  }

  // Execute on device 1, which is then in use by this client.
  ConvProblem p = Problem(8);
  v1::ExecuteRequest exec;
  *exec.mutable_problem() = wire;
  exec.set_solver_id(kCpuDirectNaiveId);
  exec.set_x(std::string(p.x_bytes(), '\x01'));
  exec.set_w(std::string(p.w_bytes(), '\x01'));
  exec.set_device(1);
  {
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    grpc::Status s = stub_->Execute(&ctx, exec, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.output().size(), static_cast<size_t>(p.y_bytes()));
  }
  EXPECT_EQ(Status().devices(1).state(), "in use");
  exec.set_device(2);
  {
    grpc::ClientContext ctx;
    v1::ExecuteResponse resp;
    grpc::Status s = stub_->Execute(&ctx, exec, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("no device 2 here"));
  }
  EXPECT_EQ(d.Stop(SIGTERM), 0) << d.log();
}

// Device lists the daemon cannot honour stop it at start, saying why.
TEST_F(CpuDevicesDaemonTest, DeviceListsItCannotHaveAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--cpu-devices", "2", "--measure-in-worker", "off"},
       "cpu_devices: more than one device needs measure_in_worker"},
      {{"--devices", "0,1"}, "devices: names GPUs, and the backend is cpu"},
      {{"--devices", "1,1"}, "devices: device 1 is listed twice"},
      {{"--devices", "0,x"}, "--devices: expected up to 64 ordinals"},
      {{"--cpu-devices", "0"}, "--cpu-devices: expected 1 to 64, got '0'"}};
  for (const auto& [extra, why] : cases) {
    SCOPED_TRACE(why);
    testing::DaemonProcess d;
    std::vector<std::string> args = {"--socket",   socket_,     "--db",
                                     dir_ + "/db", "--backend", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(d.Start(CONVTUNED_PATH, args, dir_ + "/d.log"));
    EXPECT_NE(d.WaitExit(20000), 0);
    EXPECT_THAT(d.log(), HasSubstr(why));
  }
}

}  // namespace
}  // namespace convtune
