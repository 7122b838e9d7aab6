#include "server/call_log.h"

#include <grpcpp/server_context.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace convtune {
namespace {

bool IsHealthCheck(const char* method) {
  return method != nullptr &&
         std::strncmp(method, "/grpc.health.v1.Health/", 23) == 0;
}

// The RPC's own name, "Find" of "/convtune.v1.ConvTune/Find".
absl::string_view ShortName(const char* method) {
  if (method == nullptr) return "unknown";
  absl::string_view m(method);
  const size_t slash = m.rfind('/');
  return slash == absl::string_view::npos ? m : m.substr(slash + 1);
}

class CallInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(CallLog* log, grpc::experimental::ServerRpcInfo* info)
      : log_(log), info_(info), start_(absl::Now()) {
    log_->Started();
  }
  ~CallInterceptor() override {
    log_->Finished(info_->method(), caller_, status_, absl::Now() - start_);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      Identify();
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      status_ = methods->GetSendStatus();
      Identify();
    }
    methods->Proceed();
  }

 private:
  void Identify() {
    if (identified_ || !log_->needs_caller()) return;
    identified_ = true;
    caller_ = log_->access().IdentifyCall(*info_->server_context());
  }

  CallLog* log_;
  grpc::experimental::ServerRpcInfo* info_;
  const absl::Time start_;
  bool identified_ = false;
  Caller caller_;
  grpc::Status status_{grpc::StatusCode::CANCELLED, "no status sent"};
};

class Factory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(CallLog* log) : log_(log) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (IsHealthCheck(info->method())) return nullptr;
    return new CallInterceptor(log_, info);
  }

 private:
  CallLog* log_;
};

}  // namespace

CallLog::CallLog(const Access& access, bool log, Metrics* metrics)
    : access_(access), log_(log), metrics_(metrics) {
  if (log_) writer_ = std::thread([this] { WriterLoop(); });
}

CallLog::~CallLog() {
  {
    absl::MutexLock lock(&log_mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

void CallLog::WriterLoop() {
  for (;;) {
    std::string lines;
    int64_t dropped = 0;
    bool stop = false;
    {
      absl::MutexLock lock(&log_mu_);
      log_mu_.Await(absl::Condition(
          +[](CallLog* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->log_mu_) {
            return c->stopping_ || !c->pending_.empty();
          },
          this));
      lines.swap(pending_);
      std::swap(dropped, dropped_);
      stop = stopping_;
    }
    if (dropped > 0) {
      lines += absl::StrCat("convtuned: log: ", dropped,
                            " RPC line(s) dropped while the log was slow\n");
    }
    for (size_t at = 0; at < lines.size();) {
      const ssize_t n =
          write(STDERR_FILENO, lines.data() + at, lines.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    if (stop) return;
  }
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallLog::Factory() {
  return std::make_unique<convtune::Factory>(this);
}

int64_t CallLog::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool CallLog::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_SHARED_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void CallLog::Started() {
  absl::MutexLock lock(&mu_);
  ++in_flight_;
}

void CallLog::Finished(const char* method, const Caller& caller,
                       const grpc::Status& status, absl::Duration took) {
  if (log_ || metrics_ != nullptr) {
    const absl::string_view rpc = ShortName(method);
    const std::string code = absl::StatusCodeToString(
        static_cast<absl::StatusCode>(status.error_code()));
    if (metrics_ != nullptr) {
      metrics_->CountRpc(rpc, code, caller.tenant, absl::ToDoubleSeconds(took));
    }
    if (log_) {
      const std::string line = absl::StrFormat(
          "convtuned: rpc=%s tenant=%s role=%s code=%s ms=%.3f\n", rpc,
          caller.tenant, caller.known ? RoleName(caller.role) : "refused", code,
          absl::ToDoubleMilliseconds(took));
      absl::MutexLock lock(&log_mu_);
      if (pending_.size() < (size_t{1} << 20)) {
        pending_ += line;
      } else {
        ++dropped_;
      }
    }
  }
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

}  // namespace convtune
