// `convtune`: the command-line client of convtuned.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli.h"
#include "common/defaults.h"
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

int Main(const std::vector<std::string>& argv) {
  std::string socket, address, timeout;
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
        !FlagValue(argv, &i, "--timeout", &timeout, &error)) {
      return UsageError(
          absl::StrCat("unknown global flag '", QuotePrefix(arg), "'"));
    }
    if (!error.empty()) return UsageError(error);
  }
  if (i >= argv.size())
    return UsageError(
        "missing sub-command (find, immediate, solvers, db, heuristic or "
        "status)");
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
  Context context;
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
  return DbCommand(context, args);
}

}  // namespace
}  // namespace convtune::cli

int main(int argc, char** argv) {
  return convtune::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}
