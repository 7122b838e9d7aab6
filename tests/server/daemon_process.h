// Starts the real convtuned binary in a child process for integration tests,
// waits until it serves, and stops it with a signal. Not thread-safe.
#ifndef CONVTUNE_TESTS_SERVER_DAEMON_PROCESS_H_
#define CONVTUNE_TESTS_SERVER_DAEMON_PROCESS_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace convtune::testing {

class DaemonProcess {
 public:
  // Kills the child if it is still running.
  ~DaemonProcess();

  // Starts `binary` with `args`; stderr goes to `log_path`. Returns false if
  // the process could not be started.
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             const std::string& log_path);
  // Polls until a gRPC health check on `socket_path` answers SERVING, or the
  // child exits, or `timeout_ms` passes.
  bool WaitServing(const std::string& socket_path, int timeout_ms = 20000);
  // Sends `sig` and waits up to timeout_ms. Returns the exit status (as from
  // waitpid) or -1 on timeout (the child is then killed).
  int Stop(int sig, int timeout_ms = 10000);
  // Waits for the child to exit by itself; the exit code or -1.
  int WaitExit(int timeout_ms);

  pid_t pid() const { return pid_; }
  std::string log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

// SIGSTOP to `pid`, then waits until every thread of it has stopped (kill()
// returns before threads running on other cores do). False if they have not
// within `timeout_ms`.
bool PauseProcess(pid_t pid, int timeout_ms = 5000);

// The bytes of a ByteBuffer ("" if they cannot be read).
std::string Bytes(const grpc::ByteBuffer& b);

// grpc.health.v1.Health/Check for `service` ("" for the whole server) with a
// deadline of `timeout_ms`: the ServingStatus enum's value, or -1 with the
// call's error code in *code.
int HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                const std::string& service, int timeout_ms,
                grpc::StatusCode* code);

// A fresh folder under /tmp, removed by the caller.
std::string MakeTempDir(const std::string& prefix);

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_SERVER_DAEMON_PROCESS_H_
