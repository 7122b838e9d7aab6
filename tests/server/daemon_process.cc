#include "tests/server/daemon_process.h"

#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/defaults.h"

namespace convtune::testing {

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Stop(SIGKILL, 5000);
}

bool DaemonProcess::Start(const std::string& binary,
                          const std::vector<std::string>& args,
                          const std::string& log_path) {
  log_path_ = log_path;
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      dup2(fd, 1);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return true;
}

bool DaemonProcess::WaitServing(const std::string& socket_path,
                                int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto channel = grpc::CreateChannel(UnixTarget(socket_path),
                                     grpc::InsecureChannelCredentials());
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(500));
    grpc::ByteBuffer request, response;
    // grpc.health.v1.HealthCheckRequest{service: ""} serializes to zero bytes.
    grpc::GenericStub stub(channel);
    grpc::Slice empty;
    request = grpc::ByteBuffer(&empty, 1);
    grpc::Status s;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                   &request, &response, [&](grpc::Status st) {
                     std::lock_guard<std::mutex> lock(mu);
                     s = st;
                     done = true;
                     cv.notify_one();
                   });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (s.ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int DaemonProcess::WaitExit(int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

int DaemonProcess::Stop(int sig, int timeout_ms) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  const int code = WaitExit(timeout_ms);
  if (code == -1 && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  return code;
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir == nullptr ? "" : std::string(dir);
}

}  // namespace convtune::testing
