#include "storage/memory_store.h"

#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace convtune::storage {
namespace {

class MemoryStore final : public Store {
 public:
  absl::StatusOr<std::string> Get(Column column,
                                  absl::string_view key) override {
    absl::ReaderMutexLock lock(&mu_);
    const Map& map = columns_[Index(column)];
    auto it = map.find(key);
    if (it == map.end()) {
      return absl::NotFoundError(
          absl::StrCat(ColumnName(column), ": no key '", key, "'"));
    }
    return it->second;
  }

  absl::Status Put(Column column, absl::string_view key,
                   absl::string_view value,
                   const WriteOptions& options) override {
    absl::MutexLock lock(&mu_);
    Map& map = columns_[Index(column)];
    auto it = map.find(key);
    if (it == map.end()) {
      map.emplace(std::string(key), std::string(value));
    } else {
      it->second.assign(value.data(), value.size());
    }
    return absl::OkStatus();
  }

  absl::Status PutAll(const std::vector<Pair>& pairs,
                      const WriteOptions& options) override {
    absl::MutexLock lock(&mu_);
    for (const Pair& p : pairs) columns_[Index(p.column)][p.key] = p.value;
    return absl::OkStatus();
  }

  absl::Status Delete(Column column, absl::string_view key,
                      const WriteOptions& options) override {
    absl::MutexLock lock(&mu_);
    Map& map = columns_[Index(column)];
    auto it = map.find(key);
    if (it != map.end()) map.erase(it);
    return absl::OkStatus();
  }

  absl::Status Scan(
      Column column, absl::string_view prefix,
      const std::function<bool(absl::string_view key, absl::string_view value)>&
          fn) override {
    // fn runs without the lock, on a copy of the matching pairs: it may call
    // back into this store, and it sees the point-in-time view a RocksDB
    // iterator gives.
    std::vector<std::pair<std::string, std::string>> snapshot;
    {
      absl::ReaderMutexLock lock(&mu_);
      const Map& map = columns_[Index(column)];
      for (auto it = map.lower_bound(prefix);
           it != map.end() && absl::StartsWith(it->first, prefix); ++it) {
        snapshot.emplace_back(it->first, it->second);
      }
    }
    for (const auto& [key, value] : snapshot) {
      if (!fn(key, value)) break;
    }
    return absl::OkStatus();
  }

  std::string path() const override { return ""; }

 private:
  // std::less<> looks keys up by string_view without a copy; std::string
  // compares as unsigned bytes, RocksDB's default comparator order.
  using Map = std::map<std::string, std::string, std::less<>>;

  static size_t Index(Column c) { return static_cast<size_t>(c); }

  absl::Mutex mu_;
  std::array<Map, std::size(kAllColumns)> columns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore() {
  return std::make_unique<MemoryStore>();
}

}  // namespace convtune::storage
