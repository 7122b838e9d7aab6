// Test helpers: run a program and capture its output, and run a real
// convtuned on a temporary socket and database. Not thread-safe.
#ifndef CONVTUNE_TESTS_CLIENT_PROCESS_UTIL_H_
#define CONVTUNE_TESTS_CLIENT_PROCESS_UTIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace convtune::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal or the timeout
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with the arguments, waiting at most `timeout_s`.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         int timeout_s = 600);

// Where the test finds convtuned; empty when the daemon is not part of this
// build (the caller skips).
std::string ConvtunedPath();

// A convtuned child process serving on `dir`/convtuned.sock with its
// database in `db_dir`. Stopped with SIGTERM (then SIGKILL) on destruction.
class Daemon {
 public:
  Daemon() = default;
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts the daemon (with `extra_args` after the usual flags) and waits
  // (up to 60 s) for its readiness line.
  absl::Status Start(const std::string& dir, const std::string& db_dir,
                     const std::vector<std::string>& extra_args = {});
  // SIGTERM, then SIGKILL after 20 s. OK if it exited with status 0.
  absl::Status Stop();

  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "unix:" + socket_path_; }
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string socket_path_;
  std::string log_path_;
};

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_CLIENT_PROCESS_UTIL_H_
