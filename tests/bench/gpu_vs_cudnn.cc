// Per layer of MIOpenDriver problem lists: the best time of convtune's find
// beside the best of cuDNN's own find, in one process, on the same device
// buffers, both re-timed the same way (device events, median). Also the cold
// find time (compile + benchmark) and the warm find time (FindDb hit).
// Prints Markdown. Needs an NVIDIA GPU.
//
// usage: bench_gpu_vs_cudnn [--max-layers N] [--repeats N] [--max-seconds S]
//                           [--exhaustive] [--list-cold-find] [--steps] FILE...
// --max-seconds starts no layer after S seconds; --exhaustive makes
// convtune's find search every tunable solver's configs; --list-cold-find
// first times the cold find of each file's layers submitted all at once (as
// a daemon serving `convtune find --file` sees them), on an empty database;
// --steps adds a line per layer with the time of each step of our best plan.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/cuda_device.h"
#include "kernels/driver_line.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/backend.h"
#include "server/core.h"
#include "server/kernel_builder.h"
#include "server/solver.h"

namespace convtune {
namespace {

#define CUDNN_OK(expr)                                       \
  do {                                                       \
    cudnnStatus_t s_ = (expr);                               \
    if (s_ != CUDNN_STATUS_SUCCESS) {                        \
      return absl::InternalError(std::string(#expr) + ": " + \
                                 cudnnGetErrorString(s_));   \
    }                                                        \
  } while (0)

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
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

cudnnDataType_t CudnnType(DataType t) {
  return t == DataType::kFp32   ? CUDNN_DATA_FLOAT
         : t == DataType::kFp16 ? CUDNN_DATA_HALF
                                : CUDNN_DATA_BFLOAT16;
}

// cuDNN descriptors of one 2-D problem.
struct CudnnProblem {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~CudnnProblem() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
  absl::Status Init(const ConvProblem& p) {
    const cudnnTensorFormat_t fmt =
        p.layout == Layout::kNCHW ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
    const cudnnDataType_t dt = CudnnType(p.type);
    CUDNN_OK(cudnnCreateTensorDescriptor(&x));
    CUDNN_OK(cudnnCreateTensorDescriptor(&y));
    CUDNN_OK(cudnnCreateFilterDescriptor(&w));
    CUDNN_OK(cudnnCreateConvolutionDescriptor(&conv));
    CUDNN_OK(
        cudnnSetTensor4dDescriptor(x, fmt, dt, p.n, p.c, p.in[1], p.in[2]));
    CUDNN_OK(
        cudnnSetTensor4dDescriptor(y, fmt, dt, p.n, p.k, p.out(1), p.out(2)));
    CUDNN_OK(cudnnSetFilter4dDescriptor(w, dt, fmt, p.k, p.c_per_group(),
                                        p.filter[1], p.filter[2]));
    CUDNN_OK(cudnnSetConvolution2dDescriptor(
        conv, p.pad[1], p.pad[2], p.stride[1], p.stride[2], p.dilation[1],
        p.dilation[2], CUDNN_CROSS_CORRELATION,
        p.type == DataType::kFp32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_FLOAT));
    CUDNN_OK(cudnnSetConvolutionGroupCount(conv, static_cast<int>(p.groups)));
    // fp32 is compared in fp32 math: no TF32 on either side.
    CUDNN_OK(cudnnSetConvolutionMathType(conv, p.type == DataType::kFp32
                                                   ? CUDNN_FMA_MATH
                                                   : CUDNN_TENSOR_OP_MATH));
    return absl::OkStatus();
  }
};

struct Row {
  std::string key, ours_solver, cudnn_algo;
  double ours_ms = 0, cudnn_ms = 0, cold_s = 0, warm_us = 0, max_rel_err = 0;
  std::string step_times;  // with --steps: "kernel ms, ..." of our plan's steps
};

// cuDNN's own find on the given buffers; returns the best algorithm re-timed.
absl::StatusOr<std::pair<int, double>> CudnnBest(cudnnHandle_t h, Device& dev,
                                                 const ConvProblem& p,
                                                 CudnnProblem& d, void* x,
                                                 void* w, void* y, void* ws,
                                                 size_t ws_bytes, int repeats) {
  int returned = 0;
  const float one = 1, zero = 0;
  if (p.direction == Direction::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    CUDNN_OK(cudnnFindConvolutionForwardAlgorithmEx(
        h, d.x, x, d.w, w, d.conv, d.y, y, 16, &returned, perf, ws, ws_bytes));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > ws_bytes)
        continue;
      const auto algo = perf[i].algo;
      ASSIGN_OR_RETURN(
          double ms, TimeMedian(dev, repeats, [&]() -> absl::Status {
            CUDNN_OK(cudnnConvolutionForward(h, &one, d.x, x, d.w, w, d.conv,
                                             algo, ws, ws_bytes, &zero, d.y,
                                             y));
            return absl::OkStatus();
          }));
      return std::make_pair(static_cast<int>(algo), ms);
    }
  } else if (p.direction == Direction::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[16];
    CUDNN_OK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, d.w, w, d.y, y, d.conv, d.x, x, 16, &returned, perf, ws, ws_bytes));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > ws_bytes)
        continue;
      const auto algo = perf[i].algo;
      ASSIGN_OR_RETURN(
          double ms, TimeMedian(dev, repeats, [&]() -> absl::Status {
            CUDNN_OK(cudnnConvolutionBackwardData(h, &one, d.w, w, d.y, y,
                                                  d.conv, algo, ws, ws_bytes,
                                                  &zero, d.x, x));
            return absl::OkStatus();
          }));
      return std::make_pair(static_cast<int>(algo), ms);
    }
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
    CUDNN_OK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, d.x, x, d.y, y, d.conv, d.w, w, 16, &returned, perf, ws, ws_bytes));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > ws_bytes)
        continue;
      const auto algo = perf[i].algo;
      ASSIGN_OR_RETURN(
          double ms, TimeMedian(dev, repeats, [&]() -> absl::Status {
            CUDNN_OK(cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, y,
                                                    d.conv, algo, ws, ws_bytes,
                                                    &zero, d.w, w));
            return absl::OkStatus();
          }));
      return std::make_pair(static_cast<int>(algo), ms);
    }
  }
  return absl::NotFoundError("cuDNN found no algorithm");
}

struct Bench {
  Device* dev;
  Core* engine;
  cudnnHandle_t cudnn;
  int repeats;
  bool exhaustive = false;
  bool steps = false;
  std::mt19937_64 rng{std::random_device{}()};

  absl::StatusOr<Row> Layer(const ConvProblem& p) {
    Row row;
    row.key = ProblemKey(p);
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(FindOutcome cold,
                     engine->find().FindBlocking(
                         p, {.mode = v1::NORMAL, .exhaustive = exhaustive}));
    row.cold_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto t1 = Clock::now();
    ASSIGN_OR_RETURN(FindOutcome warm, engine->find().FindBlocking(p, {}));
    row.warm_us =
        std::chrono::duration<double, std::micro>(Clock::now() - t1).count();
    const v1::PerfResult& best = cold.record.results(0);
    row.ours_solver = best.solver_name();
    if (best.perf_config_size() > 0) {
      absl::StrAppend(&row.ours_solver, " [",
                      PerfConfigString(PerfConfig(best.perf_config().begin(),
                                                  best.perf_config().end())),
                      "]");
    }
    ASSIGN_OR_RETURN(
        v1::ExecutionPlan plan,
        engine->planner().Plan(
            p, best.solver_id(),
            PerfConfig(best.perf_config().begin(), best.perf_config().end())));
    RETURN_IF_ERROR(engine->planner().BuildKernels(&plan));
    // Shared buffers: inputs random, the output written by both and compared.
    std::vector<char> hx(p.x_bytes()), hw(p.w_bytes()), hy(p.y_bytes());
    FillRandom(hx.data(), p.type, p.x_elements(), rng);
    FillRandom(hw.data(), p.type, p.w_elements(), rng);
    FillRandom(hy.data(), p.type, p.y_elements(), rng);
    ASSIGN_OR_RETURN(auto x, dev->Allocate(p.x_bytes()));
    ASSIGN_OR_RETURN(auto w, dev->Allocate(p.w_bytes()));
    ASSIGN_OR_RETURN(auto y, dev->Allocate(p.y_bytes()));
    const size_t ws_bytes =
        std::max<size_t>(plan.workspace_bytes(), size_t{1} << 30);
    ASSIGN_OR_RETURN(auto ws, dev->Allocate(ws_bytes));
    RETURN_IF_ERROR(dev->CopyToDevice(x.get(), hx.data(), hx.size()));
    RETURN_IF_ERROR(dev->CopyToDevice(w.get(), hw.data(), hw.size()));
    RETURN_IF_ERROR(dev->CopyToDevice(y.get(), hy.data(), hy.size()));
    PlanBuffers b{x->data(), w->data(), y->data(), ws->data(),
                  static_cast<int64_t>(ws_bytes)};
    ASSIGN_OR_RETURN(row.ours_ms, TimeMedian(*dev, repeats, [&] {
                       return ExecutePlan(*dev, plan, b);
                     }));
    DeviceBuffer* out = ByTensor(p.output(), x, w, y).get();
    const int64_t out_bytes = out->size();
    std::vector<char> ours(out_bytes), theirs(out_bytes);
    RETURN_IF_ERROR(dev->CopyFromDevice(ours.data(), *out, out_bytes));
    if (steps) {
      // Each step alone, timed the same way: where the plan's time goes
      // (after our output is saved: steps run alone leave partial results).
      for (int i = 0; i < plan.steps_size(); ++i) {
        v1::ExecutionPlan one = plan;
        one.clear_steps();
        *one.add_steps() = plan.steps(i);
        ASSIGN_OR_RETURN(double ms, TimeMedian(*dev, repeats, [&] {
                           return ExecutePlan(*dev, one, b);
                         }));
        absl::StrAppendFormat(&row.step_times, "%s%s %.4f", i ? ", " : "",
                              plan.steps(i).kernel(), ms);
      }
    }
    CudnnProblem d;
    RETURN_IF_ERROR(d.Init(p));
    ASSIGN_OR_RETURN(
        auto algo, CudnnBest(cudnn, *dev, p, d, x->data(), w->data(), y->data(),
                             ws->data(), ws_bytes, repeats));
    row.cudnn_algo = std::to_string(algo.first);
    row.cudnn_ms = algo.second;
    RETURN_IF_ERROR(dev->CopyFromDevice(theirs.data(), *out, out_bytes));
    const int64_t n = p.output_elements();
    double max_abs = 1e-30, max_err = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = LoadElement(ours.data(), p.type, i),
                   c = LoadElement(theirs.data(), p.type, i);
      max_abs = std::max(max_abs, std::fabs(c));
      max_err = std::max(max_err, std::fabs(a - c));
    }
    row.max_rel_err = max_err / max_abs;
    return row;
  }
};

// The problems of a MIOpenDriver file: 2-D, each once, at most max_layers.
std::vector<ConvProblem> ReadLayers(const std::string& file, int max_layers) {
  std::vector<ConvProblem> out;
  std::set<std::string> seen;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line) && static_cast<int>(out.size()) < max_layers) {
    auto problems = ParseDriverLine(line);
    if (!problems.ok()) continue;
    for (const ConvProblem& p : *problems) {
      if (p.is_3d() || !seen.insert(ProblemKey(p)).second) continue;
      out.push_back(p);
    }
  }
  return out;
}

// Submits every layer's find at once to an engine on an empty database (its
// own kernel cache too) and waits for all: compiling later layers overlaps
// timing earlier ones. Prints the wall time.
absl::Status ListColdFind(Device& dev, KernelCompiler& compiler,
                          const std::string& file, int max_layers) {
  const std::vector<ConvProblem> layers = ReadLayers(file, max_layers);
  const std::string dir =
      std::filesystem::temp_directory_path() / "convtune-bench-cudnn-list";
  std::filesystem::remove_all(dir);
  ASSIGN_OR_RETURN(auto store, storage::OpenRocksDbStore(dir));
  KernelBuilder builder(&dev, compiler, *store, dev.info().arch);
  ThreadPool compile("compile", 16), bench_queue("bench", 1);
  Core engine(dev, SolverRegistry::Default(), *store, compile, bench_queue,
              Core::Options(), nullptr, &builder);
  absl::Mutex mu;
  int left = static_cast<int>(layers.size()), failed = 0;
  const auto t0 = Clock::now();
  for (const ConvProblem& p : layers) {
    engine.find().Find(
        p, {.mode = v1::NORMAL}, [&](absl::StatusOr<FindOutcome> r) {
          absl::MutexLock lock(&mu);
          if (!r.ok()) {
            ++failed;
            std::fprintf(stderr, "%s: %s\n", ProblemKey(p).c_str(),
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
      "stage %.1f s "
      "and timing %.1f s summed over layers, overlapping; %lld kernels "
      "compiled; %d "
      "failed)\n\n",
      layers.size(), std::filesystem::path(file).filename().c_str(), wall,
      c.compile_stage_ms / 1e3, c.timing_stage_ms / 1e3,
      static_cast<long long>(builder.stats().compiled), failed);
  std::fflush(stdout);
  engine.Shutdown();
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  int max_layers = 1000, repeats = 10;
  bool exhaustive = false, list_cold_find = false, steps = false;
  double max_seconds = 1e9;
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
    } else if (a == "--max-seconds" && i + 1 < argc) {
      max_seconds = std::atof(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
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
  KernelBuilder builder(&dev, *backend->compiler, **store, dev.info().arch);
  ThreadPool compile("compile", 16), bench_queue("bench", 1);
  Core::Options options;
  Core engine(dev, SolverRegistry::Default(), **store, compile, bench_queue,
              options, nullptr, &builder);
  cudnnHandle_t cudnn;
  if (cudnnCreate(&cudnn) != CUDNN_STATUS_SUCCESS) return 1;
  Bench bench{&dev, &engine, cudnn, repeats, exhaustive, steps};
  std::printf("device %s, cuDNN %zu\n\n", dev.info().Key().c_str(),
              cudnnGetVersion());
  const auto bench_start = Clock::now();
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(Clock::now() - bench_start).count();
  };
  for (const std::string& file : files) {
    if (list_cold_find) {
      if (absl::Status s =
              ListColdFind(dev, *backend->compiler, file, max_layers);
          !s.ok()) {
        std::printf("cold find of %s submitted at once failed: %s\n\n",
                    file.c_str(), s.ToString().c_str());
      }
    }
    std::map<std::string, std::vector<double>>
        ratios;  // "F FP32" -> cudnn/ours
    const EngineCounters counters_before = engine.counters();
    const BuildStats build_before = builder.stats();
    std::printf(
        "## %s\n\n| layer | convtune solver | convtune ms | cuDNN algo | cuDNN "
        "ms | "
        "cuDNN/convtune | cold find s | warm find us | max rel diff |\n"
        "|---|---|---|---|---|---|---|---|---|\n",
        std::filesystem::path(file).filename().c_str());
    std::ifstream in(file);
    std::string line;
    std::set<std::string> seen;
    double cold_total = 0;
    int layers = 0;
    while (std::getline(in, line) && layers < max_layers &&
           elapsed_s() < max_seconds) {
      auto problems = ParseDriverLine(line);
      if (!problems.ok()) continue;
      for (const ConvProblem& p : *problems) {
        if (!seen.insert(ProblemKey(p)).second || p.is_3d()) continue;
        ++layers;
        absl::StatusOr<Row> r = bench.Layer(p);
        if (!r.ok()) {
          std::printf("| %s | error: %s |\n", ProblemKey(p).c_str(),
                      std::string(r.status().message()).c_str());
          continue;
        }
        cold_total += r->cold_s;
        const double ratio = r->cudnn_ms / r->ours_ms;
        ratios[std::string(DirectionName(p.direction)) + " " +
               std::string(DataTypeName(p.type)) +
               (p.groups > 1 ? " grouped" : "")]
            .push_back(ratio);
        std::printf(
            "| %s | %s | %.4f | %s | %.4f | %.2f | %.2f | %.0f | %.1e |\n",
            r->key.c_str(), r->ours_solver.c_str(), r->ours_ms,
            r->cudnn_algo.c_str(), r->cudnn_ms, ratio, r->cold_s, r->warm_us,
            r->max_rel_err);
        if (!r->step_times.empty())
          std::printf("|  | steps: %s |\n", r->step_times.c_str());
        std::fflush(stdout);
      }
    }
    const EngineCounters c = engine.counters();
    const BuildStats b = builder.stats();
    std::printf(
        "\ncold find of all %d layers: %.1f s (compile stage %.1f s, timing "
        "%.1f s, "
        "%lld kernels compiled)%s\n\n",
        layers, cold_total,
        (c.compile_stage_ms - counters_before.compile_stage_ms) / 1e3,
        (c.timing_stage_ms - counters_before.timing_stage_ms) / 1e3,
        static_cast<long long>(b.compiled - build_before.compiled),
        elapsed_s() >= max_seconds ? "; stopped at --max-seconds" : "");
    std::printf(
        "Geometric mean of cuDNN time / convtune time, %s\n\n| group | layers "
        "| geomean |\n"
        "|---|---|---|\n",
        std::filesystem::path(file).filename().c_str());
    for (const auto& [group, v] : ratios) {
      double log_sum = 0;
      for (double r : v) log_sum += std::log(r);
      std::printf("| %s | %zu | %.3f |\n", group.c_str(), v.size(),
                  std::exp(log_sum / v.size()));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  cudnnDestroy(cudnn);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
