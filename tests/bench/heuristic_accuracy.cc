// Leave-one-network-out accuracy of the immediate-mode fallbacks. Every fp32
// layer of the MIOpen performance-model networks (N set to 1) is found for
// real on the CPU; then, for each network, the learned model is trained on
// the other networks' records only and asked to pick the held-out layers'
// best solver. Prints a Markdown table for the learned models (ridge, kNN)
// and the weighted-throughput estimate.
//
// usage: bench_heuristic_accuracy [--max_per_network=16] [--directions=F]
//          [--budget_ms=20] [--db=DIR (keep the finds for a re-run)]
//          [--backend=cpu|cuda|hip|auto] [--verbose]
// The problem lists are read from $CONVTUNE_SHARED_DIR when set.
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu_device.h"
#include "kernels/driver_line.h"
#include "server/backend.h"
#include "server/core.h"
#include "server/heuristics/learned.h"
#include "server/heuristics/wti.h"
#include "server/kernel_builder.h"
#include "storage/records.h"

namespace convtune {
namespace {

struct Flags {
  int max_per_network = 16;
  std::string directions = "F";
  double budget_ms = 20;
  std::string db;
  std::string backend = "cpu";
  bool verbose = false;  // list each miss on stderr
};

struct Layer {
  std::string key;
  ConvProblem problem;
  v1::FindRecord record;
};

// Network name: the file name before "_v" ("Resnet50_v1.5_FP32_BS256.txt").
std::map<std::string, std::vector<ConvProblem>> ReadNetworks(
    const Flags& flags) {
  const char* shared = std::getenv("CONVTUNE_SHARED_DIR");
  const std::filesystem::path dir =
      std::filesystem::path(
          shared != nullptr && *shared != '\0' ? shared : CONVTUNE_SHARED_DIR) /
      "problems" / "miopen-perf-models";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<ConvProblem>> nets;
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& path : files) {
    const std::string name = path.filename().string();
    if (!absl::StrContains(name, "_FP32_")) continue;
    const std::string net = name.substr(0, name.find("_v"));
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      absl::StatusOr<std::vector<ConvProblem>> ps = ParseDriverLine(line);
      if (!ps.ok()) continue;
      for (ConvProblem p : *ps) {
        if (!absl::StrContains(flags.directions, DirectionName(p.direction)))
          continue;
        p.n = 1;
        if (seen[net].insert(ProblemKey(p)).second) nets[net].push_back(p);
      }
    }
  }
  for (auto& [net, ps] : nets) {
    if (flags.max_per_network <= 0 ||
        static_cast<int>(ps.size()) <= flags.max_per_network) {
      continue;
    }
    std::vector<ConvProblem> even;
    for (int i = 0; i < flags.max_per_network; ++i) {
      even.push_back(ps[i * ps.size() / flags.max_per_network]);
    }
    ps = std::move(even);
  }
  return nets;
}

double MeasuredMs(const v1::FindRecord& r, uint32_t id) {
  for (const v1::PerfResult& x : r.results()) {
    if (x.solver_id() == id) return x.time_ms();
  }
  return -1;
}

struct Score {
  int layers = 0, within = 0, fallbacks = 0;
  double slowdown = 0;
  void Add(const v1::FindRecord& r, uint32_t picked) {
    const double best = r.results(0).time_ms();
    const double t = MeasuredMs(r, picked);
    ++layers;
    within += t <= 1.10 * best;
    slowdown += t / best - 1;
  }
  std::string Cells() const {
    if (layers == 0) return "– | –";
    return absl::StrFormat("%.1f%% | %.1f%%", 100.0 * within / layers,
                           100.0 * slowdown / layers);
  }
};

std::vector<const Solver*> Candidates(const v1::FindRecord& r) {
  std::vector<const Solver*> out;
  for (const v1::PerfResult& x : r.results())
    out.push_back(SolverRegistry::Default().Find(x.solver_id()));
  return out;
}

int Run(const Flags& flags) {
  const auto nets = ReadNetworks(flags);
  std::string dir = flags.db;
  if (dir.empty()) {
    char tmpl[] = "/tmp/convtune-heuristic-accuracy-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
  }
  auto store = storage::OpenRocksDbStore(dir);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  absl::StatusOr<SelectedBackend> backend = SelectBackend(flags.backend, 0);
  if (!backend.ok()) {
    std::cerr << backend.status() << "\n";
    return 1;
  }
  std::cerr << backend->note << "\n";
  Device& device = *backend->device;
  std::unique_ptr<KernelBuilder> builder;
  if (backend->compiler != nullptr) {
    builder = std::make_unique<KernelBuilder>(&device, *backend->compiler,
                                              **store, device.info().arch);
  }
  ThreadPool compile("compile",
                     std::max(2u, std::thread::hardware_concurrency())),
      bench("bench", 1);
  Core::Options options;
  options.timing.min_repeats = 2;
  options.timing.budget_ms = flags.budget_ms;
  Core engine(device, SolverRegistry::Default(), **store, compile, bench,
              options,
              /*system_db=*/nullptr, builder.get());
  std::map<std::string, std::vector<Layer>> layers;
  const auto start = std::chrono::steady_clock::now();
  int total = 0;
  for (const auto& [net, ps] : nets) {
    for (const ConvProblem& p : ps) {
      absl::StatusOr<FindOutcome> r = engine.find().FindBlocking(p, {});
      if (!r.ok()) {
        std::cerr << net << " " << ProblemKey(p) << ": " << r.status() << "\n";
        continue;
      }
      layers[net].push_back({ProblemKey(p), p, r->record});
      ++total;
    }
    std::cerr << net << ": " << layers[net].size() << " layers found\n";
  }
  const double find_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  WtiEstimator wti(device.info());
  const ModelKind kinds[] = {ModelKind::kRidge, ModelKind::kKnn};
  std::map<std::string, std::array<Score, 3>> scores;  // ridge, knn, wti
  std::array<Score, 3> all;
  int overlap_total = 0;
  std::map<std::string, int> overlap;
  for (const auto& [held, test] : layers) {
    std::vector<TrainingSample> train;
    std::set<std::string> train_keys;
    for (const auto& [net, ls] : layers) {
      if (net == held) continue;
      for (const Layer& l : ls) {
        if (!train_keys.insert(l.key).second) continue;
        absl::StatusOr<TrainingSample> s = SampleFromRecord(l.record);
        if (s.ok()) train.push_back(*std::move(s));
      }
    }
    for (const Layer& l : test) overlap[held] += train_keys.count(l.key);
    overlap_total += overlap[held];
    for (int m = 0; m < 2; ++m) {
      LearnedOptions lo;
      lo.kind = kinds[m];
      auto ranker = LearnedRanker::Train(train, device.info().Key(),
                                         SolverRegistry::Default(), wti, lo);
      if (!ranker.ok()) continue;
      for (const Layer& l : test) {
        const std::vector<const Solver*> c = Candidates(l.record);
        // As the facade does: the estimate answers where the model does not
        // apply.
        const bool applies = (*ranker)->IsApplicable(l.problem).ok();
        const uint32_t pick =
            applies ? (*ranker)->Rank(l.problem, c)[0].solver->id()
                    : wti.Rank(l.problem, c)[0].solver->id();
        scores[held][m].Add(l.record, pick);
        if (flags.verbose &&
            MeasuredMs(l.record, pick) > 1.1 * l.record.results(0).time_ms()) {
          std::cerr << ModelKindName(kinds[m]) << " miss " << held << " "
                    << l.key << ": picked " << pick << " "
                    << MeasuredMs(l.record, pick) << " ms, best "
                    << l.record.results(0).solver_id() << " "
                    << l.record.results(0).time_ms() << " ms\n";
        }
        all[m].Add(l.record, pick);
        scores[held][m].fallbacks += !applies;
        all[m].fallbacks += !applies;
      }
    }
    for (const Layer& l : test) {
      const uint32_t pick =
          wti.Rank(l.problem, Candidates(l.record))[0].solver->id();
      scores[held][2].Add(l.record, pick);
      all[2].Add(l.record, pick);
    }
  }

  std::printf(
      "Leave-one-network-out, %d fp32 layers (directions %s, N=1, <= %d per "
      "network), "
      "finds took %.0f s on %s.\n\n",
      total, flags.directions.c_str(), flags.max_per_network, find_s,
      device.info().Key().c_str());
  std::printf(
      "Cells: layers whose predicted best is within 10%% of find's best | mean "
      "slowdown "
      "(predicted-best time / best time - 1).\n\n");
  std::printf(
      "| held-out network | layers | also in training | ridge | ridge slowdown "
      "| "
      "ridge fallbacks | kNN | kNN slowdown | kNN fallbacks | WTI | WTI "
      "slowdown |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [net, s] : scores) {
    std::printf("| %s | %d | %d | %s | %d | %s | %d | %s |\n", net.c_str(),
                s[2].layers, overlap[net], s[0].Cells().c_str(), s[0].fallbacks,
                s[1].Cells().c_str(), s[1].fallbacks, s[2].Cells().c_str());
  }
  std::printf("| **all** | %d | %d | %s | %d | %s | %d | %s |\n", all[2].layers,
              overlap_total, all[0].Cells().c_str(), all[0].fallbacks,
              all[1].Cells().c_str(), all[1].fallbacks, all[2].Cells().c_str());
  std::printf(
      "\nFallbacks: held-out layers the model declared not applicable "
      "(answered by the "
      "estimate, and scored as such).\n");
  if (flags.db.empty()) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) {
  convtune::Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](absl::string_view name) -> const char* {
      return absl::StartsWith(a, name) ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = value("--max_per_network=")) {
      if (!absl::SimpleAtoi(v, &flags.max_per_network)) return 2;
    } else if (const char* v = value("--directions=")) {
      flags.directions = v;
    } else if (const char* v = value("--budget_ms=")) {
      if (!absl::SimpleAtod(v, &flags.budget_ms)) return 2;
    } else if (const char* v = value("--backend=")) {
      flags.backend = v;
    } else if (a == "--verbose") {
      flags.verbose = true;
    } else if (const char* v = value("--db=")) {
      flags.db = v;
    } else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  return convtune::Run(flags);
}
