// Ranking solvers for a problem without timing them: the immediate-mode
// fallbacks on a FindDb miss. Two implementations: the weighted-throughput
// estimate (wti.h) and the learned model (learned.h), which corrects it with
// the device's measurements. Implementations are
// immutable after construction and thread-safe.
#ifndef CONVTUNE_SERVER_HEURISTICS_RANKER_H_
#define CONVTUNE_SERVER_HEURISTICS_RANKER_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/vocabulary.h"
#include "convtune/v1/records.pb.h"
#include "kernels/problem.h"
#include "server/solver.h"

namespace convtune {

struct Estimate {
  const Solver* solver = nullptr;
  double time_ms = 0;
  v1::Provenance provenance = v1::ESTIMATED;
  // 0 (nothing measured supports it) to 1 (measured, or predicted from close
  // and consistent measurements).
  float confidence = 0;
  // Learned estimates: log2 of how far this solver was from the fastest at
  // the measurements it was predicted from (0: it was the fastest).
  float regret = 0;
};

class Ranker {
 public:
  virtual ~Ranker() = default;

  // "heuristic" (the learned model) or "estimate" (weighted throughput).
  virtual absl::string_view name() const = 0;

  // OK when Rank can be trusted for p; FailedPrecondition saying why not
  // (no model for this device, a problem outside what it was trained on, ...).
  virtual absl::Status IsApplicable(const ConvProblem& p) const = 0;

  // An estimated time for every candidate, best first (the estimate: by
  // time; the learned model: see LearnedRanker::Rank).
  // REQUIRES: every candidate is applicable to p.
  virtual std::vector<Estimate> Rank(
      const ConvProblem& p,
      const std::vector<const Solver*>& candidates) const = 0;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_HEURISTICS_RANKER_H_
