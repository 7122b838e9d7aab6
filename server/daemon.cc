#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/defaults.h"
#include "common/file_util.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu_device.h"
#include "server/backend.h"
#include "server/solver_registry.h"
#include "server/solvers/fault_injection.h"
#include "storage/records.h"

namespace convtune {
namespace {

// True if a process accepts connections on the Unix socket at `path`.
bool SocketIsLive(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

absl::Status PrepareSocketPath(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket: path '", path, "' is longer than ",
                     sizeof(sockaddr_un::sun_path) - 1, " bytes"));
  }
  std::error_code ec;
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  // A folder made here must let the socket's other users through, whatever
  // the umask.
  if (!parent.empty() && !std::filesystem::exists(parent, ec) &&
      std::filesystem::create_directories(parent, ec)) {
    chmod(parent.c_str(), 0755);
  }
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "socket: cannot create folder ", parent.string(), ": ", ec.message()));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket: ", path, " exists and is not a socket"));
    }
    if (SocketIsLive(path)) {
      return absl::FailedPreconditionError(
          absl::StrCat("socket: ", path,
                       " is in use by a running convtuned; stop it or pass "
                       "another --socket"));
    }
    unlink(path.c_str());  // left behind by a daemon that died
  }
  return absl::OkStatus();
}

// The TLS listener's credentials: the server's certificate and key, and the
// CA whose signature each client's certificate must carry (a client without
// one is refused in the handshake). InvalidArgument naming the missing
// setting; NotFound naming a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(
    const DaemonOptions::TlsFiles& files) {
  struct Setting {
    const char* key;     // the config key
    const char* flag;    // the flag
    const char* marker;  // what its PEM text must hold
    const std::string* path;
  };
  const Setting settings[3] = {
      {"tls_cert", "--tls-cert", "-----BEGIN CERTIFICATE-----",
       &files.cert_file},
      {"tls_key", "--tls-key", "PRIVATE KEY-----", &files.key_file},
      {"tls_client_ca", "--tls-client-ca", "-----BEGIN CERTIFICATE-----",
       &files.client_ca_file}};
  std::string pem[3];
  for (int i = 0; i < 3; ++i) {
    const Setting& s = settings[i];
    if (s.path->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.key, ": needed with listen_tls (", s.flag, " FILE)"));
    }
    absl::StatusOr<std::string> text = ReadFile(*s.path);
    if (!text.ok()) {
      return absl::NotFoundError(
          absl::StrCat(s.key, ": cannot read '", QuotePrefix(*s.path), "'"));
    }
    if (text->find(s.marker) == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.key, ": '", QuotePrefix(*s.path), "' holds no PEM ",
                       i == 1 ? "private key" : "certificate"));
    }
    pem[i] = *std::move(text);
  }
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = pem[2];
  options.pem_key_cert_pairs.push_back({pem[1], pem[0]});
  return grpc::SslServerCredentials(options);
}

// Bulk store operations (stats, export, import) are rare; two threads keep
// one long export from holding up a stats call.
constexpr int kStoreThreads = 2;
constexpr int kMaxCpuDevices = 64;

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency());
         ++i) {
      out.push_back(static_cast<int>(i));
    }
    return out;
  }
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.push_back(i);
  }
  return out;
}

int DefaultCompileThreads(int tuning_threads) {
  if (const char* env = std::getenv("CONVTUNE_COMPILE_PARALLEL_LEVEL")) {
    int v;
    if (absl::SimpleAtoi(env, &v) && v > 0) return v;
  }
  return tuning_threads;
}

}  // namespace

std::string DefaultDbDir() {
  if (const char* state = std::getenv("XDG_STATE_HOME");
      state != nullptr && *state != '\0') {
    return absl::StrCat(state, "/convtune/db");
  }
  if (const char* home = std::getenv("HOME");
      home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.local/state/convtune/db");
  }
  return "/var/lib/convtune/db";
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options) {
  if (options.socket_path.empty()) options.socket_path = DefaultSocketPath();
  if (options.db_dir.empty()) options.db_dir = DefaultDbDir();
  if (options.compile_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compile_threads: must be >= 1, got ", options.compile_threads));
  }
  if (options.tuning_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tuning_threads: must be >= 1, got ", options.tuning_threads));
  }
  if (options.tuning_threads == 0) {
    options.tuning_threads =
        static_cast<int>(std::max(2u, std::thread::hardware_concurrency()) - 1);
  }
  if (options.cpu_devices < 1 || options.cpu_devices > kMaxCpuDevices) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_devices: must be 1 to ",
                                                   kMaxCpuDevices, ", got ",
                                                   options.cpu_devices));
  }
  for (size_t i = 0; i < options.devices.size(); ++i) {
    if (options.devices[i] < 0 || options.devices[i] > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(
          "devices: ordinals are 0 to 1024, got ", options.devices[i]));
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.devices[j] == options.devices[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "devices: device ", options.devices[i], " is listed twice"));
      }
    }
  }
  if (options.cpu_devices > 1 && !options.measure_in_worker) {
    return absl::InvalidArgumentError(
        "cpu_devices: more than one device needs measure_in_worker (each "
        "device's timings run in its own worker process)");
  }
  // The compile pool feeds every device: sized by the tuning threads of all.
  if (options.compile_threads == 0) {
    options.compile_threads = DefaultCompileThreads(options.tuning_threads);
  }
  if (options.cpu_devices > 1) {
    const int allowed = static_cast<int>(AllowedCpus().size());
    if (options.cpu_devices > allowed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cpu_devices: ", options.cpu_devices, " devices need as many CPUs; ",
          "this process may run on ", allowed));
    }
    // Each device's share of the tuning threads (the device key counts
    // them: records of one share are not another's).
    options.tuning_threads = std::max(
        1, std::min(options.tuning_threads, allowed) / options.cpu_devices);
  }
  // Before anything runs a CPU kernel: the pool is made once. A process
  // that ran CPU kernels before (a test serving itself) keeps their count.
  if (!cpu::SetNumThreads(options.tuning_threads)) {
    options.tuning_threads = cpu::NumThreads();
  }
  absl::StatusOr<v1::FindMode> mode =
      options.find_mode.empty() ? FindModeFromEnvironment()
                                : ParseFindMode(options.find_mode, "find_mode");
  if (!mode.ok()) return mode.status();
  options.find_mode = FindModeName(*mode);
  options.service.default_mode = *mode;
  if (options.backend != "auto" && options.backend != "cpu" &&
      options.backend != "cuda" && options.backend != "hip") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend: unknown '", options.backend.substr(0, 32),
                     "' (expected auto, cpu, cuda or hip)"));
  }
  std::unique_ptr<Daemon> d(new Daemon(std::move(options)));
  RETURN_IF_ERROR(d->Init());
  return d;
}

absl::Status Daemon::Init() {
  std::error_code ec;
  std::filesystem::create_directories(options_.db_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "db: cannot create folder ", options_.db_dir, ": ", ec.message()));
  }
  // What tenants tuned is the daemon's alone: the folder 0700, its files
  // 0600 (main sets the umask for files written later; this mends a
  // database made before).
  if (chmod(options_.db_dir.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("db: cannot make folder ", options_.db_dir,
                     " private (mode 0700): ", std::strerror(errno)));
  }
  if (options_.db_min_free_mb < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "db_min_free_mb: must be 0 or more, got ", options_.db_min_free_mb));
  }
  if (options_.db_recovery != "continue" && options_.db_recovery != "refuse") {
    return absl::InvalidArgumentError(
        absl::StrCat("db_recovery: expected continue or refuse, got '",
                     QuotePrefix(options_.db_recovery), "'"));
  }
  ASSIGN_OR_RETURN(store_,
                   storage::OpenRocksDbStore(
                       options_.db_dir,
                       {.min_free_bytes = options_.db_min_free_mb << 20,
                        .refuse_damaged = options_.db_recovery == "refuse"}));
  if (const std::string mended = store_->Health().opened_damaged;
      !mended.empty()) {
    std::cerr << "convtuned: DATABASE DAMAGE MENDED at open of "
              << options_.db_dir << ": " << mended << std::endl;
  }
  for (const auto& entry :
       std::filesystem::directory_iterator(options_.db_dir, ec)) {
    if (entry.is_regular_file(ec)) chmod(entry.path().c_str(), 0600);
  }
  // A database that takes no writes (a full disk) still serves what it
  // holds; the stamp waits for the next start.
  if (absl::Status stamped = storage::StampMeta(store_.get(), "convtuned");
      !stamped.ok()) {
    if (!absl::IsResourceExhausted(stamped) && !absl::IsUnavailable(stamped)) {
      return stamped;
    }
    std::cerr << "convtuned: " << stamped.message() << std::endl;
  }
  if (!options_.devices.empty()) {
    if (options_.cpu_devices > 1) {
      return absl::InvalidArgumentError(
          "devices: names GPUs; cpu_devices splits the CPU; not both");
    }
    options_.device_ordinal = options_.devices.front();
  }
  ASSIGN_OR_RETURN(SelectedBackend backend,
                   SelectBackend(options_.backend, options_.device_ordinal));
  device_ = std::move(backend.device);
  compiler_ = std::move(backend.compiler);
  backend_note_ = std::move(backend.note);
  if (options_.cpu_devices > 1) {
    if (device_->info().backend != v1::CPU) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cpu_devices: applies to the cpu backend; the backend is ",
          BackendName(device_->info().backend)));
    }
    for (int i = 1; i < options_.cpu_devices; ++i) {
      more_devices_.push_back(std::make_unique<CpuDevice>());
    }
    absl::StrAppend(&backend_note_, "; ", options_.cpu_devices,
                    " CPU devices of ", options_.tuning_threads,
                    " thread(s) each");
  }
  if (options_.devices.size() > 1) {
    const v1::Backend kind = device_->info().backend;
    if (kind == v1::CPU) {
      return absl::InvalidArgumentError(
          "devices: names GPUs, and the backend is cpu (cpu_devices splits "
          "the CPU)");
    }
    for (size_t i = 1; i < options_.devices.size(); ++i) {
      ASSIGN_OR_RETURN(SelectedBackend more,
                       SelectBackend(BackendName(kind), options_.devices[i]));
      more_devices_.push_back(std::move(more.device));
    }
    absl::StrAppend(&backend_note_, "; devices ",
                    absl::StrJoin(options_.devices, ", "));
  }
  std::vector<Device*> devices = {device_.get()};
  for (const auto& d : more_devices_) devices.push_back(d.get());
  // Devices of one key share a core; a node of mixed GPUs has one a key.
  for (size_t i = 0; i < devices.size(); ++i) {
    auto same =
        std::find_if(keys_.begin(), keys_.end(), [&](const KeyGroup& g) {
          return devices[g.devices.front()]->info().Key() ==
                 devices[i]->info().Key();
        });
    if (same == keys_.end()) same = keys_.insert(keys_.end(), KeyGroup());
    same->devices.push_back(i);
  }
  if (keys_.size() > 1) {
    absl::StrAppend(&backend_note_, "; ", keys_.size(), " device keys");
  }
  // The key group of device i.
  std::vector<KeyGroup*> group_of(devices.size());
  for (KeyGroup& g : keys_) {
    for (size_t i : g.devices) group_of[i] = &g;
  }
  for (KeyGroup& g : keys_) {
    Device* first = devices[g.devices.front()];
    if (compiler_ != nullptr) {
      g.kernel_builder = std::make_unique<KernelBuilder>(
          first, *compiler_, *store_, first->info().arch);
      for (size_t k = 1; k < g.devices.size(); ++k) {
        g.kernel_builder->AddDevice(devices[g.devices[k]]);
      }
    }
    if (!options_.system_db_dir.empty()) {
      absl::StatusOr<std::unique_ptr<SystemFindDb>> system =
          SystemFindDb::Open(options_.system_db_dir, first->info().Key());
      if (system.ok()) {
        g.system_db = *std::move(system);
      } else if (!absl::IsNotFound(system.status())) {
        return system.status();
      }
    }
  }
  for (size_t i = 0; options_.measure_in_worker && i < devices.size(); ++i) {
    WorkerOptions worker{
        .exe = options_.measure_worker_exe,
        .backend = std::string(BackendName(devices[i]->info().backend)),
        .ordinal = Ordinal(i),
        .device_key = devices[i]->info().Key(),
        .threads = options_.tuning_threads,
        .nice = options_.tuning_nice,
        .cpus = CpuShare(i)};
    if (KernelBuilder* builder = group_of[i]->kernel_builder.get();
        builder != nullptr) {
      worker.code_object = [builder](const std::string& hash) {
        return builder->CodeObjectFor(hash);
      };
    }
    measurers_.push_back(std::make_unique<WorkerMeasurer>(std::move(worker)));
    RETURN_IF_ERROR(measurers_.back()->Start());
  }
  compile_pool_ = std::make_unique<ThreadPool>(
      "ct-compile", options_.compile_threads, options_.tuning_nice);
  for (size_t i = 0; i < devices.size(); ++i) {
    timing_queues_.push_back(std::make_unique<ThreadPool>(
        devices.size() > 1 ? absl::StrCat("ct-timing", i) : "ct-timing", 1,
        options_.tuning_nice));
  }
  store_pool_ = std::make_unique<ThreadPool>("ct-store", kStoreThreads);
  quotas_ = std::make_unique<TuningQuotas>(options_.core.quotas);
  Core::Options core_options = options_.core;
  core_options.shared_quotas = quotas_.get();
  for (KeyGroup& g : keys_) {
    std::vector<Core::DeviceLane> lanes;
    for (size_t i : g.devices) {
      lanes.push_back(
          {.ordinal = Ordinal(i),
           .device = devices[i],
           .timing_queue = timing_queues_[i].get(),
           .measurer = measurers_.empty() ? nullptr : measurers_[i].get()});
    }
    Device* first = devices[g.devices.front()];
    ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Solver>> faults,
                     MakeFaultInjectionSolvers(first->info().backend));
    if (!faults.empty() && &g == &keys_.front()) {
      std::cerr << "convtuned: CONVTUNE_FAULT_SOLVER is set: solver "
                << faults[0]->name() << " faults on purpose" << std::endl;
    }
    g.registry = SolverRegistry::WithLibraries(*first, std::move(faults));
    g.core = std::make_unique<Core>(std::move(lanes), *g.registry, *store_,
                                    *compile_pool_, core_options,
                                    g.system_db.get(), g.kernel_builder.get());
    g.core->SetDeviceLostHandler([this](const std::string& why) {
      std::cerr << "convtuned: device lost: " << why
                << "; stopping (exit status 3) so that a supervisor "
                   "restarts convtuned"
                << std::endl;
      absl::MutexLock lock(&mu_);
      device_lost_ = why;
      // Not on the timing queue: Shutdown waits for calls in flight.
      if (!lost_shutdown_.joinable())
        lost_shutdown_ = std::thread([this] { Shutdown(); });
    });
  }
  if (!options_.tier.address.empty()) RETURN_IF_ERROR(StartTier());
  access_ = std::make_unique<Access>(options_.access, &peers_);
  if (!options_.metrics_address.empty()) {
    MetricsSources sources;
    sources.counters = [this] {
      EngineCounters sum;
      for (Core* core : Cores()) sum += core->counters();
      return sum;
    };
    sources.tunings_in_flight = [this] {
      int64_t n = 0;
      for (Core* core : Cores()) n += core->tunings_in_flight();
      return n;
    };
    sources.calls_in_flight = [this] { return call_log_->in_flight(); };
    sources.storage = [this] { return store_->Health(); };
    sources.devices = [this] {
      std::vector<MetricsSources::DeviceFigures> out;
      for (Core* core : Cores()) {
        for (const TimingLanes::LaneStatus& l : core->timing().Status()) {
          out.push_back({.ordinal = l.ordinal,
                         .jobs_waiting = l.jobs_waiting,
                         .jobs_done = l.jobs_done,
                         .busy_ms = l.busy_ms});
        }
      }
      return out;
    };
    sources.pools = {{"compile", compile_pool_.get()},
                     {"store", store_pool_.get()}};
    for (const auto& [name, pool] : TimingQueues()) {
      sources.pools.emplace_back(name, pool);
    }
    if (compiler_ != nullptr) {
      sources.kernel_cache = [this] {
        BuildStats s;
        for (const KeyGroup& g : keys_) {
          const BuildStats one = g.kernel_builder->stats();
          s.memory_hits += one.memory_hits;
          s.store_hits += one.store_hits;
          s.compiled += one.compiled;
        }
        absl::StatusOr<int64_t> entries =
            storage::KernelCache(store_.get()).Count();
        return std::vector<std::pair<std::string, int64_t>>{
            {"entries", entries.ok() ? *entries : 0},
            {"memory_hits", s.memory_hits},
            {"store_hits", s.store_hits},
            {"compiles", s.compiled}};
      };
    }
    ASSIGN_OR_RETURN(
        metrics_, Metrics::Start(options_.metrics_address, std::move(sources)));
  }
  call_log_ =
      std::make_unique<CallLog>(*access_, options_.log_rpcs, metrics_.get());
  options_.service.status = [this](v1::GetStatusResponse* resp) {
    resp->set_version(CONVTUNE_VERSION);
    resp->set_backend_note(backend_note_);
    resp->set_calls_in_flight(call_log_->in_flight());
    if (core().tier() != nullptr) resp->set_tier(core().tier()->Describe());
    std::vector<std::pair<std::string, ThreadPool*>> pools = {
        {"compile", compile_pool_.get()}};
    for (const auto& p : TimingQueues()) pools.push_back(p);
    pools.emplace_back("store", store_pool_.get());
    for (const auto& [name, pool] : pools) {
      v1::QueueStatus* q = resp->add_queues();
      q->set_name(name);
      q->set_threads(pool->threads());
      q->set_queued(pool->queued());
    }
    std::vector<v1::DeviceStatus> listed;
    for (Core* core : Cores()) {
      for (const TimingLanes::LaneStatus& lane : core->timing().Status()) {
        v1::DeviceStatus& d = listed.emplace_back();
        d.set_ordinal(lane.ordinal);
        d.set_device_key(core->device_key());
        d.set_jobs_waiting(lane.jobs_waiting);
        d.set_jobs_done(lane.jobs_done);
        d.set_busy_ms(lane.busy_ms);
        d.set_state(lane.lost               ? "lost"
                    : lane.jobs_waiting > 0 ? "tuning"
                    : lane.in_use           ? "in use"
                                            : "idle");
      }
    }
    // In the order the devices were given.
    std::stable_sort(
        listed.begin(), listed.end(),
        [this](const v1::DeviceStatus& a, const v1::DeviceStatus& b) {
          return DeviceIndex(a.ordinal()) < DeviceIndex(b.ordinal());
        });
    for (v1::DeviceStatus& d : listed) *resp->add_devices() = std::move(d);
  };
  service_ = std::make_unique<ConvTuneService>(Cores(), *store_, *store_pool_,
                                               *access_, options_.service);

  RETURN_IF_ERROR(PrepareSocketPath(options_.socket_path));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // The Unix socket is accepted by UnixListener, which reads each
  // connection's credentials; gRPC listens only on TCP.
  int tcp_port = -1;
  if (!options_.listen_address.empty()) {
    builder.AddListeningPort(options_.listen_address,
                             grpc::InsecureServerCredentials(), &tcp_port);
  }
  int tls_port = -1;
  if (!options_.tls_address.empty()) {
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> tls,
                     TlsCredentials(options_.tls));
    builder.AddListeningPort(options_.tls_address, tls, &tls_port);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(call_log_->Factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || tcp_port == 0 || tls_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ",
                     tcp_port == 0 || (server_ == nullptr && tls_port != 0)
                         ? options_.listen_address
                         : options_.tls_address));
  }
  tcp_port_ = std::max(tcp_port, 0);
  tls_port_ = std::max(tls_port, 0);
  listener_ = std::make_unique<UnixListener>(server_.get(), &peers_);
  RETURN_IF_ERROR(listener_->Start(options_.socket_path, options_.socket_mode));
  owns_socket_ = true;
  // The database is open and the device ready: only now SERVING, for the
  // whole server ("") and for the service by name.
  server_->GetHealthCheckService()->SetServingStatus(
      v1::ConvTune::service_full_name(), true);
  // SetServingStatus(bool) sets every name: the storage name after it.
  server_->GetHealthCheckService()->SetServingStatus(true);
  storage_writable_ = store_->Health().writable;
  server_->GetHealthCheckService()->SetServingStatus(kStorageHealthName,
                                                     storage_writable_);
  storage_watch_ = std::thread([this] { WatchStorage(); });
  return absl::OkStatus();
}

void Daemon::WatchStorage() {
  absl::MutexLock lock(&mu_);
  while (
      !mu_.AwaitWithTimeout(absl::Condition(&shut_down_), absl::Seconds(1))) {
    mu_.Unlock();
    storage::StoreHealth health = store_->Health();
    if (!health.writable) {
      if (store_->Recover().ok()) health = store_->Health();
    }
    if (health.writable != storage_writable_) {
      storage_writable_ = health.writable;
      if (health.writable) {
        std::cerr << "convtuned: database " << options_.db_dir
                  << " takes writes again" << std::endl;
      } else {
        std::cerr << "convtuned: database " << options_.db_dir
                  << " takes no writes: " << health.error
                  << "; answers go on, new results are not stored" << std::endl;
      }
    }
    mu_.Lock();
    // Shutdown has told health checks NOT_SERVING for every name.
    if (!shut_down_) {
      server_->GetHealthCheckService()->SetServingStatus(kStorageHealthName,
                                                         health.writable);
    }
  }
}

absl::Status Daemon::StartTier() {
  RETURN_IF_ERROR(FindTier::Validate(options_.tier));
  if (!options_.tier_password_file.empty()) {
    std::ifstream in(options_.tier_password_file);
    std::string line;
    if (!in || !std::getline(in, line) || line.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tier.password_file: cannot read a password from ",
                       QuotePrefix(options_.tier_password_file)));
    }
    options_.tier.password = line;
  }
  // Each key shares its own records with the fleet. The BLAS's version is
  // part of what library steps' timings depend on.
  for (const KeyGroup& g : keys_) {
    const DeviceInfo& info = g.core->device_info();
    const std::string scope = info.blas.empty()
                                  ? info.Key()
                                  : absl::StrCat(info.Key(), "-", info.blas);
    storage::Store* store = store_.get();
    const std::string device_key = info.Key();
    g.core->StartTier(
        options_.tier, scope, CONVTUNE_VERSION,
        [store,
         device_key](const std::function<void(const v1::FindRecord&)>& each) {
          storage::FindDb db(store, device_key);
          absl::StatusOr<std::vector<std::string>> keys = db.ProblemKeys();
          if (!keys.ok()) return;
          for (const std::string& key : *keys) {
            absl::StatusOr<v1::FindRecord> r = db.Get(key);
            if (r.ok()) each(*r);
          }
        });
  }
  return absl::OkStatus();
}

std::vector<Core*> Daemon::Cores() const {
  std::vector<Core*> out;
  for (const KeyGroup& g : keys_) {
    if (g.core != nullptr) out.push_back(g.core.get());
  }
  return out;
}

size_t Daemon::DeviceIndex(int ordinal) const {
  const size_t n = 1 + more_devices_.size();
  for (size_t i = 0; i < n; ++i) {
    if (Ordinal(i) == ordinal) return i;
  }
  return n;
}

std::vector<int> Daemon::CpuShare(size_t i) const {
  std::vector<int> cpus;
  if (options_.cpu_devices < 2) return cpus;
  // Start checked that each device's share fits the allowed CPUs.
  const std::vector<int> allowed = AllowedCpus();
  for (int k = 0; k < options_.tuning_threads; ++k) {
    const size_t at = i * options_.tuning_threads + k;
    if (at < allowed.size()) cpus.push_back(allowed[at]);
  }
  return cpus;
}

int Daemon::Ordinal(size_t i) const {
  if (options_.devices.size() > 1) return options_.devices[i];
  return options_.cpu_devices > 1 ? static_cast<int>(i)
                                  : options_.device_ordinal;
}

std::vector<std::pair<std::string, ThreadPool*>> Daemon::TimingQueues() const {
  std::vector<std::pair<std::string, ThreadPool*>> out;
  for (size_t i = 0; i < timing_queues_.size(); ++i) {
    out.emplace_back(timing_queues_.size() > 1 ? absl::StrCat("timing", i)
                                               : std::string("timing"),
                     timing_queues_[i].get());
  }
  const std::vector<Core*> cores = Cores();
  for (size_t i = 0; i < cores.size(); ++i) {
    if (ThreadPool* q = cores[i]->timing().dispatch_queue(); q != nullptr) {
      out.emplace_back(cores.size() > 1 ? absl::StrCat("dispatch", i)
                                        : std::string("dispatch"),
                       q);
    }
  }
  return out;
}

std::string Daemon::TierSummary() {
  std::vector<std::string> parts;
  for (const KeyGroup& g : keys_) {
    FindTier* tier = g.core->tier();
    const std::string one = tier == nullptr ? "none" : tier->Describe();
    parts.push_back(
        keys_.size() > 1 ? absl::StrCat(g.core->device_key(), ": ", one) : one);
  }
  return absl::StrJoin(parts, "; ");
}

std::string Daemon::SystemDbSummary() const {
  if (options_.system_db_dir.empty()) return "none";
  std::vector<std::string> parts;
  for (const KeyGroup& g : keys_) {
    const SystemFindDb* system_db = g.system_db.get();
    const std::string key = g.core->device_key();
    std::string one;
    if (system_db == nullptr) {
      one = absl::StrCat("none for ", keys_.size() > 1 ? key : "this device",
                         " in ", options_.system_db_dir);
    } else if (system_db->exact()) {
      one =
          absl::StrCat(system_db->path(), " (", system_db->size(), " records)");
    } else {
      one = absl::StrCat(system_db->path(), " (", system_db->size(),
                         " records) of the nearest compute-unit count: ",
                         system_db->source_device_key(), " for ", key);
    }
    parts.push_back(keys_.size() > 1 && system_db != nullptr
                        ? absl::StrCat(key, ": ", one)
                        : one);
  }
  return absl::StrJoin(parts, "; ");
}

void Daemon::Shutdown(int grace_ms) {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(grace_ms + 200);
  // NOT_SERVING first, so that a supervisor's health check sees the
  // shutdown while calls in flight finish.
  if (server_) server_->GetHealthCheckService()->Shutdown();
  if (listener_) listener_->Stop();
  for (Core* core : Cores()) core->Shutdown();
  if (call_log_) call_log_->WaitIdle(absl::Milliseconds(grace_ms));
  // Whoever still waits (on a tuning, an import) hears why, rather than
  // losing the connection.
  if (service_) service_->CutPendingCalls();
  if (server_) server_->Shutdown(deadline);
  // No scrape reads the core or the pools once they start to go.
  metrics_.reset();
}

void Daemon::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&shut_down_));
}

void Daemon::JoinLostShutdown() {
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    t = std::move(lost_shutdown_);
  }
  if (t.joinable()) t.join();
}

std::string Daemon::device_lost() const {
  absl::MutexLock lock(&mu_);
  return device_lost_;
}

Daemon::~Daemon() {
  Shutdown();
  if (storage_watch_.joinable()) storage_watch_.join();
  // After a device loss Shutdown runs on its own thread, which may still be
  // waiting out the grace period for calls in flight: those need the pools.
  JoinLostShutdown();
  // The pools drain first: their tasks finish calls on the server and use
  // the core, so both must still exist. Compile tasks hand work to the
  // timing queue and timing tasks to the compile pool (a stored record may
  // start a training), so they are drained together.
  std::vector<ThreadPool*> pools = {compile_pool_.get(), store_pool_.get()};
  for (const auto& q : timing_queues_) pools.push_back(q.get());
  for (Core* core : Cores()) pools.push_back(core->timing().dispatch_queue());
  ThreadPool::DrainAll(pools);
  compile_pool_.reset();
  timing_queues_.clear();
  store_pool_.reset();
  // With the timing queue gone no device-loss handler can start one again.
  JoinLostShutdown();
  server_.reset();
  service_.reset();
  keys_.clear();
  if (owns_socket_) unlink(options_.socket_path.c_str());
}

}  // namespace convtune
