// The find engine: answers a find from the FindDb or tunes the problem by
// enumerating the applicable solvers, building their plans on the compile
// pool and timing them one at a time on the device's benchmark queue, then
// stores the ranked record. Identical concurrent finds share one run.
// Thread-safe; callbacks run on the caller's thread (FindDb hit) or a pool.
#ifndef CONVTUNE_SERVER_FIND_ENGINE_H_
#define CONVTUNE_SERVER_FIND_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "convtune/v1/records.pb.h"
#include "kernels/device.h"
#include "kernels/problem.h"
#include "server/benchmark.h"
#include "server/solver_registry.h"
#include "server/thread_pool.h"
#include "storage/records.h"

namespace convtune {

struct FindParams {
  // Largest workspace the caller offers; negative: no limit.
  int64_t workspace_limit = -1;
  // Ignore the FindDb, search every tunable solver's configs, re-store.
  bool exhaustive = false;
};

struct FindOutcome {
  v1::FindRecord record;
  bool from_db = false;
};

// Counters the tests read to see what a find did.
struct EngineCounters {
  int64_t finds = 0;         // Find calls
  int64_t db_hits = 0;       // answered from the FindDb
  int64_t tunings = 0;       // tuning runs started
  int64_t joined = 0;        // finds that joined a tuning already running
  int64_t plans_timed = 0;   // plan measurements (one per solver and config)
  int64_t solver_failures = 0;
  int64_t records_stored = 0;
  int64_t records_dropped = 0;  // corrupt records removed (DataLoss)
};

struct SolverReport {
  const Solver* solver = nullptr;
  absl::Status applicable;
  int64_t workspace_bytes = 0;
};

class FindEngine {
 public:
  struct Options {
    TimingOptions timing;
    // Configs tried per solver in an exhaustive find (the space is sampled
    // evenly beyond that).
    int max_configs_per_solver = 16;
  };

  // All references must outlive the engine. The engine times only on
  // `bench_queue`, which must have exactly one thread.
  FindEngine(Device& device, const SolverRegistry& registry, storage::Store& store,
             ThreadPool& compile_pool, ThreadPool& bench_queue, Options options);

  using Done = std::function<void(absl::StatusOr<FindOutcome>)>;

  // REQUIRES: ValidateProblem(p).ok(). Calls `done` exactly once: inline on a
  // FindDb hit, else from a pool thread when tuning ends. FailedPrecondition
  // when no solver applies (within the workspace limit), Internal when every
  // applicable solver failed.
  void Find(const ConvProblem& p, const FindParams& options, Done done);
  absl::StatusOr<FindOutcome> FindBlocking(const ConvProblem& p, const FindParams& options);

  // The largest workspace of any applicable solver (0 if none needs one).
  int64_t MaxWorkspace(const ConvProblem& p) const;
  // Every solver of this device's backend with its applicability.
  std::vector<SolverReport> Solvers(const ConvProblem* p) const;
  // The plan of `solver_id` for p: `config` if given, else the PerfDb's best,
  // else the default. NotFound for an unknown solver, FailedPrecondition if it
  // does not apply, InvalidArgument for a bad config.
  absl::StatusOr<v1::ExecutionPlan> Plan(const ConvProblem& p, uint32_t solver_id,
                                         const PerfConfig& config);

  // Runs `plan` with the given host tensors on the benchmark queue (so it
  // never overlaps a timing) and calls done with the time in ms. The output
  // role is written in place.
  struct HostRun {
    std::string x, w, y;
  };
  void Execute(v1::ExecutionPlan plan, std::shared_ptr<HostRun> tensors,
               std::function<void(absl::StatusOr<double>)> done);

  // Makes every later Find and Execute, and every tuning not yet timed,
  // finish with Unavailable. Idempotent.
  void Shutdown();

  const std::string& device_key() const { return device_key_; }
  EngineCounters counters() const;

 private:
  struct Candidate {
    const Solver* solver;
    std::vector<PerfConfig> configs;
    std::vector<v1::ExecutionPlan> plans;
    absl::Status status;
  };
  struct Tuning;

  absl::StatusOr<FindOutcome> Lookup(const ConvProblem& p, const FindParams& o);
  void StartTuning(const ConvProblem& p, const FindParams& o, const std::string& dedup_key);
  void TimeCandidates(std::shared_ptr<Tuning> t);
  absl::StatusOr<v1::FindRecord> RunTimings(Tuning& t);
  void Complete(const std::string& dedup_key, absl::StatusOr<FindOutcome> result);
  std::vector<PerfConfig> ConfigsToTry(const Solver& s, const ConvProblem& p, bool exhaustive);

  Device& device_;
  const SolverRegistry& registry_;
  storage::Store& store_;
  ThreadPool& compile_pool_;
  ThreadPool& bench_queue_;
  const Options options_;
  const std::string device_key_;
  storage::FindDb find_db_;
  storage::PerfDb perf_db_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Done>> in_flight_ ABSL_GUARDED_BY(mu_);
  EngineCounters counters_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> seed_{0x5eed};
  std::atomic<bool> stopping_{false};
};

// The FindDb key of a record tuned under a workspace limit that left solvers
// out; such a record is never the problem's unconstrained answer.
std::string LimitedProblemKey(absl::string_view problem_key, int64_t workspace_limit);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_ENGINE_H_
