#include "server/heuristics/heuristics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/file_util.h"
#include "kernels/cpu_device.h"
#include "kernels/driver_line.h"
#include "server/core.h"
#include "server/heuristics/learned.h"
#include "server/solvers/cpu_solvers.h"
#include "storage/portable.h"
#include "storage/records.h"

namespace convtune {
namespace {

using ::testing::HasSubstr;

// A few dozen small problems: forward and backward-weights only (backward
// data is what "unseen direction" asks about).
std::vector<ConvProblem> TrainingProblems() {
  std::vector<ConvProblem> out;
  const int64_t channels[] = {4, 8, 16};
  const int64_t sizes[] = {6, 10};
  for (Direction dir : {Direction::kForward, Direction::kBackwardWeights}) {
    for (int64_t c : channels) {
      for (int64_t hw : sizes) {
        for (int64_t f : {1, 3}) {
          if (dir == Direction::kBackwardWeights && hw == 10) continue;
          ConvProblem p;
          p.c = c;
          p.k = c == 16 ? 8 : 2 * c;
          p.in = {1, hw, hw};
          p.filter = {1, f, f};
          p.pad = {0, f / 2, f / 2};
          p.stride = {1, 1 + (hw == 10 && f == 1), 1 + (hw == 10 && f == 1)};
          p.direction = dir;
          out.push_back(p);
        }
      }
    }
  }
  return out;  // 12 forward + 6 backward-weights
}

class HeuristicsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/convtune-heuristics-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    auto store = storage::OpenRocksDbStore(*dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = store->release();
    device_ = new CpuDevice;
    ThreadPool compile("compile", 2), bench("bench", 1);
    Core engine(*device_, SolverRegistry::Default(), *store_, compile, bench,
                EngineOptions());
    for (const ConvProblem& p : TrainingProblems()) {
      auto r = engine.find().FindBlocking(p, {});
      ASSERT_TRUE(r.ok()) << r.status();
    }
    // One find under a workspace limit that leaves im2col out: stored under
    // a "|ws=" key, which training must skip.
    FindParams limited;
    limited.workspace_limit = 0;
    ConvProblem p = TrainingProblems()[1];
    p.c = 12;
    auto r = engine.find().FindBlocking(p, limited);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  static void TearDownTestSuite() {
    delete store_;
    delete device_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static Core::Options EngineOptions() {
    Core::Options options;
    options.timing.min_repeats = 2;
    options.timing.budget_ms = 3;
    return options;
  }
  void SetUp() override {
    ASSERT_TRUE(store_
                    ->Delete(storage::Column::kMeta,
                             storage::HeuristicModelName(device_->info().Key()))
                    .ok());
  }
  static Heuristics::Options SmallOptions() {
    Heuristics::Options o;
    o.learned.min_records = 4;
    return o;
  }
  std::vector<const Solver*> Applicable(const ConvProblem& p) {
    std::vector<const Solver*> out;
    for (const Solver* s : SolverRegistry::Default().ForBackend(v1::CPU)) {
      if (s->IsApplicable(p).ok()) out.push_back(s);
    }
    return out;
  }

  static std::string* dir_;
  static storage::Store* store_;
  static CpuDevice* device_;
};

std::string* HeuristicsTest::dir_ = nullptr;
storage::Store* HeuristicsTest::store_ = nullptr;
CpuDevice* HeuristicsTest::device_ = nullptr;

TEST_F(HeuristicsTest, TrainUsesEveryUnconstrainedRecordAndStoresTheModel) {
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  EXPECT_EQ(h.model(), nullptr);
  storage::FindDb db(store_, device_->info().Key());
  auto count = db.Count();
  ASSERT_TRUE(count.ok());
  ASSERT_EQ(*count, static_cast<int64_t>(TrainingProblems().size()) + 1);

  auto report = h.Train();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->records, *count - 1);
  EXPECT_EQ(report->skipped, 1);  // the workspace-limited record
  EXPECT_GE(report->train_accuracy, 0.0);
  EXPECT_LE(report->train_accuracy, 1.0);
  EXPECT_EQ(report->generation, 1);
  ASSERT_NE(h.model(), nullptr);
  EXPECT_EQ(h.model()->record_count(), report->records);
  EXPECT_TRUE(storage::Meta(store_)
                  .Get(storage::HeuristicModelName(device_->info().Key()))
                  .ok());

  const ConvProblem p = TrainingProblems()[3];
  Ranking r = h.Rank(p, Applicable(p));
  EXPECT_EQ(r.source, "heuristic");
  EXPECT_EQ(r.fallback_reason, "");
  ASSERT_EQ(r.estimates.size(), Applicable(p).size());
  // Best first: by predicted time, weighed by regret at the neighbours and
  // by doubt.
  const LearnedOptions o = SmallOptions().learned;
  auto key = [&](const Estimate& e) {
    return std::log2(e.time_ms) + o.regret_weight * e.regret -
           o.doubt_weight * std::log2(std::max(1e-6f, e.confidence));
  };
  for (size_t i = 1; i < r.estimates.size(); ++i) {
    const Estimate &a = r.estimates[i - 1], &b = r.estimates[i];
    EXPECT_EQ(a.provenance, v1::LEARNED);
    EXPECT_LE(key(a), key(b) + 1e-9);
    EXPECT_GE(a.regret, 0.0f);
  }
}

TEST_F(HeuristicsTest, AFreshInstanceLoadsTheStoredModelAndRanksIdentically) {
  Heuristics trained(*store_, SolverRegistry::Default(), device_->info(),
                     SmallOptions());
  ASSERT_TRUE(trained.Train().ok());
  Heuristics loaded(*store_, SolverRegistry::Default(), device_->info(),
                    SmallOptions());
  ASSERT_NE(loaded.model(), nullptr);
  EXPECT_EQ(loaded.generation(), 1);
  EXPECT_EQ(loaded.model()->proto().kind(), "knn");
  for (ConvProblem p : TrainingProblems()) {
    p.c += 4;  // near, not equal to, a training problem
    Ranking a = trained.Rank(p, Applicable(p));
    Ranking b = loaded.Rank(p, Applicable(p));
    EXPECT_EQ(a.source, "heuristic");
    EXPECT_EQ(b.source, "heuristic");
    ASSERT_EQ(a.estimates.size(), b.estimates.size());
    for (size_t i = 0; i < a.estimates.size(); ++i) {
      EXPECT_EQ(a.estimates[i].solver, b.estimates[i].solver);
      EXPECT_DOUBLE_EQ(a.estimates[i].time_ms, b.estimates[i].time_ms);
      EXPECT_EQ(a.estimates[i].provenance, b.estimates[i].provenance);
      EXPECT_FLOAT_EQ(a.estimates[i].confidence, b.estimates[i].confidence);
    }
  }
}

TEST_F(HeuristicsTest, AStoredModelOfAnotherSchemaIsDeletedAndRetrained) {
  Heuristics trained(*store_, SolverRegistry::Default(), device_->info(),
                     SmallOptions());
  ASSERT_TRUE(trained.Train().ok());
  v1::HeuristicModel old = trained.model()->proto();
  old.set_schema_version(1);
  const std::string key = storage::HeuristicModelName(device_->info().Key());
  ASSERT_TRUE(storage::Meta(store_)
                  .Put(key, absl::Base64Escape(old.SerializeAsString()))
                  .ok());
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  EXPECT_EQ(h.model(), nullptr);
  EXPECT_EQ(store_->Get(storage::Column::kMeta, key).status().code(),
            absl::StatusCode::kNotFound);
  ThreadPool pool("train", 1);
  h.TrainIfMissing(pool);
  pool.WaitIdle();
  ASSERT_NE(h.model(), nullptr);
  EXPECT_EQ(h.background_trainings(), 1);
  h.TrainIfMissing(pool);  // a model is installed: nothing to do
  pool.WaitIdle();
  EXPECT_EQ(h.background_trainings(), 1);
}

TEST_F(HeuristicsTest, KnnReproducesTheMeasuredBestOfItsTrainingRecords) {
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  auto report = h.Train();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(report->train_accuracy, 0.75);
}

TEST_F(HeuristicsTest, WithoutAModelTheEstimateAnswersAndSaysWhy) {
  char tmpl[] = "/tmp/convtune-heuristics-empty-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto empty = storage::OpenRocksDbStore(tmpl);
    ASSERT_TRUE(empty.ok());
    Heuristics h(**empty, SolverRegistry::Default(), device_->info());
    const ConvProblem p = TrainingProblems()[0];
    absl::Status s = h.IsApplicable(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("no learned model"));
    Ranking r = h.Rank(p, Applicable(p));
    EXPECT_EQ(r.source, "estimate");
    EXPECT_EQ(r.fallback_reason, s.message());
    EXPECT_EQ(r.estimates.size(), Applicable(p).size());
    EXPECT_EQ(h.Train().status().code(), absl::StatusCode::kFailedPrecondition);
  }
  std::filesystem::remove_all(tmpl);
}

TEST_F(HeuristicsTest, TooFewRecordsForTraining) {
  Heuristics::Options o;
  o.learned.min_records = 1000;
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(), o);
  auto report = h.Train();
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(), HasSubstr("at least 1000"));
  EXPECT_EQ(h.model(), nullptr);
}

TEST_F(HeuristicsTest, AnUnseenClassIsEstimatedAndSaysWhy) {
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  ASSERT_TRUE(h.Train().ok());

  ConvProblem backward = TrainingProblems()[0];
  backward.direction = Direction::kBackwardData;
  absl::Status s = h.IsApplicable(backward);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("no training record of class B FP32 NCHW dense"));
  Ranking r = h.Rank(backward, Applicable(backward));
  EXPECT_EQ(r.source, "estimate");
  EXPECT_THAT(r.fallback_reason, HasSubstr("class B FP32 NCHW dense"));
  ASSERT_FALSE(r.estimates.empty());
  for (const Estimate& e : r.estimates) {
    EXPECT_EQ(e.provenance, v1::ESTIMATED) << e.solver->name();
    EXPECT_EQ(e.confidence, 0.0f);
  }

  ConvProblem nhwc = TrainingProblems()[0];
  nhwc.layout = Layout::kNHWC;
  EXPECT_THAT(h.IsApplicable(nhwc).message(), HasSubstr("class F FP32 NHWC"));

  ConvProblem grouped = TrainingProblems()[2];
  grouped.groups = 2;
  EXPECT_THAT(h.IsApplicable(grouped).message(),
              HasSubstr("class F FP32 NCHW grouped"));
}

TEST_F(HeuristicsTest, ConfidenceFallsWithDistanceFromWhatWasMeasured) {
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  ASSERT_TRUE(h.Train().ok());
  const ConvProblem seen = TrainingProblems()[0];
  ConvProblem near = seen, far = seen;
  near.c = 6;
  far.c = 4096;  // trained on 4..16 channels
  far.k = 4096;
  auto top = [&](const ConvProblem& p) {
    Ranking r = h.Rank(p, Applicable(p));
    EXPECT_EQ(r.source, "heuristic");
    EXPECT_EQ(r.estimates[0].provenance, v1::LEARNED);
    return r.estimates[0].confidence;
  };
  const float c_seen = top(seen), c_near = top(near), c_far = top(far);
  EXPECT_GT(c_seen, 0.0f);
  EXPECT_LE(c_seen, 1.0f);
  EXPECT_GT(c_seen, c_far);
  EXPECT_GT(c_near, c_far);
  EXPECT_LT(c_far, 0.05f);
}

TEST_F(HeuristicsTest, AModelOfTooFewRecordsIsNotApplicable) {
  std::vector<TrainingSample> samples;
  storage::FindDb db(store_, device_->info().Key());
  auto keys = db.ProblemKeys();
  ASSERT_TRUE(keys.ok());
  for (size_t i = 0; i < keys->size() && samples.size() < 3; ++i) {
    auto record = db.Get((*keys)[i]);
    ASSERT_TRUE(record.ok());
    auto sample = SampleFromRecord(*record);
    if (sample.ok()) samples.push_back(*sample);
  }
  ASSERT_EQ(samples.size(), 3u);
  WtiEstimator wti(device_->info());
  auto m =
      LearnedRanker::Train(samples, device_->info().Key(),
                           SolverRegistry::Default(), wti, LearnedOptions());
  ASSERT_TRUE(m.ok()) << m.status();
  absl::Status s = (*m)->IsApplicable(samples[0].problem);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("trained on 3 records, needs at least 8"));
}

TEST_F(HeuristicsTest, SolversAbsentFromTrainingRankLast) {
  storage::FindDb db(store_, device_->info().Key());
  auto keys = db.ProblemKeys();
  ASSERT_TRUE(keys.ok());
  std::vector<TrainingSample> samples;
  for (const std::string& key : *keys) {
    auto record = db.Get(key);
    ASSERT_TRUE(record.ok());
    auto sample = SampleFromRecord(*record);
    if (!sample.ok()) continue;
    std::erase_if(sample->times,
                  [](const auto& t) { return t.first == kCpuGemm1x1Id; });
    samples.push_back(*sample);
  }
  WtiEstimator wti(device_->info());
  auto m =
      LearnedRanker::Train(samples, device_->info().Key(),
                           SolverRegistry::Default(), wti, LearnedOptions());
  ASSERT_TRUE(m.ok()) << m.status();
  ConvProblem p = TrainingProblems()[0];  // 1x1: gemm_1x1 applies
  const std::vector<const Solver*> candidates = Applicable(p);
  ASSERT_GE(candidates.size(), 4u);
  std::vector<Estimate> ranked = (*m)->Rank(p, candidates);
  ASSERT_EQ(ranked.size(), candidates.size());
  EXPECT_EQ(ranked.back().solver->id(), kCpuGemm1x1Id);
  EXPECT_EQ(ranked.back().provenance, v1::ESTIMATED);
  EXPECT_EQ(ranked.back().confidence, 0.0f);
  for (size_t i = 1; i < ranked.size(); ++i) {
    EXPECT_LE(ranked[i - 1].time_ms, ranked.back().time_ms);
    EXPECT_EQ(ranked[i - 1].provenance, v1::LEARNED);
  }
}

TEST_F(HeuristicsTest, ACorruptStoredModelIsDeletedAndIgnored) {
  const std::string key = storage::HeuristicModelName(device_->info().Key());
  // Not a MetaRecord at all, then a MetaRecord whose value is not a model.
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 0) {
      ASSERT_TRUE(
          store_->Put(storage::Column::kMeta, key, "\xff\x01garbage").ok());
    } else {
      ASSERT_TRUE(storage::Meta(store_).Put(key, "bm90IGEgbW9kZWw=").ok());
    }
    Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
                 SmallOptions());
    EXPECT_EQ(h.model(), nullptr) << variant;
    EXPECT_EQ(h.generation(), 0);
    EXPECT_EQ(store_->Get(storage::Column::kMeta, key).status().code(),
              absl::StatusCode::kNotFound);
    const ConvProblem p = TrainingProblems()[0];
    EXPECT_EQ(h.Rank(p, Applicable(p)).source, "estimate");
    ASSERT_TRUE(h.Train().ok());  // and training replaces it
    EXPECT_NE(h.model(), nullptr);
  }
}

TEST_F(HeuristicsTest, ModelWithBadSizesIsDataLoss) {
  Heuristics h(*store_, SolverRegistry::Default(), device_->info(),
               SmallOptions());
  ASSERT_TRUE(h.Train().ok());
  v1::HeuristicModel m = h.model()->proto();
  m.mutable_feature_mean()->RemoveLast();
  auto r = LearnedRanker::FromProto(m, SolverRegistry::Default(), h.wti(),
                                    LearnedOptions());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(HeuristicsTest, BackgroundRetrainingStartsAfterRetrainEveryRecords) {
  char tmpl[] = "/tmp/convtune-heuristics-bg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto store = storage::OpenRocksDbStore(tmpl);
    ASSERT_TRUE(store.ok());
    ThreadPool compile("compile", 2), bench("bench", 1), train("train", 1);
    Core engine(*device_, SolverRegistry::Default(), **store, compile, bench,
                EngineOptions());
    Heuristics::Options o = SmallOptions();
    o.retrain_every = 5;
    Heuristics h(**store, SolverRegistry::Default(), device_->info(), o);
    auto wait_for = [&](int64_t trainings) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (h.background_trainings() < trainings &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    };
    const std::vector<ConvProblem> problems = TrainingProblems();
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(engine.find().FindBlocking(problems[i], {}).ok());
      h.NoteRecordStored(train);
      if (i == 3) {
        EXPECT_EQ(h.background_trainings(), 0);
        EXPECT_EQ(h.generation(), 0);
      }
      if (i == 4 || i == 9) wait_for(i == 4 ? 1 : 2);
    }
    EXPECT_EQ(h.background_trainings(), 2);
    EXPECT_EQ(h.generation(), 2);
    ASSERT_NE(h.model(), nullptr);
    EXPECT_EQ(h.model()->record_count(), 10);
  }
  std::filesystem::remove_all(tmpl);
}

TEST_F(HeuristicsTest, ASystemFindDbWarmStartsTheModel) {
  const std::string key = device_->info().Key();
  const std::string sys = *dir_ + "-sys";
  storage::ExportOptions eo;
  eo.system_device_key = key;
  absl::StatusOr<std::string> bytes = storage::ExportStore(*store_, eo);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::filesystem::create_directories(sys);
  ASSERT_TRUE(
      WriteFileAtomically(sys + "/" + storage::SystemDbFileName(key), *bytes)
          .ok());
  auto system = SystemFindDb::Open(sys, key);
  ASSERT_TRUE(system.ok()) << system.status();
  char tmpl[] = "/tmp/convtune-heuristics-warm-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto empty = storage::OpenRocksDbStore(tmpl);
    ASSERT_TRUE(empty.ok());
    Heuristics h(**empty, SolverRegistry::Default(), device_->info(),
                 SmallOptions(), system->get());
    const ConvProblem p = TrainingProblems()[3];
    EXPECT_EQ(h.Rank(p, Applicable(p)).source, "estimate");
    auto report = h.Train();
    ASSERT_TRUE(report.ok()) << report.status();
    // Every system record but the workspace-limited one.
    EXPECT_EQ(report->records, (*system)->size() - 1);
    EXPECT_EQ(report->system_records, report->records);
    EXPECT_EQ(h.model()->proto().system_records(), report->records);
    Ranking r = h.Rank(p, Applicable(p));
    EXPECT_EQ(r.source, "heuristic");
    EXPECT_EQ(r.estimates[0].provenance, v1::LEARNED);
  }
  std::filesystem::remove_all(tmpl);
  std::filesystem::remove_all(sys);
}

// Where the shared problem lists are.
std::string SharedListsDir() {
  const char* env = std::getenv("CONVTUNE_SHARED_DIR");
  return std::string(env != nullptr ? env : CONVTUNE_SHARED_DIR) +
         "/problems/miopen-perf-models";
}

// The shared lists' forward layers of `file` at N = 1, at most `count`,
// small enough to be found quickly on two cores.
std::vector<ConvProblem> SharedLayers(const std::string& file, int count,
                                      bool grouped) {
  std::ifstream in(SharedListsDir() + "/" + file);
  std::vector<ConvProblem> out;
  for (std::string line;
       std::getline(in, line) && static_cast<int>(out.size()) < count;) {
    absl::StatusOr<std::vector<ConvProblem>> ps = ParseDriverLine(line);
    if (!ps.ok()) continue;
    for (ConvProblem p : *ps) {
      p.n = 1;
      if (p.direction != Direction::kForward || (p.groups > 1) != grouped ||
          p.macs() > 1.5e8) {
        continue;
      }
      if (std::none_of(out.begin(), out.end(), [&](const ConvProblem& q) {
            return ProblemKey(q) == ProblemKey(p);
          })) {
        out.push_back(p);
      }
    }
  }
  return out;
}

TEST(UnseenStructureTest, ADepthwiseLayerRanksWithinTwiceTheBestUntrained) {
  if (!std::filesystem::is_directory(SharedListsDir()))
    GTEST_SKIP() << "no problem lists at " << SharedListsDir();
  char tmpl[] = "/tmp/convtune-heuristics-dw-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto store = storage::OpenRocksDbStore(tmpl);
    ASSERT_TRUE(store.ok());
    CpuDevice device;
    ThreadPool compile("compile", 2), bench("bench", 1);
    Core::Options options;
    // Medians of 5 at least: the pick and the best are compared by their
    // times, which another process on the same cores can stretch.
    options.timing.min_repeats = 5;
    options.timing.budget_ms = 10;
    options.background_tuning = false;
    Core engine(device, SolverRegistry::Default(), **store, compile, bench,
                options);
    // Networks without a depthwise layer.
    std::vector<ConvProblem> train;
    for (const char* file :
         {"Resnet50_v1.5_FP32_BS128.txt", "VGG16_v1_FP32_BS4.txt",
          "Alexnet_v1_FP32_BS4.txt", "Googlenet_v1_FP32_BS128.txt"}) {
      for (const ConvProblem& p : SharedLayers(file, 3, false))
        train.push_back(p);
    }
    ASSERT_GE(train.size(), 8u);
    for (const ConvProblem& p : train) {
      ASSERT_TRUE(engine.find().FindBlocking(p, {}).ok()) << ProblemKey(p);
    }
    ASSERT_TRUE(engine.heuristics().Train().ok());

    const std::vector<ConvProblem> depthwise =
        SharedLayers("Mobilenet_v1_FP32_BS64.txt", 1, true);
    ASSERT_EQ(depthwise.size(), 1u);
    const ConvProblem& p = depthwise[0];
    ASSERT_EQ(GroupStructure(p), "depthwise");
    auto answer = engine.immediate().GetSolutions(p, -1, false);
    ASSERT_TRUE(answer.ok()) << answer.status();
    ASSERT_GE(answer->results.size(), 2u);
    EXPECT_EQ(answer->source, "estimate");
    EXPECT_EQ(answer->quality[0].provenance, v1::ESTIMATED);
    const uint32_t pick = answer->results[0].solver_id();

    auto found = engine.find().FindBlocking(p, {});
    ASSERT_TRUE(found.ok()) << found.status();
    const v1::FindRecord& record = found->record;
    ASSERT_TRUE(record.results(0).measured());
    double pick_ms = -1;
    for (const v1::PerfResult& r : record.results()) {
      if (r.solver_id() == pick) pick_ms = r.time_ms();
    }
    ASSERT_GT(pick_ms, 0) << "the pick was not measured";
    EXPECT_LE(pick_ms, 2.0 * record.results(0).time_ms())
        << "picked " << answer->results[0].solver_name() << ", best "
        << record.results(0).solver_name();

    // Once a depthwise layer is measured, the class has support.
    ASSERT_TRUE(engine.heuristics().Train().ok());
    ConvProblem wider = p;
    wider.c = wider.k = wider.groups = 2 * p.c;
    auto learned = engine.immediate().GetSolutions(wider, -1, false);
    ASSERT_TRUE(learned.ok()) << learned.status();
    EXPECT_EQ(learned->source, "heuristic");
    EXPECT_EQ(learned->quality[0].provenance, v1::LEARNED);
    EXPECT_GT(learned->quality[0].confidence, 0.0f);
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace convtune
