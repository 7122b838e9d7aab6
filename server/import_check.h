// What the daemon checks before it takes a record from an import: each
// record's solvers must be solvers of this convtune under the same names and,
// for the records of a device key served here, apply to the record's
// problem and run on a device of that key. Code objects are never imported:
// their store key hashes the kernel's source and options, not its bytes, so
// bytes from a file cannot be checked, and this node compiles its own.
// Stateless apart from its references; thread-safe.
#ifndef CONVTUNE_SERVER_IMPORT_CHECK_H_
#define CONVTUNE_SERVER_IMPORT_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/device.h"
#include "server/solver_registry.h"
#include "storage/store.h"

namespace convtune {

class ImportCheck {
 public:
  // A device key served here: its device and solvers.
  struct Served {
    const SolverRegistry* registry;
    const DeviceInfo* device;
  };
  // Pointers must outlive this. REQUIRES: `served` non-empty; the first's
  // solvers check the names of records of keys not served here.
  explicit ImportCheck(std::vector<Served> served);
  ImportCheck(const SolverRegistry& registry, const DeviceInfo& device)
      : ImportCheck(std::vector<Served>{{&registry, &device}}) {}

  // OK to store `value` under `key` in `column`; InvalidArgument saying why
  // not. REQUIRES: storage::ValidateStoredPair(column, key, value).ok().
  absl::Status operator()(storage::Column column, absl::string_view key,
                          absl::string_view value) const;

 private:
  // The solver `id` named `name` ("" to skip the name) for `problem_key` of
  // `device_key`.
  absl::Status CheckSolver(absl::string_view device_key,
                           absl::string_view problem_key, uint32_t id,
                           absl::string_view name) const;

  std::vector<Served> served_;
  std::vector<std::string> keys_;  // served_[i].device->Key()
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_IMPORT_CHECK_H_
