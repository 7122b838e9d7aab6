// convtuned: flags -> options -> Daemon::Start -> wait for SIGTERM/SIGINT.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/defaults.h"
#include "common/quote.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/measure_worker.h"

namespace {

constexpr char kUsage[] = R"(usage: convtuned [flags]

convtuned owns this node's convolution tuning: it times every applicable
solver for a problem once, keeps the answer in its database, and serves it to
every process over gRPC.

Settings come from built-in defaults, then the config file, then the
environment (CONVTUNE_SOCKET, CONVTUNE_FIND_MODE,
CONVTUNE_COMPILE_PARALLEL_LEVEL), then these flags.

flags:
  --config FILE          TOML config file: daemon settings, limits, tenants
                         and admins (deploy/convtuned.toml documents every
                         key). default: $CONVTUNE_CONFIG, else none
  --socket PATH          Unix socket to serve on. Each connection's user
                         (SO_PEERCRED) is its identity: the daemon's own user
                         and root are admins, other users tenants, unless the
                         config says otherwise. default: $CONVTUNE_SOCKET,
                         else $XDG_RUNTIME_DIR/convtune/convtuned.sock, else
                         /tmp/convtune-$UID/convtuned.sock
  --socket-mode MODE     the socket's permission bits, octal. default: 0660
  --listen-plaintext HOST:PORT
                         also serve on plaintext TCP (e.g. 127.0.0.1:7345).
                         Its callers are anonymous: read-only queries only
                         (immediate answers, solver lists, workspace sizes),
                         never tuning, Execute or database calls. default: off
  --listen-tls HOST:PORT also serve on TLS. Each caller must present a client
                         certificate that --tls-client-ca signed; its common
                         name or a subject alternative name is its identity
                         ([[tenant]] cert_names in the config). default: off
  --tls-cert FILE        the server's certificate chain (PEM), for --listen-tls
  --tls-key FILE         the server's private key (PEM), for --listen-tls
  --tls-client-ca FILE   the CA certificates that sign clients' certificates
                         (PEM), for --listen-tls
  --db DIR               database folder (RocksDB). default:
                         $XDG_STATE_HOME/convtune/db, else ~/.local/state/convtune/db
  --db-min-free-mb N     free space the database leaves on its filesystem.
                         Below it, or after a failed write (a full disk),
                         finds still answer but store nothing and say so
                         (FindResponse.not_stored); health name
                         convtune.storage is NOT_SERVING until writes resume,
                         checked each second. 0: no floor. default: 64
  --db-recovery continue|refuse
                         when a write-ahead log is damaged (a flipped bit, a
                         cut-off tail) or CURRENT is missing: continue with
                         every record before the damage, after copying the
                         logs to DIR/lost/ (said at start and in status), or
                         refuse to start, naming the file. default: continue
  --backend auto|cpu|cuda|hip
                         device backend; auto tries CUDA, then HIP, else uses
                         the CPU and says why. An explicit GPU backend that
                         cannot be opened is an error. default: auto
  --device N             GPU ordinal for cuda / hip. default: 0
  --devices N,N,...      the GPUs (cuda / hip ordinals) the daemon owns, each
                         with its own timing queue and worker; GPUs of one
                         device key share records, those of different keys
                         are kept apart. default: --device alone
  --device-in-use-ms MS  how long tuning leaves a device to a client that said
                         it runs there (a find's or Execute's device), where
                         another is free. default: 10000
  --cpu-devices N        the cpu backend as N devices (ordinals 0 to N-1), the
                         tuning threads split evenly between them, each timed
                         in its own worker: tuning runs on N at once, never
                         two on one. Needs --measure-in-worker on. default: 1
  --system-db DIR        folder of system FindDb files (<device_key>.ctsys, made
                         by convtune db export --system); consulted after the
                         database. default: none
  --find-mode MODE       mode of finds that name none: NORMAL (1), FAST (2),
                         HYBRID (3), DYNAMIC_HYBRID (5), TRUST_VERIFY (6),
                         TRUST_VERIFY_FULL (7). default: $CONVTUNE_FIND_MODE,
                         else DYNAMIC_HYBRID
  --background-tune on|off
                         on an immediate-mode miss of both FindDbs, queue a
                         NORMAL find of the problem at the lowest priority
                         (at most 64 waiting); a request may say otherwise.
                         default: on
  --tuning-threads N     hardware threads tuning may keep busy: compiling,
                         and on the CPU backend the timed kernels (its
                         device's compute units) and reference checks. One is
                         left to serving, so that answers do not wait on
                         tuning. default: hardware threads minus one (at
                         least one)
  --compile-threads N    threads that build and compile kernels. default:
                         $CONVTUNE_COMPILE_PARALLEL_LEVEL, else --tuning-threads
  --measure-in-worker on|off
                         check and time candidate kernels in a worker process
                         that owns the device: a kernel that faults or hangs
                         costs that worker only (it is replaced, and the
                         solver quarantined for the problem). off: in
                         convtuned itself, where a fault stops it. default: on
  --measure-bound-ms N   wall-time floor of each measurement's bound, which
                         adds 50 times the plan's estimated time per run; a
                         worker past its bound is killed. default: 20000
  --max-tensor-bytes N   largest tensor a request may describe. default: 16 GiB
  --max-execute-bytes N  largest total of inline tensors for Execute. default: 64 MiB
  --log-rpcs on|off      one line per RPC on stderr (rpc, tenant, role, code,
                         ms). default: on
  --metrics HOST:PORT    serve Prometheus text at http://HOST:PORT/metrics:
                         RPCs by method, code and tenant, latency, FindDb
                         hits, tunings, compile and timing seconds, queue
                         depths, kernel cache. It names tenants: bind it
                         where only operators reach. default: off
  --tier ADDRESS         share find records with the fleet's other daemons
                         of this device through Redis: host:port,
                         redis://host:port or unix:/path. Before tuning, a
                         find that misses the local FindDbs asks the tier
                         (25 ms deadline, circuit breaker); what it tunes is
                         published. A record read from the tier is checked
                         (device, problem, solvers, configs) and stored
                         locally. The tier down or slow costs no errors.
                         hiredis has no TLS: use a private network with ACL
                         passwords, or stunnel. default: off ([tier] in the
                         config sets the rest)
  --tier-fleet NAME      daemons of one fleet share records. default: default
  --tier-user USER       the Redis ACL user daemons write as.
                         default: convtune-daemon
  --tier-password-file FILE
                         the file holding that user's password (first line)
  --tier-node NAME       this daemon's name in what it publishes.
                         default: the host name
  --help                 this text
  --version              the version, then exit

Stop it with SIGTERM or SIGINT (Ctrl-C): calls in flight get 1.5 seconds,
then those still waiting are answered UNAVAILABLE ("convtuned is shutting
down"), and the process ends within two seconds of the signal (a measurement
still running is abandoned; nothing partial is stored).

A solver whose kernel faults the GPU is quarantined for that problem (kept in
the database). If the GPU cannot be reset afterwards, convtuned stops with
exit status 3 so that its supervisor (deploy/convtuned.service) restarts it.

example:
  convtuned --socket /tmp/ct.sock --db ./state/db &
  convtune --socket /tmp/ct.sock find conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1
)";

int UsageError(const std::string& msg) {
  std::cerr << "convtuned: " << msg << "\n(convtuned --help lists the flags)\n";
  return 2;
}

bool IsFlag(const std::string& name) {
  for (const char* f : {"--config",
                        "--socket",
                        "--socket-mode",
                        "--listen-plaintext",
                        "--listen-tls",
                        "--tls-cert",
                        "--tls-key",
                        "--tls-client-ca",
                        "--db",
                        "--system-db",
                        "--find-mode",
                        "--backend",
                        "--background-tune",
                        "--device",
                        "--cpu-devices",
                        "--device-in-use-ms",
                        "--devices",
                        "--compile-threads",
                        "--tuning-threads",
                        "--max-tensor-bytes",
                        "--max-execute-bytes",
                        "--log-rpcs",
                        "--metrics",
                        "--db-min-free-mb",
                        "--db-recovery",
                        "--measure-in-worker",
                        "--measure-bound-ms",
                        "--tier",
                        "--tier-fleet",
                        "--tier-user",
                        "--tier-password-file",
                        "--tier-node"}) {
    if (name == f) return true;
  }
  return false;
}

int signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  // write() is async-signal-safe; nothing else happens in the handler.
  ssize_t ignored = write(signal_pipe[1], &byte, 1);
  (void)ignored;
}

bool ParseInt64(const std::string& s, int64_t* v) {
  return absl::SimpleAtoi(s, v) && *v > 0;
}

// The --config flag's value, else $CONVTUNE_CONFIG, else "".
std::string ConfigPath(int argc, char** argv) {
  std::string path;
  if (const char* env = std::getenv("CONVTUNE_CONFIG")) path = env;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--config" && i + 1 < argc) path = argv[i + 1];
    if (flag.rfind("--config=", 0) == 0) path = flag.substr(9);
  }
  return path;
}

bool OnOff(const std::string& value, bool* out) {
  if (value != "on" && value != "off") return false;
  *out = value == "on";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // A measurement worker, started by a daemon: nothing else of main runs.
  if (argc >= 2 && std::string(argv[1]) == "--measure-worker") {
    return convtune::MeasureWorkerMain(
        std::vector<std::string>(argv + 2, argv + argc));
  }
  convtune::DaemonOptions options;
  // The config first, so that the environment and the flags override it.
  if (const std::string config = ConfigPath(argc, argv); !config.empty()) {
    if (absl::Status s = convtune::LoadConfig(config, &options); !s.ok()) {
      std::cerr << "convtuned: " << s.message() << "\n";
      return 2;
    }
  }
  if (absl::Status s = convtune::ApplyEnvironment(&options); !s.ok()) {
    std::cerr << "convtuned: " << s.message() << "\n";
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (flag == "--version") {
      std::cout << "convtuned " << CONVTUNE_VERSION << "\n";
      return 0;
    }
    // Named before its value is taken: "--bogus" alone is unknown, not
    // missing a value.
    if (!IsFlag(flag.substr(0, flag.find('=')))) {
      return UsageError(absl::StrCat(
          "unknown flag '",
          convtune::QuotePrefix(flag.substr(0, flag.find('='))), "'"));
    }
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return UsageError(absl::StrCat(flag, ": missing value"));
    }
    int64_t n = 0;
    if (flag == "--config") {
      // Read before the other flags.
    } else if (flag == "--socket") {
      options.socket_path = value;
    } else if (flag == "--socket-mode") {
      char* end = nullptr;
      const unsigned long bits = std::strtoul(value.c_str(), &end, 8);
      if (value.empty() || *end != '\0' || bits > 0777 ||
          (bits & 0600) != 0600 || (bits & 0111) != 0) {
        return UsageError(absl::StrCat(
            "--socket-mode: expected an octal mode such as 0660, with owner "
            "read and write and no execute bits, got '",
            convtune::QuotePrefix(value), "'"));
      }
      options.socket_mode = static_cast<mode_t>(bits);
    } else if (flag == "--listen-plaintext") {
      options.listen_address = value;
    } else if (flag == "--listen-tls") {
      options.tls_address = value;
    } else if (flag == "--tls-cert") {
      options.tls.cert_file = value;
    } else if (flag == "--tls-key") {
      options.tls.key_file = value;
    } else if (flag == "--tls-client-ca") {
      options.tls.client_ca_file = value;
    } else if (flag == "--metrics") {
      options.metrics_address = value;
    } else if (flag == "--log-rpcs") {
      if (!OnOff(value, &options.log_rpcs)) {
        return UsageError(absl::StrCat("--log-rpcs: expected on or off, got '",
                                       convtune::QuotePrefix(value), "'"));
      }
    } else if (flag == "--db") {
      options.db_dir = value;
    } else if (flag == "--db-min-free-mb") {
      if (!absl::SimpleAtoi(value, &n) || n < 0 || n > (int64_t{1} << 30)) {
        return UsageError(absl::StrCat("--db-min-free-mb: expected 0 to ",
                                       int64_t{1} << 30, ", got '",
                                       convtune::QuotePrefix(value), "'"));
      }
      options.db_min_free_mb = n;
    } else if (flag == "--db-recovery") {
      if (value != "continue" && value != "refuse") {
        return UsageError(
            absl::StrCat("--db-recovery: expected continue or refuse, got '",
                         convtune::QuotePrefix(value), "'"));
      }
      options.db_recovery = value;
    } else if (flag == "--system-db") {
      options.system_db_dir = value;
    } else if (flag == "--find-mode") {
      options.find_mode = value;
    } else if (flag == "--backend") {
      options.backend = value;
    } else if (flag == "--measure-in-worker") {
      if (!OnOff(value, &options.measure_in_worker)) {
        return UsageError(
            absl::StrCat("--measure-in-worker: expected on or off, got '",
                         convtune::QuotePrefix(value), "'"));
      }
    } else if (flag == "--measure-bound-ms") {
      if (!absl::SimpleAtoi(value, &n) || n < 100 || n > 3600000) {
        return UsageError(
            absl::StrCat("--measure-bound-ms: expected 100 to 3600000, got '",
                         convtune::QuotePrefix(value), "'"));
      }
      options.core.bound_floor_ms = static_cast<double>(n);
    } else if (flag == "--background-tune") {
      if (!OnOff(value, &options.core.background_tuning)) {
        return UsageError(
            absl::StrCat("--background-tune: expected on or off, got '",
                         convtune::QuotePrefix(value), "'"));
      }
    } else if (flag == "--device") {
      if (!absl::SimpleAtoi(value, &n) || n < 0 || n > 1024) {
        return UsageError(absl::StrCat("--device: expected 0 to 1024, got '",
                                       convtune::QuotePrefix(value), "'"));
      }
      options.device_ordinal = static_cast<int>(n);
    } else if (flag == "--devices") {
      options.devices.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        if (!absl::SimpleAtoi(part, &n) || n < 0 || n > 1024 ||
            options.devices.size() >= 64) {
          return UsageError(absl::StrCat(
              "--devices: expected up to 64 ordinals 0 to 1024 separated by "
              "commas, got '",
              convtune::QuotePrefix(value), "'"));
        }
        options.devices.push_back(static_cast<int>(n));
      }
    } else if (flag == "--device-in-use-ms") {
      if (!absl::SimpleAtoi(value, &n) || n < 0 || n > 86400000) {
        return UsageError(
            absl::StrCat("--device-in-use-ms: expected 0 to 86400000, got '",
                         convtune::QuotePrefix(value), "'"));
      }
      options.core.device_in_use_ms = static_cast<double>(n);
    } else if (flag == "--cpu-devices") {
      if (!absl::SimpleAtoi(value, &n) || n < 1 || n > 64) {
        return UsageError(absl::StrCat("--cpu-devices: expected 1 to 64, got '",
                                       convtune::QuotePrefix(value), "'"));
      }
      options.cpu_devices = static_cast<int>(n);
    } else if (flag == "--compile-threads") {
      if (!ParseInt64(value, &n) || n > 1024) {
        return UsageError(
            absl::StrCat("--compile-threads: expected 1 to 1024, got '",
                         convtune::QuotePrefix(value), "'"));
      }
      options.compile_threads = static_cast<int>(n);
    } else if (flag == "--tuning-threads") {
      if (!ParseInt64(value, &n) || n > 1024) {
        return UsageError(
            absl::StrCat("--tuning-threads: expected 1 to 1024, got '",
                         convtune::QuotePrefix(value), "'"));
      }
      options.tuning_threads = static_cast<int>(n);
    } else if (flag == "--tier") {
      options.tier.address = value;
    } else if (flag == "--tier-fleet") {
      options.tier.fleet = value;
    } else if (flag == "--tier-user") {
      options.tier.user = value;
    } else if (flag == "--tier-password-file") {
      options.tier_password_file = value;
    } else if (flag == "--tier-node") {
      options.tier.node = value;
    } else if (flag == "--max-tensor-bytes") {
      if (!ParseInt64(value, &n)) {
        return UsageError(
            absl::StrCat("--max-tensor-bytes: expected a positive integer"));
      }
      options.service.limits.max_tensor_bytes = n;
    } else if (flag == "--max-execute-bytes") {
      if (!ParseInt64(value, &n) || n > convtune::kMaxGrpcMessageBytes / 2) {
        return UsageError(absl::StrCat("--max-execute-bytes: expected 1 to ",
                                       convtune::kMaxGrpcMessageBytes / 2));
      }
      options.service.max_execute_bytes = n;
    } else {
      return UsageError(
          absl::StrCat("unknown flag '", convtune::QuotePrefix(flag), "'"));
    }
  }

  // Libraries start threads before main (OpenBLAS does), so blocking signals
  // here cannot route them to one thread: a handler writes the signal number
  // to a pipe that the waiter thread reads.
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) {
    std::cerr << "convtuned: cannot create a pipe: " << std::strerror(errno)
              << "\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Database files are private to the daemon's user (the socket's mode is
  // set explicitly).
  umask(077);
  absl::StatusOr<std::unique_ptr<convtune::Daemon>> daemon =
      convtune::Daemon::Start(options);
  if (!daemon.ok()) {
    std::cerr << "convtuned: " << daemon.status().message() << "\n";
    return 1;
  }
  const convtune::DaemonOptions& o = (*daemon)->options();
  std::cerr << "convtuned: " << (*daemon)->backend_note() << std::endl;
  if (!o.tier.address.empty()) {
    std::cerr << "convtuned: tier: " << (*daemon)->TierSummary() << std::endl;
  }
  // The serving line comes last: it is the readiness signal that
  // supervisors and tests wait for.
  std::cerr << "convtuned: system FindDb: " << (*daemon)->SystemDbSummary()
            << std::endl;
  std::cerr
      << "convtuned: serving on unix:" << o.socket_path
      << (o.listen_address.empty()
              ? ""
              : absl::StrCat(" and plaintext tcp port ", (*daemon)->tcp_port(),
                             " (", o.listen_address, ", read-only)"))
      << (o.tls_address.empty()
              ? ""
              : absl::StrCat(" and tls port ", (*daemon)->tls_port(), " (",
                             o.tls_address, ", client certificates required)"))
      << ((*daemon)->metrics_port() == 0
              ? ""
              : absl::StrCat(", metrics on port ", (*daemon)->metrics_port()))
      << " (device " << (*daemon)->device_key() << ", db " << o.db_dir
      << ", find mode " << o.find_mode << ")" << std::endl;

  std::thread waiter([&] {
    unsigned char sig = 0;
    while (read(signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // the daemon stopped itself
    std::cerr << "convtuned: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
              << ", shutting down" << std::endl;
    // The process ends within kExitWithinMs of the signal: a measurement
    // still running then (a kernel cannot be stopped midway) is abandoned.
    // Every stored record was synced when it was written.
    std::thread([] {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(convtune::Daemon::kExitWithinMs));
      std::cerr << "convtuned: a measurement was still running; it is "
                   "abandoned, stopped"
                << std::endl;
      _exit(0);
    }).detach();
    (*daemon)->Shutdown();
  });
  (*daemon)->Wait();
  const bool lost = !(*daemon)->device_lost().empty();
  // The waiter blocks on the signal pipe: wake it when the daemon stopped
  // itself.
  if (lost) {
    const unsigned char none = 0;
    while (write(signal_pipe[1], &none, 1) < 0 && errno == EINTR) {
    }
  }
  waiter.join();
  daemon->reset();
  std::cerr << "convtuned: stopped" << std::endl;
  return lost ? 3 : 0;
}
