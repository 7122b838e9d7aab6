#include "client/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/defaults.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "kernels/cuda_device.h"
#include "kernels/hip_device.h"
#include "kernels/problem_proto.h"

namespace convtune {

absl::StatusOr<std::string> ResolveTarget(absl::string_view address) {
  if (address.empty()) return UnixTarget(DefaultSocketPath());
  if (absl::StrContains(address, ' ')) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' contains a space"));
  }
  if (absl::StartsWith(address, "/")) return UnixTarget(address);
  // unix:, unix-abstract:, dns:, ipv4:, ipv6: and plain host:port all pass.
  if (absl::StrContains(address, ':')) return std::string(address);
  return absl::InvalidArgumentError(absl::StrCat(
      "address '", address,
      "': expected unix:/path, an absolute socket path or host:port"));
}

Client::Client(std::string target, ClientOptions options,
               std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)),
      options_(options),
      channel_(std::move(channel)),
      stub_(v1::ConvTune::NewStub(channel_)),
      call_timeout_us_(absl::ToInt64Microseconds(options.call_timeout)),
      find_timeout_us_(absl::ToInt64Microseconds(options.find_timeout)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(std::string address,
                                                        ClientOptions options) {
  ASSIGN_OR_RETURN(std::string target, ResolveTarget(address));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // A daemon that restarts is back within a second or two: reconnect soon,
  // not after gRPC's growing default backoff (up to two minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (options.tls.has_value()) {
    if (absl::StartsWith(target, "unix")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", target,
          "': TLS needs a host:port address (the daemon's --listen-tls)"));
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls->ca_pem;
    ssl.pem_cert_chain = options.tls->cert_pem;
    ssl.pem_private_key = options.tls->key_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls->server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls->server_name);
    }
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, credentials, args);
  if (channel == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a channel to ", target));
  }
  return std::unique_ptr<Client>(
      new Client(std::move(target), options, std::move(channel)));
}

void Client::SetDeadline(grpc::ClientContext* context,
                         absl::Duration timeout) const {
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(timeout));
}

absl::Status Client::CallError(const grpc::Status& status,
                               const grpc::ClientContext* context) const {
  absl::Status s = FromGrpcStatus(status);
  if (context != nullptr) {
    const auto& trailers = context->GetServerTrailingMetadata();
    auto it = trailers.find(kRetryAfterKey);
    int64_t ms = 0;
    if (it != trailers.end() &&
        absl::SimpleAtoi(
            absl::string_view(it->second.data(), it->second.size()), &ms)) {
      s = WithRetryAfter(std::move(s), ms);
    }
  }
  // The daemon also answers Unavailable (device busy); only a channel that
  // failed to connect means nobody is listening.
  // The daemon's own word that it is going away stands as it is.
  if (s.code() == absl::StatusCode::kUnavailable &&
      !absl::StrContains(s.message(), "convtuned is shutting down") &&
      channel_->GetState(false) != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach convtuned at ", target_, ": ", s.message()));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(
        "convtuned at ", target_, " did not answer in time: ", s.message()));
  }
  return s;
}

absl::StatusOr<int64_t> Client::WorkspaceSize(const ConvProblem& problem) {
  v1::WorkspaceSizeRequest request;
  ProblemToProto(problem, request.mutable_problem());
  NameDevice(&request);
  v1::WorkspaceSizeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->GetWorkspaceSize(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response.workspace_bytes();
}

v1::FindRequest Client::FindRequestFor(const ConvProblem& problem,
                                       const FindOptions& options) const {
  v1::FindRequest request;
  ProblemToProto(problem, request.mutable_problem());
  if (options.workspace_limit >= 0)
    request.set_workspace_limit(options.workspace_limit);
  request.set_request_count(options.request_count);
  request.set_exhaustive(options.exhaustive);
  request.set_mode(options.mode);
  NameDevice(&request);
  if (options.tune_on_device.has_value()) {
    request.set_tune_on_device(*options.tune_on_device);
  }
  return request;
}

absl::StatusOr<v1::FindResponse> Client::Find(const ConvProblem& problem,
                                              const FindOptions& options) {
  const v1::FindRequest request = FindRequestFor(problem, options);
  v1::FindResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, FindTimeout());
  grpc::Status status = stub_->Find(&context, request, &response);
  if (!status.ok()) return CallError(status, &context);
  return response;
}

absl::StatusOr<v1::FindResponse> Client::Find(
    const ConvProblem& problem, const FindOptions& options,
    const std::function<void(const v1::FindProgress&)>& progress) {
  if (!progress) return Find(problem, options);
  const v1::FindRequest request = FindRequestFor(problem, options);
  grpc::ClientContext context;
  SetDeadline(&context, FindTimeout());
  std::unique_ptr<grpc::ClientReader<v1::FindEvent>> reader =
      stub_->FindStream(&context, request);
  v1::FindEvent event;
  std::optional<v1::FindResponse> result;
  while (reader->Read(&event)) {
    if (event.has_result()) {
      result = std::move(*event.mutable_result());
    } else if (event.has_progress()) {
      progress(event.progress());
    }
  }
  grpc::Status status = reader->Finish();
  // A daemon from before FindStream: the find without its progress.
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return Find(problem, options);
  }
  if (!status.ok()) return CallError(status, &context);
  if (!result.has_value()) {
    return absl::InternalError(absl::StrCat(
        "convtuned at ", target_, " ended the find without an answer"));
  }
  return *std::move(result);
}

absl::StatusOr<v1::PrefillResponse> Client::Prefill(
    const std::vector<ConvProblem>& problems, int64_t workspace_limit,
    bool cluster) {
  v1::PrefillRequest request;
  request.set_cluster(cluster);
  for (const ConvProblem& p : problems) {
    ProblemToProto(p, request.add_problems());
  }
  if (workspace_limit >= 0) request.set_workspace_limit(workspace_limit);
  NameDevice(&request);
  v1::PrefillResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->Prefill(&context, request, &response);
  if (!status.ok()) return CallError(status, &context);
  return response;
}

absl::StatusOr<v1::ExecutionPlan> Client::GetPlan(const ConvProblem& problem,
                                                  uint32_t solver_id) {
  ASSIGN_OR_RETURN(const v1::ExecutionPlan* plan, PlanRef(problem, solver_id));
  return *plan;
}

absl::StatusOr<const v1::ExecutionPlan*> Client::PlanRef(
    const ConvProblem& problem, uint32_t solver_id) {
  RETURN_IF_ERROR(ValidateProblem(problem));
  std::pair<std::string, uint32_t> key(ProblemKey(problem), solver_id);
  {
    absl::MutexLock lock(&mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      ++counters_.plan_cache_hits;
      return &it->second;
    }
    ++counters_.plan_rpcs;
  }
  v1::GetPlanRequest request;
  ProblemToProto(problem, request.mutable_problem());
  request.set_solver_id(solver_id);
  NameDevice(&request);
  v1::GetPlanResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->GetPlan(&context, request, &response);
  if (!status.ok()) return CallError(status);
  absl::MutexLock lock(&mu_);
  // Two threads may have fetched the same plan; either copy is the same.
  return &plans_.emplace(std::move(key), std::move(*response.mutable_plan()))
              .first->second;
}

absl::StatusOr<v1::ListSolversResponse> Client::ListSolvers(
    const std::optional<ConvProblem>& problem) {
  v1::ListSolversRequest request;
  if (problem.has_value()) ProblemToProto(*problem, request.mutable_problem());
  NameDevice(&request);
  v1::ListSolversResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->ListSolvers(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<std::string> Client::Execute(const ConvProblem& problem,
                                            uint32_t solver_id, std::string x,
                                            std::string w, std::string y) {
  v1::ExecuteRequest request;
  ProblemToProto(problem, request.mutable_problem());
  request.set_solver_id(solver_id);
  request.set_x(std::move(x));
  request.set_w(std::move(w));
  request.set_y(std::move(y));
  NameDevice(&request);
  v1::ExecuteResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->Execute(&context, request, &response);
  if (!status.ok()) return CallError(status, &context);
  return std::move(*response.mutable_output());
}

absl::StatusOr<v1::DbStatsResponse> Client::DbStats() {
  v1::DbStatsResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status =
      stub_->DbStats(&context, v1::DbStatsRequest(), &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<v1::GetStatusResponse> Client::GetStatus(bool cluster) {
  v1::GetStatusResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  v1::GetStatusRequest request;
  request.set_cluster(cluster);
  grpc::Status status = stub_->GetStatus(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<std::string> Client::Health(const std::string& service) {
  if (service.size() > 127) {
    return absl::InvalidArgumentError("service: longer than 127 bytes");
  }
  // HealthCheckRequest {string service = 1;} by hand: the health service's
  // C++ stubs are not part of the installed gRPC.
  std::string wire;
  if (!service.empty()) {
    wire.push_back('\x0a');
    wire.push_back(static_cast<char>(service.size()));
    wire += service;
  }
  grpc::Slice slice(wire);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  absl::Mutex mu;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   absl::MutexLock lock(&mu);
                   status = std::move(s);
                   done = true;
                 });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&done));
  }
  if (!status.ok()) return CallError(status);
  // HealthCheckResponse {ServingStatus status = 1;}: absent means UNKNOWN.
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  int value = 0;
  if (bytes.size() >= 2 && bytes[0] == '\x08') value = bytes[1];
  switch (value) {
    case 1:
      return std::string("SERVING");
    case 2:
      return std::string("NOT_SERVING");
    case 3:
      return std::string("SERVICE_UNKNOWN");
    default:
      return std::string("UNKNOWN");
  }
}

absl::StatusOr<v1::DbExportResponse> Client::DbExport(bool system) {
  v1::DbExportRequest request;
  request.set_system(system);
  NameDevice(&request);
  v1::DbExportResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->DbExport(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<v1::DbImportResponse> Client::DbImport(std::string file,
                                                      bool overwrite) {
  v1::DbImportRequest request;
  request.set_file(std::move(file));
  request.set_overwrite(overwrite);
  v1::DbImportResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, CallTimeout());
  grpc::Status status = stub_->DbImport(&context, request, &response);
  if (!status.ok()) return CallError(status);
  return response;
}

absl::StatusOr<Device*> Client::DeviceFor(v1::Backend backend) {
  if (backend == cpu_.info().backend) return &cpu_;
  absl::MutexLock lock(&device_mu_);
  auto it = gpus_.find(backend);
  if (it == gpus_.end()) {
    // Any GPU device as a Device, or the reason it cannot be opened.
    auto open = [&](auto opened) -> absl::StatusOr<std::unique_ptr<Device>> {
      if (!opened.ok()) return opened.status();
      return std::unique_ptr<Device>(*std::move(opened));
    };
    absl::StatusOr<std::unique_ptr<Device>> device =
        backend == v1::CUDA
            ? open(CudaDevice::Open(options_.device_ordinal.value_or(0)))
        : backend == v1::HIP
            ? open(HipDevice::Open(options_.device_ordinal.value_or(0)))
            : absl::UnimplementedError(
                  absl::StrCat("unknown backend '", BackendName(backend), "'"));
    it = gpus_.emplace(backend, std::move(device)).first;
  }
  if (!it->second.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this client cannot run ", BackendName(backend),
                     " plans: ", it->second.status().message()));
  }
  return it->second->get();
}

absl::Status Client::Run(const ConvProblem& problem, uint32_t solver_id,
                         const PlanBuffers& buffers) {
  // The cached plan itself: its entries are never removed.
  ASSIGN_OR_RETURN(const v1::ExecutionPlan* cached,
                   PlanRef(problem, solver_id));
  const v1::ExecutionPlan& plan = *cached;
  absl::StatusOr<Device*> device = DeviceFor(plan.backend());
  if (!device.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "solver ", solver_id, " has a ", BackendName(plan.backend()), " plan; ",
        device.status().message()));
  }
  RETURN_IF_ERROR(LoadCodeObjects(plan, **device));
  if (*device == &cpu_) return ExecutePlan(**device, plan, buffers);
  absl::MutexLock lock(&run_mu_);
  void* const stream = stream_.load();
  RETURN_IF_ERROR((*device)->UseStream(stream));
  RETURN_IF_ERROR(ExecutePlan(**device, plan, buffers));
  // GPU steps are queued on the stream: on the caller's, the caller orders
  // what follows; on the device's own, the output is the caller's once
  // they are done.
  if (stream != nullptr) return absl::OkStatus();
  return (*device)->Synchronize();
}

void Client::SetStream(void* stream) { stream_.store(stream); }

void Client::SetTimeouts(absl::Duration call, absl::Duration find) {
  call_timeout_us_.store(absl::ToInt64Microseconds(call));
  find_timeout_us_.store(absl::ToInt64Microseconds(find));
}

}  // namespace convtune
