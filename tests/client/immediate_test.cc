// Immediate mode and find modes against a real convtuned: fallback solutions
// on a miss, measured ones after a find, compile-then-run without a plan
// round trip, solution workspace sizes, bad ids, the C API workflow in all
// three directions, and the handle's find mode.
#include <signal.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/client.h"
#include "client/convtune.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/reference.h"
#include "tests/client/c_descriptors.h"
#include "tests/client/process_util.h"
#include "tests/server/daemon_process.h"

namespace convtune {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

class ImmediateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir;
    daemon_ = new testing::Daemon;
    // Background finds only where a test asks: a solution's workspace
    // follows the config a find tunes, which would race these tests.
    start_status_ = daemon_->Start(dir_->path(), dir_->path() + "/db",
                                   {"--background-tune", "off"});
  }
  static void TearDownTestSuite() {
    if (start_status_.ok()) {
      absl::Status stopped = daemon_->Stop();
      EXPECT_TRUE(stopped.ok()) << stopped;
    }
    delete daemon_;
    delete dir_;
  }
  void SetUp() override {
    if (testing::ConvtunedPath().empty())
      GTEST_SKIP() << "convtuned is not part of this build";
    ASSERT_TRUE(start_status_.ok()) << start_status_;
    auto client = Client::Connect(daemon_->address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_EQ(convtuneCreateWithAddress(&handle_, daemon_->address().c_str()),
              convtuneStatusSuccess);
  }
  void TearDown() override {
    if (handle_ != nullptr) convtuneDestroy(handle_);
  }

  // A random problem no test has asked for before (the daemon's database is
  // fresh and the sizes are drawn per call).
  ConvProblem RandomProblem(Direction direction) {
    std::uniform_int_distribution<int> small(1, 2), channels(3, 11),
        spatial(7, 17);
    ConvProblem p;
    p.n = small(rng_);
    p.c = channels(rng_);
    p.k = channels(rng_);
    p.in = {1, spatial(rng_), spatial(rng_)};
    const int64_t f = small(rng_) == 1 ? 1 : 3;
    p.filter = {1, f, f};
    p.pad = {0, f / 2, f / 2};
    p.stride = {1, small(rng_), small(rng_)};
    p.direction = direction;
    EXPECT_TRUE(ValidateProblem(p).ok());
    return p;
  }

  // The C API immediate workflow for `p`'s direction; checks every output
  // element against the float64 reference.
  void CImmediateWorkflow(const ConvProblem& p);

  static testing::TempDir* dir_;
  static testing::Daemon* daemon_;
  static absl::Status start_status_;
  std::unique_ptr<Client> client_;
  convtuneHandle_t handle_ = nullptr;
  std::mt19937 rng_{std::random_device{}()};
  std::mt19937_64 rng64_{std::random_device{}()};
};

testing::TempDir* ImmediateTest::dir_ = nullptr;
testing::Daemon* ImmediateTest::daemon_ = nullptr;
absl::Status ImmediateTest::start_status_;

bool IsFallbackSource(const std::string& source) {
  return source == "estimate" || source == "heuristic";
}

// One direction's immediate calls with the descriptors and buffers bound, so
// the workflow is written once.
struct DirectionApi {
  std::function<convtuneStatus_t(size_t*)> count;
  std::function<convtuneStatus_t(size_t, size_t*, convtuneConvSolution_t*)> get;
  std::function<convtuneStatus_t(uint64_t, size_t*)> workspace;
  std::function<convtuneStatus_t(uint64_t)> compile;
  std::function<convtuneStatus_t(void*, size_t, uint64_t)> run;
};

DirectionApi BindApi(convtuneHandle_t h, const CDescriptors& d, Direction dir,
                     void* x, void* w, void* y) {
  DirectionApi api;
  switch (dir) {
    case Direction::kForward:
      api.count = [=, &d](size_t* n) {
        return convtuneConvolutionForwardGetSolutionCount(h, d.w, d.x, d.conv,
                                                          d.y, n);
      };
      api.get = [=, &d](size_t max, size_t* n, convtuneConvSolution_t* s) {
        return convtuneConvolutionForwardGetSolution(h, d.w, d.x, d.conv, d.y,
                                                     max, n, s);
      };
      api.workspace = [=, &d](uint64_t id, size_t* size) {
        return convtuneConvolutionForwardGetSolutionWorkspaceSize(
            h, d.w, d.x, d.conv, d.y, id, size);
      };
      api.compile = [=, &d](uint64_t id) {
        return convtuneConvolutionForwardCompileSolution(h, d.w, d.x, d.conv,
                                                         d.y, id);
      };
      api.run = [=, &d](void* ws, size_t size, uint64_t id) {
        return convtuneConvolutionForwardImmediate(h, d.w, w, d.x, x, d.conv,
                                                   d.y, y, ws, size, id);
      };
      break;
    case Direction::kBackwardData:
      api.count = [=, &d](size_t* n) {
        return convtuneConvolutionBackwardDataGetSolutionCount(h, d.y, d.w,
                                                               d.conv, d.x, n);
      };
      api.get = [=, &d](size_t max, size_t* n, convtuneConvSolution_t* s) {
        return convtuneConvolutionBackwardDataGetSolution(h, d.y, d.w, d.conv,
                                                          d.x, max, n, s);
      };
      api.workspace = [=, &d](uint64_t id, size_t* size) {
        return convtuneConvolutionBackwardDataGetSolutionWorkspaceSize(
            h, d.y, d.w, d.conv, d.x, id, size);
      };
      api.compile = [=, &d](uint64_t id) {
        return convtuneConvolutionBackwardDataCompileSolution(h, d.y, d.w,
                                                              d.conv, d.x, id);
      };
      api.run = [=, &d](void* ws, size_t size, uint64_t id) {
        return convtuneConvolutionBackwardDataImmediate(
            h, d.y, y, d.w, w, d.conv, d.x, x, ws, size, id);
      };
      break;
    case Direction::kBackwardWeights:
      api.count = [=, &d](size_t* n) {
        return convtuneConvolutionBackwardWeightsGetSolutionCount(
            h, d.y, d.x, d.conv, d.w, n);
      };
      api.get = [=, &d](size_t max, size_t* n, convtuneConvSolution_t* s) {
        return convtuneConvolutionBackwardWeightsGetSolution(
            h, d.y, d.x, d.conv, d.w, max, n, s);
      };
      api.workspace = [=, &d](uint64_t id, size_t* size) {
        return convtuneConvolutionBackwardWeightsGetSolutionWorkspaceSize(
            h, d.y, d.x, d.conv, d.w, id, size);
      };
      api.compile = [=, &d](uint64_t id) {
        return convtuneConvolutionBackwardWeightsCompileSolution(
            h, d.y, d.x, d.conv, d.w, id);
      };
      api.run = [=, &d](void* ws, size_t size, uint64_t id) {
        return convtuneConvolutionBackwardWeightsImmediate(
            h, d.y, y, d.x, x, d.conv, d.w, w, ws, size, id);
      };
      break;
  }
  return api;
}

void ImmediateTest::CImmediateWorkflow(const ConvProblem& p) {
  CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng64_);
  FillRandom(w.data(), p.type, p.w_elements(), rng64_);
  FillRandom(y.data(), p.type, p.y_elements(), rng64_);
  void* out = ByTensor(p.output(), x, w, y).data();
  const DirectionApi api =
      BindApi(handle_, d, p.direction, x.data(), w.data(), y.data());

  size_t count = 0;
  ASSERT_EQ(api.count(&count), convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  ASSERT_GE(count, 1u);
  std::vector<convtuneConvSolution_t> solutions(count);
  size_t actual = 0;
  ASSERT_EQ(api.get(count, &actual, solutions.data()), convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  ASSERT_EQ(actual, count);
  absl::StatusOr<v1::GetSolutionsResponse> expected = client_->GetSolutions(p);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(static_cast<size_t>(expected->solutions_size()), count);
  for (size_t i = 0; i < count; ++i) {
    const v1::Solution& want = expected->solutions(static_cast<int>(i));
    EXPECT_EQ(solutions[i].solution_id, want.solution_id());
    EXPECT_STREQ(solutions[i].solver_name, want.solver_name().c_str());
    EXPECT_EQ(solutions[i].measured, want.measured() ? 1 : 0);
    EXPECT_EQ(static_cast<int>(solutions[i].provenance),
              static_cast<int>(want.provenance()));
    EXPECT_FLOAT_EQ(solutions[i].confidence, want.confidence());
    if (want.measured()) {
      EXPECT_EQ(solutions[i].provenance, convtuneSolutionMeasured);
      EXPECT_EQ(solutions[i].confidence, 1.0f);
    } else {
      EXPECT_NE(solutions[i].provenance, convtuneSolutionMeasured);
    }
    EXPECT_EQ(static_cast<int64_t>(solutions[i].workspace_size),
              want.workspace_bytes());
  }
  // Every solution runs, the best one after an explicit compile.
  for (size_t i = 0; i < count; ++i) {
    const convtuneConvSolution_t& s = solutions[i];
    SCOPED_TRACE(s.solver_name);
    size_t ws_size = 1;
    ASSERT_EQ(api.workspace(s.solution_id, &ws_size), convtuneStatusSuccess)
        << convtuneGetLastError(handle_);
    EXPECT_EQ(ws_size, s.workspace_size);
    std::vector<char> ws(ws_size);
    if (i == 0) {
      ASSERT_EQ(api.compile(s.solution_id), convtuneStatusSuccess)
          << convtuneGetLastError(handle_);
    }
    FillNaN(out, p.type, p.output_elements());
    ASSERT_EQ(api.run(ws.data(), ws.size(), s.solution_id),
              convtuneStatusSuccess)
        << convtuneGetLastError(handle_);
    HostTensors t{x.data(), w.data(), y.data()};
    absl::Status check = CheckOutput(p, t, out, 0, rng64_);
    EXPECT_TRUE(check.ok()) << DirectionName(p.direction) << " solution "
                            << s.solution_id << ": " << check;
  }
}

// The C API's immediate calls run a oneDNN solution on host memory: forward,
// backward data and backward weights, each against the reference.
TEST_F(ImmediateTest, OnednnSolutionRunsInEveryDirection) {
  absl::StatusOr<v1::ListSolversResponse> listed = client_->ListSolvers();
  ASSERT_TRUE(listed.ok()) << listed.status();
  uint64_t id = 0;
  for (const v1::SolverInfo& s : listed->solvers()) {
    if (s.name() == "onednn_direct") id = s.id();
  }
  if (id == 0) GTEST_SKIP() << "convtuned was built without oneDNN";
  for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
    const ConvProblem p = RandomProblem(dir);
    SCOPED_TRACE(DescribeProblem(p));
    CDescriptors d(p);
    ASSERT_TRUE(d.ok);
    std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    FillRandom(x.data(), p.type, p.x_elements(), rng64_);
    FillRandom(w.data(), p.type, p.w_elements(), rng64_);
    FillRandom(y.data(), p.type, p.y_elements(), rng64_);
    void* out = ByTensor(p.output(), x, w, y).data();
    FillNaN(out, p.type, p.output_elements());
    absl::StatusOr<int64_t> need = client_->GetSolutionWorkspaceSize(p, id);
    ASSERT_TRUE(need.ok()) << need.status();
    std::vector<char> ws(*need + 1);
    const DirectionApi api =
        BindApi(handle_, d, dir, x.data(), w.data(), y.data());
    ASSERT_EQ(api.run(ws.data(), ws.size(), id), convtuneStatusSuccess)
        << convtuneGetLastError(handle_);
    HostTensors t{x.data(), w.data(), y.data()};
    ByTensor(p.output(), t.x, t.w, t.y) = nullptr;
    EXPECT_EQ(CheckOutput(p, t, out, 0, rng64_), absl::OkStatus());
  }
}

TEST_F(ImmediateTest, MissGivesEstimatedSolutionsAndTheCWorkflowRuns) {
  for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
    SCOPED_TRACE(DirectionName(dir));
    const ConvProblem p = RandomProblem(dir);
    absl::StatusOr<v1::GetSolutionsResponse> r = client_->GetSolutions(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(IsFallbackSource(r->source())) << r->source();
    EXPECT_EQ(r->problem_key(), ProblemKey(p));
    if (r->source() == "estimate") {
      EXPECT_FALSE(r->fallback_reason().empty());
    }
    ASSERT_GT(r->solutions_size(), 0);
    for (const v1::Solution& s : r->solutions()) {
      EXPECT_FALSE(s.measured()) << s.solver_name();
      EXPECT_GT(s.time_ms(), 0) << s.solver_name();
      EXPECT_TRUE(s.provenance() == v1::LEARNED ||
                  s.provenance() == v1::ESTIMATED)
          << s.solver_name();
      EXPECT_GE(s.confidence(), 0.0f);
      EXPECT_LE(s.confidence(), 1.0f);
      if (s.provenance() == v1::ESTIMATED) EXPECT_EQ(s.confidence(), 0.0f);
    }
    // The response carries the pick's.
    EXPECT_EQ(r->provenance(), r->solutions(0).provenance());
    EXPECT_EQ(r->confidence(), r->solutions(0).confidence());
    EXPECT_EQ(r->provenance() == v1::LEARNED, r->source() == "heuristic");
    EXPECT_FALSE(r->tuning_queued());
    CImmediateWorkflow(p);
    // Immediate mode does not tune here (the daemon's default is off):
    // still a miss.
    absl::StatusOr<v1::GetSolutionsResponse> again = client_->GetSolutions(p);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(IsFallbackSource(again->source())) << again->source();
  }
}

TEST_F(ImmediateTest, ADaemonPastTheCallDeadlineIsUnavailableUntilItAnswers) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  const CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(convtuneSetTimeouts(handle_, 0.3, 0), convtuneStatusSuccess);
  size_t count = 0;
  // Connected: the daemon has answered once.
  ASSERT_EQ(convtuneConvolutionForwardGetSolutionCount(handle_, d.w, d.x,
                                                       d.conv, d.y, &count),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  // The daemon stopped (SIGSTOP) still holds the connection: calls wait for
  // an answer that does not come.
  ASSERT_TRUE(testing::PauseProcess(daemon_->pid()));
  count = 0;
  const absl::Time start = absl::Now();
  const convtuneStatus_t stopped = convtuneConvolutionForwardGetSolutionCount(
      handle_, d.w, d.x, d.conv, d.y, &count);
  const absl::Duration waited = absl::Now() - start;
  ASSERT_EQ(kill(daemon_->pid(), SIGCONT), 0);
  EXPECT_EQ(stopped, convtuneStatusUnavailable);
  EXPECT_THAT(convtuneGetLastError(handle_),
              HasSubstr("did not answer in time"));
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Seconds(10));
  EXPECT_EQ(convtuneConvolutionForwardGetSolutionCount(handle_, d.w, d.x,
                                                       d.conv, d.y, &count),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  EXPECT_GT(count, 0u);
}

TEST_F(ImmediateTest, TimeoutsOutOfRangeNameTheArgument) {
  EXPECT_EQ(convtuneSetTimeouts(nullptr, 1, 1), convtuneStatusBadParm);
  EXPECT_EQ(convtuneSetTimeouts(handle_, -1, 0), convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("call: "));
  EXPECT_EQ(convtuneSetTimeouts(handle_, 0, std::nan("")),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("find: "));
  EXPECT_EQ(convtuneSetTimeouts(handle_, 5, 60), convtuneStatusSuccess);
}

TEST_F(ImmediateTest, AMissThatAsksForABackgroundFindIsLaterMeasured) {
  const ConvProblem p = RandomProblem(Direction::kBackwardData);
  absl::StatusOr<v1::GetSolutionsResponse> r =
      client_->GetSolutions(p, 0, -1, true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsFallbackSource(r->source())) << r->source();
  EXPECT_TRUE(r->tuning_queued());
  absl::StatusOr<v1::GetSolutionsResponse> again;
  for (int i = 0; i < 600; ++i) {
    again = client_->GetSolutions(p);
    ASSERT_TRUE(again.ok()) << again.status();
    if (again->source() == "user_db") break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(again->source(), "user_db");
  EXPECT_FALSE(again->tuning_queued());
  ASSERT_GT(again->solutions_size(), 0);
  for (const v1::Solution& s : again->solutions()) {
    EXPECT_TRUE(s.measured());
    EXPECT_EQ(s.provenance(), v1::MEASURED);
    EXPECT_EQ(s.confidence(), 1.0f);
  }
}

TEST_F(ImmediateTest, AMissThatAsksForNoBackgroundFindQueuesNone) {
  const ConvProblem p = RandomProblem(Direction::kBackwardWeights);
  absl::StatusOr<v1::GetSolutionsResponse> r =
      client_->GetSolutions(p, 0, -1, false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(IsFallbackSource(r->source())) << r->source();
  EXPECT_FALSE(r->tuning_queued());
  // Nothing tunes it: a FAST find still falls back.
  FindOptions fast;
  fast.mode = v1::FAST;
  absl::StatusOr<v1::FindResponse> f = client_->Find(p, fast);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->source(), "fallback");
}

TEST_F(ImmediateTest, AfterAFindSolutionsAreMeasuredInTheFindsOrder) {
  for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
    SCOPED_TRACE(DirectionName(dir));
    const ConvProblem p = RandomProblem(dir);
    absl::StatusOr<v1::FindResponse> found = client_->Find(p);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->source(), "tuned");
    absl::StatusOr<v1::GetSolutionsResponse> r = client_->GetSolutions(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source(), "user_db");
    EXPECT_TRUE(r->fallback_reason().empty());
    ASSERT_EQ(r->solutions_size(), found->results_size());
    for (int i = 0; i < r->solutions_size(); ++i) {
      EXPECT_EQ(r->solutions(i).solution_id(), found->results(i).solver_id());
      EXPECT_TRUE(r->solutions(i).measured());
      EXPECT_DOUBLE_EQ(r->solutions(i).time_ms(), found->results(i).time_ms());
    }
    absl::StatusOr<v1::GetSolutionsResponse> first =
        client_->GetSolutions(p, 1);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_EQ(first->solutions_size(), 1);
    EXPECT_EQ(first->solutions(0).solution_id(), found->results(0).solver_id());
    CImmediateWorkflow(p);
  }
}

TEST_F(ImmediateTest, CompileThenRunMakesNoPlanCall) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<v1::GetSolutionsResponse> r = client_->GetSolutions(p);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->solutions_size(), 2);
  const uint64_t compiled_id = r->solutions(0).solution_id();
  const uint64_t other_id = r->solutions(1).solution_id();

  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng64_);
  FillRandom(w.data(), p.type, p.w_elements(), rng64_);
  auto run = [&](uint64_t id, int64_t ws_bytes) {
    std::vector<char> ws(ws_bytes);
    FillNaN(y.data(), p.type, p.y_elements());
    PlanBuffers b{x.data(), w.data(), y.data(), ws.data(), ws_bytes};
    absl::Status s = client_->RunImmediate(p, id, b);
    ASSERT_TRUE(s.ok()) << s;
    HostTensors t{x.data(), w.data(), nullptr};
    absl::Status check = CheckOutput(p, t, y.data(), 0, rng64_);
    EXPECT_TRUE(check.ok()) << "solution " << id << ": " << check;
  };

  const ClientCounters before = client_->counters();
  absl::StatusOr<v1::CompileSolutionResponse> compiled =
      client_->CompileSolution(p, compiled_id);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->plan().solver_id(), compiled_id);
  EXPECT_EQ(compiled->compiled(), 0);  // CPU plans use built-in kernels
  run(compiled_id, compiled->plan().workspace_bytes());
  const ClientCounters after = client_->counters();
  EXPECT_EQ(after.compile_rpcs, before.compile_rpcs + 1);
  EXPECT_EQ(after.plan_rpcs, before.plan_rpcs);
  EXPECT_EQ(after.plan_cache_hits, before.plan_cache_hits + 1);
  // CPU plans carry no code objects, so none was fetched.
  EXPECT_EQ(after.code_object_rpcs, before.code_object_rpcs);

  // Without a compile, the first run fetches the plan once.
  run(other_id, r->solutions(1).workspace_bytes());
  run(other_id, r->solutions(1).workspace_bytes());
  const ClientCounters last = client_->counters();
  EXPECT_EQ(last.plan_rpcs, after.plan_rpcs + 1);
  EXPECT_EQ(last.plan_cache_hits, after.plan_cache_hits + 1);
}

TEST_F(ImmediateTest, SolutionWorkspaceSizesMatchTheSolutions) {
  for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
    const ConvProblem p = RandomProblem(dir);
    absl::StatusOr<v1::GetSolutionsResponse> r = client_->GetSolutions(p);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const v1::Solution& s : r->solutions()) {
      absl::StatusOr<int64_t> ws =
          client_->GetSolutionWorkspaceSize(p, s.solution_id());
      ASSERT_TRUE(ws.ok()) << ws.status();
      EXPECT_EQ(*ws, s.workspace_bytes()) << s.solver_name();
    }
    // A workspace limit leaves out the solutions that need more.
    absl::StatusOr<v1::GetSolutionsResponse> none =
        client_->GetSolutions(p, 0, 0);
    ASSERT_TRUE(none.ok()) << none.status();
    for (const v1::Solution& s : none->solutions())
      EXPECT_EQ(s.workspace_bytes(), 0) << s.solver_name();
  }
}

TEST_F(ImmediateTest, BadSolutionIdsAreNotFoundWithAMessage) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<v1::ListSolversResponse> solvers = client_->ListSolvers();
  ASSERT_TRUE(solvers.ok());
  uint64_t unused = 1;
  for (const v1::SolverInfo& s : solvers->solvers())
    unused = std::max<uint64_t>(unused, s.id() + 1);
  for (uint64_t bad : {unused + 1000, (uint64_t{1} << 32) + 1}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<int64_t> ws = client_->GetSolutionWorkspaceSize(p, bad);
    EXPECT_EQ(ws.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(ws.status().message()), HasSubstr("solution"));
    EXPECT_EQ(client_->CompileSolution(p, bad).status().code(),
              absl::StatusCode::kNotFound);
    std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    PlanBuffers b{x.data(), w.data(), y.data(), nullptr, 0};
    EXPECT_EQ(client_->RunImmediate(p, bad, b).code(),
              absl::StatusCode::kNotFound);

    CDescriptors d(p);
    ASSERT_TRUE(d.ok);
    size_t size = 0;
    EXPECT_EQ(convtuneConvolutionForwardGetSolutionWorkspaceSize(
                  handle_, d.w, d.x, d.conv, d.y, bad, &size),
              convtuneStatusNotFound);
    EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("solution"));
    EXPECT_EQ(convtuneConvolutionForwardCompileSolution(handle_, d.w, d.x,
                                                        d.conv, d.y, bad),
              convtuneStatusNotFound);
    EXPECT_EQ(convtuneConvolutionForwardImmediate(handle_, d.w, w.data(), d.x,
                                                  x.data(), d.conv, d.y,
                                                  y.data(), nullptr, 0, bad),
              convtuneStatusNotFound);
    EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("solution"));
  }
}

TEST_F(ImmediateTest, TooSmallWorkspaceIsResourceExhausted) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  absl::StatusOr<v1::GetSolutionsResponse> r = client_->GetSolutions(p);
  ASSERT_TRUE(r.ok()) << r.status();
  CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  int checked = 0;
  for (const v1::Solution& s : r->solutions()) {
    if (s.workspace_bytes() == 0) continue;
    std::vector<char> ws(s.workspace_bytes() - 1);
    EXPECT_EQ(convtuneConvolutionForwardImmediate(
                  handle_, d.w, w.data(), d.x, x.data(), d.conv, d.y, y.data(),
                  ws.data(), ws.size(), s.solution_id()),
              convtuneStatusResourceExhausted)
        << s.solver_name();
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no solution needs a workspace here";
}

TEST_F(ImmediateTest, CodeObjectsAreNotFoundOnTheCpu) {
  absl::StatusOr<v1::GetCodeObjectResponse> r =
      client_->GetCodeObject("0123456789abcdef");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->GetCodeObject("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->counters().code_object_rpcs, 1);
}

TEST_F(ImmediateTest, FastModeFallsBackWithoutTimingAndNormalTunes) {
  const ConvProblem p = RandomProblem(Direction::kForward);
  FindOptions fast;
  fast.mode = v1::FAST;
  absl::StatusOr<v1::FindResponse> fell_back = client_->Find(p, fast);
  ASSERT_TRUE(fell_back.ok()) << fell_back.status();
  EXPECT_EQ(fell_back->source(), "fallback");
  EXPECT_EQ(fell_back->mode(), v1::FAST);
  EXPECT_FALSE(fell_back->from_db());
  ASSERT_GT(fell_back->results_size(), 0);
  for (const v1::PerfResult& r : fell_back->results())
    EXPECT_FALSE(r.measured()) << r.solver_name();
  // A fallback is not stored.
  absl::StatusOr<v1::GetSolutionsResponse> s = client_->GetSolutions(p);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(IsFallbackSource(s->source())) << s->source();

  FindOptions normal;
  normal.mode = v1::NORMAL;
  absl::StatusOr<v1::FindResponse> tuned = client_->Find(p, normal);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->source(), "tuned");
  EXPECT_EQ(tuned->mode(), v1::NORMAL);
  for (const v1::PerfResult& r : tuned->results())
    EXPECT_TRUE(r.measured()) << r.solver_name();
  // NORMAL ignores the FindDb: it tunes again.
  absl::StatusOr<v1::FindResponse> again = client_->Find(p, normal);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source(), "tuned");
  // Now FAST hits the FindDb.
  absl::StatusOr<v1::FindResponse> hit = client_->Find(p, fast);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source(), "user_db");
  EXPECT_TRUE(hit->from_db());
}

TEST_F(ImmediateTest, HandleFindModeReachesTheDaemon) {
  convtuneFindMode_t mode = convtuneFindModeNormal;
  ASSERT_EQ(convtuneGetFindMode(handle_, &mode), convtuneStatusSuccess);
  EXPECT_EQ(mode, convtuneFindModeDefault);
  EXPECT_EQ(convtuneSetFindMode(handle_, static_cast<convtuneFindMode_t>(4)),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("reserved"));
  EXPECT_EQ(convtuneSetFindMode(handle_, static_cast<convtuneFindMode_t>(8)),
            convtuneStatusBadParm);
  EXPECT_THAT(convtuneGetLastError(handle_), HasSubstr("findMode 8"));
  ASSERT_EQ(convtuneGetFindMode(handle_, &mode), convtuneStatusSuccess);
  EXPECT_EQ(mode, convtuneFindModeDefault);

  ASSERT_EQ(convtuneSetFindMode(handle_, convtuneFindModeFast),
            convtuneStatusSuccess);
  ASSERT_EQ(convtuneGetFindMode(handle_, &mode), convtuneStatusSuccess);
  EXPECT_EQ(mode, convtuneFindModeFast);
  const ConvProblem p = RandomProblem(Direction::kForward);
  CDescriptors d(p);
  ASSERT_TRUE(d.ok);
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  convtuneConvAlgoPerf_t perf[8];
  int returned = 0;
  ASSERT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, d.x, x.data(), d.w, w.data(), d.conv, d.y, y.data(), 8,
                &returned, perf, nullptr, 0, false),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  EXPECT_GT(returned, 0);
  // FAST on a miss stores nothing; the daemon's default mode would have tuned.
  // (The find offered no workspace, so its record is the one for limit 0.)
  absl::StatusOr<v1::GetSolutionsResponse> s = client_->GetSolutions(p, 0, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(IsFallbackSource(s->source())) << s->source();

  ASSERT_EQ(convtuneSetFindMode(handle_, convtuneFindModeNormal),
            convtuneStatusSuccess);
  ASSERT_EQ(convtuneFindConvolutionForwardAlgorithm(
                handle_, d.x, x.data(), d.w, w.data(), d.conv, d.y, y.data(), 8,
                &returned, perf, nullptr, 0, false),
            convtuneStatusSuccess)
      << convtuneGetLastError(handle_);
  s = client_->GetSolutions(p, 0, 0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->source(), "user_db");
}

TEST_F(ImmediateTest, TrainHeuristicNeedsRecordsThenTrains) {
  // A daemon of its own: the shared one holds the other tests' records.
  testing::TempDir dir;
  testing::Daemon daemon;
  ASSERT_TRUE(daemon.Start(dir.path(), dir.path() + "/db").ok());
  absl::StatusOr<std::unique_ptr<Client>> own =
      Client::Connect(daemon.address());
  ASSERT_TRUE(own.ok()) << own.status();
  std::unique_ptr<Client>& client = *own;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client->Find(RandomProblem(Direction::kForward)).ok());
  }
  absl::StatusOr<v1::TrainHeuristicResponse> few = client->TrainHeuristic();
  EXPECT_EQ(few.status().code(), absl::StatusCode::kFailedPrecondition)
      << few.status();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(client->Find(RandomProblem(Direction::kForward)).ok());
  }
  absl::StatusOr<v1::TrainHeuristicResponse> r = client->TrainHeuristic();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->records(), 8);
  EXPECT_GE(r->train_accuracy(), 0.0);
  EXPECT_LE(r->train_accuracy(), 1.0);
  EXPECT_FALSE(r->device_key().empty());
  client.reset();
  EXPECT_TRUE(daemon.Stop().ok());
}

}  // namespace
}  // namespace convtune
