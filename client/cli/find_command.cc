// `convtune find`: problems from a MIOpenDriver line or a file, answered by
// the daemon's Find, printed as a table or JSON.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli.h"
#include "client/cli/progress.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/quote.h"
#include "common/vocabulary.h"
#include "kernels/driver_line.h"

namespace convtune::cli {

bool ReadProblemFile(const std::string& path,
                     std::vector<ConvProblem>* problems) {
  FILE* in = nullptr;
  if (path == "-") {
    in = stdin;
  } else {
    // Only a regular file: a folder, a device or a pipe named by mistake
    // is refused by name rather than read forever.
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      std::cerr << "convtune: " << QuotePrefix(path) << ": cannot open ("
                << std::strerror(errno) << ")\n";
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      std::cerr << "convtune: " << QuotePrefix(path) << ": not a regular file ("
                << (S_ISDIR(st.st_mode)    ? "a folder"
                    : S_ISCHR(st.st_mode)  ? "a character device"
                    : S_ISBLK(st.st_mode)  ? "a block device"
                    : S_ISFIFO(st.st_mode) ? "a pipe; use --file - for stdin"
                                           : "not a file")
                << ")\n";
      return false;
    }
    in = std::fopen(path.c_str(), "r");
    if (in == nullptr) {
      std::cerr << "convtune: " << QuotePrefix(path) << ": cannot open ("
                << std::strerror(errno) << ")\n";
      return false;
    }
  }
  const std::string name = path == "-" ? "stdin" : path;
  bool ok = true;
  std::string line;
  for (int number = 1;; ++number) {
    // Byte by byte, so that a NUL byte (from /dev/zero, or a binary file) is
    // seen as such and counted against the line's length.
    line.clear();
    int c = 0;
    bool binary = false;
    while ((c = getc(in)) != EOF && c != '\n' && line.size() <= kMaxLineBytes) {
      if (c == '\0') binary = true;
      line.push_back(static_cast<char>(c));
    }
    if (c == EOF && line.empty()) break;
    if (line.size() > kMaxLineBytes) {
      // No line of a problem list is this long: not a list; stop here.
      std::cerr << name << ":" << number << ": line longer than "
                << kMaxLineBytes
                << " bytes; not a list of MIOpenDriver lines\n";
      ok = false;
      break;
    }
    if (binary) {
      std::cerr << name << ":" << number
                << ": a NUL byte; not a list of MIOpenDriver lines\n";
      ok = false;
      break;
    }
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    absl::StatusOr<std::vector<ConvProblem>> parsed = ParseDriverLine(text);
    if (!parsed.ok()) {
      std::cerr << name << ":" << number << ": " << parsed.status().message()
                << "\n";
      ok = false;
      continue;
    }
    problems->insert(problems->end(), parsed->begin(), parsed->end());
  }
  if (std::ferror(in)) {
    std::cerr << "convtune: " << QuotePrefix(name) << ": read failed\n";
    ok = false;
  }
  if (in != stdin) std::fclose(in);
  return ok;
}

int LoadProblems(const std::string& file,
                 const std::vector<std::string>& driver_args,
                 std::vector<ConvProblem>* problems, bool* input_ok) {
  *input_ok = true;
  if (!file.empty()) {
    *input_ok = ReadProblemFile(file, problems);
    if (*input_ok && problems->empty()) {
      std::cerr << "convtune: " << QuotePrefix(file == "-" ? "stdin" : file)
                << ": no problems (expected MIOpenDriver lines)\n";
      *input_ok = false;
    }
    return kExitOk;
  }
  absl::StatusOr<std::vector<ConvProblem>> parsed =
      ParseDriverArgs(driver_args);
  if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
  *problems = *std::move(parsed);
  return kExitOk;
}

namespace {

// Finds in flight at once by default: the daemon compiles the kernels of
// later problems while it times earlier ones.
constexpr int kDefaultJobs = 8;

// Times a find refused for the tenant's limits is sent again, each after
// the wait the daemon named.
constexpr int kRetries = 20;

struct FindFlags {
  bool json = false;
  int jobs = kDefaultJobs;
  ProgressDisplay::Style progress = ProgressDisplay::Style::kOff;
  std::string file;
  FindOptions options;
  std::vector<std::string> driver_args;
};

struct Outcome {
  ConvProblem problem;
  absl::Status status;
  v1::FindResponse response;
  double seconds = 0;
};

// Our flags may appear anywhere: none collides with a MIOpenDriver flag.
int ParseFindFlags(const std::vector<std::string>& args, FindFlags* flags) {
  std::string progress = "auto";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--json") {
      flags->json = true;
    } else if (a == "--exhaustive") {
      flags->options.exhaustive = true;
    } else if (a == "--file") {
      if (!value(&flags->file)) return UsageError("--file needs a FILE");
    } else if (a == "--progress") {
      if (!value(&progress)) {
        return UsageError("--progress needs auto, bar, lines or off");
      }
    } else if (a == "--jobs") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->jobs) || flags->jobs < 1) {
        return UsageError("--jobs needs a number of finds >= 1");
      }
    } else if (a == "--workspace-limit") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->options.workspace_limit) ||
          flags->options.workspace_limit < 0) {
        return UsageError("--workspace-limit needs a number of bytes >= 0");
      }
    } else if (a == "--tune-on-device") {
      int device = -1;
      if (!value(&v) || !absl::SimpleAtoi(v, &device) || device < 0) {
        return UsageError("--tune-on-device needs a device ordinal >= 0");
      }
      flags->options.tune_on_device = device;
    } else if (a == "--mode") {
      if (!value(&v)) return UsageError("--mode needs a MODE");
      absl::StatusOr<v1::FindMode> mode = ParseFindMode(v, "--mode");
      if (!mode.ok()) return UsageError(std::string(mode.status().message()));
      flags->options.mode = *mode;
    } else if (a == "--count") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->options.request_count) ||
          flags->options.request_count < 1) {
        return UsageError("--count needs a number >= 1");
      }
    } else {
      flags->driver_args.push_back(a);
    }
  }
  if (flags->file.empty() == flags->driver_args.empty()) {
    return UsageError(
        flags->file.empty()
            ? "find needs a MIOpenDriver line or --file FILE"
            : "find takes either a MIOpenDriver line or --file FILE, not both");
  }
  absl::StatusOr<ProgressDisplay::Style> style =
      ProgressDisplay::Parse(progress);
  if (!style.ok()) return UsageError(std::string(style.status().message()));
  flags->progress = *style;
  return kExitOk;
}

// The line a finished find leaves in the progress log.
std::string DoneLine(size_t done, size_t total, const Outcome& o) {
  const std::string key = o.response.problem_key().empty()
                              ? ProblemKey(o.problem)
                              : o.response.problem_key();
  std::string line = absl::StrCat("[", done, "/", total, "] ", key, ": ");
  if (!o.status.ok()) {
    absl::StrAppend(&line, "failed: ", o.status.message());
  } else if (o.response.from_db()) {
    absl::StrAppend(&line, "from ", o.response.source());
  } else if (o.response.source() == "fallback") {
    absl::StrAppend(&line, "fallback ranking, not timed");
  } else {
    absl::StrAppend(&line, absl::StrFormat("tuned in %.2f s", o.seconds));
    if (!o.response.not_stored().empty())
      absl::StrAppend(&line, ", not stored");
  }
  if (o.status.ok() && o.response.results_size() > 0) {
    const v1::PerfResult& best = o.response.results(0);
    absl::StrAppend(&line, absl::StrFormat("; best %s %.4g ms",
                                           best.solver_name(), best.time_ms()));
  }
  return line;
}

void PrintJson(const std::vector<Outcome>& outcomes) {
  std::cout << "[";
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    std::cout << (i ? ",\n " : "\n ") << "{\"problem_key\": "
              << JsonString(o.response.problem_key().empty()
                                ? ProblemKey(o.problem)
                                : o.response.problem_key())
              << ", \"driver_line\": "
              << JsonString(FormatDriverLine(o.problem))
              << ", \"from_db\": " << (o.response.from_db() ? "true" : "false")
              << ", \"device_key\": " << JsonString(o.response.device_key())
              << ", \"mode\": " << JsonString(FindModeName(o.response.mode()))
              << ", \"source\": " << JsonString(o.response.source());
    if (!o.response.not_stored().empty())
      std::cout << ", \"not_stored\": " << JsonString(o.response.not_stored());
    if (!o.status.ok())
      std::cout << ", \"error\": " << JsonString(o.status.message());
    std::cout << ", \"results\": [";
    for (int r = 0; r < o.response.results_size(); ++r) {
      const v1::PerfResult& p = o.response.results(r);
      std::cout << (r ? ", " : "")
                << absl::StrFormat(
                       "{\"rank\": %d, \"solver_id\": %u, \"solver_name\": %s, "
                       "\"algorithm\": %s, \"time_ms\": %.6g, "
                       "\"workspace_bytes\": %d, "
                       "\"measured\": %s, \"origin\": %s}",
                       r + 1, p.solver_id(), JsonString(p.solver_name()),
                       JsonString(p.algorithm()), p.time_ms(),
                       p.workspace_bytes(), p.measured() ? "true" : "false",
                       JsonString(p.library().empty() ? "own" : p.library()));
    }
    std::cout << "]}";
  }
  std::cout << "\n]\n";
}

// `seconds`: the wall time of all the finds (they may overlap).
void PrintTable(const Context& context, const std::vector<Outcome>& outcomes,
                double seconds) {
  int from_db = 0, tuned = 0, fallback = 0, failed = 0, results = 0;
  for (const Outcome& o : outcomes) {
    if (!o.status.ok()) {
      ++failed;
      continue;
    }
    const bool fell_back = o.response.source() == "fallback";
    o.response.from_db() ? ++from_db : fell_back ? ++fallback : ++tuned;
    results += o.response.results_size();
    std::cout << "problem " << o.response.problem_key() << "  ("
              << (o.response.from_db() ? "from FindDb"
                  : fell_back ? "not in the FindDb: fallback ranking, not timed"
                              : absl::StrFormat("tuned in %.2f s", o.seconds))
              << "; source " << o.response.source() << ", mode "
              << FindModeName(o.response.mode()) << ")\n";
    std::cout << absl::StrFormat("  %4s  %5s  %-32s  %-14s  %12s  %14s  %s\n",
                                 "rank", "id", "solver", "algorithm",
                                 "time (ms)", "workspace (B)", "origin");
    for (int r = 0; r < o.response.results_size(); ++r) {
      const v1::PerfResult& p = o.response.results(r);
      std::cout << absl::StrFormat(
          "  %4d  %5u  %-32s  %-14s  %12.4f%s %14d  %s\n", r + 1, p.solver_id(),
          p.solver_name(), p.algorithm(), p.time_ms(), p.measured() ? " " : "*",
          p.workspace_bytes(), p.library().empty() ? "own" : p.library());
    }
    if (o.response.results_size() == 0) std::cout << "  (no solution)\n";
    std::cout << "\n";
  }
  std::cout << absl::StrFormat(
      "%d problem(s): %d from FindDb, %d tuned, %d failed%s; %d result(s); "
      "%.2f s\n",
      outcomes.size(), from_db, tuned, failed,
      fallback > 0 ? absl::StrCat(", ", fallback, " fallback (not timed)") : "",
      results, seconds);
}

}  // namespace

int FindCommand(Context& context, const std::vector<std::string>& args) {
  FindFlags flags;
  if (int rc = ParseFindFlags(args, &flags); rc != kExitOk) return rc;
  std::vector<ConvProblem> problems;
  bool input_ok = true;
  if (int rc =
          LoadProblems(flags.file, flags.driver_args, &problems, &input_ok);
      rc != kExitOk) {
    return rc;
  }
  // Up to --jobs finds in flight; the outcomes keep the problems' order.
  std::vector<Outcome> outcomes(problems.size());
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::atomic<bool> unreachable{false};
  ProgressDisplay display(flags.progress, "find",
                          static_cast<int>(problems.size()));
  // Only a bar shows a run's own progress; lines say when each find ends.
  std::function<void(const v1::FindProgress&)> on_progress;
  if (display.style() == ProgressDisplay::Style::kBar) {
    on_progress = [&](const v1::FindProgress& p) {
      display.Update(static_cast<int>(finished.load()),
                     absl::StrCat(p.problem_key(), ": ", DescribeProgress(p)));
    };
  }
  auto worker = [&] {
    for (size_t i = next++; i < problems.size() && !unreachable; i = next++) {
      Outcome& o = outcomes[i];
      o.problem = problems[i];
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<v1::FindResponse> response =
          context.client->Find(o.problem, flags.options, on_progress);
      // Over a limit of the tenant's: again when the daemon says, a few
      // times.
      for (int retry = 0; retry < kRetries && !response.ok() &&
                          absl::IsResourceExhausted(response.status()) &&
                          RetryAfter(response.status()) > 0;
           ++retry) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(RetryAfter(response.status())));
        response = context.client->Find(o.problem, flags.options, on_progress);
      }
      o.seconds = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      if (response.ok()) {
        o.response = *std::move(response);
      } else {
        o.status = response.status();
        // The daemon is down: every other problem would say the same.
        if (Unreachable(o.status)) unreachable = true;
      }
      const size_t done = ++finished;
      if (display.style() == ProgressDisplay::Style::kLines) {
        display.Line(DoneLine(done, problems.size(), o));
      } else {
        display.Update(static_cast<int>(done), "");
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> threads;
    const size_t jobs = std::min<size_t>(flags.jobs, problems.size());
    for (size_t j = 1; j < jobs; ++j) threads.emplace_back(worker);
    worker();
    for (std::thread& t : threads) t.join();
  }
  display.Close();
  bool request_ok = true;
  for (const Outcome& o : outcomes) {
    if (o.status.ok()) continue;
    if (Unreachable(o.status)) {
      ReportError(context, o.status);
      return kExitFailed;
    }
    request_ok = false;
    std::cerr << "convtune: " << ProblemKey(o.problem) << ": "
              << o.status.message() << "\n";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  flags.json ? PrintJson(outcomes) : PrintTable(context, outcomes, seconds);
  // The answers stand; the operator should know nothing was kept.
  for (const Outcome& o : outcomes) {
    if (o.status.ok() && !o.response.not_stored().empty()) {
      std::cerr << "convtune: warning: " << o.response.problem_key()
                << " was tuned but not stored, so a later find tunes it "
                   "again: "
                << o.response.not_stored() << "\n";
    }
  }
  if (!input_ok) return kExitUsage;
  return request_ok ? kExitOk : kExitFailed;
}

}  // namespace convtune::cli
