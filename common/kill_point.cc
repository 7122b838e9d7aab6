#include "common/kill_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdint>
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
  // xorshift64*: eight bytes of thread-local state. Static TLS comes out of
  // every thread's stack, and some libraries' threads have small ones
  // (civetweb's serve the metrics with about 100 KiB).
  thread_local uint64_t state = 0;
  if (state == 0) state = (uint64_t{std::random_device{}()} << 32) | 1;
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  const uint64_t r = (state * 0x2545F4914F6CDD1DULL) >> 33;
  if (static_cast<int>(r % static_cast<uint64_t>(points.odds)) == 0) {
    kill(getpid(), SIGKILL);
  }
}

}  // namespace convtune
