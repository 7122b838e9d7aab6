#include "server/find_records.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/kill_point.h"
#include "common/status_macros.h"
#include "storage/keys.h"

namespace convtune {

v1::FindRecord Fitting(const v1::FindRecord& record, int64_t workspace_limit) {
  if (workspace_limit < 0) return record;
  v1::FindRecord out = record;
  out.clear_results();
  for (const v1::PerfResult& r : record.results()) {
    if (r.workspace_bytes() <= workspace_limit) *out.add_results() = r;
  }
  return out;
}

FindRecords::FindRecords(storage::Store& store, std::string device_key,
                         const SystemFindDb* system_db, Heuristics& heuristics,
                         ThreadPool& training_pool, Counters& counters)
    : device_key_(std::move(device_key)),
      find_db_(&store, device_key_),
      system_db_(system_db),
      heuristics_(heuristics),
      training_pool_(training_pool),
      counters_(counters) {}

absl::StatusOr<v1::FindRecord> FindRecords::GetUser(
    const std::string& problem_key) {
  absl::StatusOr<v1::FindRecord> r = find_db_.Get(problem_key);
  if (r.status().code() == absl::StatusCode::kDataLoss) {
    // The corrupt record is gone; this find re-tunes and stores a new one.
    std::cerr << "convtuned: dropped unreadable find record " << problem_key
              << ": " << r.status() << "\n";
    counters_.Add(&EngineCounters::records_dropped);
    return absl::NotFoundError(problem_key);
  }
  return r;
}

absl::StatusOr<FindOutcome> FindRecords::LookupUser(const ConvProblem& p,
                                                    int64_t limit) {
  const std::string key = ProblemKey(p);
  absl::StatusOr<v1::FindRecord> full = GetUser(key);
  if (full.ok()) {
    v1::FindRecord fitting = Fitting(*full, limit);
    if (fitting.results_size() > 0) {
      return FindOutcome{std::move(fitting), true, "user_db"};
    }
  } else if (!absl::IsNotFound(full.status())) {
    return full.status();
  }
  if (limit < 0) return absl::NotFoundError(key);
  ASSIGN_OR_RETURN(v1::FindRecord limited,
                   GetUser(storage::LimitedProblemKey(key, limit)));
  limited.set_problem_key(key);
  return FindOutcome{std::move(limited), true, "user_db"};
}

absl::StatusOr<FindOutcome> FindRecords::LookupSystem(const ConvProblem& p,
                                                      int64_t limit) const {
  if (system_db_ == nullptr) return absl::NotFoundError("no system FindDb");
  ASSIGN_OR_RETURN(v1::FindRecord record, system_db_->Get(ProblemKey(p)));
  v1::FindRecord fitting = Fitting(record, limit);
  if (fitting.results_size() == 0) {
    return absl::NotFoundError("nothing fits the workspace");
  }
  fitting.set_device_key(device_key_);
  return FindOutcome{std::move(fitting), true, "system_db"};
}

absl::StatusOr<FindOutcome> FindRecords::Lookup(const ConvProblem& p,
                                                int64_t limit) {
  absl::StatusOr<FindOutcome> user = LookupUser(p, limit);
  if (!user.ok() && absl::IsNotFound(user.status())) {
    return LookupSystem(p, limit);
  }
  return user;
}

absl::Status FindRecords::Store(const v1::FindRecord& record) {
  KillPoint("find_db.before_write");
  if (absl::Status put = find_db_.Put(record); !put.ok()) {
    counters_.Add(&EngineCounters::records_not_stored);
    return put;
  }
  KillPoint("find_db.after_write");
  counters_.Add(&EngineCounters::records_stored);
  heuristics_.NoteRecordStored(training_pool_);
  return absl::OkStatus();
}

}  // namespace convtune
