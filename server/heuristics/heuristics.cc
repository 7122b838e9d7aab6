#include "server/heuristics/heuristics.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/records.h"

namespace convtune {

Heuristics::Heuristics(storage::Store& store, const SolverRegistry& registry,
                       const DeviceInfo& device, const SystemFindDb* system_db)
    : Heuristics(store, registry, device, Options(), system_db) {}

Heuristics::Heuristics(storage::Store& store, const SolverRegistry& registry,
                       const DeviceInfo& device, Options options,
                       const SystemFindDb* system_db)
    : store_(store),
      registry_(registry),
      device_key_(device.Key()),
      options_(options),
      system_db_(system_db),
      wti_(device) {
  Load();
}

Heuristics::~Heuristics() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](bool* training) { return !*training; }, &training_));
}

void Heuristics::Load() {
  storage::Meta meta(&store_);
  const std::string key = storage::HeuristicModelName(device_key_);
  // Meta::Get deletes an unreadable meta record itself.
  absl::StatusOr<std::string> encoded = meta.Get(key);
  if (!encoded.ok()) return;
  std::string bytes;
  v1::HeuristicModel model;
  absl::StatusOr<std::unique_ptr<LearnedRanker>> ranker = absl::DataLossError(
      "heuristic model: not base64 or not a HeuristicModel");
  if (absl::Base64Unescape(*encoded, &bytes) && model.ParseFromString(bytes)) {
    if (model.device_key() != device_key_) {
      ranker = absl::DataLossError("heuristic model: of another device");
    } else {
      ranker = LearnedRanker::FromProto(std::move(model), registry_, wti_,
                                        options_.learned);
    }
  }
  if (!ranker.ok()) {
    // The next training replaces it; until then the estimate answers.
    (void)store_.Delete(storage::Column::kMeta, key);
    return;
  }
  Install(std::shared_ptr<const LearnedRanker>(*std::move(ranker)));
}

void Heuristics::Install(std::shared_ptr<const LearnedRanker> model) {
  absl::MutexLock lock(&mu_);
  model_ = std::move(model);
  ++generation_;
}

std::shared_ptr<const LearnedRanker> Heuristics::model() const {
  absl::MutexLock lock(&mu_);
  return model_;
}

int64_t Heuristics::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

int64_t Heuristics::background_trainings() const {
  absl::MutexLock lock(&mu_);
  return background_trainings_;
}

absl::Status Heuristics::IsApplicable(const ConvProblem& p) const {
  std::shared_ptr<const LearnedRanker> m = model();
  if (m == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("heuristic: no learned model for ", device_key_));
  }
  return m->IsApplicable(p);
}

Ranking Heuristics::Rank(const ConvProblem& p,
                         const std::vector<const Solver*>& candidates) const {
  std::shared_ptr<const LearnedRanker> m = model();
  Ranking r;
  if (m == nullptr) {
    r.estimates = wti_.Rank(p, candidates);
    r.source = std::string(wti_.name());
    r.fallback_reason =
        absl::StrCat("heuristic: no learned model for ", device_key_);
    return r;
  }
  absl::Status applicable = m->IsApplicable(p);
  // A model of too few records is not used at all; one that has not seen
  // p's class still knows each solver's device-wide rate.
  r.estimates =
      applicable.ok() || m->record_count() >= options_.learned.min_records
          ? m->Rank(p, candidates)
          : wti_.Rank(p, candidates);
  const bool learned =
      !r.estimates.empty() && r.estimates[0].provenance == v1::LEARNED;
  r.source = std::string(learned ? m->name() : wti_.name());
  if (!learned) {
    r.fallback_reason =
        applicable.ok()
            ? absl::StrCat("heuristic: ",
                           r.estimates.empty() ? "no candidate"
                                               : r.estimates[0].solver->name(),
                           " was never measured on class ", ProblemClassName(p))
            : std::string(applicable.message());
  }
  return r;
}

absl::StatusOr<TrainReport> Heuristics::Train() {
  absl::MutexLock train_lock(&train_mu_);
  int64_t seen_before = 0;
  {
    absl::MutexLock lock(&mu_);
    seen_before = new_records_;
  }
  storage::FindDb db(&store_, device_key_);
  ASSIGN_OR_RETURN(std::vector<std::string> keys, db.ProblemKeys());
  std::vector<TrainingSample> samples;
  TrainReport report;
  absl::flat_hash_set<std::string> user_keys;
  for (const std::string& key : keys) {
    absl::StatusOr<v1::FindRecord> record = db.Get(key);
    absl::StatusOr<TrainingSample> sample =
        record.ok() ? SampleFromRecord(*record)
                    : absl::StatusOr<TrainingSample>(record.status());
    if (!sample.ok()) {
      ++report.skipped;
      continue;
    }
    user_keys.insert(key);
    samples.push_back(*std::move(sample));
  }
  if (system_db_ != nullptr) {
    for (const auto& [key, record] : system_db_->records()) {
      if (user_keys.contains(key)) continue;
      absl::StatusOr<TrainingSample> sample = SampleFromRecord(record);
      if (!sample.ok()) {
        ++report.skipped;
        continue;
      }
      ++report.system_records;
      samples.push_back(*std::move(sample));
    }
  }
  if (static_cast<int>(samples.size()) < options_.learned.min_records) {
    return absl::FailedPreconditionError(absl::StrCat(
        "heuristic: ", samples.size(), " usable find records on ", device_key_,
        ", training needs at least ", options_.learned.min_records));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LearnedRanker> ranker,
                   LearnedRanker::Train(samples, device_key_, registry_, wti_,
                                        options_.learned));
  ranker->SetSystemRecords(report.system_records);
  RETURN_IF_ERROR(storage::Meta(&store_).Put(
      storage::HeuristicModelName(device_key_),
      absl::Base64Escape(ranker->proto().SerializeAsString())));
  report.records = static_cast<int64_t>(samples.size());
  report.train_accuracy = ranker->proto().train_accuracy();
  report.kind = ranker->proto().kind();
  Install(std::shared_ptr<const LearnedRanker>(std::move(ranker)));
  absl::MutexLock lock(&mu_);
  // Records noted while this training read the FindDb count toward the next.
  new_records_ = std::max<int64_t>(0, new_records_ - seen_before);
  report.generation = generation_;
  return report;
}

void Heuristics::TrainOn(
    ThreadPool& pool, std::function<void(absl::StatusOr<TrainReport>)> done) {
  pool.Schedule([this, done = std::move(done)] { done(Train()); });
}

void Heuristics::NoteRecordStored(ThreadPool& pool) {
  absl::MutexLock lock(&mu_);
  ++new_records_;
  if (new_records_ >= options_.retrain_every) TrainInBackground(pool);
}

void Heuristics::TrainIfMissing(ThreadPool& pool) {
  absl::MutexLock lock(&mu_);
  if (model_ == nullptr) TrainInBackground(pool);
}

void Heuristics::TrainInBackground(ThreadPool& pool) {
  if (training_) return;
  training_ = true;
  pool.Schedule([this] {
    // Failure (too few records, a store error) waits for more records.
    (void)Train();
    absl::MutexLock lock(&mu_);
    training_ = false;
    ++background_trainings_;
  });
}

}  // namespace convtune
