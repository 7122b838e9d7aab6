#include "server/core.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {

namespace {

// An in-process measurer for each lane given none (null for the others).
std::vector<std::unique_ptr<Measurer>> OwnMeasurers(
    const std::vector<Core::DeviceLane>& devices) {
  std::vector<std::unique_ptr<Measurer>> out;
  for (const Core::DeviceLane& d : devices) {
    out.push_back(d.measurer == nullptr
                      ? std::make_unique<InProcessMeasurer>(*d.device)
                      : nullptr);
  }
  return out;
}

std::vector<TimingLanes::Lane> Lanes(
    const std::vector<Core::DeviceLane>& devices,
    const std::vector<std::unique_ptr<Measurer>>& own) {
  std::vector<TimingLanes::Lane> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back({.ordinal = devices[i].ordinal,
                   .measurer = devices[i].measurer != nullptr
                                   ? devices[i].measurer
                                   : own[i].get(),
                   .queue = devices[i].timing_queue});
  }
  return out;
}

}  // namespace

Core::Core(std::vector<DeviceLane> devices, const SolverRegistry& registry,
           storage::Store& store, ThreadPool& compile_pool, Options options,
           const SystemFindDb* system_db, KernelBuilder* kernel_builder)
    : device_key_(devices.front().device->info().Key()),
      device_info_(devices.front().device->info()),
      registry_(registry),
      compile_pool_(compile_pool),
      own_quotas_(options.shared_quotas == nullptr
                      ? std::make_unique<TuningQuotas>(options.quotas)
                      : nullptr),
      quotas_(options.shared_quotas != nullptr ? options.shared_quotas
                                               : own_quotas_.get()),
      heuristics_(store, registry, device_info_, system_db),
      records_(store, device_key_, system_db, heuristics_, compile_pool,
               counters_),
      quarantine_(store, device_key_),
      planner_(device_info_, registry, store, quarantine_, kernel_builder,
               compile_pool),
      own_measurers_(OwnMeasurers(devices)),
      timing_(Lanes(devices, own_measurers_), device_info_, quarantine_,
              counters_, stop_,
              TimingStage::Options{
                  .timing = options.timing,
                  .retiming = options.retiming,
                  .remeasure_top = options.remeasure_top,
                  .max_tuning_ms = options.max_tuning_ms,
                  .patience = options.patience,
                  .report_slower_than_ms = options.report_slower_than_ms,
                  .bound_floor_ms = options.bound_floor_ms,
                  .bound_factor = options.bound_factor},
              std::chrono::milliseconds(
                  static_cast<int64_t>(options.device_in_use_ms))),
      tuner_(planner_, timing_, records_, store, compile_pool, counters_, stop_,
             Tuner::Options{options.max_configs_per_solver}, quotas_),
      immediate_(records_, planner_, heuristics_),
      find_(records_, immediate_, tuner_, counters_, stop_,
            FindEngine::Options{options.verify_tolerance}),
      background_tuning_(options.background_tuning),
      max_background_tunings_(options.max_background_tunings) {
  immediate_.SetMissHandler([this](const ConvProblem& p, int64_t limit,
                                   std::optional<bool> asked,
                                   const std::string& tenant) {
    return TuneInBackground(p, limit, asked, tenant);
  });
  if (kernel_builder != nullptr) {
    // A lost device is loaded no more kernels, so that builds for the
    // devices left do not fail on it.
    std::vector<std::pair<int, Device*>> by_ordinal;
    for (const DeviceLane& d : devices)
      by_ordinal.emplace_back(d.ordinal, d.device);
    timing_.SetLaneLostHandler([kernel_builder, by_ordinal](int ordinal) {
      for (const auto& [o, device] : by_ordinal) {
        if (o == ordinal) kernel_builder->DropDevice(device);
      }
    });
  }
  for (const DeviceLane& d : devices) {
    ordinals_.push_back(d.ordinal);
    executors_.push_back(std::make_unique<RemoteExecutor>(
        *d.device, planner_, *d.timing_queue, stop_));
  }
  heuristics_.TrainIfMissing(compile_pool);
}

RemoteExecutor& Core::executor() {
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (timing_.Usable(ordinals_[i])) return *executors_[i];
  }
  return *executors_.front();
}

absl::StatusOr<RemoteExecutor*> Core::executor(int ordinal) {
  // Unavailable for a device that was lost.
  RETURN_IF_ERROR(timing_.CheckDevice(ordinal));
  for (size_t i = 0; i < ordinals_.size(); ++i) {
    if (ordinals_[i] == ordinal) return executors_[i].get();
  }
  RETURN_IF_ERROR(timing_.CheckDevice(ordinal));
  return absl::InternalError("device ordinals out of step");
}

void Core::StartTier(FindTier::Options options, const std::string& scope_key,
                     std::string version, FindTier::LocalRecords local) {
  tier_ = std::make_unique<FindTier>(std::move(options), scope_key,
                                     std::move(version), std::move(local),
                                     counters_);
  tuner_.SetTier(tier_.get());
  // Prefill jobs of the fleet: each a background find, whose record the
  // tier gets as any other's.
  tier_->StartJobs([this](const std::string& key, int64_t limit,
                          std::function<void(absl::Status)> done) {
    absl::StatusOr<ConvProblem> p = ParseProblemKey(key);
    if (!p.ok()) return done(p.status());
    if (absl::Status valid = ValidateProblem(*p); !valid.ok()) {
      return done(valid);
    }
    find_.Find(*p,
               {.mode = v1::NORMAL,
                .workspace_limit = limit,
                .background = true,
                .tenant = ""},
               [done = std::move(done)](absl::StatusOr<FindOutcome> found) {
                 done(found.status());
               });
  });
}

Core::~Core() {
  Shutdown();
  absl::MutexLock lock(&background_mu_);
  background_mu_.Await(absl::Condition(
      +[](Core* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->background_mu_) {
        return c->background_.empty() && c->prefill_pending_ == 0;
      },
      this));
}

bool Core::TuneInBackground(const ConvProblem& p, int64_t workspace_limit,
                            std::optional<bool> asked,
                            const std::string& tenant) {
  if (!asked.value_or(background_tuning_) || stop_.stopped()) return false;
  const std::string key = absl::StrCat(ProblemKey(p), "|", workspace_limit);
  TuningQuotas::Ticket ticket;
  {
    absl::MutexLock lock(&background_mu_);
    if (background_.contains(key)) return true;
    if (background_failed_.contains(key)) return false;
    absl::StatusOr<TuningQuotas::Ticket> admitted =
        quotas_->AdmitBackground(tenant);
    if (static_cast<int>(background_.size()) >= max_background_tunings_ ||
        !admitted.ok()) {
      counters_.Add(&EngineCounters::background_refused);
      return false;
    }
    ticket = *std::move(admitted);
    background_.insert(key);
  }
  counters_.Add(&EngineCounters::background_tunings);
  find_.Find(p,
             {.mode = v1::NORMAL,
              .workspace_limit = workspace_limit,
              .background = true,
              .tenant = tenant},
             [this, key, ticket](absl::StatusOr<FindOutcome> found) {
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

absl::StatusOr<Core::PrefillOutcome> Core::Prefill(
    const std::string& tenant, const std::vector<ConvProblem>& ps,
    int64_t workspace_limit) {
  RETURN_IF_ERROR(stop_.Check());
  PrefillOutcome out;
  for (const ConvProblem& p : ps) {
    if (records_.Lookup(p, workspace_limit).ok()) {
      ++out.already_tuned;
      ++out.taken;
      continue;
    }
    absl::StatusOr<TuningQuotas::Ticket> ticket =
        quotas_->AdmitBackground(tenant);
    if (!ticket.ok()) {
      out.refusal = ticket.status();
      break;
    }
    ++out.queued;
    ++out.taken;
    quotas_->NotePrefill(tenant);
    {
      absl::MutexLock lock(&background_mu_);
      ++prefill_pending_;
    }
    find_.Find(p,
               {.mode = v1::NORMAL,
                .workspace_limit = workspace_limit,
                .background = true,
                .tenant = tenant},
               [this, tenant, ticket = *std::move(ticket)](
                   absl::StatusOr<FindOutcome> found) {
                 quotas_->NotePrefillDone(tenant, found.ok());
                 absl::MutexLock lock(&background_mu_);
                 --prefill_pending_;
               });
  }
  return out;
}

}  // namespace convtune
