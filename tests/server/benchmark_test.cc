#include "server/benchmark.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "kernels/cpu_device.h"
#include "server/core.h"
#include "server/solvers/cpu_solvers.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

ConvProblem Problem(int filter) {
  ConvProblem p;
  p.n = 2;
  p.c = 8;
  p.k = 8;
  p.in = {1, 12, 12};
  p.filter = {1, filter, filter};
  p.pad = {0, filter / 2, filter / 2};
  return p;
}

class BenchmarkSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/convtune-bench-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = storage::OpenRocksDbStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    core_ = std::make_unique<Core>(device_, SolverRegistry::Default(), *store_,
                                   compile_, queue_, Core::Options());
  }
  void TearDown() override {
    core_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  v1::ExecutionPlan Plan(const ConvProblem& p) {
    auto plan = core_->planner().Plan(p, kCpuDirectTiledId, {});
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : v1::ExecutionPlan();
  }
  std::unique_ptr<BenchmarkSession> Session(const ConvProblem& p) {
    auto s = BenchmarkSession::Create(&device_, p, 1 << 20, 7);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  std::string dir_;
  CpuDevice device_;
  std::unique_ptr<storage::Store> store_;
  ThreadPool compile_{"compile", 1}, queue_{"bench", 1};
  std::unique_ptr<Core> core_;
};

TEST_F(BenchmarkSessionTest, EveryMeasuredPlanIsCheckedOnTheSameSamples) {
  const ConvProblem p = Problem(3);
  auto session = Session(p);
  ASSERT_NE(session, nullptr);
  TimingOptions options;
  options.budget_ms = 1;
  EXPECT_TRUE(session->samples().empty());
  auto right = session->Measure(Plan(p), options);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_GT(right->median_ms, 0);
  EXPECT_GE(right->repeats, options.min_repeats);
  // The output's two ends are among the samples.
  const std::vector<ReferenceSample> samples = session->samples();
  ASSERT_EQ(samples.size(), static_cast<size_t>(options.verify_samples));
  EXPECT_EQ(samples[0].index, 0);
  EXPECT_EQ(samples[1].index, p.output_elements() - 1);
  // A 1x1 plan writes an output of the same shape with other values: the
  // reference computed for the 3x3 problem's first plan must catch it.
  auto wrong = session->Measure(Plan(Problem(1)), options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(wrong.status().message(), HasSubstr("float64 reference"));
  // And the right plan still passes after it, on the same samples.
  EXPECT_TRUE(session->Measure(Plan(p), options).ok());
  ASSERT_EQ(session->samples().size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(session->samples()[i].index, samples[i].index);
    EXPECT_EQ(session->samples()[i].ref.value, samples[i].ref.value);
  }
}

TEST_F(BenchmarkSessionTest, PlansFarBehindTheBestStopEarly) {
  const ConvProblem p = Problem(3);
  auto session = Session(p);
  ASSERT_NE(session, nullptr);
  const v1::ExecutionPlan plan = Plan(p);
  TimingOptions options;
  options.min_repeats = 3;
  options.max_repeats = 25;
  options.budget_ms = 1e9;
  // Any run is far slower than a best of a picosecond: two runs (one might
  // be a stall) are its time.
  auto slow = session->TimeOnly(plan, options, 1e-9);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->repeats, 2);
  // Without the cutoff, it stops after min_repeats.
  options.slow_factor = 0;
  auto hopeless = session->TimeOnly(plan, options, 1e-9);
  ASSERT_TRUE(hopeless.ok()) << hopeless.status();
  EXPECT_EQ(hopeless->repeats, options.min_repeats);
  // With no best to compare with, it runs to max_repeats.
  auto full = session->TimeOnly(plan, options);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->repeats, options.max_repeats);
}

TEST_F(BenchmarkSessionTest, ACheckedRunFarBehindTheBestIsThePlansTime) {
  const ConvProblem p = Problem(3);
  auto session = Session(p);
  ASSERT_NE(session, nullptr);
  const v1::ExecutionPlan plan = Plan(p);
  TimingOptions options;
  options.budget_ms = 1e9;
  options.first_run_trusted_ms = 0;
  auto one = session->Measure(plan, options, 1e-9, true);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->repeats, 1);
  EXPECT_GE(one->check_ms, one->median_ms);
  // A plan whose first run may set a library up is run again.
  auto library = session->Measure(plan, options, 1e-9, false);
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(library->repeats, 2);  // its timed runs are cut off
  // Within reach of the best it is timed in full, however long.
  auto full = session->Measure(plan, options, 1e9, true);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->repeats, options.max_repeats);
}

TEST_F(BenchmarkSessionTest, SideBySideTimesEachPlanInEveryRound) {
  const ConvProblem p = Problem(3);
  auto session = Session(p);
  ASSERT_NE(session, nullptr);
  const v1::ExecutionPlan a = Plan(p), b = Plan(p);
  TimingOptions options;
  options.min_repeats = 4;
  options.max_repeats = 9;
  options.budget_ms = 1e9;
  auto times = session->TimeSideBySide({&a, &b, &a}, options);
  ASSERT_TRUE(times.ok()) << times.status();
  ASSERT_EQ(times->size(), 3u);
  for (const Measurement& m : *times) {
    EXPECT_EQ(m.repeats, options.max_repeats);
    EXPECT_GT(m.median_ms, 0);
  }
  // The budget ends the rounds after min_repeats.
  options.budget_ms = 0;
  times = session->TimeSideBySide({&a, &b}, options);
  ASSERT_TRUE(times.ok()) << times.status();
  for (const Measurement& m : *times) EXPECT_EQ(m.repeats, options.min_repeats);
}

}  // namespace
}  // namespace convtune
