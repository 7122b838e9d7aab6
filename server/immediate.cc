#include "server/immediate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {

Immediate::Immediate(FindRecords& records, const Planner& planner,
                     const Heuristics& heuristics)
    : records_(records), planner_(planner), heuristics_(heuristics) {}

absl::StatusOr<Solutions> Immediate::GetSolutions(
    const ConvProblem& p, int64_t limit, std::optional<bool> background_tune,
    const std::string& tenant) {
  absl::StatusOr<FindOutcome> hit = records_.Lookup(p, limit);
  if (hit.ok()) {
    Solutions out;
    out.results.assign(hit->record.results().begin(),
                       hit->record.results().end());
    out.quality.resize(out.results.size());
    out.source = hit->source;
    return out;
  }
  if (!absl::IsNotFound(hit.status())) return hit.status();
  ASSIGN_OR_RETURN(Solutions ranked, Rank(p, limit));
  if (on_miss_)
    ranked.tuning_queued = on_miss_(p, limit, background_tune, tenant);
  return ranked;
}

absl::StatusOr<Solutions> Immediate::Rank(const ConvProblem& p,
                                          int64_t limit) const {
  // The plan of an immediate solution uses the tuned (or default) config:
  // that one must fit.
  std::vector<const Solver*> candidates =
      planner_.Candidates(p, limit, /*dynamic_only=*/true, nullptr);
  if (limit >= 0) {
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Solver* s) {
                                      return planner_.PlanWorkspace(*s, p) >
                                             limit;
                                    }),
                     candidates.end());
  }
  if (candidates.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no dynamic solver on ", records_.device_key(),
                     " applies to ", ProblemKey(p), WithinWorkspace(limit)));
  }
  Ranking ranking = heuristics_.Rank(p, candidates);
  Solutions out;
  for (const Estimate& e : ranking.estimates) {
    v1::PerfResult r = PerfResultOf(*e.solver, p, e.time_ms,
                                    /*measured=*/false);
    if (e.solver->workspace_depends_on_config()) {
      r.set_workspace_bytes(planner_.PlanWorkspace(*e.solver, p));
    }
    out.results.push_back(std::move(r));
    out.quality.push_back({e.provenance, e.confidence});
  }
  out.source = ranking.source;
  out.fallback_reason = ranking.fallback_reason;
  return out;
}

absl::StatusOr<FindOutcome> Immediate::Fallback(const ConvProblem& p,
                                                int64_t limit) {
  ASSIGN_OR_RETURN(Solutions s, Rank(p, limit));
  FindOutcome out;
  out.record.set_device_key(records_.device_key());
  out.record.set_problem_key(ProblemKey(p));
  for (const v1::PerfResult& r : s.results) *out.record.add_results() = r;
  out.source = "fallback";
  return out;
}

int64_t Immediate::MaxWorkspace(const ConvProblem& p) const {
  int64_t ws = 0;
  for (const Solver* s : planner_.Candidates(p, -1, false, nullptr)) {
    // The config a plan would use now, and every one a find may time.
    ws = std::max(ws, planner_.PlanWorkspace(*s, p));
    if (!s->workspace_depends_on_config()) continue;
    for (const PerfConfig& c : s->FindConfigs(p)) {
      ws = std::max(ws, s->ConfigWorkspaceBytes(p, c));
    }
  }
  return ws;
}

absl::StatusOr<int64_t> Immediate::SolutionWorkspace(
    const ConvProblem& p, uint32_t solution_id) const {
  ASSIGN_OR_RETURN(const Solver* s, planner_.Applicable(p, solution_id));
  // The config its plan uses: the tuned one, as the solution's record says.
  return planner_.PlanWorkspace(*s, p);
}

}  // namespace convtune
