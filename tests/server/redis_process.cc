#include "tests/server/redis_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace convtune::testing {
namespace {

// A loopback port free now (bound, read, released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

std::string RedisServerPath() {
  if (const char* env = std::getenv("REDIS_SERVER"); env != nullptr && *env) {
    return env;
  }
#ifdef REDIS_SERVER_PATH
  return REDIS_SERVER_PATH;
#else
  return "";
#endif
}

bool RedisProcess::Start(const std::string& dir) {
  dir_ = dir;
  socket_ = dir + "/redis.sock";
  port_ = FreePort();
  {
    std::ofstream acl(dir + "/users.acl");
    acl << "user default off\n"
        << "user " << kAdmin << " on >" << kAdminPassword
        << " ~* &* +@all\n"
        // Daemons: read and write the tier's keys, nothing else.
        << "user " << kWriter << " on >" << kWriterPassword
        << " ~convtune:* resetchannels -@all +get +set +exists +pexpire +del "
           "+eval +xadd +xreadgroup +xack +xautoclaim +xclaim +xgroup|create "
           "+xinfo +xlen +ping +hello\n"
        // CI readers: read-only key access.
        << "user " << kReader << " on >" << kReaderPassword
        << " %R~convtune:* resetchannels -@all +get +ping +hello\n";
  }
  const std::string binary = RedisServerPath();
  const std::vector<std::string> args = {binary,
                                         "--port",
                                         std::to_string(port_),
                                         "--bind",
                                         "127.0.0.1",
                                         "--unixsocket",
                                         socket_,
                                         "--unixsocketperm",
                                         "700",
                                         "--save",
                                         "",
                                         "--appendonly",
                                         "no",
                                         "--dir",
                                         dir,
                                         "--aclfile",
                                         dir + "/users.acl",
                                         "--daemonize",
                                         "no",
                                         "--logfile",
                                         dir + "/redis.log"};
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    const int fd =
        open((dir + "/redis.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  absl::Status last;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<storage::RedisReply> r = Admin({"PING"});
    if (r.ok()) return true;
    last = r.status();
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::cerr << "redis-server does not answer: " << last << "\n";
  return false;
}

void RedisProcess::Stop(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  unlink(socket_.c_str());
}

RedisProcess::~RedisProcess() { Stop(SIGKILL); }

std::string RedisProcess::log() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<std::unique_ptr<storage::RedisConnection>> RedisProcess::Connect(
    const std::string& user, const std::string& password) {
  storage::RedisConnection::Options o;
  o.endpoint.unix_path = socket_;
  o.user = user.empty() ? kAdmin : user;
  o.password = user.empty() ? kAdminPassword : password;
  o.deadline = absl::Seconds(2);
  return storage::RedisConnection::Connect(o);
}

absl::StatusOr<storage::RedisReply> RedisProcess::Admin(
    const std::vector<std::string>& argv) {
  absl::StatusOr<std::unique_ptr<storage::RedisConnection>> c = Connect();
  if (!c.ok()) return c.status();
  absl::StatusOr<storage::RedisReply> r = (*c)->Command(argv);
  if (r.ok() && r->is_error()) {
    return absl::FailedPreconditionError(r->str);
  }
  return r;
}

}  // namespace convtune::testing
