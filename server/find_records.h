// The find records of one device: the user FindDb (read and written), the
// records it holds for finds under a workspace limit, and the read-only system
// FindDb. Storing a record tells the heuristics, which retrain in the
// background as records arrive. Thread-safe.
#ifndef CONVTUNE_SERVER_FIND_RECORDS_H_
#define CONVTUNE_SERVER_FIND_RECORDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/problem.h"
#include "server/counters.h"
#include "server/find_outcome.h"
#include "server/heuristics/heuristics.h"
#include "server/system_db.h"
#include "server/thread_pool.h"
#include "storage/records.h"

namespace convtune {

// The results of `record` that fit the workspace limit (all when negative).
v1::FindRecord Fitting(const v1::FindRecord& record, int64_t workspace_limit);

class FindRecords {
 public:
  // References must outlive this object; `system_db` may be null. Background
  // training runs on `training_pool`.
  FindRecords(storage::Store& store, std::string device_key,
              const SystemFindDb* system_db, Heuristics& heuristics,
              ThreadPool& training_pool, Counters& counters);

  // The user FindDb's answer for p: the results of its record that fit the
  // workspace limit (negative: all), else the record tuned under exactly
  // this limit. NotFound on a miss; a corrupt record is dropped, counted and
  // answered as a miss. Other store errors as the store reports them.
  absl::StatusOr<FindOutcome> LookupUser(const ConvProblem& p,
                                         int64_t workspace_limit);
  // The system FindDb's record for p, the results that fit the limit.
  // NotFound on a miss or when nothing fits.
  absl::StatusOr<FindOutcome> LookupSystem(const ConvProblem& p,
                                           int64_t workspace_limit) const;
  // The user FindDb, else the system FindDb.
  absl::StatusOr<FindOutcome> Lookup(const ConvProblem& p,
                                     int64_t workspace_limit);

  // Stores a record this daemon measured (synced), counts it and tells the
  // heuristics. The store's error when it was not written.
  absl::Status Store(const v1::FindRecord& record);

  const std::string& device_key() const { return device_key_; }
  const SystemFindDb* system_db() const { return system_db_; }

 private:
  absl::StatusOr<v1::FindRecord> GetUser(const std::string& problem_key);

  const std::string device_key_;
  storage::FindDb find_db_;
  const SystemFindDb* const system_db_;
  Heuristics& heuristics_;
  ThreadPool& training_pool_;
  Counters& counters_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_RECORDS_H_
