// The immediate-mode fallback of one device: the learned model when it
// applies, else the weighted-throughput estimate. Says which it used and why.
// Trains the learned model from the device's FindDb and the system FindDb
// (warm start: its records count as measurements of this device), stores it,
// and retrains it in the background as records arrive. Thread-safe: ranking
// copies a pointer to the current model and never waits for training.
#ifndef CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_
#define CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/device.h"
#include "server/heuristics/learned.h"
#include "server/heuristics/ranker.h"
#include "server/heuristics/wti.h"
#include "server/solver_registry.h"
#include "server/system_db.h"
#include "server/thread_pool.h"
#include "storage/store.h"

namespace convtune {

struct Ranking {
  // Those with measured support (LEARNED) best first, then the others.
  std::vector<Estimate> estimates;
  // "heuristic" when the first estimate is learned, else "estimate".
  std::string source;
  std::string fallback_reason;  // why the first estimate is not learned
};

struct TrainReport {
  int64_t records = 0;         // training records used, system ones included
  int64_t system_records = 0;  // of the system FindDb, not in the user's
  int64_t skipped = 0;  // workspace-limited, unparsable or unmeasured records
  double train_accuracy = 0;
  int64_t generation = 0;  // of the model now installed
  std::string kind;        // "knn"
};

class Heuristics {
 public:
  struct Options {
    LearnedOptions learned;
    // Records stored since the last training that start a background one.
    int retrain_every = 16;
  };

  // Loads this device's stored model; a corrupt one, or one of another
  // schema, is deleted and the heuristics run without a model until the next
  // training. `system_db` (may be null) must outlive this object.
  Heuristics(storage::Store& store, const SolverRegistry& registry,
             const DeviceInfo& device, const SystemFindDb* system_db = nullptr);
  Heuristics(storage::Store& store, const SolverRegistry& registry,
             const DeviceInfo& device, Options options,
             const SystemFindDb* system_db = nullptr);
  // Waits for a background training that is queued or running.
  ~Heuristics();

  // Ranks `candidates` (each applicable to p).
  Ranking Rank(const ConvProblem& p,
               const std::vector<const Solver*>& candidates) const;

  // OK when the learned model would rank p; FailedPrecondition with the reason.
  absl::Status IsApplicable(const ConvProblem& p) const;

  // Trains on every unconstrained FindRecord of this device and of the system
  // FindDb (a user record wins over a system one of the same problem), stores
  // the model synced and installs it. FailedPrecondition with fewer usable
  // records than options.learned.min_records; store errors as the store reports
  // them.
  absl::StatusOr<TrainReport> Train();
  // Train() on `pool`; `done` gets its report there. The same REQUIRES as
  // NoteRecordStored.
  void TrainOn(ThreadPool& pool,
               std::function<void(absl::StatusOr<TrainReport>)> done);

  // Called after each stored FindRecord. Once retrain_every records arrived
  // since the last training and none is running, schedules Train() on pool.
  // REQUIRES: pool runs its queued tasks before this object is destroyed, or
  // outlives it.
  void NoteRecordStored(ThreadPool& pool);
  // When no model is installed, schedules Train() on pool: a daemon that
  // starts on records (or a system FindDb) but no model of this schema
  // learns from them at once. The same REQUIRES as NoteRecordStored.
  void TrainIfMissing(ThreadPool& pool);

  // The installed model (nullptr if none).
  std::shared_ptr<const LearnedRanker> model() const;
  // Models installed so far (stored one loaded at construction included).
  int64_t generation() const;
  // Background trainings finished (successful or not).
  int64_t background_trainings() const;

  const WtiEstimator& wti() const { return wti_; }

 private:
  void Load();
  // Schedules Train() on pool unless one is running.
  void TrainInBackground(ThreadPool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Install(std::shared_ptr<const LearnedRanker> model);

  storage::Store& store_;
  const SolverRegistry& registry_;
  const std::string device_key_;
  const Options options_;
  const SystemFindDb* const system_db_;
  WtiEstimator wti_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const LearnedRanker> model_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t new_records_ ABSL_GUARDED_BY(mu_) = 0;
  bool training_ ABSL_GUARDED_BY(mu_) = false;
  int64_t background_trainings_ ABSL_GUARDED_BY(mu_) = 0;
  // Serializes Train() calls (foreground and background).
  absl::Mutex train_mu_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_HEURISTICS_H_
