// Help texts and error reporting of the `convtune` command line.
#include <iostream>

#include "absl/strings/match.h"
#include "client/cli/cli.h"

namespace convtune::cli {

const char kMainHelp[] =
    R"(convtune: ask the convtuned daemon which convolution algorithm is fastest.

Usage:
  convtune [GLOBAL FLAGS] find [OPTIONS] MIOPENDRIVER-LINE | --file FILE
  convtune [GLOBAL FLAGS] immediate [OPTIONS] MIOPENDRIVER-LINE | --file FILE
  convtune [GLOBAL FLAGS] solvers [MIOPENDRIVER-LINE]
  convtune [GLOBAL FLAGS] db stats | db export FILE | db export --system DIR
                          | db import [--overwrite] FILE | db merge OUT IN...
  convtune [GLOBAL FLAGS] prefill [--cluster] [--follow] FILE
  convtune [GLOBAL FLAGS] heuristic train
  convtune [GLOBAL FLAGS] status [--cluster]
  convtune [GLOBAL FLAGS] health [--service NAME]
  convtune help | --help          this text;  convtune SUBCOMMAND --help  its details

Sub-commands:
  find       Find the fastest solutions of one or more problems: convtuned times
             the applicable solvers, or answers from its FindDb if it has already
             (--mode picks the find mode).
  immediate  Immediate mode: the solutions of problems, best first, from the
             FindDb (measured) or a fallback ranking (estimated); times nothing.
  prefill    Queue a list of problems to tune in the background (after every
             interactive find) and return, or follow it to the end.
  solvers    List the daemon's solvers; with a problem, whether each applies.
  db         Show, export (whole, or as a system FindDb), import or merge
             FindDb files.
  heuristic  Train the daemon's learned immediate-mode heuristic.
  status     What the daemon is doing: device, queues, tunings, counters, who
             it takes you for, and your usage (every tenant's for an admin).
  health     Whether the daemon serves (gRPC health): exit 0 when it does,
             for supervisors' and Kubernetes' probes.

Global flags (before the sub-command):
  --socket PATH       Unix socket of convtuned. Default: $CONVTUNE_SOCKET, else
                      $XDG_RUNTIME_DIR/convtune/convtuned.sock, else
                      /tmp/convtune-UID/convtuned.sock.
  --address HOST:PORT Reach convtuned over TCP instead (wins over --socket).
                      Its plaintext TCP answers read-only queries only
                      (immediate, solvers, status); find, prefill, db and
                      heuristic need the Unix socket, or TLS.
  --tls-ca FILE       With --address: connect over TLS (convtuned
  --tls-cert FILE     --listen-tls). The CA that signed the daemon's
  --tls-key FILE      certificate, and your certificate and key, which the
                      daemon's client CA signed; its names are who you are
                      there. Default: $CONVTUNE_TLS_CA, $CONVTUNE_TLS_CERT,
                      $CONVTUNE_TLS_KEY.
  --tls-server-name NAME  The name in the daemon's certificate, when the
                      address's host is not it.
  --device N          The GPU your work runs on: answers are for its device
                      key (a daemon of mixed GPUs keeps each key's records),
                      and tuning leaves it to you while another is free.
                      Default: none (the daemon's first device).
  --timeout SECONDS   Deadline of each request (default: 600 for find, 30 otherwise).
  --version           Print the version and exit.

Problems are MIOpenDriver command lines: conv (fp32), convfp16 or convbfp16,
then its flags (-n batch, -c channels, -H/-W height/width, -k filters,
-y/-x filter height/width, -p/-q pad, -u/-v stride, -l/-j dilation,
-g groups, -I layout NCHW|NHWC, -F direction 1 fwd, 2 bwd-data, 4 bwd-weights, 0 all).

Examples:
  convtune find conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
  convtune find --mode FAST conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -F 1
  convtune immediate conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 0
  convtune --socket /run/convtune.sock find --json --file resnet50_b1.txt
  convtune solvers conv -n 8 -c 32 -H 28 -W 28 -k 32 -y 1 -x 1 -F 1
  convtune --address node7:7050 db export node7.ctdb
  convtune --address node7:7346 --tls-ca ca.pem --tls-cert me.pem \
           --tls-key me.key find conv -n 8 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3
  convtune prefill --follow resnet50.txt
  convtune db export --system /usr/share/convtune/system
  convtune heuristic train

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
  --jobs N                Send up to N finds at once (default 8): the daemon
                          compiles the kernels of some problems while it times
                          others. Results print in the file's order. A find
                          refused for your limits on the daemon (finds waiting,
                          device seconds a minute) is sent again when the
                          daemon says, up to 20 times.
  --json                  Print one JSON array: per problem {problem_key,
                          driver_line, from_db, device_key, results[], error}.
  --workspace-limit BYTES Leave out solutions needing more workspace (default: none).
  --count N               Print at most N results per problem (default: all).
  --exhaustive            Re-time even if the FindDb has the answer.
  --tune-on-device N      Time on the daemon's device N (convtune status lists
                          them); default: whichever is free.
  --progress auto|bar|lines|off
                          How tuning shows on stderr: a bar with each run's
                          stage, solvers timed and best so far (a terminal),
                          a line as each problem ends (otherwise), or
                          nothing. Default: auto (bar on a terminal).
  --mode MODE             The find mode, by name or number (default: the
                          daemon's, from convtuned --find-mode or
                          $CONVTUNE_FIND_MODE, else DYNAMIC_HYBRID):
                            NORMAL 1          time every applicable solver
                            FAST 2            FindDb, else the immediate-mode
                                              fallback ranking (nothing timed)
                            HYBRID 3          FindDb, else a full find
                            DYNAMIC_HYBRID 5  FindDb, else dynamic solvers only
                            TRUST_VERIFY 6    user FindDb; a system FindDb hit is
                                              re-timed first; else bounded tuning
                            TRUST_VERIFY_FULL 7  as 6, tuning unbounded
                          4 is reserved.

Output: a block per problem (its key; whether it came from the FindDb, was
tuned now or is a fallback; the source user_db, system_db, tuned or fallback;
the mode), with rows rank, solution id, solver, algorithm, time (ms),
workspace (bytes) and origin ("own", or the vendor library and version that
runs the solver), then a summary line. A time marked * is an estimate, not a
measurement.

Examples:
  convtune find conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
  convtune find --mode NORMAL conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -F 1
  convtune find --mode 2 --file deploy/problems/resnet50_b1.txt
  convtune find --count 3 convfp16 -n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -F 0
  convtune find --json --file deploy/problems/resnet50_b1.txt > resnet.json
)";

const char kSolversHelp[] = R"(convtune solvers: list the daemon's solvers.

Usage:
  convtune solvers                      id, name, algorithm, backend, dynamic,
                                        origin ("own" for convtune's kernels,
                                        else the library and its version:
                                        onednn2.6.3, cudnn9.19.0)
  convtune solvers MIOPENDRIVER-LINE    also: applicable, workspace, or why not

Examples:
  convtune solvers
  convtune solvers conv -n 1 -c 3 -H 224 -W 224 -k 64 -y 7 -x 7 -p 3 -q 3 -u 2 -v 2 -F 1
)";

const char kDbHelp[] = R"(convtune db: the daemon's database and FindDb files.

Usage:
  convtune db stats          device key, database path and record counts
  convtune db export FILE    write every record to FILE (atomically: a temporary
                             file, fsync, then rename)
  convtune db export --system DIR
                             write a system FindDb of the daemon's device (its
                             find and perf records only) to DIR/<device_key>.ctsys
                             (atomically); convtuned --system-db DIR serves it
                             to daemons with a fresh database
  convtune db import [--overwrite] FILE
                             add the records of an exported FILE; records the
                             daemon holds with another value are kept, unless
                             --overwrite (identical ones are skipped)
  convtune db merge OUT IN1 [IN2 ...]
                             merge export files here, with no daemon: the union
                             of their records; for one find record the newest
                             wins, other records keep the first (counted as
                             conflicts); system FindDbs of different devices
                             are refused. OUT is written atomically.

Examples:
  convtune db export finddb-$(hostname).ctdb
  convtune --socket /tmp/other.sock db import finddb-node7.ctdb
  convtune db export --system ./system-finddb
  convtune db merge merged.ctsys node1/cpu-x.ctsys node2/cpu-x.ctsys
  convtuned --db /var/lib/convtune/db --system-db ./system-finddb
)";

const char kImmediateHelp[] =
    R"(convtune immediate: the solutions of problems, best first, timing nothing.

Usage:
  convtune immediate [OPTIONS] MIOPENDRIVER-LINE
  convtune immediate [OPTIONS] --file FILE

Immediate mode answers from the user FindDb, else the system FindDb (times
measured by a find), else a fallback ranking: the learned heuristic when it
applies, else the weighted-throughput estimate (times estimated). On such a miss the
daemon queues a find of the problem at its lowest priority (unless
--no-background-tune, or convtuned --background-tune off), so that a later
call is answered from the measurement; `convtune find` measures at once.

Options:
  --file FILE             One MIOpenDriver line per line (as for find).
  --json                  Print one JSON array: per problem {problem_key,
                          driver_line, source, fallback_reason, device_key,
                          tuning_queued, solutions[{rank, solution_id,
                          solver_name, algorithm, time_ms, workspace_bytes,
                          measured}], error}.
  --workspace-limit BYTES Leave out solutions needing more workspace.
  --count N               At most N solutions per problem (default: all).
  --background-tune       On a miss, queue a find in the background even when
                          the daemon's default is off.
  --no-background-tune    On a miss, queue nothing.

Output: a block per problem with its source (user_db, system_db, heuristic
or estimate) and, for a fallback, why the learned model was not used and
whether a find of it was queued; rows
rank, solution id, solver, algorithm, time (ms), workspace (bytes), and
whether the time is measured or estimated.

Examples:
  convtune immediate conv -n 1 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 1
  convtune immediate --count 1 --json --file deploy/problems/resnet50_b1.txt
)";

const char kHeuristicHelp[] =
    R"(convtune heuristic: the daemon's learned immediate-mode heuristic.

Usage:
  convtune heuristic train   train it from the FindDb records of the daemon's
                             device; prints the records used and the fraction
                             whose fastest solver the model ranks first

Examples:
  convtune find --file deploy/problems/resnet50_b1.txt && convtune heuristic train
)";

const char kHealthHelp[] =
    R"(convtune health: whether the daemon serves, by its gRPC health service.

Usage:
  convtune health                   the daemon as a whole: prints SERVING
                                    (exit 0), or NOT_SERVING while it shuts
                                    down (exit 1); exit 1 when nobody
                                    answers
  convtune health --service convtune.storage
                                    whether its database takes writes
                                    (NOT_SERVING on a full disk: answers go
                                    on, nothing new is stored)

Anyone who can reach the socket may ask. Kubernetes' exec probes use it
(deploy/k8s/convtuned.yaml).
)";

const char kStatusHelp[] =
    R"(convtune status: what the daemon is doing.

Usage:
  convtune status            version, device, backend, who the daemon takes
                             you for (tenant and role), tunings in flight,
                             calls in flight, each queue's threads and waiting
                             tasks, the find engine's counters since start,
                             and your usage: finds waiting on tuning,
                             background jobs, prefill entries done / failed /
                             queued, device seconds of timing in the last
                             minute, Executes in flight, each with its limit
                             (an admin sees every tenant, and the database's
                             size on disk), and the cluster tier
  convtune status --cluster  also the fleet's prefill jobs: waiting, running
                             (per node), done and dead

Examples:
  convtune status
  convtune --socket /run/convtune/convtuned.sock status
)";

const char kPrefillHelp[] =
    R"(convtune prefill: tune a list of problems in the background.

Usage:
  convtune prefill [OPTIONS] FILE

The problems of FILE (MIOpenDriver lines, as for find --file) are queued for
tuning at background priority: they are compiled and timed after every
interactive find, and those already in the FindDb are skipped. Without
--follow, prefill returns once the list is queued; convtune status then shows
how far it has got (prefill done / failed / queued).

A tenant may have limits.tenant_tunings_queued background jobs at once. The
daemon takes the list in order up to that limit; without --follow the rest
is reported (exit status 1) to be sent again later, with --follow it is sent
as earlier entries end.

With --cluster (an admin's call, to a daemon with a cluster tier) the list
goes onto the fleet's job stream instead: every daemon of the fleet and
device takes jobs from it, one at a time, at background priority, and a
problem is tuned once for the fleet. A job whose daemon stops is taken over
by another; one that fails three times is set aside (dead). convtune status
--cluster shows the stream.

Options:
  --cluster               Queue the list for the whole fleet (see above).
  --follow                Wait until every entry has been tuned, showing
                          progress on stderr.
  --progress auto|bar|lines|off
                          With --follow: a bar (a terminal), a line whenever
                          an entry ends (otherwise), or nothing. Default: auto.
  --poll SECONDS          With --follow: how often to ask (default 0.5).
  --workspace-limit BYTES Tune for at most this much workspace.

Examples:
  convtune prefill deploy/problems/resnet50_b1.txt
  convtune prefill --follow --progress lines resnet50_b1.txt
)";

bool Unreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         absl::StartsWith(status.message(), "cannot reach convtuned");
}

void ReportError(const Context& context, const absl::Status& status) {
  if (Unreachable(status) && context.tls) {
    std::cerr << "convtune: " << status.message()
              << "\n(is convtuned serving --listen-tls " << context.address
              << ", does --tls-ca sign its certificate, and does its "
                 "--tls-client-ca sign yours?)\n";
    return;
  }
  if (Unreachable(status)) {
    std::cerr << "convtune: cannot reach convtuned at "
              << context.client->target()
              << " \u2014 is it running? (start it with convtuned "
              << (context.address.empty()
                      ? "--socket " + context.socket_path
                      : "--listen-plaintext " + context.address)
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
