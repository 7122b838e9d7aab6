// The find engine: answers a find in one of the specification's modes by
// lookup, then verification, then tuning, as the mode's find policy says.
// The user FindDb answers first, then the system FindDb (re-timed first in the
// TRUST_VERIFY modes); on a miss, FAST answers from immediate mode and the
// other modes tune. Thread-safe; `done` runs on the caller's thread when
// nothing needs timing, else on a pool thread.
#ifndef CONVTUNE_SERVER_FIND_ENGINE_H_
#define CONVTUNE_SERVER_FIND_ENGINE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "kernels/problem.h"
#include "server/counters.h"
#include "server/find_outcome.h"
#include "server/find_policy.h"
#include "server/find_records.h"
#include "server/immediate.h"
#include "server/stop_flag.h"
#include "server/tuner.h"

namespace convtune {

class FindEngine {
 public:
  struct Options {
    // TRUST_VERIFY: a system record is kept when measured / recorded time is
    // at most 1 + verify_tolerance.
    double verify_tolerance = 0.15;
  };

  // References must outlive the engine.
  FindEngine(FindRecords& records, Immediate& immediate, Tuner& tuner,
             Counters& counters, const StopFlag& stop, Options options);

  using Done = std::function<void(absl::StatusOr<FindOutcome>)>;

  // Calls `done` exactly once. InvalidArgument naming `mode` for a mode the
  // specification does not number, FailedPrecondition when no solver
  // applies (within the workspace limit), Internal when every applicable
  // solver failed, Unavailable when stopping. REQUIRES:
  // ValidateProblem(p).ok().
  void Find(const ConvProblem& p, const FindParams& params, Done done);
  absl::StatusOr<FindOutcome> FindBlocking(const ConvProblem& p,
                                           const FindParams& params);

 private:
  void Verify(const ConvProblem& p, const FindParams& params,
              FindOutcome system, Done done);
  void Tune(const ConvProblem& p, const FindParams& params, Done done);

  FindRecords& records_;
  Immediate& immediate_;
  Tuner& tuner_;
  Counters& counters_;
  const StopFlag& stop_;
  const Options options_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_ENGINE_H_
