// Defaults shared by the daemon and its clients. Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_DEFAULTS_H_
#define CONVTUNE_COMMON_DEFAULTS_H_

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace convtune {

// $CONVTUNE_SOCKET, else $XDG_RUNTIME_DIR/convtune/convtuned.sock, else
// /tmp/convtune-<uid>/convtuned.sock.
inline std::string DefaultSocketPath() {
  if (const char* env = std::getenv("CONVTUNE_SOCKET");
      env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* run = std::getenv("XDG_RUNTIME_DIR");
      run != nullptr && *run != '\0') {
    return absl::StrCat(run, "/convtune/convtuned.sock");
  }
  return absl::StrCat("/tmp/convtune-", getuid(), "/convtuned.sock");
}

// A gRPC target for a Unix socket path ("unix:/abs/path").
inline std::string UnixTarget(absl::string_view path) {
  return absl::StartsWith(path, "unix:") ? std::string(path)
                                         : absl::StrCat("unix:", path);
}

// Largest gRPC message either side accepts (export files, inline tensors).
inline constexpr int kMaxGrpcMessageBytes = 512 << 20;

}  // namespace convtune

#endif  // CONVTUNE_COMMON_DEFAULTS_H_
