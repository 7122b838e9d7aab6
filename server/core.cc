#include "server/core.h"

namespace convtune {

Core::Core(Device& device, const SolverRegistry& registry,
           storage::Store& store, ThreadPool& compile_pool,
           ThreadPool& timing_queue, Options options,
           const SystemFindDb* system_db, KernelBuilder* kernel_builder)
    : device_key_(device.info().Key()),
      compile_pool_(compile_pool),
      heuristics_(store, registry, device.info()),
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
            FindEngine::Options{options.verify_tolerance}) {}

}  // namespace convtune
