// The find engine: answers a find in one of the specification's modes, from
// the user FindDb, the system FindDb, the immediate-mode fallback, or by
// tuning: enumerating the applicable solvers, building their plans on the
// compile pool and timing them one at a time on the device's benchmark queue,
// then storing the ranked record. Identical concurrent finds share one run.
// Thread-safe; callbacks run on the caller's thread or a pool thread.
#ifndef CONVTUNE_SERVER_FIND_ENGINE_H_
#define CONVTUNE_SERVER_FIND_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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
#include "server/find_mode.h"
#include "server/heuristics/heuristics.h"
#include "server/solver_registry.h"
#include "server/system_db.h"
#include "server/thread_pool.h"
#include "storage/records.h"

namespace convtune {

class KernelBuilder;

struct FindParams {
  FindMode mode = kDefaultFindMode;
  // Largest workspace the caller offers; negative: no limit.
  int64_t workspace_limit = -1;
  // Ignore the FindDb, search every tunable solver's configs, re-store.
  bool exhaustive = false;
};

struct FindOutcome {
  v1::FindRecord record;
  bool from_db = false;
  // "user_db", "system_db", "tuned" or "fallback".
  std::string source;
  // Solvers whose plans this find timed (verification included), in order.
  std::vector<uint32_t> timed_solvers;
  // Whether this find wrote a record to the user FindDb.
  bool stored = false;
};

// Immediate mode's answer: solutions best first, never timed here.
struct Solutions {
  std::vector<v1::PerfResult> results;  // measured from a FindDb, else estimated
  std::string source;                   // "user_db", "system_db", "heuristic", "estimate"
  std::string fallback_reason;
};

// Counters the tests read to see what the engine did.
struct EngineCounters {
  int64_t finds = 0;          // Find calls
  int64_t db_hits = 0;        // answered from the user FindDb
  int64_t system_hits = 0;    // answered from the system FindDb (verified or not)
  int64_t fallbacks = 0;      // answered by the immediate-mode fallback (FAST)
  int64_t tunings = 0;        // tuning runs started
  int64_t joined = 0;         // finds that joined a tuning already running
  int64_t plans_timed = 0;    // plan measurements (one per solver and config)
  int64_t verifications = 0;  // system records re-timed (TRUST_VERIFY)
  int64_t verify_rejected = 0;
  int64_t solver_failures = 0;
  int64_t records_stored = 0;
  int64_t records_dropped = 0;  // corrupt records removed (DataLoss)
  // Where tuning time goes: milliseconds from a tuning's start until its
  // plans were built (kernels compiled, in parallel), and milliseconds its
  // timing held the device, summed over tunings.
  int64_t compile_stage_ms = 0;
  int64_t timing_stage_ms = 0;
  int64_t device_resets = 0;      // resets after a solver left the device unusable
  int64_t solvers_quarantined = 0;
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
    // Configs tried per solver in a config search (the space is sampled
    // evenly beyond that).
    int max_configs_per_solver = 16;
    // Configs re-measured at the end of a search, the best first.
    int remeasure_top = 3;
    // TRUST_VERIFY: a system record is kept when measured / recorded time is
    // at most 1 + verify_tolerance.
    double verify_tolerance = 0.15;
    // TRUST_VERIFY's bounds on tuning: total milliseconds, and configs in a
    // row without improvement before a solver's search stops.
    double max_tuning_ms = 30000;
    int patience = 4;
  };

  // All references must outlive the engine. The engine times only on
  // `bench_queue`, which must have exactly one thread. `system_db` may be null.
  // `kernel_builder` compiles the sources of GPU plans; null on the CPU.
  FindEngine(Device& device, const SolverRegistry& registry, storage::Store& store,
             ThreadPool& compile_pool, ThreadPool& bench_queue, Options options,
             const SystemFindDb* system_db = nullptr, KernelBuilder* kernel_builder = nullptr);
  ~FindEngine();

  using Done = std::function<void(absl::StatusOr<FindOutcome>)>;

  // REQUIRES: ValidateProblem(p).ok(). Calls `done` exactly once: inline when
  // no timing is needed, else from a pool thread. FailedPrecondition when no
  // solver applies (within the workspace limit), Internal when every
  // applicable solver failed, Unavailable after Shutdown.
  void Find(const ConvProblem& p, const FindParams& params, Done done);
  absl::StatusOr<FindOutcome> FindBlocking(const ConvProblem& p, const FindParams& params);

  // Immediate mode: the applicable solutions best first, from the user or
  // system FindDb, else ranked by the fallback over the applicable dynamic
  // solvers that fit the workspace. Never times; never blocks on tuning.
  // FailedPrecondition when no solver applies.
  absl::StatusOr<Solutions> GetSolutions(const ConvProblem& p, int64_t workspace_limit);

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

  // Trains the learned heuristic on this device's FindDb records, on the
  // compile pool; `done` gets the report (FailedPrecondition with too few
  // records).
  void TrainHeuristics(std::function<void(absl::StatusOr<TrainReport>)> done);

  // Makes every later Find and Execute, and every tuning not yet timed,
  // finish with Unavailable. Idempotent.
  void Shutdown();

  // A GPU kernel fault can leave the device unusable for this process (a
  // CUDA context is not re-created after an illegal address). When a solver
  // fails while timing and the device does not answer afterwards, the
  // engine resets it; the solver is quarantined for that problem on this
  // device key (stored, so a restarted daemon skips it too). If the reset
  // fails the device is lost: the tuning fails with Unavailable, the engine
  // shuts down and `handler` is called once with the reason, from the
  // benchmark queue. Set before the first Find.
  void SetDeviceLostHandler(std::function<void(const std::string&)> handler);
  // Solvers quarantined for `problem_key` on this device key.
  std::vector<uint32_t> Quarantined(const std::string& problem_key) const;

  const std::string& device_key() const { return device_key_; }
  const SystemFindDb* system_db() const { return system_db_; }
  Heuristics& heuristics() { return *heuristics_; }
  EngineCounters counters() const;

 private:
  struct Candidate {
    const Solver* solver;
    std::vector<PerfConfig> configs;
    std::vector<v1::ExecutionPlan> plans;
    absl::Status status;
  };
  struct Tuning;
  struct Timed {
    double ms;
    size_t config;
  };

  absl::StatusOr<FindOutcome> LookupUser(const ConvProblem& p, int64_t workspace_limit);
  absl::StatusOr<FindOutcome> LookupSystem(const ConvProblem& p, int64_t workspace_limit);
  FindOutcome Fallback(const ConvProblem& p, const Solutions& s);
  void Verify(const ConvProblem& p, const FindParams& params, FindOutcome system, Done done);
  void Tune(const ConvProblem& p, const FindParams& params, Done done);
  void StartTuning(std::shared_ptr<Tuning> t);
  void TimeCandidates(std::shared_ptr<Tuning> t);
  absl::StatusOr<v1::FindRecord> RunTimings(Tuning& t);
  absl::StatusOr<Timed> TimeCandidate(Tuning& t, BenchmarkSession& session, Candidate& c);
  void Complete(const std::string& dedup_key, absl::StatusOr<FindOutcome> result);
  std::vector<PerfConfig> ConfigsToTry(const Solver& s, const ConvProblem& p, bool search);
  // Applicable solvers (dynamic ones only, if asked) that fit the limit;
  // *over_limit (may be null) is set when the limit left one out.
  std::vector<const Solver*> Candidates(const ConvProblem& p, int64_t workspace_limit,
                                        bool dynamic_only, bool* over_limit) const;
  void Count(int64_t EngineCounters::*counter, int64_t n = 1);
  // Compiles a GPU plan's sources and stamps its steps with code object
  // hashes; nothing to do for a plan without sources.
  absl::Status BuildKernels(v1::ExecutionPlan* plan);
  // After `solver` failed on problem_key: false when the device still
  // answers, true when it was reset (buffers allocated before are gone) with
  // the solver quarantined, Unavailable when the device is lost.
  void LoadQuarantine();
  absl::StatusOr<bool> RecoverDevice(const std::string& problem_key, const Solver& solver,
                                     const absl::Status& failure);

  Device& device_;
  const SolverRegistry& registry_;
  storage::Store& store_;
  ThreadPool& compile_pool_;
  ThreadPool& bench_queue_;
  const Options options_;
  const SystemFindDb* const system_db_;
  KernelBuilder* const kernel_builder_;
  const std::string device_key_;
  storage::FindDb find_db_;
  storage::PerfDb perf_db_;
  std::unique_ptr<Heuristics> heuristics_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Done>> in_flight_ ABSL_GUARDED_BY(mu_);
  EngineCounters counters_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> seed_{0x5eed};
  std::atomic<bool> stopping_{false};
  std::function<void(const std::string&)> on_device_lost_;
  // Quarantined solver ids by problem key (this device key's, from the
  // store's meta column and added as solvers fault).
  absl::flat_hash_map<std::string, std::vector<uint32_t>> quarantine_ ABSL_GUARDED_BY(mu_);
};

// The FindDb key of a record tuned under a workspace limit that left solvers
// out; such a record is never the problem's unconstrained answer.
std::string LimitedProblemKey(absl::string_view problem_key, int64_t workspace_limit);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_ENGINE_H_
