// The best CPU solver per layer beside oneDNN on the same layer, in one
// process, on the same inputs. Prints a Markdown table.
//
// usage: bench_cpu_vs_onednn [PROBLEM_FILE] [--repeats N]
//   PROBLEM_FILE: MIOpenDriver lines (default deploy/problems/resnet50_b1.txt)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu_device.h"
#include "kernels/driver_line.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"
#include "server/solver_registry.h"

namespace convtune {
namespace {

double MedianMs(const std::function<void()>& run, int repeats) {
  // OpenBLAS and OpenMP workers spin for a while after a parallel call; on a
  // small machine a spinning pool of one library steals the cores of the
  // other. Let them park before each measurement.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  run();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto a = std::chrono::steady_clock::now();
    run();
    t.push_back(std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - a)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2]
                      : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

struct OneDnnConv {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward prim;
  dnnl::memory src, wei, dst;        // user memory, NCHW / OIHW
  dnnl::memory src_i, wei_i, dst_i;  // the primitive's chosen layouts

  // `any_layout`: let oneDNN choose blocked layouts (reorders not timed).
  OneDnnConv(const ConvProblem& p, float* x, float* w, bool any_layout) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims xd = {p.n, p.c, p.in[1], p.in[2]};
    const dnnl::memory::dims wd = {p.k, p.c, p.filter[1], p.filter[2]};
    const dnnl::memory::dims yd = {p.n, p.k, p.out(1), p.out(2)};
    const dnnl::memory::dims strides = {p.stride[1], p.stride[2]};
    const dnnl::memory::dims dil = {p.dilation[1] - 1, p.dilation[2] - 1};
    const dnnl::memory::dims pad_l = {p.pad[1], p.pad[2]};
    dnnl::memory::dims pad_r(2);
    for (int a = 0; a < 2; ++a) {
      pad_r[a] = (yd[2 + a] - 1) * strides[a] + (dil[a] + 1) * (wd[2 + a] - 1) +
                 1 - xd[2 + a] - pad_l[a];
    }
    src = dnnl::memory({xd, dt::f32, tag::nchw}, engine, x);
    wei = dnnl::memory({wd, dt::f32, tag::oihw}, engine, w);
    dst = dnnl::memory({yd, dt::f32, tag::nchw}, engine);
    const tag t = any_layout ? tag::any : tag::nchw;
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto,
        {xd, dt::f32, t}, {wd, dt::f32, any_layout ? tag::any : tag::oihw},
        {yd, dt::f32, t}, strides, dil, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(d, engine);
    prim = dnnl::convolution_forward(pd);
    src_i = pd.src_desc() == src.get_desc()
                ? src
                : dnnl::memory(pd.src_desc(), engine);
    wei_i = pd.weights_desc() == wei.get_desc()
                ? wei
                : dnnl::memory(pd.weights_desc(), engine);
    dst_i = pd.dst_desc() == dst.get_desc()
                ? dst
                : dnnl::memory(pd.dst_desc(), engine);
    if (src_i != src) dnnl::reorder(src, src_i).execute(stream, src, src_i);
    if (wei_i != wei) dnnl::reorder(wei, wei_i).execute(stream, wei, wei_i);
    stream.wait();
  }
  void Run() {
    prim.execute(stream, {{DNNL_ARG_SRC, src_i},
                          {DNNL_ARG_WEIGHTS, wei_i},
                          {DNNL_ARG_DST, dst_i}});
    stream.wait();
  }
  // The output in NCHW.
  const float* Output() {
    if (dst_i != dst) {
      dnnl::reorder(dst_i, dst).execute(stream, dst_i, dst);
      stream.wait();
    }
    return static_cast<const float*>(dst.get_data_handle());
  }
};

int Main(int argc, char** argv) {
  std::string file =
      std::string(CONVTUNE_SOURCE_DIR) + "/deploy/problems/resnet50_b1.txt";
  int repeats = 15;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      file = a;
    }
  }
  std::ifstream in(file);
  if (!in) {
    std::cerr << "cannot read " << file << "\n";
    return 1;
  }
  CpuDevice device;
  std::mt19937_64 rng(std::random_device{}());
  std::unique_ptr<SolverRegistry> registry =
      SolverRegistry::WithLibraries(device);
  std::printf(
      "| layer | find's best solver | find ms | best own solver | own ms | "
      "oneDNN NCHW ms | oneDNN blocked ms | find speed vs NCHW | vs blocked | "
      "own speed vs blocked |\n|---|---|---|---|---|---|---|---|---|---|\n");
  double ours_total = 0, own_total = 0, dnnl_total = 0, blocked_total = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto problems = ParseDriverLine(line);
    if (!problems.ok()) {
      std::cerr << problems.status() << "\n";
      return 1;
    }
    for (const ConvProblem& p : *problems) {
      if (p.direction != Direction::kForward || p.type != DataType::kFp32 ||
          p.is_3d() || p.groups != 1 || p.layout != Layout::kNCHW) {
        continue;
      }
      std::vector<float> x(p.x_elements()), w(p.w_elements()),
          y(p.y_elements());
      FillRandom(x.data(), p.type, p.x_elements(), rng);
      FillRandom(w.data(), p.type, p.w_elements(), rng);
      // What a find times: every solver's find configs (both layout
      // choices of each oneDNN method), the own kernels among them.
      double best = 1e30, own = 1e30;
      std::string best_name, own_name;
      std::vector<float> best_y;
      for (const Solver* s : registry->ForBackend(v1::CPU)) {
        if (!s->IsApplicable(p).ok()) continue;
        for (const PerfConfig& config : s->FindConfigs(p)) {
          auto plan = s->MakePlan(p, config);
          if (!plan.ok()) continue;
          std::vector<char> ws(
              std::max<int64_t>(1, s->ConfigWorkspaceBytes(p, config)));
          PlanBuffers b{x.data(), w.data(), y.data(), ws.data(),
                        static_cast<int64_t>(ws.size())};
          bool ok = true;
          const double ms =
              MedianMs([&] { ok = ok && ExecutePlan(device, *plan, b).ok(); },
                       s->id() == 1 ? 3 : repeats);
          if (!ok) continue;
          const std::string name =
              s->library().empty()
                  ? std::string(s->name())
                  : absl::StrCat(s->name(), " [", PerfConfigString(config),
                                 "]");
          if (ms < best) {
            best = ms;
            best_name = name;
            best_y = y;
          }
          if (s->library().empty() && ms < own) {
            own = ms;
            own_name = name;
          }
        }
      }
      OneDnnConv plain(p, x.data(), w.data(), false);
      const double dnnl_ms = MedianMs([&] { plain.Run(); }, repeats);
      OneDnnConv blocked(p, x.data(), w.data(), true);
      const double blocked_ms = MedianMs([&] { blocked.Run(); }, repeats);
      // Same convolution on both sides: the outputs must agree.
      const float* ref = plain.Output();
      double max_err = 0;
      for (size_t i = 0; i < best_y.size(); ++i) {
        max_err = std::max(max_err,
                           static_cast<double>(std::fabs(best_y[i] - ref[i])));
      }
      if (max_err > 1e-2) {
        std::cerr << "outputs disagree on " << ProblemKey(p) << ": " << max_err
                  << "\n";
        return 1;
      }
      ours_total += best;
      own_total += own;
      dnnl_total += dnnl_ms;
      blocked_total += blocked_ms;
      std::printf(
          "| %s | %s | %.3f | %s | %.3f | %.3f | %.3f | %.2fx | %.2fx | "
          "%.2fx |\n",
          ProblemKey(p).c_str(), best_name.c_str(), best, own_name.c_str(), own,
          dnnl_ms, blocked_ms, dnnl_ms / best, blocked_ms / best,
          blocked_ms / own);
      std::fflush(stdout);
    }
  }
  std::printf(
      "| **total** | | %.3f | | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.2fx "
      "|\n",
      ours_total, own_total, dnnl_total, blocked_total, dnnl_total / ours_total,
      blocked_total / ours_total, blocked_total / own_total);
  return 0;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) { return convtune::Main(argc, argv); }
