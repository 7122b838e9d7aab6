// Each find mode, asserting what was timed and what was stored, not only the
// answer; the system FindDb.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "common/export_file.h"
#include "common/file_util.h"
#include "kernels/cpu_device.h"
#include "server/core.h"
#include "server/solvers/cpu_solvers.h"
#include "storage/portable.h"

namespace convtune {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint32_t kStaticId = 900;

// A real solver (im2col + GEMM underneath) that says its kernels are compiled
// per size, so the modes that skip non-dynamic solvers have one to skip.
class StaticIm2col final : public Solver {
 public:
  explicit StaticIm2col(const Solver* inner) : inner_(inner) {}
  uint32_t id() const override { return kStaticId; }
  absl::string_view name() const override { return "test_static_im2col"; }
  v1::AlgorithmFamily family() const override { return inner_->family(); }
  v1::Backend backend() const override { return inner_->backend(); }
  bool dynamic() const override { return false; }
  absl::Status IsApplicable(const ConvProblem& p) const override {
    return inner_->IsApplicable(p);
  }
  int64_t WorkspaceBytes(const ConvProblem& p) const override {
    return inner_->WorkspaceBytes(p);
  }
  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& c) const override {
    absl::StatusOr<v1::ExecutionPlan> plan =
        inner_->MakePlan(p, inner_->DefaultConfig(p));
    if (plan.ok()) plan->set_solver_id(kStaticId);
    return plan;
  }

 private:
  const Solver* inner_;
};

SolverRegistry* TestRegistry() {
  static SolverRegistry* registry = [] {
    std::vector<std::unique_ptr<Solver>> all = MakeCpuSolvers();
    const Solver* im2col = nullptr;
    for (const auto& s : all) {
      if (s->id() == kCpuIm2colGemmId) im2col = s.get();
    }
    all.push_back(std::make_unique<StaticIm2col>(im2col));
    return new SolverRegistry(std::move(all));
  }();
  return registry;
}

ConvProblem Problem(int64_t c = 8) {
  ConvProblem p;
  p.n = 1;
  p.c = c;
  p.k = 8;
  p.in = {1, 9, 9};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

std::string TempDir() {
  char tmpl[] = "/tmp/convtune-modes-XXXXXX";
  return mkdtemp(tmpl);
}

// One engine on its own database, optionally with a system FindDb.
struct Engine {
  explicit Engine(const std::string& db, const SystemFindDb* system = nullptr,
                  Core::Options options = Defaults()) {
    store = *storage::OpenRocksDbStore(db);
    engine = std::make_unique<Core>(device, *TestRegistry(), *store, compile,
                                    bench, options, system);
  }
  static Core::Options Defaults() {
    Core::Options o;
    o.timing.min_repeats = 2;
    o.timing.budget_ms = 3;
    return o;
  }
  FindOutcome Find(const ConvProblem& p, v1::FindMode mode) {
    absl::StatusOr<FindOutcome> r =
        engine->find().FindBlocking(p, {.mode = mode});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : FindOutcome{};
  }
  CpuDevice device;
  ThreadPool compile{"compile", 2};
  ThreadPool bench{"bench", 1};
  std::unique_ptr<storage::Store> store;
  std::unique_ptr<Core> engine;
};

int Applicable(const ConvProblem& p, bool dynamic_only) {
  int n = 0;
  for (const Solver* s : TestRegistry()->ForBackend(v1::CPU)) {
    n += s->IsApplicable(p).ok() && (!dynamic_only || s->dynamic());
  }
  return n;
}

class FindModesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FindModesTest, NormalAlwaysTimesEverySolverAndStores) {
  Engine e(dir_ + "/db");
  const ConvProblem p = Problem();
  FindOutcome first = e.Find(p, v1::NORMAL);
  EXPECT_EQ(first.source, "tuned");
  EXPECT_EQ(first.timed_solvers.size(),
            static_cast<size_t>(Applicable(p, false)));
  EXPECT_THAT(first.timed_solvers, Contains(kStaticId));
  EXPECT_TRUE(first.stored);
  FindOutcome second = e.Find(p, v1::NORMAL);
  EXPECT_EQ(second.source, "tuned");
  EXPECT_EQ(e.engine->counters().tunings, 2);
  EXPECT_EQ(e.engine->counters().db_hits, 0);
}

TEST_F(FindModesTest, FastUsesTheFindDbElseTheFallbackWithoutTiming) {
  Engine e(dir_ + "/db");
  const ConvProblem p = Problem();
  FindOutcome miss = e.Find(p, v1::FAST);
  EXPECT_EQ(miss.source, "fallback");
  EXPECT_TRUE(miss.timed_solvers.empty());
  EXPECT_FALSE(miss.stored);
  EXPECT_EQ(e.engine->counters().plans_timed, 0);
  EXPECT_EQ(e.engine->counters().records_stored, 0);
  ASSERT_GT(miss.record.results_size(), 0);
  for (const auto& r : miss.record.results()) {
    EXPECT_FALSE(r.measured());
    EXPECT_NE(r.solver_id(), kStaticId);  // only dynamic solvers are candidates
  }
  e.Find(p, v1::HYBRID);
  FindOutcome hit = e.Find(p, v1::FAST);
  EXPECT_EQ(hit.source, "user_db");
  EXPECT_TRUE(hit.record.results(0).measured());
}

TEST_F(FindModesTest, HybridTimesAllOnAMissDynamicHybridOnlyDynamicOnes) {
  Engine e(dir_ + "/db");
  const ConvProblem a = Problem(8), b = Problem(16);
  FindOutcome hybrid = e.Find(a, v1::HYBRID);
  EXPECT_THAT(hybrid.timed_solvers, Contains(kStaticId));
  EXPECT_EQ(hybrid.timed_solvers.size(),
            static_cast<size_t>(Applicable(a, false)));
  FindOutcome dynamic = e.Find(b, v1::DYNAMIC_HYBRID);
  EXPECT_THAT(dynamic.timed_solvers, Not(Contains(kStaticId)));
  EXPECT_EQ(dynamic.timed_solvers.size(),
            static_cast<size_t>(Applicable(b, true)));
  EXPECT_TRUE(dynamic.stored);
  // Both hit afterwards, timing nothing.
  const int64_t timed = e.engine->counters().plans_timed;
  EXPECT_EQ(e.Find(a, v1::DYNAMIC_HYBRID).source, "user_db");
  EXPECT_EQ(e.Find(b, v1::HYBRID).source, "user_db");
  EXPECT_EQ(e.engine->counters().plans_timed, timed);
}

// Builds a system FindDb file for `device_key` from a tuned database, with the
// recorded times of the best result multiplied by `scale`.
std::string MakeSystemDb(const std::string& dir, Engine& tuned,
                         const std::string& device_key, double scale) {
  storage::ExportOptions o;
  o.system_device_key = tuned.engine->device_key();
  absl::StatusOr<std::string> bytes = storage::ExportStore(*tuned.store, o);
  EXPECT_TRUE(bytes.ok());
  v1::ExportFile file;
  EXPECT_TRUE(file.ParseFromString(*bytes));
  file.set_device_key(device_key);
  for (v1::ExportEntry& e : *file.mutable_entries()) {
    if (e.column_family() != "find_db") continue;
    v1::FindRecord r;
    r.ParseFromString(e.value());
    r.set_device_key(device_key);
    for (auto& res : *r.mutable_results())
      res.set_time_ms(res.time_ms() * scale);
    e.set_key(device_key + "/" + r.problem_key());
    e.set_value(r.SerializeAsString());
  }
  std::filesystem::create_directories(dir);
  SealExportFile(&file);
  EXPECT_TRUE(
      WriteFileAtomically(dir + "/" + storage::SystemDbFileName(device_key),
                          file.SerializeAsString())
          .ok());
  return dir;
}

TEST_F(FindModesTest, SystemFindDbIsConsultedAfterTheUserOne) {
  const ConvProblem p = Problem();
  std::string key;
  std::string sys;
  {
    Engine tuner(dir_ + "/tuner");
    tuner.Find(p, v1::NORMAL);
    key = tuner.engine->device_key();
    sys = MakeSystemDb(dir_ + "/sys", tuner, key, 1.0);
  }
  auto system = SystemFindDb::Open(sys, key);
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_TRUE((*system)->exact());
  Engine e(dir_ + "/user", system->get());
  FindOutcome out = e.Find(p, v1::DYNAMIC_HYBRID);
  EXPECT_EQ(out.source, "system_db");
  EXPECT_TRUE(out.timed_solvers.empty());
  EXPECT_FALSE(out.stored);
  EXPECT_EQ(e.engine->counters().system_hits, 1);
  auto solutions = e.engine->immediate().GetSolutions(p, -1);
  ASSERT_TRUE(solutions.ok());
  EXPECT_EQ(solutions->source, "system_db");
  EXPECT_TRUE(solutions->results[0].measured());
}

TEST_F(FindModesTest, TrustVerifyKeepsASystemRecordThatHoldsUp) {
  const ConvProblem p = Problem();
  std::string key, sys;
  {
    Engine tuner(dir_ + "/tuner");
    tuner.Find(p, v1::NORMAL);
    key = tuner.engine->device_key();
    // Recorded times ten times slower than this machine: re-timing agrees.
    sys = MakeSystemDb(dir_ + "/sys", tuner, key, 10.0);
  }
  auto system = SystemFindDb::Open(sys, key);
  ASSERT_TRUE(system.ok());
  Engine e(dir_ + "/user", system->get());
  FindOutcome out = e.Find(p, v1::TRUST_VERIFY);
  EXPECT_EQ(out.source, "system_db");
  ASSERT_EQ(out.timed_solvers.size(),
            1u);  // only the recorded best was re-timed
  EXPECT_EQ(out.timed_solvers[0], out.record.results(0).solver_id());
  EXPECT_TRUE(out.stored);  // copied to the user FindDb
  EXPECT_EQ(e.engine->counters().verifications, 1);
  EXPECT_EQ(e.engine->counters().verify_rejected, 0);
  FindOutcome again = e.Find(p, v1::TRUST_VERIFY);
  EXPECT_EQ(again.source, "user_db");
  EXPECT_TRUE(again.timed_solvers.empty());
}

TEST_F(FindModesTest, TrustVerifyRetunesWhenTheSystemRecordIsTooOptimistic) {
  const ConvProblem p = Problem();
  std::string key, sys;
  {
    Engine tuner(dir_ + "/tuner");
    tuner.Find(p, v1::NORMAL);
    key = tuner.engine->device_key();
    sys = MakeSystemDb(dir_ + "/sys", tuner, key, 0.01);  // claims 100x faster
  }
  auto system = SystemFindDb::Open(sys, key);
  ASSERT_TRUE(system.ok());
  Engine e(dir_ + "/user", system->get());
  FindOutcome out = e.Find(p, v1::TRUST_VERIFY);
  EXPECT_EQ(out.source, "tuned");
  EXPECT_EQ(e.engine->counters().verify_rejected, 1);
  // First the recorded best was re-timed (it may be any solver), then the
  // tuning timed dynamic solvers only.
  const uint32_t recorded_best =
      (*system)->Get(ProblemKey(p))->results(0).solver_id();
  ASSERT_GE(out.timed_solvers.size(), 2u);
  EXPECT_EQ(out.timed_solvers[0], recorded_best);
  const std::vector<uint32_t> tuned(out.timed_solvers.begin() + 1,
                                    out.timed_solvers.end());
  EXPECT_THAT(tuned, Not(Contains(kStaticId)));
  EXPECT_TRUE(out.stored);
  EXPECT_EQ(e.Find(p, v1::TRUST_VERIFY).source, "user_db");
}

TEST_F(FindModesTest, TrustVerifyBoundsTheSearchAndFullDoesNot) {
  const ConvProblem p = Problem();
  const Solver* tiled = TestRegistry()->Find(kCpuDirectTiledId);
  const size_t space = std::min<size_t>(tiled->ConfigSpace(p).size(), 16);
  ASSERT_GT(space, 3u);
  Core::Options bounded = Engine::Defaults();
  bounded.patience = 1;
  bounded.remeasure_top = 1;
  auto tiled_timings = [](const FindOutcome& o) {
    return std::count(o.timed_solvers.begin(), o.timed_solvers.end(),
                      kCpuDirectTiledId);
  };
  Engine verify(dir_ + "/a", nullptr, bounded);
  FindOutcome v = verify.Find(p, v1::TRUST_VERIFY);
  EXPECT_LT(static_cast<size_t>(tiled_timings(v)), space);
  Engine full(dir_ + "/b", nullptr, bounded);
  FindOutcome f = full.Find(p, v1::TRUST_VERIFY_FULL);
  EXPECT_EQ(static_cast<size_t>(tiled_timings(f)), space);
  EXPECT_THAT(f.timed_solvers, Not(Contains(kStaticId)));
}

TEST(SystemDbTest, ComputeUnitsAreSplitFromTheKey) {
  EXPECT_EQ(
      SplitComputeUnits("cpu-x86-64-v4-cu16-openblas0.3.21"),
      std::make_pair(16, std::string("cpu-x86-64-v4-cu*-openblas0.3.21")));
  EXPECT_EQ(SplitComputeUnits("cuda-sm_90-cu132-drv580"),
            std::make_pair(132, std::string("cuda-sm_90-cu*-drv580")));
  EXPECT_EQ(SplitComputeUnits("odd").first, -1);
}

TEST_F(FindModesTest, NearestComputeUnitCountIsUsedAndSaidSo) {
  const ConvProblem p = Problem();
  Engine tuner(dir_ + "/tuner");
  tuner.Find(p, v1::NORMAL);
  const std::string key = tuner.engine->device_key();
  const auto [units, pattern] = SplitComputeUnits(key);
  ASSERT_GT(units, 0);
  auto with_units = [&, pattern = pattern](int n) {
    std::string k = pattern;
    k.replace(k.find("cu*"), 3, "cu" + std::to_string(n));
    return k;
  };
  MakeSystemDb(dir_ + "/sys", tuner, with_units(units + 2), 1.0);
  MakeSystemDb(dir_ + "/sys", tuner, with_units(units + 40), 1.0);
  auto system = SystemFindDb::Open(dir_ + "/sys", key);
  ASSERT_TRUE(system.ok()) << system.status();
  EXPECT_FALSE((*system)->exact());
  EXPECT_EQ((*system)->source_device_key(), with_units(units + 2));
  EXPECT_TRUE((*system)->Get(ProblemKey(p)).ok());
  // Another arch never matches.
  EXPECT_EQ(
      SystemFindDb::Open(dir_ + "/sys", "cpu-other-cu2-x").status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace convtune
