// Immediate mode: a problem's solutions best first without timing anything,
// from the FindDb, or on a miss ranked by the heuristics over the applicable
// dynamic solvers that fit the workspace; the fallback answer of a FAST find;
// and workspace sizes. Never compiles, times or waits on tuning, so every
// call answers at once. Thread-safe.
#ifndef CONVTUNE_SERVER_IMMEDIATE_H_
#define CONVTUNE_SERVER_IMMEDIATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/problem.h"
#include "server/find_outcome.h"
#include "server/find_records.h"
#include "server/heuristics/heuristics.h"
#include "server/planner.h"

namespace convtune {

class Immediate {
 public:
  // References must outlive this object.
  Immediate(FindRecords& records, const Planner& planner,
            const Heuristics& heuristics);

  // The solutions of p best first within the workspace limit (negative:
  // none): measured ones from the user or system FindDb, else estimated.
  // On such a miss the miss handler is told (`background_tune` and the
  // caller's `tenant` are passed to it), and says whether it queued a find.
  // FailedPrecondition when no dynamic solver applies.
  absl::StatusOr<Solutions> GetSolutions(
      const ConvProblem& p, int64_t workspace_limit,
      std::optional<bool> background_tune = std::nullopt,
      const std::string& tenant = "");

  // Set once, before the first call.
  using MissHandler =
      std::function<bool(const ConvProblem&, int64_t workspace_limit,
                         std::optional<bool>, const std::string& tenant)>;
  void SetMissHandler(MissHandler handler) { on_miss_ = std::move(handler); }
  // A FAST find's answer once both FindDbs missed: the estimated ranking as
  // a record, never stored. FailedPrecondition as GetSolutions.
  absl::StatusOr<FindOutcome> Fallback(const ConvProblem& p,
                                       int64_t workspace_limit);

  // The largest workspace of any applicable solver (0 if none needs one).
  int64_t MaxWorkspace(const ConvProblem& p) const;
  // The workspace of one solution (solver id). Errors as
  // Planner::Applicable.
  absl::StatusOr<int64_t> SolutionWorkspace(const ConvProblem& p,
                                            uint32_t solution_id) const;

 private:
  // The heuristics' ranking of the applicable dynamic solvers.
  absl::StatusOr<Solutions> Rank(const ConvProblem& p,
                                 int64_t workspace_limit) const;

  FindRecords& records_;
  const Planner& planner_;
  const Heuristics& heuristics_;
  MissHandler on_miss_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_IMMEDIATE_H_
