// What each find mode of the specification does, as one table: whether it
// reads the FindDb, whether a system FindDb hit is re-timed before it is
// trusted, what a miss does, and how a tuning run searches. Stateless;
// thread-safe.
#ifndef CONVTUNE_SERVER_FIND_POLICY_H_
#define CONVTUNE_SERVER_FIND_POLICY_H_

#include "convtune/v1/service.pb.h"

namespace convtune {

struct FindPolicy {
  v1::FindMode mode;
  // The user and system FindDb answer when they hold the problem. NORMAL
  // alone ignores them and always tunes.
  bool reads_find_db;
  // A system FindDb hit is timed here, kept when it holds up, else tuned.
  bool verifies_system_db;
  // On a miss: the immediate-mode fallback (no timing), or a tuning run.
  bool falls_back_on_miss;
  // How a tuning run of this mode goes: only solvers that compile nothing per
  // size; every config of each solver; stopped on a time budget and patience.
  bool dynamic_only;
  bool searches_configs;
  bool bounded;
};

// The policy of one of the six modes; nullptr for any other value.
const FindPolicy* PolicyFor(v1::FindMode mode);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_FIND_POLICY_H_
