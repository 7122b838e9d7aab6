#include "storage/keys.h"

#include "absl/strings/str_cat.h"

namespace convtune::storage {

std::string FindDbKey(absl::string_view device_key,
                      absl::string_view problem_key) {
  return absl::StrCat(device_key, std::string(1, kKeySeparator), problem_key);
}

std::string PerfDbKey(absl::string_view device_key,
                      absl::string_view problem_key, uint32_t solver_id) {
  return absl::StrCat(FindDbKey(device_key, problem_key),
                      std::string(1, kKeySeparator), solver_id);
}

std::string LimitedProblemKey(absl::string_view problem_key,
                              int64_t workspace_limit) {
  return absl::StrCat(problem_key, "|ws=", workspace_limit);
}

bool IsWorkspaceLimited(const v1::FindRecord& record) {
  return record.workspace_limit() >= 0;
}

std::string HeuristicModelName(absl::string_view device_key) {
  return absl::StrCat("heuristic/", device_key);
}

std::string QuarantineName(absl::string_view device_key,
                           absl::string_view problem_key) {
  return absl::StrCat("quarantine/", device_key, "/", problem_key);
}

}  // namespace convtune::storage
