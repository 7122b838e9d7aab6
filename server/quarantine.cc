#include "server/quarantine.h"

#include <algorithm>
#include <iostream>

namespace convtune {

Quarantine::Quarantine(storage::Store& store, std::string device_key)
    : records_(&store, std::move(device_key)) {
  absl::StatusOr<std::map<std::string, std::vector<uint32_t>>> loaded =
      records_.LoadAll();
  if (!loaded.ok()) {
    std::cerr << "convtuned: cannot read the quarantine: " << loaded.status()
              << "\n";
    return;
  }
  absl::MutexLock lock(&mu_);
  for (auto& [problem_key, ids] : *loaded) ids_[problem_key] = std::move(ids);
}

std::vector<uint32_t> Quarantine::For(absl::string_view problem_key) const {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(problem_key);
  return it == ids_.end() ? std::vector<uint32_t>() : it->second;
}

bool Quarantine::empty() const {
  absl::MutexLock lock(&mu_);
  return ids_.empty();
}

absl::Status Quarantine::Add(absl::string_view problem_key,
                             uint32_t solver_id) {
  std::vector<uint32_t> ids;
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint32_t>& q = ids_[problem_key];
    if (std::find(q.begin(), q.end(), solver_id) == q.end()) {
      q.push_back(solver_id);
    }
    ids = q;
  }
  return records_.Put(problem_key, ids);
}

}  // namespace convtune
