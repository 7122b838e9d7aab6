// `convtune`: the command-line client of convtuned.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
#include "common/defaults.h"
#include "common/file_util.h"
#include "common/quote.h"

namespace convtune::cli {
namespace {

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

// Reads "--name VALUE" or "--name=VALUE" at argv[*i]; advances *i.
bool FlagValue(const std::vector<std::string>& argv, size_t* i,
               absl::string_view name, std::string* value, std::string* error) {
  const std::string& arg = argv[*i];
  if (absl::StartsWith(arg, absl::StrCat(name, "="))) {
    *value = arg.substr(name.size() + 1);
    return true;
  }
  if (arg != name) return false;
  if (*i + 1 >= argv.size()) {
    *error = absl::StrCat(name, " needs a value");
    return true;
  }
  *value = argv[++*i];
  return true;
}

// The PEM text of a TLS flag's file, or of $env when the flag is not given.
bool ReadPem(const std::string& flag, std::string path, const char* env,
             bool use_env, std::string* pem, std::string* error) {
  if (path.empty()) {
    if (!use_env) return true;
    const char* v = std::getenv(env);
    if (v == nullptr || *v == '\0') return true;
    path = v;
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    *error = absl::StrCat(flag, ": cannot read '", QuotePrefix(path), "'");
    return false;
  }
  *pem = *std::move(text);
  return true;
}

int Main(const std::vector<std::string>& argv) {
  std::string socket, address, timeout, device;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  size_t i = 0;
  for (; i < argv.size() && absl::StartsWith(argv[i], "-"); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kMainHelp;
      return kExitOk;
    }
    if (arg == "--version") {
      std::cout << "convtune " << CONVTUNE_VERSION << "\n";
      return kExitOk;
    }
    std::string error;
    if (!FlagValue(argv, &i, "--socket", &socket, &error) &&
        !FlagValue(argv, &i, "--address", &address, &error) &&
        !FlagValue(argv, &i, "--timeout", &timeout, &error) &&
        !FlagValue(argv, &i, "--device", &device, &error) &&
        !FlagValue(argv, &i, "--tls-ca", &tls_ca, &error) &&
        !FlagValue(argv, &i, "--tls-cert", &tls_cert, &error) &&
        !FlagValue(argv, &i, "--tls-key", &tls_key, &error) &&
        !FlagValue(argv, &i, "--tls-server-name", &tls_server_name, &error)) {
      return UsageError(
          absl::StrCat("unknown global flag '", QuotePrefix(arg), "'"));
    }
    if (!error.empty()) return UsageError(error);
  }
  if (i >= argv.size())
    return UsageError(
        "missing sub-command (find, immediate, prefill, solvers, db, "
        "heuristic, status or health)");
  const std::string command = argv[i];
  const std::vector<std::string> args(argv.begin() + i + 1, argv.end());
  if (command == "help") {
    std::cout << kMainHelp;
    return kExitOk;
  }
  const char* help = command == "find"        ? kFindHelp
                     : command == "immediate" ? kImmediateHelp
                     : command == "solvers"   ? kSolversHelp
                     : command == "db"        ? kDbHelp
                     : command == "heuristic" ? kHeuristicHelp
                     : command == "status"    ? kStatusHelp
                     : command == "prefill"   ? kPrefillHelp
                     : command == "health"    ? kHealthHelp
                                              : nullptr;
  if (help == nullptr) {
    return UsageError(absl::StrCat("unknown sub-command '", command, "'"));
  }
  if (WantsHelp(args)) {
    std::cout << help;
    return kExitOk;
  }

  ClientOptions options;
  if (!timeout.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(timeout, &seconds) || !(seconds > 0)) {
      return UsageError(
          absl::StrCat("--timeout: '", timeout, "' is not a positive number"));
    }
    options.find_timeout = options.call_timeout = absl::Seconds(seconds);
  }
  if (!device.empty()) {
    int ordinal = -1;
    if (!absl::SimpleAtoi(device, &ordinal) || ordinal < 0) {
      return UsageError(absl::StrCat("--device: '", QuotePrefix(device),
                                     "' is not a device ordinal (0 or more)"));
    }
    options.device_ordinal = ordinal;
  }
  // TLS when any of its files is named: by flag, or by the environment
  // for a TCP address (the Unix socket never takes TLS).
  TlsOptions tls;
  std::string error;
  const bool use_env = !address.empty();
  if (!ReadPem("--tls-ca", tls_ca, "CONVTUNE_TLS_CA", use_env, &tls.ca_pem,
               &error) ||
      !ReadPem("--tls-cert", tls_cert, "CONVTUNE_TLS_CERT", use_env,
               &tls.cert_pem, &error) ||
      !ReadPem("--tls-key", tls_key, "CONVTUNE_TLS_KEY", use_env, &tls.key_pem,
               &error)) {
    return UsageError(error);
  }
  tls.server_name = tls_server_name;
  if (!tls.ca_pem.empty() || !tls.cert_pem.empty() || !tls.key_pem.empty()) {
    if (tls.ca_pem.empty() || tls.cert_pem.empty() || tls.key_pem.empty()) {
      return UsageError(
          "TLS needs all of --tls-ca, --tls-cert and --tls-key (or "
          "CONVTUNE_TLS_CA, CONVTUNE_TLS_CERT and CONVTUNE_TLS_KEY)");
    }
    if (address.empty()) {
      return UsageError(
          "TLS needs --address HOST:PORT (convtuned --listen-tls)");
    }
    options.tls = std::move(tls);
  }
  const bool with_tls = options.tls.has_value();
  Context context;
  context.tls = with_tls;
  if (!address.empty()) {
    context.address = address;
  } else {
    context.socket_path = socket.empty() ? DefaultSocketPath() : socket;
    if (absl::StartsWith(context.socket_path, "unix:")) {
      context.socket_path = context.socket_path.substr(5);
    }
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(
      address.empty() ? UnixTarget(context.socket_path) : address, options);
  if (!client.ok()) return UsageError(std::string(client.status().message()));
  context.client = std::move(*client);

  if (command == "find") return FindCommand(context, args);
  if (command == "immediate") return ImmediateCommand(context, args);
  if (command == "solvers") return SolversCommand(context, args);
  if (command == "heuristic") return HeuristicCommand(context, args);
  if (command == "status") return StatusCommand(context, args);
  if (command == "health") return HealthCommand(context, args);
  if (command == "prefill") return PrefillCommand(context, args);
  return DbCommand(context, args);
}

}  // namespace
}  // namespace convtune::cli

int main(int argc, char** argv) {
  return convtune::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}
