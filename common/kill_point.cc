#include "common/kill_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace convtune {
namespace {

struct KillPoints {
  std::vector<std::string> names;
  int odds = 1;
};

const KillPoints& Points() {
  static const KillPoints* const points = [] {
    auto* p = new KillPoints;
    if (const char* names = std::getenv("CONVTUNE_KILL_POINTS")) {
      for (absl::string_view n : absl::StrSplit(names, ',', absl::SkipEmpty()))
        p->names.emplace_back(n);
    }
    if (const char* odds = std::getenv("CONVTUNE_KILL_ODDS")) {
      if (!absl::SimpleAtoi(odds, &p->odds) || p->odds < 1) p->odds = 1;
    }
    return p;
  }();
  return *points;
}

}  // namespace

void KillPoint(absl::string_view name) {
  const KillPoints& points = Points();
  if (points.names.empty()) return;
  bool listed = false;
  for (const std::string& n : points.names) listed = listed || n == name;
  if (!listed) return;
  thread_local std::mt19937 rng(std::random_device{}());
  if (std::uniform_int_distribution<int>(1, points.odds)(rng) == 1) {
    kill(getpid(), SIGKILL);
  }
}

}  // namespace convtune
