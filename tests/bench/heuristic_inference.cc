// Rank() latency of the immediate-mode fallbacks over the CPU solvers for a
// typical layer (ResNet-50 3x3, N=1), with a model trained on synthetic-shape
// records of every class whose times come from the weighted-throughput
// estimate: inference cost depends on the model's size, not on where its
// times came from.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu_device.h"
#include "server/heuristics/learned.h"
#include "server/heuristics/wti.h"

namespace convtune {
namespace {

ConvProblem Typical() {
  ConvProblem p;
  p.c = 128;
  p.k = 128;
  p.in = {1, 28, 28};
  p.filter = {1, 3, 3};
  p.pad = {0, 1, 1};
  return p;
}

std::vector<const Solver*> Applicable(const ConvProblem& p) {
  std::vector<const Solver*> out;
  for (const Solver* s : SolverRegistry::Default().ForBackend(v1::CPU)) {
    if (s->IsApplicable(p).ok()) out.push_back(s);
  }
  return out;
}

std::vector<TrainingSample> Samples(const WtiEstimator& wti, int count) {
  std::mt19937 rng(std::random_device{}());
  const int64_t channels[] = {16, 32, 64, 128, 256, 512};
  const int64_t sizes[] = {7, 14, 28, 56};
  std::vector<TrainingSample> out;
  while (static_cast<int>(out.size()) < count) {
    ConvProblem p;
    p.c = channels[rng() % 6];
    p.k = channels[rng() % 6];
    p.in[1] = p.in[2] = sizes[rng() % 4];
    const int64_t f = rng() % 2 ? 3 : 1;
    p.filter = {1, f, f};
    p.pad = {0, f / 2, f / 2};
    // Every class: direction, type, layout, group structure.
    p.direction = static_cast<Direction>(1 + rng() % 3);
    p.type = rng() % 2 ? DataType::kFp32 : DataType::kFp16;
    p.layout = rng() % 2 ? Layout::kNCHW : Layout::kNHWC;
    if (rng() % 4 == 0) p.k = p.groups = p.c;
    if (!Applicable(p).size()) continue;
    TrainingSample s{p, {}};
    std::lognormal_distribution<double> noise(0, 0.2);
    for (const Solver* solver : Applicable(p)) {
      s.times.emplace_back(solver->id(),
                           wti.EstimateMs(*solver, p) * noise(rng));
    }
    out.push_back(std::move(s));
  }
  return out;
}

void BM_Rank(benchmark::State& state) {
  CpuDevice device;
  WtiEstimator wti(device.info());
  LearnedOptions options;
  auto ranker = LearnedRanker::Train(
      Samples(wti, static_cast<int>(state.range(0))), device.info().Key(),
      SolverRegistry::Default(), wti, options);
  if (!ranker.ok()) {
    state.SkipWithError(std::string(ranker.status().message()).c_str());
    return;
  }
  const ConvProblem p = Typical();
  const std::vector<const Solver*> candidates = Applicable(p);
  for (auto _ : state) {
    benchmark::DoNotOptimize((*ranker)->IsApplicable(p));
    benchmark::DoNotOptimize((*ranker)->Rank(p, candidates));
  }
}

void BM_RankWti(benchmark::State& state) {
  CpuDevice device;
  WtiEstimator wti(device.info());
  const ConvProblem p = Typical();
  const std::vector<const Solver*> candidates = Applicable(p);
  for (auto _ : state) benchmark::DoNotOptimize(wti.Rank(p, candidates));
}

BENCHMARK(BM_Rank)->Arg(100)->Arg(1000)->Arg(5000);
BENCHMARK(BM_RankWti);

}  // namespace
}  // namespace convtune

BENCHMARK_MAIN();
