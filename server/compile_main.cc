// convtune-compile: fills a kernel cache for a named GPU arch without a
// device (compile-only mode), so a CPU machine can prepare a database that a
// GPU node then opens with every kernel already compiled.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "kernels/driver_line.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/sources.h"
#include "server/kernel_builder.h"
#include "server/solver_registry.h"
#include "storage/records.h"
#include "storage/store.h"

namespace convtune {
namespace {

constexpr char kUsage[] =
    R"(usage: convtune-compile --target ARCH --db DIR [flags]

Compiles GPU kernels for ARCH (sm_90, gfx90a, ...) into the kernel cache of
the database in DIR, creating it if needed. No GPU is needed. A daemon on a
device of that arch, opened on DIR, then compiles none of them again.
Kernels already in the cache are not compiled again. Exits 1 if any kernel
fails to compile.

What is compiled:
  default          every kernel the dynamic solvers (problem sizes as
                   kernel arguments) use, for each data type, direction,
                   layout and 2-D/3-D: the kernels any find or immediate
                   run of those solvers needs.
  --problems FILE  every applicable solver's kernels for the problems of
                   FILE (MIOpenDriver lines, one per line, '#' comments),
                   size-specialised solvers included, default configs.
  --file NAME      one embedded source with its default options
                   (repeatable).

flags:
  --target ARCH    sm_XY (NVRTC) or gfxNNN (hiprtc). sm_90a is the same
                   device as sm_90: the kernels that use its architecture-
                   specific instructions (warpgroup MMA) are compiled for
                   sm_90a either way, the rest for sm_90
  --db DIR         database folder (RocksDB), e.g. the daemon's --db
  --problems FILE  see above
  --all-configs    with --problems: every config of each tunable solver's
                   search space, as an exhaustive find times them
  --file NAME      see above
  --jobs N         compiler threads. default: the number of CPUs
  --help           this text
)";

int UsageError(const std::string& msg) {
  std::cerr << "convtune-compile: " << msg
            << "\n(convtune-compile --help lists the flags)\n";
  return 2;
}

struct Flags {
  std::string target, db, problems;
  std::vector<std::string> files;
  bool all_configs = false;
  int jobs = 0;
};

// One plan to build, and what it came from (for error messages).
struct Job {
  v1::ExecutionPlan plan;
  std::string what;
};

// A representative problem of each option set the dynamic kernels are
// compiled for: data type x direction x layout x 2-D/3-D, dense and
// depthwise. Sizes do not reach dynamic kernels' options.
std::vector<ConvProblem> OptionSetProblems() {
  std::vector<ConvProblem> out;
  for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    for (Direction dir : {Direction::kForward, Direction::kBackwardData,
                          Direction::kBackwardWeights}) {
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        for (bool three_d : {false, true}) {
          for (bool depthwise : {false, true}) {
            ConvProblem p;
            p.type = type;
            p.direction = dir;
            p.layout = layout;
            p.n = 2;
            p.c = 32;
            p.k = 32;
            p.groups = depthwise ? 32 : 1;
            p.in = {three_d ? 6 : 1, 12, 12};
            p.filter = {three_d ? 3 : 1, 3, 3};
            p.pad = {three_d ? 1 : 0, 1, 1};
            out.push_back(p);
          }
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<ConvProblem>> ReadProblems(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("--problems: cannot read ", path));
  std::vector<ConvProblem> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::StatusOr<std::vector<ConvProblem>> ps = ParseDriverLine(text);
    if (!ps.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", ps.status().message()));
    }
    out.insert(out.end(), ps->begin(), ps->end());
  }
  return out;
}

// Plans of the GPU solvers that run on `device` for `problems`: dynamic
// solvers only unless `all_solvers`, default configs unless `all_configs`.
std::vector<Job> PlanJobs(const DeviceInfo& device,
                          const std::vector<ConvProblem>& problems,
                          bool all_solvers, bool all_configs) {
  std::vector<Job> jobs;
  for (const Solver* s : SolverRegistry::Default().ForDevice(device)) {
    if (!all_solvers && !s->dynamic()) continue;
    for (const ConvProblem& p : problems) {
      if (!s->IsApplicable(p).ok()) continue;
      const std::vector<PerfConfig> configs =
          all_configs ? s->ConfigSpace(p)
                      : std::vector<PerfConfig>{s->DefaultConfig(p)};
      for (const PerfConfig& config : configs) {
        absl::StatusOr<v1::ExecutionPlan> plan = s->MakePlan(p, config);
        if (!plan.ok()) continue;
        plan->set_backend(device.backend);
        jobs.push_back(
            {*std::move(plan), absl::StrCat(s->name(), " ", ProblemKey(p), " [",
                                            PerfConfigString(config), "]")});
      }
    }
  }
  return jobs;
}

// Drops plans whose sources are all in an earlier plan: one build per
// distinct (file, options) set.
std::vector<Job> DistinctSources(std::vector<Job> jobs) {
  std::set<std::string> seen;
  std::vector<Job> out;
  for (Job& job : jobs) {
    bool fresh = false;
    for (const v1::KernelSource& source : job.plan.sources()) {
      fresh |= seen.insert(source.SerializeAsString()).second;
    }
    if (fresh) out.push_back(std::move(job));
  }
  return out;
}

int Main(const Flags& flags) {
  const v1::Backend backend = absl::StartsWith(flags.target, "sm_") ? v1::CUDA
                              : absl::StartsWith(flags.target, "gfx")
                                  ? v1::HIP
                                  : v1::BACKEND_UNSPECIFIED;
  if (backend == v1::BACKEND_UNSPECIFIED) {
    return UsageError(absl::StrCat("--target: '", flags.target,
                                   "' is neither sm_XY nor gfxNNN"));
  }
  // A daemon names its device sm_90 and asks for sm_90a per source.
  std::string target = flags.target;
  if (backend == v1::CUDA && absl::EndsWith(target, "a")) target.pop_back();
  std::vector<ConvProblem> problems;
  if (!flags.problems.empty()) {
    absl::StatusOr<std::vector<ConvProblem>> read =
        ReadProblems(flags.problems);
    if (!read.ok()) {
      std::cerr << "convtune-compile: " << read.status().message() << "\n";
      return 1;
    }
    problems = *std::move(read);
  }
  absl::StatusOr<std::unique_ptr<KernelCompiler>> compiler =
      MakeCompiler(backend);
  if (!compiler.ok()) {
    std::cerr << "convtune-compile: " << compiler.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::OpenRocksDbStore(flags.db);
  if (!store.ok()) {
    std::cerr << "convtune-compile: " << store.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = storage::StampMeta(store->get(), "convtune-compile");
      !s.ok()) {
    std::cerr << "convtune-compile: " << s.message() << "\n";
    return 1;
  }
  KernelBuilder builder(nullptr, **compiler, **store, target);

  std::vector<Job> jobs;
  for (const std::string& file : flags.files) {
    Job job;
    job.plan.set_backend(backend);
    job.plan.add_sources()->set_file(file);
    job.what = file;
    jobs.push_back(std::move(job));
  }
  if (flags.files.empty()) {
    DeviceInfo device;
    device.backend = backend;
    device.arch = target;
    // The BLAS is found at run time on the GPU node; the kernels that
    // accompany its calls (im2col, col2im) are compiled here all the same.
    device.blas = "vendor";
    jobs = flags.problems.empty()
               ? PlanJobs(device, OptionSetProblems(), false, false)
               : PlanJobs(device, problems, true, flags.all_configs);
  }
  jobs = DistinctSources(std::move(jobs));

  // Compilers run in parallel; the builder compiles each hash once.
  std::atomic<size_t> next{0};
  absl::Mutex mu;
  int failures = 0;
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      Job& job = jobs[i];
      absl::Status s = absl::OkStatus();
      if (!flags.files.empty()) {
        s = builder.BuildSource(job.plan.sources(0)).status();
      } else {
        s = builder.BuildPlan(&job.plan);
      }
      absl::MutexLock lock(&mu);
      if (!s.ok()) {
        ++failures;
        std::cerr << "convtune-compile: " << job.what << ": " << s.message()
                  << "\n";
      } else {
        std::cout << "ready " << job.what << "\n";
      }
    }
  };
  const int threads = std::max(
      1, std::min<int>(
             flags.jobs > 0 ? flags.jobs : std::thread::hardware_concurrency(),
             static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();

  const BuildStats stats = builder.stats();
  std::cout << "convtune-compile: " << flags.target << " ("
            << (*compiler)->version() << "): " << jobs.size()
            << " kernel set(s), " << stats.compiled << " compiled, "
            << stats.store_hits << " already cached, " << failures
            << " failed, into " << flags.db << "\n";
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace convtune

int main(int argc, char** argv) {
  convtune::Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << convtune::kUsage;
      return 0;
    }
    if (flag == "--all-configs") {
      flags.all_configs = true;
      continue;
    }
    std::string value;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return convtune::UsageError(absl::StrCat(flag, ": missing value"));
    }
    if (flag == "--target") {
      flags.target = value;
    } else if (flag == "--db") {
      flags.db = value;
    } else if (flag == "--file") {
      flags.files.push_back(value);
    } else if (flag == "--problems") {
      flags.problems = value;
    } else if (flag == "--jobs") {
      if (!absl::SimpleAtoi(value, &flags.jobs) || flags.jobs < 1) {
        return convtune::UsageError(
            absl::StrCat("--jobs: expected a count >= 1, got '", value, "'"));
      }
    } else {
      return convtune::UsageError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (flags.target.empty()) return convtune::UsageError("--target is required");
  if (flags.db.empty()) return convtune::UsageError("--db is required");
  if (!flags.files.empty() && !flags.problems.empty()) {
    return convtune::UsageError("--file and --problems exclude each other");
  }
  if (flags.all_configs && flags.problems.empty()) {
    return convtune::UsageError("--all-configs needs --problems");
  }
  return convtune::Main(flags);
}
