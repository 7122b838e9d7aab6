// A find's parameters and its answer, and immediate mode's answer: the values
// the find engine, its lookups, the tuner and immediate mode pass between
// them. Plain values; thread-compatible.
#ifndef CONVTUNE_SERVER_FIND_OUTCOME_H_
#define CONVTUNE_SERVER_FIND_OUTCOME_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/vocabulary.h"
#include "convtune/v1/records.pb.h"
#include "convtune/v1/service.pb.h"

namespace convtune {

struct TuneProgress;  // server/tuner.h

struct FindParams {
  v1::FindMode mode = kDefaultFindMode;
  // Largest workspace the caller offers; negative: no limit.
  int64_t workspace_limit = -1;
  // Ignore the FindDb, search every tunable solver's configs, re-store.
  bool exhaustive = false;
  // Tune after all other work (see TuneRequest::background).
  bool background = false;
  // True once the caller no longer waits (its deadline passed, or it
  // cancelled); may be called from any thread until the find's `done` runs.
  // Empty: the caller always waits.
  std::function<bool()> gone;
  // The tenant the find is for (TuneCaller::tenant); "" for the daemon's own.
  std::string tenant;
  // Told how a tuning run gets on (TuneCaller::progress). Optional; not
  // called when the find is answered without tuning.
  std::function<void(const TuneProgress&)> progress;
  // The device a tuning run times on (TuneRequest::device); unset: the
  // daemon chooses.
  std::optional<int> device;
};

struct FindOutcome {
  v1::FindRecord record;
  bool from_db = false;
  // "user_db", "system_db", "tier", "tuned" or "fallback".
  std::string source;
  // Solvers whose plans this find timed (verification included), in order.
  std::vector<uint32_t> timed_solvers;
  // Whether this find wrote a record to the user FindDb, and if it tuned
  // and could not, why not.
  bool stored = false;
  std::string not_stored;
};

// Immediate mode's answer: solutions best first, never timed here.
// How far one answer can be trusted.
struct AnswerQuality {
  v1::Provenance provenance = v1::MEASURED;
  float confidence = 1;  // 0 (nothing measured supports it) to 1
};

struct Solutions {
  std::vector<v1::PerfResult>
      results;                         // measured from a FindDb, else estimated
  std::vector<AnswerQuality> quality;  // one per result
  std::string source;  // "user_db", "system_db", "heuristic", "estimate"
  std::string fallback_reason;
  // On a miss: whether a find of the problem was queued in the background,
  // so that a later call is answered from its measurement.
  bool tuning_queued = false;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_OUTCOME_H_
