// Every key convtune stores under, in one place: find and perf records scoped
// by device key, the workspace-limited find key, and the names of meta records
// (the learned model and quarantined solvers). storage/FORMAT.md documents
// each. Stateless; thread-safe.
#ifndef CONVTUNE_STORAGE_KEYS_H_
#define CONVTUNE_STORAGE_KEYS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "convtune/v1/records.pb.h"

namespace convtune::storage {

// Key separator; device keys, problem keys and kernel hashes never contain it.
inline constexpr char kKeySeparator = '/';

// find_db: "<device_key>/<problem_key>". REQUIRES: neither contains '/'.
std::string FindDbKey(absl::string_view device_key,
                      absl::string_view problem_key);
// perf_db: "<device_key>/<problem_key>/<solver_id in decimal>".
std::string PerfDbKey(absl::string_view device_key,
                      absl::string_view problem_key, uint32_t solver_id);

// The problem key of a find tuned under a workspace limit that left
// applicable solvers out: "<problem_key>|ws=<limit>". Such a record sets
// FindRecord.workspace_limit to the limit, so it is never read as the
// problem's unconstrained answer.
std::string LimitedProblemKey(absl::string_view problem_key,
                              int64_t workspace_limit);
// Whether `record` was tuned under a workspace limit that left solvers out.
bool IsWorkspaceLimited(const v1::FindRecord& record);

// meta: the learned immediate-mode model of a device,
// "heuristic/<device_key>".
std::string HeuristicModelName(absl::string_view device_key);
// meta: the solvers quarantined for one problem on a device,
// "quarantine/<device_key>/<problem_key>"; with an empty problem key, the
// prefix of every such record of the device.
std::string QuarantineName(absl::string_view device_key,
                           absl::string_view problem_key);

}  // namespace convtune::storage

#endif  // CONVTUNE_STORAGE_KEYS_H_
