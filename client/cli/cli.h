// The `convtune` command line: shared pieces of its sub-commands (the
// connection context, exit codes, error reporting). Single-threaded.
#ifndef CONVTUNE_CLIENT_CLI_CLI_H_
#define CONVTUNE_CLIENT_CLI_CLI_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "common/json.h"
#include "kernels/problem.h"

namespace convtune::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // a request failed
inline constexpr int kExitUsage =
    2;  // the command line (or an input file) is wrong

struct Context {
  std::unique_ptr<Client> client;
  // How the user named the daemon, for the "is it running?" hint.
  std::string socket_path;  // empty when --address was given
  std::string address;      // --address HOST:PORT
  bool tls = false;         // --address with --tls-*
};

// True when the status says nobody answers at the daemon's address.
bool Unreachable(const absl::Status& status);
// Prints "convtune: <message>" to stderr; an unreachable daemon gets a hint
// on how to start it.
void ReportError(const Context& context, const absl::Status& status);
// Prints "convtune: <message>" and a pointer to --help; returns kExitUsage.
int UsageError(const std::string& message);

// Sub-commands. `args` are the words after the sub-command's name.
int FindCommand(Context& context, const std::vector<std::string>& args);
int SolversCommand(Context& context, const std::vector<std::string>& args);
int DbCommand(Context& context, const std::vector<std::string>& args);
int ImmediateCommand(Context& context, const std::vector<std::string>& args);
int HeuristicCommand(Context& context, const std::vector<std::string>& args);
int StatusCommand(Context& context, const std::vector<std::string>& args);
int HealthCommand(Context& context, const std::vector<std::string>& args);
int PrefillCommand(Context& context, const std::vector<std::string>& args);

// The longest line a problem file may have.
inline constexpr size_t kMaxLineBytes = 4096;

// Appends the problems of a file of MIOpenDriver lines (blank lines and #
// comments skipped), or of stdin for "-"; reports each bad line as
// FILE:LINE on stderr. Anything but a regular file (a folder, a device) is
// refused by name, and a line over kMaxLineBytes ends the reading. Returns
// false if any line was bad or the file cannot be read.
bool ReadProblemFile(const std::string& path,
                     std::vector<ConvProblem>* problems);
// The problems of `--file FILE` (when `file` is set) or of one MIOpenDriver
// line. Returns kExitOk, or a usage error for a bad driver line; *input_ok
// is false when some line of the file was bad (the others are still loaded).
int LoadProblems(const std::string& file,
                 const std::vector<std::string>& driver_args,
                 std::vector<ConvProblem>* problems, bool* input_ok);

// Help texts.
extern const char kMainHelp[];
extern const char kFindHelp[];
extern const char kSolversHelp[];
extern const char kDbHelp[];
extern const char kImmediateHelp[];
extern const char kHeuristicHelp[];
extern const char kStatusHelp[];
extern const char kHealthHelp[];
extern const char kPrefillHelp[];

}  // namespace convtune::cli

#endif  // CONVTUNE_CLIENT_CLI_CLI_H_
