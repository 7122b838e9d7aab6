// A real redis-server for the cluster tier's tests: started in a temporary
// folder on a Unix socket (and a loopback TCP port), with three ACL users
// besides "admin": the daemons' writer, a read-only reader for CI, and the
// default user switched off. Not thread-safe.
#ifndef CONVTUNE_TESTS_SERVER_REDIS_PROCESS_H_
#define CONVTUNE_TESTS_SERVER_REDIS_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/redis.h"

namespace convtune::testing {

// $REDIS_SERVER, else the redis-server binary this build found; empty when
// there is none (the tests then skip, saying so).
std::string RedisServerPath();

class RedisProcess {
 public:
  static constexpr char kWriter[] = "convtune-daemon";
  static constexpr char kWriterPassword[] = "writer-secret";
  static constexpr char kReader[] = "convtune-reader";
  static constexpr char kReaderPassword[] = "reader-secret";
  static constexpr char kAdmin[] = "admin";
  static constexpr char kAdminPassword[] = "admin-secret";

  // Writes users.acl into `dir` (which must exist) and starts the server
  // there; its socket is dir/redis.sock. False with the log on failure.
  bool Start(const std::string& dir);
  // SIGTERM (or `sig`) and wait; the data is not saved.
  void Stop(int sig = 15);
  ~RedisProcess();

  bool running() const { return pid_ > 0; }
  std::string address() const { return "unix:" + socket_; }
  int port() const { return port_; }
  std::string log() const;

  // A connection as `user` (admin when empty).
  absl::StatusOr<std::unique_ptr<storage::RedisConnection>> Connect(
      const std::string& user = "", const std::string& password = "");
  // One command as admin; the reply, or the error as a status.
  absl::StatusOr<storage::RedisReply> Admin(
      const std::vector<std::string>& argv);

 private:
  pid_t pid_ = -1;
  std::string dir_, socket_;
  int port_ = 0;
};

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_SERVER_REDIS_PROCESS_H_
