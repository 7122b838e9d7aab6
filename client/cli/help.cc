// Help texts and error reporting of the `convtune` command line.
#include <iostream>

#include "absl/strings/match.h"
#include "client/cli/cli.h"

namespace convtune::cli {

const char kMainHelp[] =
    R"(convtune: ask the convtuned daemon which convolution algorithm is fastest.

Usage:
  convtune [GLOBAL FLAGS] find [OPTIONS] MIOPENDRIVER-LINE
  convtune [GLOBAL FLAGS] find [OPTIONS] --file FILE
  convtune [GLOBAL FLAGS] solvers [MIOPENDRIVER-LINE]
  convtune [GLOBAL FLAGS] db stats | db export FILE | db import [--overwrite] FILE
  convtune help | --help          this text;  convtune SUBCOMMAND --help  its details

Sub-commands:
  find      Find the fastest solutions of one or more problems: convtuned times
            the applicable solvers, or answers from its FindDb if it has already.
  solvers   List the daemon's solvers; with a problem, whether each applies.
  db        Show, export or import the daemon's database.

Global flags (before the sub-command):
  --socket PATH       Unix socket of convtuned. Default: $CONVTUNE_SOCKET, else
                      $XDG_RUNTIME_DIR/convtune/convtuned.sock, else
                      /tmp/convtune-UID/convtuned.sock.
  --address HOST:PORT Reach convtuned over TCP instead (wins over --socket).
  --timeout SECONDS   Deadline of each request (default: 600 for find, 30 otherwise).

Problems are MIOpenDriver command lines: conv (fp32), convfp16 or convbfp16,
then its flags (-n batch, -c channels, -H/-W height/width, -k filters,
-y/-x filter height/width, -p/-q pad, -u/-v stride, -l/-j dilation,
-g groups, -I layout NCHW|NHWC, -F direction 1 fwd, 2 bwd-data, 4 bwd-weights, 0 all).

Examples:
  convtune find conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
  convtune --socket /run/convtune.sock find --json --file resnet50_b1.txt
  convtune solvers conv -n 8 -c 32 -H 28 -W 28 -k 32 -y 1 -x 1 -F 1
  convtune --address node7:7050 db export node7.ctdb

Exit status: 0 success, 1 a request failed, 2 usage error (bad flags or input lines).
)";

const char kFindHelp[] =
    R"(convtune find: the fastest solutions of convolution problems.

Usage:
  convtune find [OPTIONS] MIOPENDRIVER-LINE
  convtune find [OPTIONS] --file FILE

One problem per direction given by -F (0: forward, backward data and backward
weights). The daemon answers from its FindDb when it can, else it times every
applicable solver and stores the answer.

Options:
  --file FILE             One MIOpenDriver line per line; blank lines and lines
                          starting with # are skipped. A bad line is reported as
                          FILE:LINE: message, the other lines still run, and the
                          exit status is 2.
  --json                  Print one JSON array: per problem {problem_key,
                          driver_line, from_db, device_key, results[], error}.
  --workspace-limit BYTES Leave out solutions needing more workspace (default: none).
  --count N               Print at most N results per problem (default: all).
  --exhaustive            Re-time even if the FindDb has the answer.

Output: a block per problem (its key, and whether it came from the FindDb or
was tuned now), with rows rank, solution id, solver, algorithm, time (ms) and
workspace (bytes), then a summary line. A time marked * is an estimate, not a
measurement.

Examples:
  convtune find conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
  convtune find --count 3 convfp16 -n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -F 0
  convtune find --json --file deploy/problems/resnet50_b1.txt > resnet.json
)";

const char kSolversHelp[] = R"(convtune solvers: list the daemon's solvers.

Usage:
  convtune solvers                      id, name, algorithm, backend, dynamic
  convtune solvers MIOPENDRIVER-LINE    also: applicable, workspace, or why not

Examples:
  convtune solvers
  convtune solvers conv -n 1 -c 3 -H 224 -W 224 -k 64 -y 7 -x 7 -p 3 -q 3 -u 2 -v 2 -F 1
)";

const char kDbHelp[] = R"(convtune db: the daemon's database.

Usage:
  convtune db stats          device key, database path and record counts
  convtune db export FILE    write every record to FILE (atomically: a temporary
                             file, fsync, then rename)
  convtune db import [--overwrite] FILE
                             add the records of an exported FILE; records the
                             daemon holds with another value are kept, unless
                             --overwrite (identical ones are skipped)

Examples:
  convtune db export finddb-$(hostname).ctdb
  convtune --socket /tmp/other.sock db import finddb-node7.ctdb
)";

bool Unreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         absl::StartsWith(status.message(), "cannot reach convtuned");
}

void ReportError(const Context& context, const absl::Status& status) {
  if (Unreachable(status)) {
    std::cerr << "convtune: cannot reach convtuned at "
              << context.client->target()
              << " \u2014 is it running? (start it with convtuned "
              << (context.address.empty() ? "--socket " + context.socket_path
                                          : "--listen " + context.address)
              << ")\n";
    return;
  }
  std::cerr << "convtune: " << status.message() << "\n";
}

int UsageError(const std::string& message) {
  std::cerr << "convtune: " << message << "\n(see convtune --help)\n";
  return kExitUsage;
}

}  // namespace convtune::cli
