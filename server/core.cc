#include "server/core.h"

#include "absl/strings/str_cat.h"

namespace convtune {

Core::Core(Device& device, const SolverRegistry& registry,
           storage::Store& store, ThreadPool& compile_pool,
           ThreadPool& timing_queue, Options options,
           const SystemFindDb* system_db, KernelBuilder* kernel_builder)
    : device_key_(device.info().Key()),
      device_info_(device.info()),
      registry_(registry),
      compile_pool_(compile_pool),
      heuristics_(store, registry, device.info(), system_db),
      records_(store, device_key_, system_db, heuristics_, compile_pool,
               counters_),
      quarantine_(store, device_key_),
      planner_(device.info(), registry, store, quarantine_, kernel_builder,
               compile_pool),
      timing_(device, timing_queue, quarantine_, counters_, stop_,
              TimingStage::Options{
                  .timing = options.timing,
                  .retiming = options.retiming,
                  .remeasure_top = options.remeasure_top,
                  .max_tuning_ms = options.max_tuning_ms,
                  .patience = options.patience,
                  .report_slower_than_ms = options.report_slower_than_ms}),
      tuner_(planner_, timing_, records_, store, compile_pool, counters_, stop_,
             Tuner::Options{options.max_configs_per_solver}),
      immediate_(records_, planner_, heuristics_),
      executor_(device, planner_, timing_queue, stop_),
      find_(records_, immediate_, tuner_, counters_, stop_,
            FindEngine::Options{options.verify_tolerance}),
      background_tuning_(options.background_tuning),
      max_background_tunings_(options.max_background_tunings) {
  immediate_.SetMissHandler(
      [this](const ConvProblem& p, int64_t limit, std::optional<bool> asked) {
        return TuneInBackground(p, limit, asked);
      });
  heuristics_.TrainIfMissing(compile_pool);
}

Core::~Core() {
  Shutdown();
  absl::MutexLock lock(&background_mu_);
  background_mu_.Await(absl::Condition(
      +[](absl::flat_hash_set<std::string>* pending) {
        return pending->empty();
      },
      &background_));
}

bool Core::TuneInBackground(const ConvProblem& p, int64_t workspace_limit,
                            std::optional<bool> asked) {
  if (!asked.value_or(background_tuning_) || stop_.stopped()) return false;
  const std::string key = absl::StrCat(ProblemKey(p), "|", workspace_limit);
  {
    absl::MutexLock lock(&background_mu_);
    if (background_.contains(key)) return true;
    if (background_failed_.contains(key)) return false;
    if (static_cast<int>(background_.size()) >= max_background_tunings_) {
      counters_.Add(&EngineCounters::background_refused);
      return false;
    }
    background_.insert(key);
  }
  counters_.Add(&EngineCounters::background_tunings);
  find_.Find(p,
             {.mode = v1::NORMAL,
              .workspace_limit = workspace_limit,
              .background = true},
             [this, key](absl::StatusOr<FindOutcome> found) {
               absl::MutexLock lock(&background_mu_);
               background_.erase(key);
               // A failure (every solver failing, the store refusing the
               // record) would repeat on every later miss.
               if (!found.ok() && !absl::IsUnavailable(found.status()) &&
                   background_failed_.size() < 4096) {
                 background_failed_.insert(key);
               }
             });
  return true;
}

}  // namespace convtune
