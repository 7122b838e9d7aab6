// Solvers that left the device unusable on a problem (a kernel fault the
// device needed a reset for): never run on that problem on this device key
// again. Loaded from the store at start; every addition is stored, so a
// restarted daemon skips them too. Thread-safe.
#ifndef CONVTUNE_SERVER_QUARANTINE_H_
#define CONVTUNE_SERVER_QUARANTINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "storage/records.h"

namespace convtune {

class Quarantine {
 public:
  // Reads the device's quarantine records; a store error is logged and the
  // quarantine starts empty. `store` must outlive this object.
  Quarantine(storage::Store& store, std::string device_key);

  // The quarantined solver ids of one problem, in the order they were added.
  std::vector<uint32_t> For(absl::string_view problem_key) const;
  // True when no solver is quarantined for any problem (a cheap check
  // before building a problem key on every immediate-mode miss).
  bool empty() const;

  // Quarantines `solver_id` for the problem. It holds in memory either way;
  // the store's error when the record was not written.
  absl::Status Add(absl::string_view problem_key, uint32_t solver_id);

 private:
  storage::QuarantineRecords records_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<uint32_t>> ids_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_QUARANTINE_H_
