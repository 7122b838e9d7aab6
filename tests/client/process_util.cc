#include "tests/client/process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace convtune::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for `pid` up to `timeout`; returns its wait status, or -1 on timeout.
int WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return 0;
    if (std::chrono::steady_clock::now() > end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int in = open("/dev/null", O_RDONLY);
  if (out < 0 || err < 0 || in < 0) _exit(126);
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base ? base : "/tmp", "/ctc-XXXXXX");
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
}

ProcessResult RunProcess(const std::vector<std::string>& argv, int timeout_s) {
  TempDir dir;
  const std::string out_path = dir.path() + "/out",
                    err_path = dir.path() + "/err";
  ProcessResult result;
  pid_t pid = Spawn(argv, out_path, err_path);
  if (pid < 0) return result;
  int status = WaitFor(pid, std::chrono::seconds(timeout_s));
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    status = -1;
  }
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

std::string ConvtunedPath() {
#ifdef CONVTUNED_PATH
  return CONVTUNED_PATH;
#else
  return "";
#endif
}

Daemon::~Daemon() { Stop().IgnoreError(); }

absl::Status Daemon::Start(const std::string& dir, const std::string& db_dir,
                           const std::vector<std::string>& extra_args) {
  const std::string binary = ConvtunedPath();
  if (binary.empty())
    return absl::FailedPreconditionError("convtuned is not built");
  socket_path_ = dir + "/convtuned.sock";
  log_path_ = dir + "/convtuned.log";
  std::vector<std::string> argv = {
      binary,      "--socket", socket_path_,        "--db", db_dir,
      "--backend", "cpu",      "--compile-threads", "2"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pid_ = Spawn(argv, dir + "/convtuned.out", log_path_);
  if (pid_ < 0) return absl::InternalError("fork failed");
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) {
    struct stat st;
    if (stat(socket_path_.c_str(), &st) == 0 &&
        absl::StrContains(Log(),
                          "convtuned: serving on unix:" + socket_path_)) {
      return absl::OkStatus();
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("convtuned exited early:\n", Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("convtuned did not get ready:\n", Log()));
}

absl::Status Daemon::Stop() {
  if (pid_ < 0) return absl::OkStatus();
  kill(pid_, SIGTERM);
  int status = WaitFor(pid_, std::chrono::seconds(20));
  if (status == -1) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return absl::DeadlineExceededError("convtuned ignored SIGTERM for 20 s");
  }
  pid_ = -1;
  if (WIFSIGNALED(status)) {
    return absl::InternalError(
        absl::StrCat("convtuned was killed by signal ", WTERMSIG(status),
                     " instead of exiting cleanly on SIGTERM:\n", Log()));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(
        "convtuned did not exit cleanly (wait status ", status, "):\n", Log()));
  }
  return absl::OkStatus();
}

std::string Daemon::Log() const { return ReadAll(log_path_); }

}  // namespace convtune::testing
