// Everything convtuned answers with, wired once, in dependency order, for the
// daemon, the tests and the benchmarks: the find records, quarantine and
// heuristics of one device, the planner, the timing stage and tuner, immediate
// mode, remote execute, and the find engine over them. It holds no logic of
// its own. Members are declared so that teardown runs in reverse dependency
// order. Thread-safe.
#ifndef CONVTUNE_SERVER_CORE_H_
#define CONVTUNE_SERVER_CORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "kernels/device.h"
#include "server/benchmark.h"
#include "server/counters.h"
#include "server/find_engine.h"
#include "server/find_records.h"
#include "server/find_tier.h"
#include "server/heuristics/heuristics.h"
#include "server/immediate.h"
#include "server/kernel_builder.h"
#include "server/measurer.h"
#include "server/planner.h"
#include "server/quarantine.h"
#include "server/remote_execute.h"
#include "server/solver_registry.h"
#include "server/stop_flag.h"
#include "server/system_db.h"
#include "server/tenant_limits.h"
#include "server/thread_pool.h"
#include "server/timing_lanes.h"
#include "server/timing_stage.h"
#include "server/tuner.h"
#include "storage/store.h"

namespace convtune {

class Core {
 public:
  struct Options {
    TimingOptions timing;
    // The side-by-side re-timing of the plans nearest a find's best.
    TimingOptions retiming = TimingStage::Retiming();
    // Configs tried per solver in a config search.
    int max_configs_per_solver = 16;
    // Plans timed again side by side at the end of a tuning run: the fastest
    // within TimingOptions::hopeless_factor of the best, whatever their
    // solver, at most this many.
    int remeasure_top = 4;
    // TRUST_VERIFY: a system record is kept when measured / recorded time is
    // at most 1 + verify_tolerance.
    double verify_tolerance = 0.15;
    // TRUST_VERIFY's bounds on tuning: total milliseconds, and configs in a
    // row without improvement before a solver's search stops.
    double max_tuning_ms = 30000;
    int patience = 4;
    // A solver whose configs took longer than this to time is reported on
    // stderr. 0: never.
    double report_slower_than_ms = 2000;
    // Each measurement's wall-time bound (TimingStage::Options).
    double bound_floor_ms = 20000;
    double bound_factor = 50;
    // An immediate-mode call that misses both FindDbs queues a NORMAL find
    // of its problem at the lowest priority, unless the call says not to
    // (or, when this is false, unless it asks). At most this many wait or
    // run at once; a miss beyond them queues nothing.
    bool background_tuning = true;
    int max_background_tunings = 64;
    // Per-tenant limits on tuning.
    TuningQuotas::Limits quotas;
    // Set: the tenants' usage is counted there, against its limits (every
    // core of a daemon shares one, so that a tenant's limits hold across
    // device keys); null: the core keeps its own, with `quotas`.
    TuningQuotas* shared_quotas = nullptr;
    // How long a device a client said it runs on is left to it by tuning
    // (TimingLanes::MarkInUse).
    double device_in_use_ms = 10000;
  };

  // One device of the core's device key: tuning times on it, clients run
  // on it by its ordinal.
  struct DeviceLane {
    int ordinal = 0;
    Device* device = nullptr;
    // Timing and Execute calls on the device run only here: exactly one
    // thread.
    ThreadPool* timing_queue = nullptr;
    // Measures candidates (a worker process, in convtuned); null: on
    // `device`, in this process.
    Measurer* measurer = nullptr;
  };

  // All references must outlive the core. Each lane's timing runs only on
  // its queue; plans are built and the heuristics trained on
  // `compile_pool`. `system_db` may be null; `kernel_builder` compiles GPU
  // plans' sources, null on the CPU. REQUIRES: `devices` non-empty, every
  // device of one key (DeviceInfo::Key), ordinals distinct.
  Core(std::vector<DeviceLane> devices, const SolverRegistry& registry,
       storage::Store& store, ThreadPool& compile_pool, Options options,
       const SystemFindDb* system_db = nullptr,
       KernelBuilder* kernel_builder = nullptr);
  // One device, ordinal 0.
  Core(Device& device, const SolverRegistry& registry, storage::Store& store,
       ThreadPool& compile_pool, ThreadPool& timing_queue, Options options,
       const SystemFindDb* system_db = nullptr,
       KernelBuilder* kernel_builder = nullptr, Measurer* measurer = nullptr)
      : Core({{.ordinal = 0,
               .device = &device,
               .timing_queue = &timing_queue,
               .measurer = measurer}},
             registry, store, compile_pool, std::move(options), system_db,
             kernel_builder) {}
  // Shuts down and waits for the background and prefill finds still queued,
  // which the pools (still running) end as Unavailable.
  ~Core();

  FindEngine& find() { return find_; }
  Immediate& immediate() { return immediate_; }
  const Planner& planner() const { return planner_; }
  // The executor of the first device not lost (of the first device when
  // every one was: the core has stopped then).
  RemoteExecutor& executor();
  // That of device `ordinal`; InvalidArgument naming the devices there are.
  absl::StatusOr<RemoteExecutor*> executor(int ordinal);
  // The lanes tuning times on.
  TimingLanes& timing() { return timing_; }
  Heuristics& heuristics() { return heuristics_; }
  FindRecords& records() { return records_; }
  const Quarantine& quarantine() const { return quarantine_; }
  const std::string& device_key() const { return device_key_; }
  // The ordinals of its devices, in order.
  const std::vector<int>& ordinals() const { return ordinals_; }
  const DeviceInfo& device_info() const { return device_info_; }
  const SolverRegistry& registry() const { return registry_; }
  EngineCounters counters() const { return counters_.Snapshot(); }
  // Tuning runs started and not finished.
  int64_t tunings_in_flight() { return tuner_.runs_in_flight(); }
  TuningQuotas& quotas() { return *quotas_; }

  // What Prefill did with a list, in the list's order: the first `taken`
  // problems were queued or found tuned already; the rest were not looked
  // at, as the tenant's background jobs reached limits.tenant_tunings_queued
  // (`refusal` says so).
  struct PrefillOutcome {
    int queued = 0;
    int already_tuned = 0;
    int taken = 0;
    absl::Status refusal;
  };
  // Queues a NORMAL find of each problem not in the FindDb at background
  // priority (after every interactive find) for `tenant`, as far as the
  // tenant's limit on queued jobs allows. Unavailable when stopping.
  // REQUIRES: each problem valid.
  absl::StatusOr<PrefillOutcome> Prefill(const std::string& tenant,
                                         const std::vector<ConvProblem>& ps,
                                         int64_t workspace_limit);

  // See TimingLanes::SetDeviceLostHandler: called when the key's last
  // device is lost (the core then stops). Set before the first find.
  void SetDeviceLostHandler(std::function<void(const std::string&)> handler) {
    timing_.SetDeviceLostHandler(std::move(handler));
  }
  // Trains the learned heuristic on the compile pool; Unavailable when
  // stopping. See Heuristics::Train.
  void TrainHeuristics(std::function<void(absl::StatusOr<TrainReport>)> done) {
    if (absl::Status s = stop_.Check(); !s.ok()) return done(s);
    heuristics_.TrainOn(compile_pool_, std::move(done));
  }
  // Makes every later find, remeasure and execute, and every tuning not yet
  // timed, finish with Unavailable. Idempotent.
  void Shutdown() {
    stop_.Stop();
    // Runs waiting on another daemon's lease end now.
    if (tier_ != nullptr) tier_->Shutdown();
  }

  // Shares find records with the fleet through the cluster tier: `scope_key`
  // is the tier's device key, `local` lists this device's FindDb records
  // (published again when the tier has lost its data). Call once, before
  // the first find. REQUIRES: FindTier::Validate(options) is OK.
  void StartTier(FindTier::Options options, const std::string& scope_key,
                 std::string version, FindTier::LocalRecords local);
  // Null without a tier.
  FindTier* tier() { return tier_.get(); }

 private:
  // Immediate mode's miss handler: queues a background find of p.
  bool TuneInBackground(const ConvProblem& p, int64_t workspace_limit,
                        std::optional<bool> asked, const std::string& tenant);

  const std::string device_key_;
  const DeviceInfo& device_info_;
  const SolverRegistry& registry_;
  ThreadPool& compile_pool_;
  StopFlag stop_;
  Counters counters_;
  // Outlives the tuner, which publishes to it.
  std::unique_ptr<FindTier> tier_;
  std::unique_ptr<TuningQuotas> own_quotas_;  // without shared_quotas
  TuningQuotas* const quotas_;
  Heuristics heuristics_;
  FindRecords records_;
  Quarantine quarantine_;
  Planner planner_;
  // In-process measurement of the lanes given no measurer.
  std::vector<std::unique_ptr<Measurer>> own_measurers_;
  TimingLanes timing_;
  Tuner tuner_;
  Immediate immediate_;
  std::vector<int> ordinals_;
  std::vector<std::unique_ptr<RemoteExecutor>> executors_;  // per device
  FindEngine find_;
  const bool background_tuning_;
  const int max_background_tunings_;
  absl::Mutex background_mu_;
  // Problem keys (with their limit) of the background finds not yet done.
  absl::flat_hash_set<std::string> background_ ABSL_GUARDED_BY(background_mu_);
  // Those whose background find failed: not queued again (bounded).
  absl::flat_hash_set<std::string> background_failed_
      ABSL_GUARDED_BY(background_mu_);
  // Prefill finds not yet done.
  int64_t prefill_pending_ ABSL_GUARDED_BY(background_mu_) = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_CORE_H_
