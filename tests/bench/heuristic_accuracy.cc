// Leave-one-network-out accuracy of immediate mode. Every shared MIOpen
// performance-model list is read in place; per network and data type, the
// list of the smallest batch size is used at that batch size (or at --batch).
// Every layer is found for real in each direction and layout asked for. Then,
// for each network, the learned model is trained on the other networks'
// records only (every direction, type and layout) and asked for the
// held-out layers' best solver, which is scored against the find's
// measurement: share within 10% of find's best, mean and worst slowdown, per
// direction x type x layout, per group structure, and by the answer's
// confidence. The weighted-throughput estimate alone is scored beside it.
//
// usage: bench_heuristic_accuracy [--backend=cpu|cuda|hip|auto] [--batch=N]
//          [--max_per_network=8] [--max_gmacs=G] [--max_seconds=S]
//          [--types=FP32,FP16]
//          [--layouts=NCHW,NHWC]
//          [--directions=FBW] [--budget_ms=20] [--db=DIR] [--json=FILE]
//          [--layers_out=FILE] [--knn_k=3] [--support_radius=2] [--verbose]
// --json writes one row per held-out layer and layout; --layers_out writes
// the layers as a MIOpenDriver list (NCHW, one line per layer and direction)
// whose line numbers the rows name, for tests/bench/torch_peer.py to time
// cuDNN's own heuristic (--no-benchmark) on the same layers;
// compare_heuristics.py joins them. The lists are read from
// $CONVTUNE_SHARED_DIR when set.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
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
  std::string backend = "cpu";
  int batch = 0;  // 0: each list's own
  int max_per_network = 8;
  double max_gmacs = 0;    // shapes above this are left out (0: none)
  double max_seconds = 0;  // no find started after this (0: no limit)
  std::string types = "FP32,FP16";
  std::string layouts = "NCHW,NHWC";
  std::string directions = "FBW";
  double budget_ms = 20;
  std::string db;
  std::string json;
  std::string layers_out;
  bool verbose = false;
  LearnedOptions learned;
};

struct Layer {
  std::string network;
  std::string list;  // the shared list it came from
  ConvProblem problem;
  int line_no = 0;  // in --layers_out
  int rank = 0;     // the shape's place among those kept of its list
  v1::FindRecord record;
};

std::string SharedProblems() {
  const char* shared = std::getenv("CONVTUNE_SHARED_DIR");
  return (std::filesystem::path(shared != nullptr && *shared != '\0'
                                    ? shared
                                    : CONVTUNE_SHARED_DIR) /
          "problems" / "miopen-perf-models")
      .string();
}

// "Resnet50_v1.5_FP16_BS128.txt" -> {"Resnet50", "FP16", 128}.
bool ListName(const std::string& name, std::string* net, std::string* type,
              int* batch) {
  const size_t v = name.find("_v");
  const size_t bs = name.rfind("_BS");
  if (v == std::string::npos || bs == std::string::npos) return false;
  *net = name.substr(0, v);
  *type = absl::StrContains(name, "_FP16_") ? "FP16" : "FP32";
  return absl::SimpleAtoi(
      name.substr(bs + 3, name.size() - bs - 3 - 4 /* .txt */), batch);
}

// Up to max_per_network distinct shapes per (network, type), evenly spread
// over the list, each in every direction the list has for it and every
// layout asked for.
std::vector<Layer> ReadLayers(const Flags& flags) {
  std::map<std::pair<std::string, std::string>, std::pair<int, std::string>>
      chosen;  // (net, type) -> (batch, file)
  for (const auto& e : std::filesystem::directory_iterator(SharedProblems())) {
    std::string net, type;
    int batch = 0;
    const std::string name = e.path().filename().string();
    if (!ListName(name, &net, &type, &batch)) continue;
    if (!absl::StrContains(flags.types, type)) continue;
    auto it = chosen.find({net, type});
    if (it == chosen.end() || batch < it->second.first ||
        (batch == it->second.first && name < it->second.second)) {
      chosen[{net, type}] = {batch, name};
    }
  }
  std::vector<Layer> out;
  for (const auto& [net_type, file] : chosen) {
    std::ifstream in(SharedProblems() + "/" + file.second);
    // Shapes (direction left out) in list order, with their directions.
    std::vector<std::pair<std::string, std::vector<ConvProblem>>> shapes;
    for (std::string line; std::getline(in, line);) {
      absl::StatusOr<std::vector<ConvProblem>> ps = ParseDriverLine(line);
      if (!ps.ok()) continue;
      for (ConvProblem p : *ps) {
        if (!absl::StrContains(flags.directions, DirectionName(p.direction)))
          continue;
        if (flags.batch > 0) p.n = flags.batch;
        if (flags.max_gmacs > 0 && p.macs() > flags.max_gmacs * 1e9) continue;
        ConvProblem shape = p;
        shape.direction = Direction::kForward;
        const std::string key = ProblemKey(shape);
        auto it = std::find_if(shapes.begin(), shapes.end(),
                               [&](const auto& s) { return s.first == key; });
        if (it == shapes.end()) it = shapes.insert(shapes.end(), {key, {}});
        if (std::none_of(it->second.begin(), it->second.end(),
                         [&](const ConvProblem& q) {
                           return q.direction == p.direction;
                         })) {
          it->second.push_back(p);
        }
      }
    }
    const size_t keep =
        flags.max_per_network > 0
            ? std::min(shapes.size(), size_t(flags.max_per_network))
            : shapes.size();
    for (size_t i = 0; i < keep; ++i) {
      for (const ConvProblem& p : shapes[i * shapes.size() / keep].second) {
        for (absl::string_view layout : absl::StrSplit(flags.layouts, ',')) {
          Layer l;
          l.network = net_type.first;
          l.list = file.second;
          l.problem = p;
          l.rank = static_cast<int>(i);
          l.problem.layout = layout == "NHWC" ? Layout::kNHWC : Layout::kNCHW;
          out.push_back(std::move(l));
        }
      }
    }
  }
  // Round-robin over the lists, so that a find stopped by --max_seconds
  // leaves every network its first shapes.
  std::stable_sort(out.begin(), out.end(), [](const Layer& a, const Layer& b) {
    return a.rank < b.rank;
  });
  return out;
}

double MeasuredMs(const v1::FindRecord& r, uint32_t id) {
  for (const v1::PerfResult& x : r.results()) {
    if (x.solver_id() == id && x.measured()) return x.time_ms();
  }
  return -1;
}

struct Score {
  int layers = 0, within = 0;
  double slowdown = 0, worst = 1;
  void Add(double ratio) {
    ++layers;
    within += ratio <= 1.10;
    slowdown += ratio - 1;
    worst = std::max(worst, ratio);
  }
  std::string Cells() const {
    if (layers == 0) return "– | – | –";
    return absl::StrFormat("%.1f%% | %+.1f%% | %.2f×", 100.0 * within / layers,
                           100.0 * slowdown / layers, worst);
  }
};

struct Pick {
  uint32_t id = 0;
  double ratio = 0;
  v1::Provenance provenance = v1::ESTIMATED;
  float confidence = 0;
};

std::vector<const Solver*> Candidates(const v1::FindRecord& r,
                                      const SolverRegistry& registry) {
  std::vector<const Solver*> out;
  for (const v1::PerfResult& x : r.results()) {
    const Solver* s = registry.Find(x.solver_id());
    if (s != nullptr && x.measured()) out.push_back(s);
  }
  return out;
}

std::string ClassOf(const ConvProblem& p) {
  return absl::StrCat(DirectionName(p.direction), " ", DataTypeName(p.type),
                      " ", p.layout == Layout::kNCHW ? "NCHW" : "NHWC");
}

int Run(const Flags& flags) {
  std::vector<Layer> layers = ReadLayers(flags);
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
  std::unique_ptr<SolverRegistry> registry =
      SolverRegistry::WithLibraries(device);
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
  options.background_tuning = false;
  Core engine(device, *registry, **store, compile, bench, options,
              /*system_db=*/nullptr, builder.get());

  // Find every layer (in parallel: the engine times one plan at a time).
  const auto start = std::chrono::steady_clock::now();
  // In waves, so that --max_seconds can stop before the next one. On a GPU
  // the finds of a wave overlap their compiling and checking, while the
  // engine times one plan at a time; on the CPU every find runs alone, since
  // a concurrent find's checks would share the cores being timed.
  std::vector<Layer> found;
  size_t started = 0;
  const size_t kWave = device.info().backend == v1::CPU ? 1 : 8;
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  while (started < layers.size()) {
    if (flags.max_seconds > 0 && elapsed() > flags.max_seconds) {
      std::cerr << "--max_seconds: " << layers.size() - started
                << " layer finds not started\n";
      break;
    }
    const size_t end = std::min(layers.size(), started + kWave);
    std::vector<std::promise<absl::StatusOr<FindOutcome>>> promises(end -
                                                                    started);
    std::vector<std::future<absl::StatusOr<FindOutcome>>> futures;
    for (size_t i = started; i < end; ++i) {
      std::promise<absl::StatusOr<FindOutcome>>* promise =
          &promises[i - started];
      futures.push_back(promise->get_future());
      engine.find().Find(layers[i].problem, {},
                         [promise](absl::StatusOr<FindOutcome> r) {
                           promise->set_value(std::move(r));
                         });
    }
    for (size_t i = started; i < end; ++i) {
      absl::StatusOr<FindOutcome> r = futures[i - started].get();
      if (!r.ok() || r->record.results_size() == 0 ||
          !r->record.results(0).measured()) {
        std::cerr << layers[i].network << " " << ProblemKey(layers[i].problem)
                  << ": "
                  << (r.ok() ? "nothing measured" : r.status().ToString())
                  << "\n";
        continue;
      }
      layers[i].record = r->record;
      found.push_back(layers[i]);
    }
    started = end;
    if (started % 32 == 0 || started == layers.size()) {
      std::cerr << absl::StrFormat("[%d/%d] found, %.0f s\n", started,
                                   layers.size(), elapsed());
    }
  }
  const double find_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  // Line numbers of --layers_out: one per problem (NCHW), shared by the
  // networks that have it.
  std::map<std::string, int> line_of;
  std::ofstream lines_file;
  if (!flags.layers_out.empty()) lines_file.open(flags.layers_out);
  for (Layer& l : found) {
    ConvProblem nchw = l.problem;
    nchw.layout = Layout::kNCHW;
    const std::string key = ProblemKey(nchw);
    auto [it, added] =
        line_of.emplace(key, static_cast<int>(line_of.size()) + 1);
    if (added && lines_file.is_open()) {
      lines_file << FormatDriverLine(nchw) << "\n";
    }
    l.line_no = it->second;
  }

  WtiEstimator wti(device.info());
  std::map<std::string, std::array<Score, 2>> by_class, by_structure;
  std::map<std::string, int> estimated_picks;
  std::array<Score, 2> all;
  // Confidence buckets of the learned model's picks.
  const double bounds[] = {0, 0.25, 0.5, 0.75, 1.01};
  std::array<Score, 5> by_confidence;  // [0] estimated picks
  std::vector<std::tuple<double, std::string>> worst;
  std::ofstream json;
  if (!flags.json.empty()) {
    json.open(flags.json);
    json << "[";
  }
  std::set<std::string> networks;
  for (const Layer& l : found) networks.insert(l.network);
  int rows = 0, overlap = 0;
  for (const std::string& held : networks) {
    std::vector<TrainingSample> train;
    std::set<std::string> train_keys;
    for (const Layer& l : found) {
      if (l.network == held) continue;
      if (!train_keys.insert(ProblemKey(l.problem)).second) continue;
      absl::StatusOr<TrainingSample> s = SampleFromRecord(l.record);
      if (s.ok()) train.push_back(*std::move(s));
    }
    auto ranker = LearnedRanker::Train(train, device.info().Key(), *registry,
                                       wti, flags.learned);
    if (!ranker.ok()) continue;
    for (const Layer& l : found) {
      if (l.network != held) continue;
      overlap += train_keys.count(ProblemKey(l.problem));
      const std::vector<const Solver*> c = Candidates(l.record, *registry);
      if (c.empty()) continue;
      const double best = l.record.results(0).time_ms();
      const Estimate e = (*ranker)->Rank(l.problem, c)[0];
      const Estimate alone = wti.Rank(l.problem, c)[0];
      const double ratio = MeasuredMs(l.record, e.solver->id()) / best;
      const double ratio_alone =
          MeasuredMs(l.record, alone.solver->id()) / best;
      const std::string cls = ClassOf(l.problem);
      const std::string structure(GroupStructure(l.problem));
      for (auto* m : {&by_class[cls], &by_structure[structure], &all}) {
        (*m)[0].Add(ratio);
        (*m)[1].Add(ratio_alone);
      }
      if (e.provenance != v1::LEARNED) {
        ++estimated_picks[cls];
        by_confidence[0].Add(ratio);
      } else {
        for (int b = 0; b < 4; ++b) {
          if (e.confidence >= bounds[b] && e.confidence < bounds[b + 1]) {
            by_confidence[b + 1].Add(ratio);
          }
        }
      }
      worst.emplace_back(
          ratio, absl::StrFormat("%s %s %s: picked %s (%s, confidence %.2f) "
                                 "%.4f ms, best %s %.4f ms",
                                 held, cls, ProblemKey(l.problem),
                                 e.solver->name(), ProvenanceName(e.provenance),
                                 e.confidence, ratio * best,
                                 l.record.results(0).solver_name(), best));
      if (flags.verbose && ratio > 1.1) {
        std::cerr << "miss " << std::get<1>(worst.back()) << "\n";
        for (const Estimate& x : (*ranker)->Rank(l.problem, c)) {
          std::cerr << absl::StrFormat(
              "  %-24s predicted %9.4f ms (%s %.2f), measured %9.4f ms\n",
              x.solver->name(), x.time_ms, ProvenanceName(x.provenance),
              x.confidence, MeasuredMs(l.record, x.solver->id()));
        }
      }
      if (json.is_open()) {
        json << (rows++ ? ",\n " : "\n ")
             << absl::StrFormat(
                    "{\"list\": %s, \"line_no\": %d, \"network\": %s, "
                    "\"source_list\": %s, \"direction\": \"%s\", \"type\": "
                    "\"%s\", \"layout\": \"%s\", \"group\": \"%s\", "
                    "\"problem_key\": %s, \"find_ms\": %.6g, "
                    "\"best_solver\": %s, \"pick\": %s, \"pick_ms\": %.6g, "
                    "\"provenance\": \"%s\", \"confidence\": %.4f, "
                    "\"estimate_pick\": %s, \"estimate_pick_ms\": %.6g}",
                    JsonString(std::filesystem::path(flags.layers_out)
                                   .filename()
                                   .string()),
                    l.line_no, JsonString(held), JsonString(l.list),
                    DirectionName(l.problem.direction),
                    absl::AsciiStrToLower(DataTypeName(l.problem.type)),
                    l.problem.layout == Layout::kNCHW ? "NCHW" : "NHWC",
                    structure, JsonString(ProblemKey(l.problem)), best,
                    JsonString(l.record.results(0).solver_name()),
                    JsonString(e.solver->name()), ratio * best,
                    ProvenanceName(e.provenance), e.confidence,
                    JsonString(alone.solver->name()), ratio_alone * best);
      }
    }
  }
  if (json.is_open()) json << "\n]\n";

  std::printf(
      "Leave-one-network-out over %zu networks: %d layer finds (%zu shapes x "
      "directions x layouts; <= %d shapes per network and type, %s), finds "
      "took %.0f s on %s; %d held-out layers were also in another network's "
      "training records.\n\n",
      networks.size(), all[0].layers, line_of.size(), flags.max_per_network,
      flags.batch > 0 ? absl::StrCat("N = ", flags.batch).c_str()
                      : "each list's own batch size",
      find_s, device.info().Key().c_str(), overlap);
  std::printf(
      "Cells: share of picks within 10%% of find's best | mean slowdown | "
      "worst pick (its measured time / find's best).\n\n");
  std::printf(
      "| class | layers | within 10%% | mean slowdown | worst | estimated "
      "picks | estimate alone: within 10%% | mean | worst |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [cls, s] : by_class) {
    std::printf("| %s | %d | %s | %d | %s |\n", cls.c_str(), s[0].layers,
                s[0].Cells().c_str(), estimated_picks[cls],
                s[1].Cells().c_str());
  }
  for (const auto& [structure, s] : by_structure) {
    std::printf("| all %s | %d | %s | | %s |\n", structure.c_str(), s[0].layers,
                s[0].Cells().c_str(), s[1].Cells().c_str());
  }
  std::printf("| **all** | %d | %s | | %s |\n\n", all[0].layers,
              all[0].Cells().c_str(), all[1].Cells().c_str());
  std::printf(
      "Confidence of the pick against its outcome:\n\n| pick | picks | "
      "within 10%% | mean slowdown | worst |\n|---|---|---|---|---|\n");
  const char* names[] = {"estimated (no support in its class)",
                         "learned, confidence < 0.25", "learned, 0.25–0.5",
                         "learned, 0.5–0.75", "learned, ≥ 0.75"};
  for (int b = 0; b < 5; ++b) {
    std::printf("| %s | %d | %s |\n", names[b], by_confidence[b].layers,
                by_confidence[b].Cells().c_str());
  }
  std::sort(worst.rbegin(), worst.rend());
  std::printf("\nWorst picks:\n\n");
  for (size_t i = 0; i < std::min<size_t>(8, worst.size()); ++i) {
    std::printf("- %.2f×: %s\n", std::get<0>(worst[i]),
                std::get<1>(worst[i]).c_str());
  }
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
    if (a == "--help" || a == "-h") {
      std::cout
          << "usage: bench_heuristic_accuracy [--backend=cpu|cuda|hip|auto] "
             "[--batch=N] [--max_per_network=8] [--max_gmacs=G] "
             "[--max_seconds=S] "
             "[--types=FP32,FP16] "
             "[--layouts=NCHW,NHWC] [--directions=FBW] [--budget_ms=20] "
             "[--db=DIR] [--json=FILE] [--layers_out=FILE] [--knn_k=3] "
             "[--support_radius=2] [--verbose]\n"
             "Leave-one-network-out accuracy of immediate mode over the "
             "shared problem lists (see the file's header).\n";
      return 0;
    }
    bool ok = true;
    if (const char* v = value("--max_per_network=")) {
      ok = absl::SimpleAtoi(v, &flags.max_per_network);
    } else if (const char* v = value("--knn_k=")) {
      ok = absl::SimpleAtoi(v, &flags.learned.knn_k);
    } else if (const char* v = value("--doubt_weight=")) {
      ok = absl::SimpleAtod(v, &flags.learned.doubt_weight);
    } else if (const char* v = value("--regret_weight=")) {
      ok = absl::SimpleAtod(v, &flags.learned.regret_weight);
    } else if (const char* v = value("--support_radius=")) {
      ok = absl::SimpleAtod(v, &flags.learned.support_radius);
    } else if (const char* v = value("--max_seconds=")) {
      ok = absl::SimpleAtod(v, &flags.max_seconds);
    } else if (const char* v = value("--max_gmacs=")) {
      ok = absl::SimpleAtod(v, &flags.max_gmacs);
    } else if (const char* v = value("--batch=")) {
      ok = absl::SimpleAtoi(v, &flags.batch);
    } else if (const char* v = value("--types=")) {
      flags.types = v;
    } else if (const char* v = value("--layouts=")) {
      flags.layouts = v;
    } else if (const char* v = value("--directions=")) {
      flags.directions = v;
    } else if (const char* v = value("--budget_ms=")) {
      ok = absl::SimpleAtod(v, &flags.budget_ms);
    } else if (const char* v = value("--backend=")) {
      flags.backend = v;
    } else if (const char* v = value("--json=")) {
      flags.json = v;
    } else if (const char* v = value("--layers_out=")) {
      flags.layers_out = v;
    } else if (a == "--verbose") {
      flags.verbose = true;
    } else if (const char* v = value("--db=")) {
      flags.db = v;
    } else {
      std::cerr << "unknown flag " << a.substr(0, 40) << " (see --help)\n";
      return 2;
    }
    if (!ok) {
      std::cerr << "bad value in " << a.substr(0, 40) << "\n";
      return 2;
    }
  }
  return convtune::Run(flags);
}
