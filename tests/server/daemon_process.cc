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
#include <filesystem>
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

std::string Bytes(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!b.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

int HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                const std::string& service, int timeout_ms,
                grpc::StatusCode* code) {
  // HealthCheckRequest{service}: field 1, length-delimited; an empty one
  // serializes to zero bytes.
  std::string wire;
  if (!service.empty()) {
    wire = std::string(1, '\x0a') +
           std::string(1, static_cast<char>(service.size())) + service;
  }
  grpc::Slice slice(wire);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(timeout_ms));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  *code = status.error_code();
  if (!status.ok()) return -1;
  const std::string bytes = Bytes(response);
  // HealthCheckResponse{status}: field 1, varint; absent is UNKNOWN (0).
  return bytes.size() >= 2 && bytes[0] == '\x08' ? bytes[1] : 0;
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
    grpc::StatusCode code;
    if (HealthCheck(channel, "", 500, &code) >= 0) return true;
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

namespace {

// Every thread of `pid` is stopped ('T', or 't' under a tracer).
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator it(
      "/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return false;
  int threads = 0;
  for (const std::filesystem::directory_entry& task : it) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) continue;
    const char state = line[paren + 2];
    if (state != 'T' && state != 't') return false;
    ++threads;
  }
  return threads > 0;
}

}  // namespace

bool PauseProcess(pid_t pid, int timeout_ms) {
  if (pid <= 0 || kill(pid, SIGSTOP) != 0) return false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (AllThreadsStopped(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
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
