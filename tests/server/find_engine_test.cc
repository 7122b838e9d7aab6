#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "kernels/cpu/kernel_conv.h"
#include "kernels/cpu_device.h"
#include "server/core.h"
#include "server/solvers/cpu_solvers.h"
#include "storage/records.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem SmallProblem(Direction dir = Direction::kForward) {
  ConvProblem p;
  p.n = 2;
  p.c = 8;
  p.k = 8;
  p.in = {1, 10, 10};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  p.direction = dir;
  return p;
}

int ApplicableCount(const ConvProblem& p) {
  int n = 0;
  for (const Solver* s : SolverRegistry::Default().ForBackend(v1::CPU))
    n += s->IsApplicable(p).ok();
  return n;
}

class FindEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convtune-engine-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Open();
  }
  void TearDown() override {
    Close();
    std::filesystem::remove_all(dir_);
  }
  static Core::Options Options() {
    Core::Options options;
    options.timing.min_repeats = 2;
    options.timing.budget_ms = 5;
    return options;
  }
  void Open(Core::Options options = Options()) {
    auto store = storage::OpenRocksDbStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    compile_ = std::make_unique<ThreadPool>("compile", 2);
    bench_ = std::make_unique<ThreadPool>("bench", 1);
    core_ = std::make_unique<Core>(device_, SolverRegistry::Default(), *store_,
                                   *compile_, *bench_, options);
  }
  void Close() {
    core_.reset();
    compile_.reset();
    bench_.reset();
    store_.reset();
  }

  std::string dir_;
  CpuDevice device_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<ThreadPool> compile_, bench_;
  std::unique_ptr<Core> core_;
};

TEST_F(FindEngineTest, ColdFindTimesEveryApplicableSolverAndStoresTheRanking) {
  const ConvProblem p = SmallProblem();
  auto r = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->from_db);
  const int applicable = ApplicableCount(p);
  ASSERT_GE(applicable, 4);  // naive, tiled, im2col, winograd
  EXPECT_EQ(r->record.results_size(), applicable);
  for (int i = 1; i < r->record.results_size(); ++i) {
    EXPECT_LE(r->record.results(i - 1).time_ms(),
              r->record.results(i).time_ms());
  }
  for (const v1::PerfResult& res : r->record.results()) {
    EXPECT_GT(res.time_ms(), 0);
    EXPECT_TRUE(res.measured());
    EXPECT_FALSE(res.solver_name().empty());
  }
  EngineCounters c = core_->counters();
  EXPECT_EQ(c.tunings, 1);
  EXPECT_EQ(c.plans_timed, applicable);
  EXPECT_EQ(c.records_stored, 1);

  storage::FindDb db(store_.get(), device_.info().Key());
  auto stored = db.Get(ProblemKey(p));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->results_size(), applicable);
}

TEST_F(FindEngineTest, PlansNearTheBestAreTimedAgainSideBySide) {
  const ConvProblem p = SmallProblem(Direction::kBackwardData);
  const int applicable = ApplicableCount(p);
  ASSERT_GE(applicable, 4);
  for (int top : {3, 1}) {
    SCOPED_TRACE(top);
    Close();
    std::filesystem::remove_all(dir_);
    Core::Options options = Options();
    // Every plan counts as near the best.
    options.timing.hopeless_factor = 1e9;
    options.timing.slow_factor = 0;
    options.remeasure_top = top;
    Open(options);
    auto r = core_->find().FindBlocking(p, {});
    ASSERT_TRUE(r.ok()) << r.status();
    const EngineCounters c = core_->counters();
    EXPECT_EQ(c.plans_timed, applicable);
    // One plan alone is not timed again.
    EXPECT_EQ(c.plans_retimed, top == 1 ? 0 : top);
    ASSERT_EQ(r->record.results_size(), applicable);
    for (int i = 1; i < r->record.results_size(); ++i) {
      EXPECT_LE(r->record.results(i - 1).time_ms(),
                r->record.results(i).time_ms());
    }
  }
}

TEST_F(FindEngineTest, AnImmediateMissQueuesAFindAndTheNextCallIsMeasured) {
  const ConvProblem p = SmallProblem(Direction::kBackwardData);
  auto first = core_->immediate().GetSolutions(p, -1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(first->source, "user_db");
  EXPECT_TRUE(first->tuning_queued);
  for (const v1::PerfResult& r : first->results) EXPECT_FALSE(r.measured());
  ThreadPool::DrainAll({compile_.get(), bench_.get()});
  auto second = core_->immediate().GetSolutions(p, -1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source, "user_db");
  EXPECT_FALSE(second->tuning_queued);
  ASSERT_FALSE(second->results.empty());
  EXPECT_TRUE(second->results[0].measured());
  EXPECT_EQ(core_->counters().background_tunings, 1);
  EXPECT_EQ(core_->counters().records_stored, 1);

  // A call that asks for no background find gets none.
  const ConvProblem q = SmallProblem(Direction::kBackwardWeights);
  auto untuned = core_->immediate().GetSolutions(q, -1, false);
  ASSERT_TRUE(untuned.ok()) << untuned.status();
  EXPECT_FALSE(untuned->tuning_queued);
  ThreadPool::DrainAll({compile_.get(), bench_.get()});
  EXPECT_EQ(core_->immediate().GetSolutions(q, -1, false)->source,
            untuned->source);
  EXPECT_EQ(core_->counters().background_tunings, 1);
}

TEST_F(FindEngineTest, BackgroundFindsFollowTheDaemonsDefaultAndCap) {
  Close();
  std::filesystem::remove_all(dir_);
  Core::Options options = Options();
  options.background_tuning = false;
  options.max_background_tunings = 1;
  Open(options);
  const ConvProblem p = SmallProblem(),
                    q = SmallProblem(Direction::kBackwardData);
  // Off by default: only a call that asks queues one.
  EXPECT_FALSE(core_->immediate().GetSolutions(p, -1)->tuning_queued);
  // Held so that the first find still waits when the second call comes.
  absl::Notification release;
  compile_->Schedule([&] { release.WaitForNotification(); });
  compile_->Schedule([&] { release.WaitForNotification(); });
  EXPECT_TRUE(core_->immediate().GetSolutions(p, -1, true)->tuning_queued);
  // The same problem again is the find already queued.
  EXPECT_TRUE(core_->immediate().GetSolutions(p, -1, true)->tuning_queued);
  // Beyond the cap nothing is queued.
  EXPECT_FALSE(core_->immediate().GetSolutions(q, -1, true)->tuning_queued);
  EXPECT_EQ(core_->counters().background_refused, 1);
  release.Notify();
  ThreadPool::DrainAll({compile_.get(), bench_.get()});
  EXPECT_EQ(core_->immediate().GetSolutions(p, -1)->source, "user_db");
  EXPECT_EQ(core_->counters().background_tunings, 1);
}

TEST_F(FindEngineTest, SecondFindIsAnsweredFromTheFindDbWithoutTiming) {
  const ConvProblem p = SmallProblem(Direction::kBackwardWeights);
  ASSERT_TRUE(core_->find().FindBlocking(p, {}).ok());
  const int64_t timed = core_->counters().plans_timed;
  auto again = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->from_db);
  EXPECT_EQ(core_->counters().plans_timed, timed);
  EXPECT_EQ(core_->counters().db_hits, 1);

  // And after the store is closed and opened again.
  Close();
  Open();
  auto reopened = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE(reopened->from_db);
  EXPECT_EQ(core_->counters().plans_timed, 0);
  EXPECT_EQ(reopened->record.results_size(), again->record.results_size());
}

TEST_F(FindEngineTest,
       WorkspaceLimitLeavesSolversOutAndIsNotStoredAsTheFullAnswer) {
  const ConvProblem p = SmallProblem();
  auto limited = core_->find().FindBlocking(p, {.workspace_limit = 0});
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_FALSE(limited->from_db);
  EXPECT_LT(limited->record.results_size(), ApplicableCount(p));
  for (const auto& r : limited->record.results())
    EXPECT_EQ(r.workspace_bytes(), 0);

  // The unconstrained answer is not there: this find tunes.
  auto full = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->from_db);
  EXPECT_EQ(full->record.results_size(), ApplicableCount(p));
  EXPECT_EQ(core_->counters().tunings, 2);

  // Now a limited find is served from the full record, filtered.
  auto again = core_->find().FindBlocking(p, {.workspace_limit = 0});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_db);
  for (const auto& r : again->record.results())
    EXPECT_EQ(r.workspace_bytes(), 0);
  EXPECT_EQ(core_->counters().tunings, 2);
}

TEST_F(FindEngineTest, IdenticalConcurrentFindsShareOneRun) {
  const ConvProblem p = SmallProblem(Direction::kBackwardData);
  constexpr int kCallers = 6;
  std::vector<absl::StatusOr<FindOutcome>> results(kCallers);
  std::vector<std::thread> threads;
  absl::Notification go;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      results[i] = core_->find().FindBlocking(p, {});
    });
  }
  go.Notify();
  for (auto& t : threads) t.join();
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.status();
  const EngineCounters c = core_->counters();
  // Every caller either joined the one tuning or, arriving after it stored
  // its record, read the FindDb.
  EXPECT_EQ(c.tunings, 1);
  EXPECT_EQ(c.joined + c.db_hits, kCallers - 1);
  EXPECT_EQ(c.plans_timed, ApplicableCount(p));
}

TEST_F(FindEngineTest, AFindWhoseCallerLeftBeforeItStartedTimesNothing) {
  const ConvProblem p = SmallProblem();
  FindParams params;
  params.gone = [] { return true; };
  absl::StatusOr<FindOutcome> r = core_->find().FindBlocking(p, params);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  const EngineCounters c = core_->counters();
  EXPECT_EQ(c.plans_timed, 0);
  EXPECT_EQ(c.tunings_abandoned, 1);
  EXPECT_EQ(core_->tunings_in_flight(), 0);
  EXPECT_TRUE(absl::IsNotFound(core_->records().LookupUser(p, -1).status()));
}

TEST_F(FindEngineTest, AFindWhoseCallerLeftMidTuningStopsAtTheNextSolver) {
  const ConvProblem p = SmallProblem(Direction::kBackwardWeights);
  ASSERT_GT(ApplicableCount(p), 2);
  FindParams params;
  // The caller leaves once the first plan has been timed.
  params.gone = [this] { return core_->counters().plans_timed > 0; };
  absl::StatusOr<FindOutcome> r = core_->find().FindBlocking(p, params);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("stopped after"));
  const EngineCounters c = core_->counters();
  EXPECT_GE(c.plans_timed, 1);
  EXPECT_LT(c.plans_timed, ApplicableCount(p));
  // What it measured is not stored as a complete answer.
  EXPECT_TRUE(absl::IsNotFound(core_->records().LookupUser(p, -1).status()));
  EXPECT_EQ(core_->tunings_in_flight(), 0);
  // The next find tunes it whole.
  absl::StatusOr<FindOutcome> again = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->record.results_size(), ApplicableCount(p));
}

TEST_F(FindEngineTest, ASharedRunGoesOnWhileOneCallerStillWaits) {
  const ConvProblem p = SmallProblem(Direction::kBackwardData);
  // The first caller leaves as soon as a second one has joined its run.
  FindParams first;
  first.gone = [this] { return core_->counters().joined > 0; };
  absl::Notification first_done;
  core_->find().Find(p, first,
                     [&](absl::StatusOr<FindOutcome>) { first_done.Notify(); });
  // The second (joined, or reading what the run stored) gets the whole
  // answer: the run went on for it.
  absl::StatusOr<FindOutcome> second = core_->find().FindBlocking(p, {});
  first_done.WaitForNotification();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->record.results_size(), ApplicableCount(p));
  EXPECT_EQ(core_->counters().tunings_abandoned, 0);
}

TEST_F(FindEngineTest, CorruptRecordIsDroppedAndRetuned) {
  const ConvProblem p = SmallProblem();
  const std::string key =
      storage::FindDbKey(device_.info().Key(), ProblemKey(p));
  ASSERT_TRUE(
      store_->Put(storage::Column::kFindDb, key, "\xff\xfe not a record").ok());
  auto r = core_->find().FindBlocking(p, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->from_db);
  EXPECT_EQ(core_->counters().records_dropped, 1);
  storage::FindDb db(store_.get(), device_.info().Key());
  EXPECT_TRUE(db.Get(ProblemKey(p)).ok());
}

TEST_F(FindEngineTest,
       ExhaustiveFindSearchesConfigsAndKeepsTheBestInThePerfDb) {
  const ConvProblem p = SmallProblem();
  const Solver* tiled = SolverRegistry::Default().Find(kCpuDirectTiledId);
  ASSERT_NE(tiled, nullptr);
  const size_t space = tiled->ConfigSpace(p).size();
  ASSERT_GT(space, 1u);
  auto r = core_->find().FindBlocking(p, {.exhaustive = true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(core_->counters().plans_timed, ApplicableCount(p));
  storage::PerfDb perf(store_.get(), device_.info().Key());
  auto best = perf.Get(ProblemKey(p), kCpuDirectTiledId);
  ASSERT_TRUE(best.ok()) << best.status();
  const PerfConfig config(best->perf_config().begin(),
                          best->perf_config().end());
  EXPECT_TRUE(tiled->ValidateConfig(p, config).ok());
  // Plans now use the tuned config.
  auto plan = core_->planner().Plan(p, kCpuDirectTiledId, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(PerfConfig(plan->perf_config().begin(), plan->perf_config().end()),
            config);
  // An exhaustive find re-tunes even though the record exists.
  ASSERT_TRUE(core_->find().FindBlocking(p, {.exhaustive = true}).ok());
  EXPECT_EQ(core_->counters().tunings, 2);
}

TEST_F(FindEngineTest, PlanErrorsNameTheProblem) {
  const ConvProblem p = SmallProblem();
  EXPECT_EQ(core_->planner().Plan(p, 9999, {}).status().code(),
            absl::StatusCode::kNotFound);
  ConvProblem big = p;
  big.filter = {1, 5, 5};
  big.pad = {0, 2, 2};
  auto s = core_->planner().Plan(big, kCpuWinogradF2x3Id, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("filter"));
  EXPECT_EQ(
      core_->planner().Plan(p, kCpuDirectTiledId, {999, 999}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(FindEngineTest, ShutdownFailsNewFindsWithUnavailable) {
  core_->Shutdown();
  auto r = core_->find().FindBlocking(SmallProblem(), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

// A CPU device that behaves as a GPU after a kernel fault: launching
// `fault_kernel` breaks it, and every call fails until a Reset, which
// succeeds only if `resettable`. (A CUDA context faults this way; the CPU
// kernels themselves cannot.)
class FaultingDevice final : public DeviceWrapper {
 public:
  FaultingDevice(std::string fault_kernel, bool resettable)
      : DeviceWrapper(&cpu_),
        fault_kernel_(std::move(fault_kernel)),
        resettable_(resettable) {}
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(
      int64_t bytes) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::Allocate(bytes);
  }
  absl::Status CopyToDevice(DeviceBuffer* dst, const void* src,
                            int64_t bytes) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::CopyToDevice(dst, src, bytes);
  }
  absl::Status CopyFromDevice(void* dst, const DeviceBuffer& src,
                              int64_t bytes) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::CopyFromDevice(dst, src, bytes);
  }
  absl::Status CopyFromDeviceAt(void* dst, const DeviceBuffer& src,
                                int64_t offset, int64_t bytes) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::CopyFromDeviceAt(dst, src, offset, bytes);
  }
  absl::Status Fill(DeviceBuffer* dst, uint32_t pattern, int element_bytes,
                    int64_t count) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::Fill(dst, pattern, element_bytes, count);
  }
  absl::Status Launch(const v1::KernelStep& step,
                      const std::vector<void*>& buffers) override {
    RETURN_IF_ERROR(Usable());
    if (step.kernel() == fault_kernel_) {
      faulted_ = true;
      return absl::InternalError("illegal address (injected)");
    }
    return DeviceWrapper::Launch(step, buffers);
  }
  absl::Status Synchronize() override { return Usable(); }
  absl::StatusOr<double> TimeMs(
      const std::function<absl::Status()>& work) override {
    RETURN_IF_ERROR(Usable());
    return DeviceWrapper::TimeMs(work);
  }
  absl::Status Reset() override {
    ++resets;
    if (!resettable_) return absl::InternalError("reset refused (injected)");
    faulted_ = false;
    return absl::OkStatus();
  }
  std::atomic<int> resets{0};

 private:
  absl::Status Usable() const {
    return faulted_ ? absl::InternalError("context faulted") : absl::OkStatus();
  }
  CpuDevice cpu_;
  const std::string fault_kernel_;
  const bool resettable_;
  std::atomic<bool> faulted_{false};
};

class DeviceFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convtune-fault-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // An engine over `device` on this test's database.
  struct Engine {
    std::unique_ptr<storage::Store> store;
    std::unique_ptr<ThreadPool> compile, bench;
    std::unique_ptr<Core> engine;
    ~Engine() {
      engine.reset();
      compile.reset();
      bench.reset();
    }
  };
  std::unique_ptr<Engine> Open(Device& device) {
    auto e = std::make_unique<Engine>();
    auto store = storage::OpenRocksDbStore(dir_);
    EXPECT_TRUE(store.ok()) << store.status();
    e->store = *std::move(store);
    e->compile = std::make_unique<ThreadPool>("compile", 2);
    e->bench = std::make_unique<ThreadPool>("bench", 1);
    Core::Options options;
    options.timing.min_repeats = 2;
    options.timing.budget_ms = 5;
    e->engine =
        std::make_unique<Core>(device, SolverRegistry::Default(), *e->store,
                               *e->compile, *e->bench, options);
    return e;
  }
  std::string dir_;
};

TEST_F(DeviceFaultTest,
       FaultingSolverIsQuarantinedAndTheRestAreTimedAfterAReset) {
  const ConvProblem p = SmallProblem();
  FaultingDevice device(std::string(cpu::kDirectNaiveKernel),
                        /*resettable=*/true);
  {
    std::unique_ptr<Engine> e = Open(device);
    absl::StatusOr<FindOutcome> r =
        e->engine->find().FindBlocking(p, {.mode = v1::NORMAL});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(device.resets, 1);
    EXPECT_EQ(e->engine->counters().solvers_quarantined, 1);
    // Every other applicable solver was timed on fresh buffers and stored.
    EXPECT_EQ(r->record.results_size(), ApplicableCount(p) - 1);
    for (const v1::PerfResult& res : r->record.results()) {
      EXPECT_NE(res.solver_id(), kCpuDirectNaiveId);
    }
    EXPECT_TRUE(r->stored);
    EXPECT_THAT(e->engine->quarantine().For(ProblemKey(p)),
                ::testing::ElementsAre(kCpuDirectNaiveId));
  }
  // After a restart the quarantine holds: an exhaustive find never runs it.
  std::unique_ptr<Engine> e = Open(device);
  EXPECT_THAT(e->engine->quarantine().For(ProblemKey(p)),
              ::testing::ElementsAre(kCpuDirectNaiveId));
  absl::StatusOr<FindOutcome> again = e->engine->find().FindBlocking(
      p, {.mode = v1::NORMAL, .exhaustive = true});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->timed_solvers,
              ::testing::Not(::testing::Contains(kCpuDirectNaiveId)));
  EXPECT_EQ(device.resets, 1);
  // Other problems still use the solver.
  ConvProblem other = p;
  other.k = 16;
  absl::StatusOr<Solutions> solutions =
      e->engine->immediate().GetSolutions(other, -1, false);
  ASSERT_TRUE(solutions.ok());
  bool listed = false;
  for (const v1::PerfResult& r : solutions->results)
    listed |= r.solver_id() == kCpuDirectNaiveId;
  EXPECT_TRUE(listed);
}

TEST_F(DeviceFaultTest, DeviceThatCannotBeResetIsLostOnceAndNothingIsStored) {
  const ConvProblem p = SmallProblem();
  FaultingDevice device(std::string(cpu::kDirectNaiveKernel),
                        /*resettable=*/false);
  std::unique_ptr<Engine> e = Open(device);
  std::atomic<int> lost{0};
  std::string why;
  e->engine->SetDeviceLostHandler([&](const std::string& reason) {
    ++lost;
    why = reason;
  });
  absl::StatusOr<FindOutcome> r =
      e->engine->find().FindBlocking(p, {.mode = v1::NORMAL});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("lost"));
  EXPECT_EQ(lost, 1);
  EXPECT_THAT(why, HasSubstr("cpu_direct_naive"));
  EXPECT_THAT(why, HasSubstr("could not be reset"));
  EXPECT_EQ(e->engine->counters().records_stored, 0);
  // The engine refuses further work; the quarantine is on disk.
  ConvProblem other = p;
  other.k = 16;
  EXPECT_EQ(e->engine->find().FindBlocking(other, {}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost, 1);
  EXPECT_THAT(e->engine->quarantine().For(ProblemKey(p)),
              ::testing::ElementsAre(kCpuDirectNaiveId));
}

TEST_F(DeviceFaultTest, LosingOneOfTwoDevicesLeavesTheOtherTuning) {
  const ConvProblem p = SmallProblem();
  FaultingDevice faulty(std::string(cpu::kDirectNaiveKernel),
                        /*resettable=*/false);
  CpuDevice healthy;
  auto store = storage::OpenRocksDbStore(dir_);
  ASSERT_TRUE(store.ok()) << store.status();
  ThreadPool compile("compile", 2), queue0("timing0", 1), queue1("timing1", 1);
  Core::Options options;
  options.timing.min_repeats = 2;
  options.timing.budget_ms = 5;
  options.background_tuning = false;
  auto core = std::make_unique<Core>(
      std::vector<Core::DeviceLane>{
          {.ordinal = 0, .device = &faulty, .timing_queue = &queue0},
          {.ordinal = 1, .device = &healthy, .timing_queue = &queue1}},
      SolverRegistry::Default(), **store, compile, options);
  std::atomic<int> lost{0};
  std::string why;
  core->SetDeviceLostHandler([&](const std::string& reason) {
    ++lost;
    why = reason;
  });
  // The run on device 0 faults it beyond reset: that find fails.
  absl::StatusOr<FindOutcome> r =
      core->find().FindBlocking(p, {.mode = v1::NORMAL, .device = 0});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("lost"));
  // One device is left: the core goes on, the handler is not called.
  EXPECT_EQ(lost, 0);
  std::vector<TimingLanes::LaneStatus> lanes = core->timing().Status();
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_TRUE(lanes[0].lost);
  EXPECT_FALSE(lanes[1].lost);
  // Work naming the lost device is refused, other work goes to device 1.
  ConvProblem other = p;
  other.k = 16;
  absl::StatusOr<FindOutcome> named =
      core->find().FindBlocking(other, {.mode = v1::NORMAL, .device = 0});
  EXPECT_EQ(named.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(named.status().message(), HasSubstr("device 0 was lost"));
  EXPECT_EQ(core->executor(0).status().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<FindOutcome> elsewhere =
      core->find().FindBlocking(other, {.mode = v1::NORMAL});
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_TRUE(elsewhere->record.results(0).measured());
  lanes = core->timing().Status();
  EXPECT_EQ(lanes[0].jobs_done, 1);
  EXPECT_EQ(lanes[1].jobs_done, 1);
  EXPECT_EQ(core->executor(1).status(), absl::OkStatus());
  // An Execute naming no device runs on the first one left.
  EXPECT_EQ(&core->executor(), *core->executor(1));
  EXPECT_EQ(lost, 0);
  core.reset();
}

// Runs the naive kernel as if the problem had half the output channels: a
// solver that leaves half of y unwritten (and the rest in the wrong places).
class HalfOutputSolver final : public Solver {
 public:
  uint32_t id() const override { return 90; }
  absl::string_view name() const override { return "test_half_output"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  v1::Backend backend() const override { return v1::CPU; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem&) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem&) const override { return 0; }
  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    ConvProblem wrong = p;
    wrong.k = p.k / 2;
    v1::BufferRef x, w, y;
    x.set_role(v1::BUFFER_X);
    w.set_role(v1::BUFFER_W);
    y.set_role(v1::BUFFER_Y);
    *plan.add_steps() =
        cpu::MakeConvStep(cpu::kDirectNaiveKernel, wrong, {}, x, w, y);
    return plan;
  }
};

TEST_F(FindEngineTest, VerificationLeavesOutASolverWithWrongOutput) {
  const ConvProblem p = SmallProblem();
  std::vector<std::unique_ptr<Solver>> solvers;
  solvers.push_back(std::make_unique<HalfOutputSolver>());
  solvers.push_back(NewCpuDirectNaiveSolver());
  SolverRegistry registry(std::move(solvers));
  Core::Options options;
  options.timing.verify_samples = 200;
  Core engine(device_, registry, *store_, *compile_, *bench_, options);
  absl::StatusOr<FindOutcome> r =
      engine.find().FindBlocking(p, {.mode = v1::NORMAL});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->record.results_size(), 1);
  EXPECT_EQ(r->record.results(0).solver_id(), kCpuDirectNaiveId);
  EXPECT_EQ(engine.counters().solver_failures, 1);
}

}  // namespace
}  // namespace convtune
