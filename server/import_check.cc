#include "server/import_check.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/quote.h"
#include "convtune/v1/records.pb.h"
#include "kernels/problem.h"
#include "storage/keys.h"

namespace convtune {

ImportCheck::ImportCheck(std::vector<Served> served)
    : served_(std::move(served)) {
  for (const Served& s : served_) keys_.push_back(s.device->Key());
}

absl::Status ImportCheck::CheckSolver(absl::string_view device_key,
                                      absl::string_view problem_key,
                                      uint32_t id,
                                      absl::string_view name) const {
  const Served* served = nullptr;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == device_key) served = &served_[i];
  }
  const SolverRegistry& registry =
      *(served != nullptr ? served : &served_.front())->registry;
  const Solver* solver = registry.Find(id);
  if (solver == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver id ", id, " is not a solver of this convtune"));
  }
  if (!name.empty() && name != solver->name()) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver id ", id, " is named '", QuotePrefix(name),
                     "', and this convtune's is '", solver->name(), "'"));
  }
  // Records of other devices are carried for them; only the keys served
  // here are held to their devices.
  if (served == nullptr) return absl::OkStatus();
  if (!SolverRegistry::Runs(*solver, *served->device)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "solver ", solver->name(), " does not run on this device"));
  }
  absl::StatusOr<ConvProblem> problem = ParseProblemKey(problem_key);
  if (!problem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "problem key '", QuotePrefix(problem_key), "' does not parse"));
  }
  if (absl::Status s = solver->IsApplicable(*problem); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver ", solver->name(), " does not apply to problem ",
                     QuotePrefix(problem_key), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ImportCheck::operator()(storage::Column column,
                                     absl::string_view key,
                                     absl::string_view value) const {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(key, storage::kKeySeparator);
  switch (column) {
    case storage::Column::kFindDb: {
      v1::FindRecord r;
      if (parts.size() != 2 ||
          !r.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
        return absl::InvalidArgumentError("find record does not read");
      }
      for (const v1::PerfResult& result : r.results()) {
        if (absl::Status s = CheckSolver(parts[0], parts[1], result.solver_id(),
                                         result.solver_name());
            !s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "find record ", QuotePrefix(key), ": ", s.message()));
        }
      }
      return absl::OkStatus();
    }
    case storage::Column::kPerfDb: {
      uint32_t id = 0;
      if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &id)) {
        return absl::InvalidArgumentError("perf record key does not read");
      }
      if (absl::Status s = CheckSolver(parts[0], parts[1], id, ""); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("perf record ", QuotePrefix(key), ": ", s.message()));
      }
      return absl::OkStatus();
    }
    case storage::Column::kKernelCache:
      return absl::InvalidArgumentError(
          "code objects are not imported: this node compiles its own");
    case storage::Column::kMeta:
      return absl::InvalidArgumentError("meta records are not imported");
  }
  return absl::InvalidArgumentError("unknown column");
}

}  // namespace convtune
