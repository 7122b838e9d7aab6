// Kill points for the crash test (tests/reliability/). With the environment
// variable CONVTUNE_KILL_POINTS set to a comma-separated list of names, each
// call of a listed point kills the process with SIGKILL one time in
// CONVTUNE_KILL_ODDS (default 1). Without it, a call costs one load of a
// flag. The points:
//   find_db.before_write, find_db.after_write   a tuned record's write
//   tune.build                                   a candidate's plan built
//   tune.measure                                 a candidate about to be timed
//   import.before_write, import.after_write      an import's one batch
// Thread-safe.
#ifndef CONVTUNE_COMMON_KILL_POINT_H_
#define CONVTUNE_COMMON_KILL_POINT_H_

#include "absl/strings/string_view.h"

namespace convtune {

void KillPoint(absl::string_view name);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_KILL_POINT_H_
