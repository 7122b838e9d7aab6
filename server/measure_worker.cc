#include "server/measure_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/problem_proto.h"
#include "server/backend.h"

extern char** environ;

namespace convtune {
namespace {

// Frames over 1 GiB are refused: no plan or code object comes near.
constexpr uint32_t kMaxFrame = 1u << 30;
// The fd the worker finds its socket on.
constexpr int kWorkerFd = 3;

absl::Status SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t sent = send(fd, data, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("send to the other side failed: ", strerror(errno)));
    }
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

absl::Status WriteFrame(int fd, const google::protobuf::Message& message) {
  std::string bytes;
  if (!message.SerializeToString(&bytes) || bytes.size() > kMaxFrame) {
    return absl::InvalidArgumentError("a worker frame over 1 GiB");
  }
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const char header[4] = {static_cast<char>(n), static_cast<char>(n >> 8),
                          static_cast<char>(n >> 16),
                          static_cast<char>(n >> 24)};
  RETURN_IF_ERROR(SendAll(fd, header, 4));
  return SendAll(fd, bytes.data(), bytes.size());
}

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline` (max(): none). DeadlineExceeded
// past it; Unavailable at end of stream.
absl::Status ReadAll(int fd, char* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - Clock::now())
                            .count();
      if (left <= 0) return absl::DeadlineExceededError("past the bound");
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("poll failed: ", strerror(errno)));
    }
    if (ready == 0) continue;  // the deadline check above ends it
    const ssize_t got = read(fd, data, n);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(
          absl::StrCat("read failed: ", strerror(errno)));
    }
    if (got == 0) return absl::UnavailableError("end of stream");
    data += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status ReadFrame(int fd, google::protobuf::Message* message,
                       Clock::time_point deadline) {
  unsigned char header[4];
  RETURN_IF_ERROR(ReadAll(fd, reinterpret_cast<char*>(header), 4, deadline));
  const uint32_t n = header[0] | header[1] << 8 | header[2] << 16 |
                     static_cast<uint32_t>(header[3]) << 24;
  if (n > kMaxFrame) return absl::DataLossError("a worker frame over 1 GiB");
  std::string bytes(n, '\0');
  RETURN_IF_ERROR(ReadAll(fd, bytes.data(), n, deadline));
  if (!message->ParseFromString(bytes)) {
    return absl::DataLossError("a worker frame that does not parse");
  }
  return absl::OkStatus();
}

Clock::time_point DeadlineAfter(double ms) {
  if (ms <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::microseconds(
                            static_cast<int64_t>(std::min(ms, 1e12) * 1e3));
}

void ToProto(const TimingOptions& t, v1::WorkerTiming* out) {
  out->set_warmup_runs(t.warmup_runs);
  out->set_min_repeats(t.min_repeats);
  out->set_max_repeats(t.max_repeats);
  out->set_budget_ms(t.budget_ms);
  out->set_verify_samples(t.verify_samples);
  out->set_slow_factor(t.slow_factor);
  out->set_first_run_trusted_ms(t.first_run_trusted_ms);
  out->set_hopeless_factor(t.hopeless_factor);
}

TimingOptions FromProto(const v1::WorkerTiming& t) {
  TimingOptions out;
  out.warmup_runs = t.warmup_runs();
  out.min_repeats = t.min_repeats();
  out.max_repeats = t.max_repeats();
  out.budget_ms = t.budget_ms();
  out.verify_samples = t.verify_samples();
  out.slow_factor = t.slow_factor();
  out.first_run_trusted_ms = t.first_run_trusted_ms();
  out.hopeless_factor = t.hopeless_factor();
  return out;
}

Measurement FromProto(const v1::WorkerMeasurement& m) {
  return {m.median_ms(), m.repeats(), m.check_ms()};
}

void ToProto(const Measurement& m, v1::WorkerMeasurement* out) {
  out->set_median_ms(m.median_ms);
  out->set_repeats(m.repeats);
  out->set_check_ms(m.check_ms);
}

// "killed by signal 11 (Segmentation fault)", "exited with status 1".
std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  return "stopped";
}

absl::Status StatusOf(const v1::WorkerResponse& r) {
  return absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
}

// ---- The worker's side ----

void SetStatus(const absl::Status& s, v1::WorkerResponse* out) {
  out->set_code(static_cast<int>(s.code()));
  out->set_message(std::string(s.message()));
}

v1::WorkerResponse Serve(Device& device, InProcessMeasurer& measurer,
                         const v1::WorkerRequest& request) {
  v1::WorkerResponse response;
  absl::Status status;
  for (const v1::WorkerCodeObject& code : request.code_objects()) {
    if (device.HasCodeObject(code.hash())) continue;
    status = device.LoadCodeObject(code.hash(), code.binary());
    if (!status.ok()) break;
  }
  if (status.ok()) {
    switch (request.kind_case()) {
      case v1::WorkerRequest::kOpen: {
        absl::StatusOr<ConvProblem> p =
            ProblemFromProto(request.open().problem());
        status = p.ok() ? measurer.Open(*p, request.open().workspace_bytes(),
                                        request.open().seed())
                        : p.status();
        break;
      }
      case v1::WorkerRequest::kMeasure: {
        const v1::WorkerMeasure& m = request.measure();
        absl::StatusOr<Measurement> measured =
            measurer.Measure(m.plan(), FromProto(m.timing()), m.best_ms(),
                             m.cold_run_is_timing(), 0);
        status = measured.status();
        if (measured.ok()) ToProto(*measured, response.add_measurements());
        break;
      }
      case v1::WorkerRequest::kSideBySide: {
        std::vector<const v1::ExecutionPlan*> plans;
        for (const v1::ExecutionPlan& plan : request.side_by_side().plans()) {
          plans.push_back(&plan);
        }
        absl::StatusOr<std::vector<Measurement>> measured =
            measurer.TimeSideBySide(
                plans, FromProto(request.side_by_side().timing()), 0);
        status = measured.status();
        if (measured.ok()) {
          for (const Measurement& m : *measured) {
            ToProto(m, response.add_measurements());
          }
        }
        break;
      }
      case v1::WorkerRequest::kProbe:
        break;
      default:
        status = absl::InvalidArgumentError("an empty worker request");
    }
  }
  SetStatus(status, &response);
  response.set_device_ok(status.ok() || measurer.Healthy().ok());
  return response;
}

}  // namespace

std::vector<std::string> MeasureWorkerArgs(const WorkerOptions& options,
                                           int fd) {
  std::vector<std::string> args = {absl::StrCat(fd),
                                   options.backend,
                                   absl::StrCat(options.ordinal),
                                   absl::StrCat(options.threads),
                                   absl::StrCat(options.nice),
                                   absl::StrCat(getpid())};
  if (!options.cpus.empty()) args.push_back(absl::StrJoin(options.cpus, ","));
  return args;
}

int MeasureWorkerMain(const std::vector<std::string>& args) {
  int fd = -1, ordinal = 0, threads = 1, nice = 0, parent = 0;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  bool confined = args.size() == 7;
  if (confined) {
    for (absl::string_view c : absl::StrSplit(args[6], ',')) {
      int n = -1;
      if (!absl::SimpleAtoi(c, &n) || n < 0 || n >= CPU_SETSIZE) {
        confined = false;
        break;
      }
      CPU_SET(n, &cpus);
    }
  }
  if ((args.size() != 6 && !confined) || !absl::SimpleAtoi(args[0], &fd) ||
      !absl::SimpleAtoi(args[2], &ordinal) ||
      !absl::SimpleAtoi(args[3], &threads) ||
      !absl::SimpleAtoi(args[4], &nice) ||
      !absl::SimpleAtoi(args[5], &parent)) {
    std::cerr << "convtuned --measure-worker: expected FD BACKEND ORDINAL "
                 "THREADS NICE PARENT_PID [CPUS] (convtuned starts its "
                 "workers itself)\n";
    return 2;
  }
  // A worker outlives nobody: it dies with the daemon that started it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  if (nice > 0) setpriority(PRIO_PROCESS, 0, nice);
  // A candidate that crashes its worker leaves no core file behind.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  v1::WorkerHello hello;
  hello.set_pid(getpid());
  // Before any kernel thread starts: they keep the mask.
  if (confined && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
    hello.set_error(absl::StrCat("cannot confine the worker to CPUs ", args[6],
                                 ": ", strerror(errno)));
    (void)WriteFrame(fd, hello);
    return 1;
  }
  cpu::SetNumThreads(threads);
  absl::StatusOr<SelectedBackend> backend = SelectBackend(args[1], ordinal);
  if (!backend.ok()) {
    hello.set_error(std::string(backend.status().message()));
    (void)WriteFrame(fd, hello);
    return 1;
  }
  Device& device = *backend->device;
  hello.set_device_key(device.info().Key());
  if (!WriteFrame(fd, hello).ok()) return 1;
  InProcessMeasurer measurer(device);
  while (true) {
    v1::WorkerRequest request;
    const absl::Status read = ReadFrame(fd, &request, Clock::time_point::max());
    if (!read.ok()) return absl::IsUnavailable(read) ? 0 : 1;
    if (!WriteFrame(fd, Serve(device, measurer, request)).ok()) return 1;
  }
}

WorkerMeasurer::WorkerMeasurer(WorkerOptions options)
    : options_(std::move(options)) {}

WorkerMeasurer::~WorkerMeasurer() { Stop(SIGKILL); }

WorkerStats WorkerMeasurer::stats() const {
  return {starts_.load(), crashes_.load(), killed_.load()};
}

pid_t WorkerMeasurer::pid() const { return running_pid_.load(); }

absl::Status WorkerMeasurer::Start() { return EnsureRunning(); }

int WorkerMeasurer::Stop(int signal) {
  int status = 0;
  if (pid_ > 0) {
    kill(pid_, signal);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  pid_ = -1;
  running_pid_ = -1;
  loaded_.clear();
  return status;
}

absl::Status WorkerMeasurer::EnsureRunning() {
  if (pid_ > 0) return absl::OkStatus();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat(
        "measurement worker: socketpair failed: ", strerror(errno)));
  }
  // The child's end goes to fd 3; from a number above 3 so that dup2 clears
  // its close-on-exec flag.
  const int child_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  close(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_end, kWorkerFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = {options_.exe, "--measure-worker"};
  for (std::string& a : MeasureWorkerArgs(options_, kWorkerFd)) {
    args.push_back(std::move(a));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, options_.exe.c_str(), &actions, &attr,
                                  argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(child_end);
  if (spawned != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("measurement worker: cannot start ",
                                            options_.exe, ": ",
                                            strerror(spawned)));
  }
  fd_ = fds[0];
  pid_ = pid;
  running_pid_ = pid;
  ++starts_;
  v1::WorkerHello hello;
  const absl::Status said =
      ReadFrame(fd_, &hello, DeadlineAfter(options_.start_bound_ms));
  absl::Status refused;
  if (!said.ok()) {
    refused = absl::UnavailableError(
        absl::StrCat("measurement worker did not start: ",
                     absl::IsDeadlineExceeded(said)
                         ? absl::StrCat("no answer within ",
                                        options_.start_bound_ms / 1e3, " s")
                         : std::string(said.message())));
  } else if (!hello.error().empty()) {
    refused = absl::UnavailableError(
        absl::StrCat("measurement worker cannot open ", options_.backend,
                     " device ", options_.ordinal, ": ", hello.error()));
  } else if (!options_.device_key.empty() &&
             hello.device_key() != options_.device_key) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("measurement worker opened device ", hello.device_key(),
                     ", not convtuned's ", options_.device_key));
  }
  if (!refused.ok()) {
    Stop(SIGKILL);
    return refused;
  }
  broken_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::StatusOr<v1::WorkerResponse> WorkerMeasurer::Call(
    v1::WorkerRequest& request, double bound_ms) {
  RETURN_IF_ERROR(broken_);
  if (absl::Status started = EnsureRunning(); !started.ok()) {
    // Unusable until Reset: the timing stage quarantines, or loses the
    // device when a fresh worker cannot start either.
    broken_ = started;
    return started;
  }
  const pid_t pid = pid_;
  absl::Status status = WriteFrame(fd_, request);
  // A request too large to send is this side's error: the worker is fine.
  if (absl::IsInvalidArgument(status)) return status;
  v1::WorkerResponse response;
  if (status.ok()) status = ReadFrame(fd_, &response, DeadlineAfter(bound_ms));
  if (absl::IsDeadlineExceeded(status)) {
    Stop(SIGKILL);
    ++killed_;
    broken_ = absl::DeadlineExceededError(
        absl::StrCat("measurement ran past its bound of ", bound_ms / 1e3,
                     " s; its worker (pid ", pid, ") was killed"));
    return broken_;
  }
  if (!status.ok()) {
    // The worker went away mid-call: how it ended is the error (a worker
    // already dead is only reaped by the kill).
    const int exit_status = Stop(SIGKILL);
    ++crashes_;
    broken_ = absl::InternalError(
        absl::StrCat("measurement worker (pid ", pid,
                     ") died during the call: ", DescribeExit(exit_status)));
    return broken_;
  }
  // The worker loads every code object before it serves, and stops at the
  // first it cannot: only a served request loaded them all.
  if (response.code() == 0) {
    for (const v1::WorkerCodeObject& code : request.code_objects()) {
      loaded_.insert(code.hash());
    }
  }
  if (!response.device_ok()) {
    broken_ = absl::InternalError(
        absl::StrCat("the device no longer answers in measurement worker "
                     "(pid ",
                     pid, ") after: ", response.message()));
  }
  return response;
}

absl::Status WorkerMeasurer::AttachCodeObjects(const v1::ExecutionPlan& plan,
                                               v1::WorkerRequest& request) {
  for (const v1::KernelStep& step : plan.steps()) {
    const std::string& hash = step.code_object_hash();
    if (hash.empty() || loaded_.contains(hash)) continue;
    bool attached = false;
    for (const v1::WorkerCodeObject& c : request.code_objects()) {
      attached = attached || c.hash() == hash;
    }
    if (attached) continue;
    if (!options_.code_object) {
      return absl::FailedPreconditionError(
          "measurement worker: no source of code objects");
    }
    ASSIGN_OR_RETURN(std::string binary, options_.code_object(hash));
    v1::WorkerCodeObject* code = request.add_code_objects();
    code->set_hash(hash);
    code->set_binary(std::move(binary));
  }
  return absl::OkStatus();
}

absl::Status WorkerMeasurer::Open(const ConvProblem& p, int64_t workspace_bytes,
                                  uint64_t seed) {
  // A new session starts on a working worker, whatever became of the last.
  if (!broken_.ok()) RETURN_IF_ERROR(Reset());
  v1::WorkerRequest request;
  ProblemToProto(p, request.mutable_open()->mutable_problem());
  request.mutable_open()->set_workspace_bytes(workspace_bytes);
  request.mutable_open()->set_seed(seed);
  ASSIGN_OR_RETURN(v1::WorkerResponse response,
                   Call(request, options_.start_bound_ms));
  return StatusOf(response);
}

absl::StatusOr<Measurement> WorkerMeasurer::Measure(
    const v1::ExecutionPlan& plan, const TimingOptions& options, double best_ms,
    bool cold_run_is_timing, double bound_ms) {
  v1::WorkerRequest request;
  RETURN_IF_ERROR(AttachCodeObjects(plan, request));
  v1::WorkerMeasure* m = request.mutable_measure();
  *m->mutable_plan() = plan;
  ToProto(options, m->mutable_timing());
  m->set_best_ms(best_ms);
  m->set_cold_run_is_timing(cold_run_is_timing);
  ASSIGN_OR_RETURN(v1::WorkerResponse response, Call(request, bound_ms));
  RETURN_IF_ERROR(StatusOf(response));
  if (response.measurements_size() != 1) {
    return absl::InternalError("measurement worker: no measurement");
  }
  return FromProto(response.measurements(0));
}

absl::StatusOr<std::vector<Measurement>> WorkerMeasurer::TimeSideBySide(
    const std::vector<const v1::ExecutionPlan*>& plans,
    const TimingOptions& options, double bound_ms) {
  v1::WorkerRequest request;
  v1::WorkerSideBySide* side = request.mutable_side_by_side();
  for (const v1::ExecutionPlan* plan : plans) {
    RETURN_IF_ERROR(AttachCodeObjects(*plan, request));
    *side->add_plans() = *plan;
  }
  ToProto(options, side->mutable_timing());
  ASSIGN_OR_RETURN(v1::WorkerResponse response, Call(request, bound_ms));
  RETURN_IF_ERROR(StatusOf(response));
  if (response.measurements_size() != static_cast<int>(plans.size())) {
    return absl::InternalError("measurement worker: measurements missing");
  }
  std::vector<Measurement> out;
  for (const v1::WorkerMeasurement& m : response.measurements()) {
    out.push_back(FromProto(m));
  }
  return out;
}

absl::Status WorkerMeasurer::Healthy() { return broken_; }

absl::Status WorkerMeasurer::Reset() {
  Stop(SIGKILL);
  broken_ = absl::OkStatus();
  return EnsureRunning();
}

}  // namespace convtune
