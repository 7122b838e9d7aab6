// convtuned's config file (TOML, read with toml11): the daemon's settings,
// its limits and its tenants. deploy/convtuned.toml documents every key.
// Precedence, lowest first: built-in defaults, the file, the environment
// (ApplyEnvironment), then flags. Stateless; thread-safe.
#ifndef CONVTUNE_SERVER_CONFIG_H_
#define CONVTUNE_SERVER_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "server/daemon.h"

namespace convtune {

// Reads `path` into `options`, setting only the keys it has. InvalidArgument
// naming the file and the key (and quoting at most a short prefix of a bad
// value) for a syntax error, an unknown key, a value of the wrong type or out
// of range; NotFound if the file cannot be read.
absl::Status LoadConfig(const std::string& path, DaemonOptions* options);

// The environment's overrides: CONVTUNE_SOCKET, CONVTUNE_FIND_MODE and
// CONVTUNE_COMPILE_PARALLEL_LEVEL, where set and not empty. InvalidArgument
// naming the variable for a bad value.
absl::Status ApplyEnvironment(DaemonOptions* options);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_CONFIG_H_
