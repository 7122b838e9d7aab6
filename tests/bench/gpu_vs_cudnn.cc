// Per layer of MIOpenDriver problem lists, on one NVIDIA GPU: the best time
// of convtune's find (every solver, cuDNN's among them), of convtune's own
// kernels alone, and of cuDNN's graph API as PyTorch uses it: every engine
// config that cuDNN's heuristics (modes A and B, then its fallback list)
// offer for the layer's operation graph, within the workspace allowed, each
// timed by the same harness as ours (device events, median of repeats) on
// the same device buffers. fp32 runs without TF32 on every side. Also the
// cold find time (compile + benchmark), the peer's search time, and the warm
// find time (FindDb hit). Prints Markdown; --json writes one object per
// layer for tests/bench/compare_peers.py.
//
// usage: bench_gpu_vs_cudnn [--layout NCHW|NHWC|both] [--json PATH]
//                           [--max-layers N] [--repeats N] [--max-seconds S]
//                           [--workspace-mib M] [--exhaustive]
//                           [--list-cold-find] [--steps] [--configs ID]
//                           [--config-size N] FILE...
// --layout runs the lists' layers in that layout (default: as the lines say);
// --max-seconds starts no layer after S seconds; --exhaustive makes
// convtune's find search every tunable solver's configs; --list-cold-find
// first times the cold find of each file's layers submitted all at once (as
// a daemon serving `convtune find --file` sees them), on an empty database;
// --steps adds a line per layer with the time of each step of our best plan;
// --configs ID one with the time of each config of solver ID (each plan
// checked against find's output first; with --steps each config's steps
// too); --config-size N times only its configs of N values (one of a
// solver's kinds of config).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "kernels/cuda_device.h"
#include "kernels/driver_line.h"
#include "kernels/gpu/cudnn_graph.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/backend.h"
#include "server/core.h"
#include "server/kernel_builder.h"
#include "server/solver.h"
#include "server/solver_registry.h"

namespace convtune {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The largest |got - ref| over the output, relative to the largest |ref|;
// infinite where got holds a NaN (an element left unwritten after
// poisoning).
double MaxRelDiff(const ConvProblem& p, const char* got, const char* ref) {
  double max_abs = 1e-30, max_err = 0;
  for (int64_t i = 0; i < p.output_elements(); ++i) {
    const double a = LoadElement(got, p.type, i),
                 c = LoadElement(ref, p.type, i);
    if (std::isnan(a)) return std::numeric_limits<double>::infinity();
    max_abs = std::max(max_abs, std::fabs(c));
    max_err = std::max(max_err, std::fabs(a - c));
  }
  return max_err / max_abs;
}

absl::StatusOr<double> TimeMedian(Device& dev, int repeats,
                                  const std::function<absl::Status()>& run) {
  RETURN_IF_ERROR(run());  // warm-up
  RETURN_IF_ERROR(dev.Synchronize());
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    ASSIGN_OR_RETURN(double ms, dev.TimeMs(run));
    t.push_back(ms);
  }
  return Median(t);
}

// Medians of `rounds` runs each of a and b, taken in turn (a b, then b a),
// after a warm-up of each.
absl::StatusOr<std::pair<double, double>> TimeAlternating(
    Device& dev, int rounds, const std::function<absl::Status()>& a,
    const std::function<absl::Status()>& b) {
  RETURN_IF_ERROR(a());
  RETURN_IF_ERROR(b());
  RETURN_IF_ERROR(dev.Synchronize());
  std::vector<double> ta, tb;
  for (int i = 0; i < rounds; ++i) {
    for (int j = 0; j < 2; ++j) {
      const bool first_a = (i % 2 == 0) == (j == 0);
      ASSIGN_OR_RETURN(double ms, dev.TimeMs(first_a ? a : b));
      (first_a ? ta : tb).push_back(ms);
    }
  }
  return std::make_pair(Median(ta), Median(tb));
}

// One layer of a list: the problem and where it came from.
struct Layer {
  ConvProblem p;
  int line_no = 0;
  std::string line;
};

struct Row {
  std::string key, find_solver, own_solver, cudnn_config;
  double find_ms = 0;
  std::optional<double> own_ms, cudnn_ms;
  // find's pick and cuDNN's best config timed again in alternation: the
  // ratio of these is free of the search's pick of the luckiest median.
  std::optional<double> pair_find_ms, pair_cudnn_ms;
  double cold_s = 0, timing_s = 0, cudnn_search_s = 0, warm_us = 0;
  double max_rel_err = 0;
  int cudnn_configs = 0;
  // With --steps: "kernel ms, ..." of find's plan's steps, and of the own
  // kernels' plan where find picked a library's.
  std::string step_times, own_step_times;
  std::string config_times;  // with --configs: "[config] ms, ..."
};

std::string WithConfig(const v1::PerfResult& r) {
  std::string s = r.solver_name();
  if (r.perf_config_size() > 0) {
    absl::StrAppend(&s, " [",
                    PerfConfigString(PerfConfig(r.perf_config().begin(),
                                                r.perf_config().end())),
                    "]");
  }
  return s;
}

struct Bench {
  Device* dev;
  Core* engine;
  const SolverRegistry* registry;
  int repeats;
  int64_t workspace_bytes;
  bool exhaustive = false;
  bool steps = false;
  uint32_t configs_of = 0;  // --configs: a solver id, 0 for none
  size_t config_size = 0;   // --config-size: 0 for every config
  std::mt19937_64 rng{std::random_device{}()};

  absl::StatusOr<v1::ExecutionPlan> BuiltPlan(const ConvProblem& p,
                                              uint32_t solver,
                                              const PerfConfig& config) {
    ASSIGN_OR_RETURN(v1::ExecutionPlan plan,
                     engine->planner().Plan(p, solver, config));
    RETURN_IF_ERROR(engine->planner().BuildKernels(&plan));
    return plan;
  }

  absl::StatusOr<Row> Run(const ConvProblem& p) {
    Row row;
    row.key = ProblemKey(p);
    const EngineCounters before = engine->counters();
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(FindOutcome cold,
                     engine->find().FindBlocking(
                         p, {.mode = v1::NORMAL, .exhaustive = exhaustive}));
    row.cold_s = std::chrono::duration<double>(Clock::now() - t0).count();
    row.timing_s =
        (engine->counters().timing_stage_ms - before.timing_stage_ms) / 1e3;
    const auto t1 = Clock::now();
    ASSIGN_OR_RETURN(FindOutcome warm, engine->find().FindBlocking(p, {}));
    row.warm_us =
        std::chrono::duration<double, std::micro>(Clock::now() - t1).count();
    const v1::PerfResult& best = cold.record.results(0);
    row.find_solver = WithConfig(best);
    const v1::PerfResult* own = nullptr;
    for (const v1::PerfResult& r : cold.record.results()) {
      if (r.library().empty()) {
        own = &r;
        break;
      }
    }
    auto config_of = [](const v1::PerfResult& r) {
      return PerfConfig(r.perf_config().begin(), r.perf_config().end());
    };
    ASSIGN_OR_RETURN(v1::ExecutionPlan plan,
                     BuiltPlan(p, best.solver_id(), config_of(best)));
    // Shared buffers: inputs random, the output written by each and compared.
    std::vector<char> hx(p.x_bytes()), hw(p.w_bytes()), hy(p.y_bytes());
    FillRandom(hx.data(), p.type, p.x_elements(), rng);
    FillRandom(hw.data(), p.type, p.w_elements(), rng);
    FillRandom(hy.data(), p.type, p.y_elements(), rng);
    ASSIGN_OR_RETURN(auto x, dev->Allocate(p.x_bytes()));
    ASSIGN_OR_RETURN(auto w, dev->Allocate(p.w_bytes()));
    ASSIGN_OR_RETURN(auto y, dev->Allocate(p.y_bytes()));
    const int64_t ws_bytes =
        std::max<int64_t>(plan.workspace_bytes(), workspace_bytes);
    ASSIGN_OR_RETURN(auto ws, dev->Allocate(ws_bytes));
    RETURN_IF_ERROR(dev->CopyToDevice(x.get(), hx.data(), hx.size()));
    RETURN_IF_ERROR(dev->CopyToDevice(w.get(), hw.data(), hw.size()));
    RETURN_IF_ERROR(dev->CopyToDevice(y.get(), hy.data(), hy.size()));
    PlanBuffers b{x->data(), w->data(), y->data(), ws->data(), ws_bytes};
    auto time_plan = [&](const v1::ExecutionPlan& pl) {
      return TimeMedian(*dev, repeats,
                        [&] { return ExecutePlan(*dev, pl, b); });
    };
    ASSIGN_OR_RETURN(row.find_ms, time_plan(plan));
    DeviceBuffer* out = ByTensor(p.output(), x, w, y).get();
    const int64_t out_bytes = out->size();
    std::vector<char> ours(out_bytes), theirs(out_bytes);
    RETURN_IF_ERROR(dev->CopyFromDevice(ours.data(), *out, out_bytes));
    // Each step alone, timed the same way: where a plan's time goes (after
    // our output is saved: steps run alone leave partial results).
    auto time_steps = [&](const v1::ExecutionPlan& pl,
                          std::string* out) -> absl::Status {
      for (int i = 0; i < pl.steps_size(); ++i) {
        v1::ExecutionPlan one = pl;
        one.clear_steps();
        *one.add_steps() = pl.steps(i);
        ASSIGN_OR_RETURN(double ms, time_plan(one));
        absl::StrAppendFormat(out, "%s%s %.4f", i ? ", " : "",
                              pl.steps(i).kernel(), ms);
      }
      return absl::OkStatus();
    };
    if (steps) RETURN_IF_ERROR(time_steps(plan, &row.step_times));
    const Solver* tuned =
        configs_of != 0 ? registry->Find(configs_of) : nullptr;
    if (tuned != nullptr && tuned->IsApplicable(p).ok()) {
      // What a plan leaves unwritten counts as wrong.
      std::vector<char> poison(out_bytes);
      FillNaN(poison.data(), p.type, p.output_elements());
      std::vector<char> got(out_bytes);
      for (const PerfConfig& config : tuned->ConfigSpace(p)) {
        if (config_size != 0 && config.size() != config_size) continue;
        absl::StatusOr<v1::ExecutionPlan> pl =
            BuiltPlan(p, tuned->id(), config);
        if (!pl.ok()) continue;
        RETURN_IF_ERROR(dev->CopyToDevice(out, poison.data(), out_bytes));
        RETURN_IF_ERROR(ExecutePlan(*dev, *pl, b));
        RETURN_IF_ERROR(dev->Synchronize());
        RETURN_IF_ERROR(dev->CopyFromDevice(got.data(), *out, out_bytes));
        const bool right = MaxRelDiff(p, got.data(), ours.data()) <= 2e-2;
        ASSIGN_OR_RETURN(double ms, time_plan(*pl));
        absl::StrAppendFormat(&row.config_times, "%s[%s] %.4f%s",
                              row.config_times.empty() ? "" : ", ",
                              PerfConfigString(config), ms,
                              right ? "" : " WRONG");
        if (steps) {
          std::string config_steps;
          RETURN_IF_ERROR(time_steps(*pl, &config_steps));
          absl::StrAppend(&row.config_times, " (", config_steps, ")");
        }
      }
    }
    if (own != nullptr) {
      row.own_solver = WithConfig(*own);
      if (own == &best) {
        row.own_ms = row.find_ms;
      } else {
        ASSIGN_OR_RETURN(v1::ExecutionPlan own_plan,
                         BuiltPlan(p, own->solver_id(), config_of(*own)));
        ASSIGN_OR_RETURN(row.own_ms, time_plan(own_plan));
        if (steps) RETURN_IF_ERROR(time_steps(own_plan, &row.own_step_times));
      }
    }
    // The peer: every engine config cuDNN's heuristics list, as PyTorch's
    // benchmark mode times them.
    const Solver* cudnn = registry->Find(gpu::kCudnnSolverId);
    if (cudnn != nullptr && cudnn->IsApplicable(p).ok()) {
      const auto t2 = Clock::now();
      double best_ms = 0;
      v1::ExecutionPlan best_plan;
      for (const PerfConfig& config : cudnn->ConfigSpace(p)) {
        if (cudnn->ConfigWorkspaceBytes(p, config) > ws_bytes) continue;
        absl::StatusOr<v1::ExecutionPlan> pl =
            BuiltPlan(p, cudnn->id(), config);
        if (!pl.ok()) continue;
        absl::StatusOr<double> ms = time_plan(*pl);
        if (!ms.ok()) continue;
        ++row.cudnn_configs;
        if (!row.cudnn_ms || *ms < best_ms) {
          best_ms = *ms;
          row.cudnn_ms = *ms;
          row.cudnn_config = PerfConfigString(config);
          best_plan = *std::move(pl);
        }
      }
      row.cudnn_search_s =
          std::chrono::duration<double>(Clock::now() - t2).count();
      if (row.cudnn_ms) {
        ASSIGN_OR_RETURN(
            auto pair,
            TimeAlternating(
                *dev, 2 * repeats, [&] { return ExecutePlan(*dev, plan, b); },
                [&] { return ExecutePlan(*dev, best_plan, b); }));
        row.pair_find_ms = pair.first;
        row.pair_cudnn_ms = pair.second;
        RETURN_IF_ERROR(ExecutePlan(*dev, best_plan, b));
        RETURN_IF_ERROR(dev->Synchronize());
        RETURN_IF_ERROR(dev->CopyFromDevice(theirs.data(), *out, out_bytes));
        row.max_rel_err = MaxRelDiff(p, ours.data(), theirs.data());
      }
    }
    return row;
  }
};

absl::string_view GroupName(const ConvProblem& p) {
  if (p.groups == 1) return "dense";
  return p.groups == p.c ? "depthwise" : "grouped";
}

std::string JsonMs(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.6g", *v) : "null";
}

// The layers of a MIOpenDriver file: 2-D, each problem once, at most
// max_layers, in `layout` when one is given.
std::vector<Layer> ReadLayers(const std::string& file, int max_layers,
                              std::optional<Layout> layout) {
  std::vector<Layer> out;
  std::set<std::string> seen;
  std::ifstream in(file);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line) && static_cast<int>(out.size()) < max_layers) {
    ++line_no;
    auto problems = ParseDriverLine(line);
    if (!problems.ok()) continue;
    for (ConvProblem p : *problems) {
      if (layout) p.layout = *layout;
      if (p.is_3d() || !seen.insert(ProblemKey(p)).second) continue;
      if (static_cast<int>(out.size()) >= max_layers) break;
      out.push_back(
          {p, line_no, std::string(absl::StripAsciiWhitespace(line))});
    }
  }
  return out;
}

// Submits every layer's find at once to an engine on an empty database (its
// own kernel cache too) and waits for all: compiling later layers overlaps
// timing earlier ones. Prints the wall time.
absl::Status ListColdFind(Device& dev, const SolverRegistry& registry,
                          KernelCompiler& compiler, const std::string& file,
                          const std::vector<Layer>& layers) {
  const std::string dir =
      std::filesystem::temp_directory_path() / "convtune-bench-cudnn-list";
  std::filesystem::remove_all(dir);
  ASSIGN_OR_RETURN(auto store, storage::OpenRocksDbStore(dir));
  KernelBuilder builder(&dev, compiler, *store, dev.info().arch);
  ThreadPool compile("compile", 16), bench_queue("bench", 1);
  Core engine(dev, registry, *store, compile, bench_queue, Core::Options(),
              nullptr, &builder);
  absl::Mutex mu;
  int left = static_cast<int>(layers.size()), failed = 0;
  const auto t0 = Clock::now();
  for (const Layer& layer : layers) {
    engine.find().Find(
        layer.p, {.mode = v1::NORMAL}, [&](absl::StatusOr<FindOutcome> r) {
          absl::MutexLock lock(&mu);
          if (!r.ok()) {
            ++failed;
            std::fprintf(stderr, "%s: %s\n", ProblemKey(layer.p).c_str(),
                         r.status().ToString().c_str());
          }
          --left;
        });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &left));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const EngineCounters c = engine.counters();
  std::printf(
      "cold find of all %zu layers of %s submitted at once: %.1f s (compile "
      "stage %.1f s and timing %.1f s summed over layers, overlapping; %lld "
      "kernels compiled; %d failed)\n\n",
      layers.size(), std::filesystem::path(file).filename().c_str(), wall,
      c.compile_stage_ms / 1e3, c.timing_stage_ms / 1e3,
      static_cast<long long>(builder.stats().compiled), failed);
  std::fflush(stdout);
  engine.Shutdown();
  return absl::OkStatus();
}

double Geomean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double r : v) log_sum += std::log(r);
  return v.empty() ? 0 : std::exp(log_sum / v.size());
}

// Sums and per-layer ratios of one (direction, type, layout, group) row.
struct Totals {
  int layers = 0;
  double find = 0, own = 0, cudnn = 0, cold = 0, timing = 0, search = 0;
  // Sums of the alternated timings, and layers where find's pick was slower
  // than cuDNN's best by more than a measurement tolerance (2%).
  double pair_find = 0, pair_cudnn = 0;
  int pair_below = 0;
  std::vector<double> own_ratio, cudnn_ratio;  // peer time / find time
};

constexpr char kUsage[] =
    "usage: bench_gpu_vs_cudnn [--layout NCHW|NHWC|both] [--json PATH]\n"
    "                          [--max-layers N] [--repeats N] "
    "[--max-seconds S]\n"
    "                          [--workspace-mib M] [--exhaustive] "
    "[--list-cold-find] [--steps]\n"
    "                          [--configs SOLVER_ID] [--config-size N] "
    "[--report-timing-ms MS] FILE...\n";

int Main(int argc, char** argv) {
  int max_layers = 1000, repeats = 10;
  int64_t workspace_mib = 4096;
  bool exhaustive = false, list_cold_find = false, steps = false;
  uint32_t configs_of = 0;
  size_t config_size = 0;
  double max_seconds = 1e9, report_timing_ms = 2000;
  std::vector<std::optional<Layout>> layouts = {std::nullopt};
  std::string json_path;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-layers" && i + 1 < argc) {
      max_layers = std::atoi(argv[++i]);
    } else if (a == "--exhaustive") {
      exhaustive = true;
    } else if (a == "--list-cold-find") {
      list_cold_find = true;
    } else if (a == "--steps") {
      steps = true;
    } else if (a == "--configs" && i + 1 < argc) {
      configs_of = static_cast<uint32_t>(std::atoi(argv[++i]));
    } else if (a == "--config-size" && i + 1 < argc) {
      config_size = static_cast<size_t>(std::max(0, std::atoi(argv[++i])));
    } else if (a == "--max-seconds" && i + 1 < argc) {
      max_seconds = std::atof(argv[++i]);
    } else if (a == "--report-timing-ms" && i + 1 < argc) {
      report_timing_ms = std::atof(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--workspace-mib" && i + 1 < argc) {
      workspace_mib = std::atoll(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--layout" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "NCHW") {
        layouts = {Layout::kNCHW};
      } else if (v == "NHWC") {
        layouts = {Layout::kNHWC};
      } else if (v == "both") {
        layouts = {Layout::kNCHW, Layout::kNHWC};
      } else {
        std::cerr << "--layout: NCHW, NHWC or both, not '" << v.substr(0, 16)
                  << "'\n"
                  << kUsage;
        return 2;
      }
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "unknown flag '" << a.substr(0, 32) << "'\n" << kUsage;
      return 2;
    } else {
      files.push_back(a);
    }
  }
  absl::StatusOr<SelectedBackend> backend = SelectBackend("cuda", 0);
  if (!backend.ok()) {
    std::cerr << "no CUDA device: " << backend.status() << "\n";
    return 2;
  }
  const std::string dir =
      std::filesystem::temp_directory_path() / "convtune-bench-cudnn";
  std::filesystem::remove_all(dir);
  auto store = storage::OpenRocksDbStore(dir);
  if (!store.ok()) return 1;
  Device& dev = *backend->device;
  std::unique_ptr<SolverRegistry> registry = SolverRegistry::WithLibraries(dev);
  KernelBuilder builder(&dev, *backend->compiler, **store, dev.info().arch);
  ThreadPool compile("compile", 16), bench_queue("bench", 1);
  Core::Options options;
  options.report_slower_than_ms = report_timing_ms;
  Core engine(dev, *registry, **store, compile, bench_queue, options, nullptr,
              &builder);
  Bench bench{&dev,       &engine, registry.get(), repeats, workspace_mib << 20,
              exhaustive, steps,   configs_of};
  bench.config_size = config_size;
  std::printf(
      "device %s, libraries: %s\n\n", dev.info().Key().c_str(),
      dev.info().libraries.empty() ? "none" : dev.info().libraries.c_str());
  std::FILE* json = nullptr;
  if (!json_path.empty()) {
    json = std::fopen(json_path.c_str(), "w");
    if (json == nullptr) {
      std::cerr << "--json: cannot write " << json_path << "\n";
      return 2;
    }
    std::fprintf(json, "[");
  }
  bool first_json = true;
  const auto bench_start = Clock::now();
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(Clock::now() - bench_start).count();
  };
  for (const std::string& file : files) {
    for (const std::optional<Layout>& layout : layouts) {
      const std::string list = std::filesystem::path(file).filename();
      const std::vector<Layer> layers = ReadLayers(file, max_layers, layout);
      if (list_cold_find) {
        if (absl::Status s =
                ListColdFind(dev, *registry, *backend->compiler, file, layers);
            !s.ok()) {
          std::printf("cold find of %s submitted at once failed: %s\n\n",
                      file.c_str(), s.ToString().c_str());
        }
      }
      std::map<std::string, Totals> totals;
      const BuildStats build_before = builder.stats();
      std::printf(
          "## %s%s\n\n| layer | find's solver | find ms | own kernels' "
          "solver | own ms | cuDNN graph config | cuDNN ms | cuDNN / find "
          "(alternated) | "
          "cold find s | timing s | cuDNN search s | warm find us | max rel "
          "diff |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
          list.c_str(),
          layout ? (*layout == Layout::kNHWC ? " (NHWC)" : " (NCHW)") : "");
      int run = 0;
      for (const Layer& layer : layers) {
        if (elapsed_s() >= max_seconds) break;
        const ConvProblem& p = layer.p;
        ++run;
        absl::StatusOr<Row> r = bench.Run(p);
        if (!r.ok()) {
          std::printf("| %s | error: %s |\n", ProblemKey(p).c_str(),
                      std::string(r.status().message()).substr(0, 200).c_str());
          continue;
        }
        // Every layer counts in its direction/type/layout row; grouped and
        // depthwise layers also in a row of their own.
        const std::string row =
            absl::StrCat(DirectionName(p.direction), " ", DataTypeName(p.type),
                         " ", p.layout == Layout::kNHWC ? "NHWC" : "NCHW");
        std::vector<std::string> rows = {absl::StrCat(row, " all")};
        if (p.groups > 1) rows.push_back(absl::StrCat(row, " ", GroupName(p)));
        for (const std::string& g : rows) {
          Totals& t = totals[g];
          ++t.layers;
          t.find += r->find_ms;
          t.cold += r->cold_s;
          t.timing += r->timing_s;
          t.search += r->cudnn_search_s;
          if (r->own_ms) {
            t.own += *r->own_ms;
            t.own_ratio.push_back(*r->own_ms / r->find_ms);
          }
          if (r->cudnn_ms) t.cudnn += *r->cudnn_ms;
          if (r->pair_cudnn_ms) {
            t.pair_find += *r->pair_find_ms;
            t.pair_cudnn += *r->pair_cudnn_ms;
            const double ratio = *r->pair_cudnn_ms / *r->pair_find_ms;
            t.cudnn_ratio.push_back(ratio);
            if (ratio < 0.98) ++t.pair_below;
          }
        }
        std::printf(
            "| %s | %s | %.4f | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f | "
            "%.0f | %.1e |\n",
            r->key.c_str(), r->find_solver.c_str(), r->find_ms,
            r->own_solver.c_str(),
            r->own_ms ? absl::StrFormat("%.4f", *r->own_ms).c_str() : "-",
            r->cudnn_config.c_str(), JsonMs(r->cudnn_ms).c_str(),
            r->pair_cudnn_ms
                ? absl::StrFormat("%.3f", *r->pair_cudnn_ms / *r->pair_find_ms)
                      .c_str()
                : "-",
            r->cold_s, r->timing_s, r->cudnn_search_s, r->warm_us,
            r->max_rel_err);
        if (!r->step_times.empty())
          std::printf("|  | steps: %s |\n", r->step_times.c_str());
        if (!r->own_step_times.empty())
          std::printf("|  | own steps: %s |\n", r->own_step_times.c_str());
        if (!r->config_times.empty())
          std::printf("|  | configs: %s |\n", r->config_times.c_str());
        std::fflush(stdout);
        if (json != nullptr) {
          std::fprintf(
              json,
              "%s\n{\"list\": %s, \"line_no\": %d, \"line\": %s, "
              "\"direction\": \"%s\", \"type\": \"%s\", \"layout\": "
              "\"%s\", \"group\": \"%s\", \"problem_key\": %s, "
              "\"find_ms\": %.6g, \"own_ms\": %s, \"cudnn_ms\": %s, "
              "\"pair_find_ms\": %s, \"pair_cudnn_ms\": %s, "
              "\"find_solver\": %s, \"own_solver\": %s, \"cudnn_config\": "
              "%s, \"cudnn_configs\": %d, \"cold_find_s\": %.4g, "
              "\"timing_s\": %.4g, \"cudnn_search_s\": %.4g, "
              "\"warm_find_us\": %.4g, \"max_rel_diff\": %.3g}",
              first_json ? "" : ",", JsonString(list).c_str(), layer.line_no,
              JsonString(layer.line).c_str(),
              std::string(DirectionName(p.direction)).c_str(),
              p.type == DataType::kFp32   ? "fp32"
              : p.type == DataType::kFp16 ? "fp16"
                                          : "bf16",
              p.layout == Layout::kNHWC ? "NHWC" : "NCHW",
              std::string(GroupName(p)).c_str(), JsonString(r->key).c_str(),
              r->find_ms, JsonMs(r->own_ms).c_str(),
              JsonMs(r->cudnn_ms).c_str(), JsonMs(r->pair_find_ms).c_str(),
              JsonMs(r->pair_cudnn_ms).c_str(),
              JsonString(r->find_solver).c_str(),
              JsonString(r->own_solver).c_str(),
              JsonString(r->cudnn_config).c_str(), r->cudnn_configs, r->cold_s,
              r->timing_s, r->cudnn_search_s, r->warm_us, r->max_rel_err);
          first_json = false;
          std::fflush(json);
        }
      }
      const BuildStats b = builder.stats();
      std::printf(
          "\n%d of %zu layers run%s; %lld kernels compiled.\n\n"
          "Totals (ms) and speed ratios (peer time / find time; above 1: "
          "find is faster), %s\n\n"
          "| row | layers | find ms | own ms | cuDNN graph ms | cuDNN / find "
          "totals (alternated) | geomean | layers < 0.98 | own / find totals "
          "| geomean | cold find s | timing s | cuDNN search s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
          run, layers.size(),
          elapsed_s() >= max_seconds ? " (stopped at --max-seconds)" : "",
          static_cast<long long>(b.compiled - build_before.compiled),
          list.c_str());
      for (const auto& [g, t] : totals) {
        std::printf(
            "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %d | %.3f | %.3f "
            "| %.1f | %.1f | %.1f |\n",
            g.c_str(), t.layers, t.find, t.own, t.cudnn,
            t.pair_find > 0 ? t.pair_cudnn / t.pair_find : 0,
            Geomean(t.cudnn_ratio), t.pair_below,
            t.find > 0 ? t.own / t.find : 0, Geomean(t.own_ratio), t.cold,
            t.timing, t.search);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (json != nullptr) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  engine.Shutdown();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
