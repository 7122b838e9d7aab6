// `convtune immediate` (the solutions of problems, best first, without
// timing anything) and `convtune heuristic train`.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli.h"
#include "common/vocabulary.h"
#include "kernels/driver_line.h"

namespace convtune::cli {
namespace {

struct ImmediateFlags {
  bool json = false;
  std::string file;
  int64_t workspace_limit = -1;
  int32_t count = 0;
  std::optional<bool> background_tune;  // absent: the daemon's default
  std::vector<std::string> driver_args;
};

struct Answer {
  ConvProblem problem;
  absl::Status status;
  v1::GetSolutionsResponse response;
};

int ParseImmediateFlags(const std::vector<std::string>& args,
                        ImmediateFlags* flags) {
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
    } else if (a == "--background-tune") {
      flags->background_tune = true;
    } else if (a == "--no-background-tune") {
      flags->background_tune = false;
    } else if (a == "--file") {
      if (!value(&flags->file)) return UsageError("--file needs a FILE");
    } else if (a == "--workspace-limit") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->workspace_limit) ||
          flags->workspace_limit < 0) {
        return UsageError("--workspace-limit needs a number of bytes >= 0");
      }
    } else if (a == "--count") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->count) ||
          flags->count < 1) {
        return UsageError("--count needs a number >= 1");
      }
    } else {
      flags->driver_args.push_back(a);
    }
  }
  if (flags->file.empty() == flags->driver_args.empty()) {
    return UsageError(flags->file.empty()
                          ? "immediate needs a MIOpenDriver line or --file FILE"
                          : "immediate takes either a MIOpenDriver line or "
                            "--file FILE, not both");
  }
  return kExitOk;
}

void PrintJson(const std::vector<Answer>& answers) {
  std::cout << "[";
  for (size_t i = 0; i < answers.size(); ++i) {
    const Answer& a = answers[i];
    std::cout << (i ? ",\n " : "\n ")
              << "{\"problem_key\": " << JsonString(ProblemKey(a.problem))
              << ", \"driver_line\": "
              << JsonString(FormatDriverLine(a.problem))
              << ", \"source\": " << JsonString(a.response.source())
              << ", \"fallback_reason\": "
              << JsonString(a.response.fallback_reason())
              << ", \"device_key\": " << JsonString(a.response.device_key())
              << ", \"tuning_queued\": "
              << (a.response.tuning_queued() ? "true" : "false");
    if (a.response.solutions_size() > 0) {
      const v1::Solution& pick = a.response.solutions(0);
      std::cout << ", \"provenance\": "
                << JsonString(
                       ProvenanceName(pick.provenance(), pick.measured()))
                << absl::StrFormat(", \"confidence\": %.3f", pick.confidence());
    }
    if (!a.status.ok())
      std::cout << ", \"error\": " << JsonString(a.status.message());
    std::cout << ", \"solutions\": [";
    for (int r = 0; r < a.response.solutions_size(); ++r) {
      const v1::Solution& s = a.response.solutions(r);
      std::cout << (r ? ", " : "")
                << absl::StrFormat(
                       "{\"rank\": %d, \"solution_id\": %u, \"solver_name\": "
                       "%s, \"algorithm\": %s, \"time_ms\": %.6g, "
                       "\"workspace_bytes\": %d, \"measured\": %s, "
                       "\"provenance\": %s, \"confidence\": %.3f}",
                       r + 1, s.solution_id(), JsonString(s.solver_name()),
                       JsonString(AlgorithmName(s.algorithm())), s.time_ms(),
                       s.workspace_bytes(), s.measured() ? "true" : "false",
                       JsonString(ProvenanceName(s.provenance(), s.measured())),
                       s.confidence());
    }
    std::cout << "]}";
  }
  std::cout << "\n]\n";
}

void PrintTable(const std::vector<Answer>& answers) {
  int measured = 0, learned = 0, estimated = 0, failed = 0;
  for (const Answer& a : answers) {
    if (!a.status.ok()) {
      ++failed;
      continue;
    }
    const bool from_db =
        a.response.source() == "user_db" || a.response.source() == "system_db";
    if (from_db) {
      ++measured;
    } else if (a.response.provenance() == v1::LEARNED) {
      ++learned;
    } else {
      ++estimated;
    }
    std::cout << "problem " << a.response.problem_key() << "  (source "
              << a.response.source() << ")\n";
    if (!a.response.fallback_reason().empty()) {
      std::cout << "  fallback reason: " << a.response.fallback_reason()
                << "\n";
    }
    if (a.response.tuning_queued()) {
      std::cout << "  a find of this problem is queued in the background; "
                   "later calls answer from its measurement\n";
    }
    std::cout << absl::StrFormat(
        "  %4s  %5s  %-32s  %-14s  %12s  %14s  %-9s  %s\n", "rank", "id",
        "solver", "algorithm", "time (ms)", "workspace (B)", "time is",
        "confidence");
    for (int r = 0; r < a.response.solutions_size(); ++r) {
      const v1::Solution& s = a.response.solutions(r);
      std::cout << absl::StrFormat(
          "  %4d  %5u  %-32s  %-14s  %12.4f  %14d  %-9s  %.2f\n", r + 1,
          s.solution_id(), s.solver_name(), AlgorithmName(s.algorithm()),
          s.time_ms(), s.workspace_bytes(),
          ProvenanceName(s.provenance(), s.measured()), s.confidence());
    }
    if (a.response.solutions_size() == 0) std::cout << "  (no solution)\n";
    std::cout << "\n";
  }
  std::cout << absl::StrFormat(
      "%d problem(s): %d from a FindDb, %d learned, %d estimated, %d "
      "failed\n",
      answers.size(), measured, learned, estimated, failed);
}

}  // namespace

int ImmediateCommand(Context& context, const std::vector<std::string>& args) {
  ImmediateFlags flags;
  if (int rc = ParseImmediateFlags(args, &flags); rc != kExitOk) return rc;
  std::vector<ConvProblem> problems;
  bool input_ok = true;
  if (int rc =
          LoadProblems(flags.file, flags.driver_args, &problems, &input_ok);
      rc != kExitOk) {
    return rc;
  }
  std::vector<Answer> answers;
  bool request_ok = true;
  for (const ConvProblem& problem : problems) {
    Answer a;
    a.problem = problem;
    absl::StatusOr<v1::GetSolutionsResponse> response =
        context.client->GetSolutions(
            problem, flags.count, flags.workspace_limit, flags.background_tune);
    if (response.ok()) {
      a.response = *std::move(response);
    } else {
      a.status = response.status();
      request_ok = false;
      if (Unreachable(a.status)) {
        ReportError(context, a.status);
        return kExitFailed;
      }
      std::cerr << "convtune: " << ProblemKey(problem) << ": "
                << a.status.message() << "\n";
    }
    answers.push_back(std::move(a));
  }
  flags.json ? PrintJson(answers) : PrintTable(answers);
  if (!input_ok) return kExitUsage;
  return request_ok ? kExitOk : kExitFailed;
}

int HeuristicCommand(Context& context, const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0] != "train") {
    return UsageError("heuristic needs the action train (and nothing else)");
  }
  absl::StatusOr<v1::TrainHeuristicResponse> trained =
      context.client->TrainHeuristic();
  if (!trained.ok()) {
    ReportError(context, trained.status());
    return kExitFailed;
  }
  std::cout << absl::StrFormat(
      "trained the heuristic of %s on %d FindDb record(s); train accuracy "
      "%.1f%% (best solver ranked first)\n",
      trained->device_key(), trained->records(),
      100.0 * trained->train_accuracy());
  return kExitOk;
}

int StatusCommand(Context& context, const std::vector<std::string>& args) {
  const bool cluster = args.size() == 1 && args[0] == "--cluster";
  if (!args.empty() && !cluster) {
    return UsageError("status takes no arguments but --cluster");
  }
  absl::StatusOr<v1::GetStatusResponse> s = context.client->GetStatus(cluster);
  if (!s.ok()) {
    ReportError(context, s.status());
    return kExitFailed;
  }
  std::cout << "convtuned " << s->version() << " on " << s->device_key() << " ("
            << s->backend_note() << ")\n"
            << "you:        " << s->tenant() << " (" << s->role() << ")\n"
            << "tunings:    " << s->tunings_in_flight() << " in flight\n"
            << "calls:      " << s->calls_in_flight()
            << " in flight (this one included)\n";
  for (const v1::QueueStatus& q : s->queues()) {
    std::cout << absl::StrFormat("queue %-8s %d thread(s), %d waiting\n",
                                 q.name(), q.threads(), q.queued());
  }
  for (const v1::DeviceStatus& d : s->devices()) {
    std::cout << absl::StrFormat(
        "device %-3d %-7s %d tuning job(s) waiting, %d done (%.1f s), %s\n",
        d.ordinal(), d.state(), d.jobs_waiting(), d.jobs_done(),
        d.busy_ms() / 1000.0, d.device_key());
  }
  // One tier (and its jobs) a device key; the key named where there are
  // several.
  auto print_tier = [&](const std::string& tier, const v1::ClusterJobs& jobs,
                        const std::string& key) {
    const std::string of = key.empty() ? "" : absl::StrCat(" (", key, ")");
    std::cout << "tier:       " << (tier.empty() ? "none" : tier) << of << "\n";
    if (!cluster) return;
    if (tier.empty()) {
      std::cout << "cluster:    this daemon has no tier" << of << "\n";
    } else if (!jobs.error().empty()) {
      std::cout << "cluster:    " << jobs.error() << of << "\n";
    } else {
      std::cout << absl::StrFormat(
          "cluster:    prefill jobs %d waiting, %d running, %d done, %d "
          "dead%s\n",
          jobs.waiting(), jobs.running(), jobs.done(), jobs.dead(), of);
      for (const v1::ClusterJobs::Node& n : jobs.nodes()) {
        std::cout << absl::StrFormat("  node %-24s %d running, idle %.1f s\n",
                                     n.node(), n.running(),
                                     n.idle_ms() / 1000.0);
      }
    }
  };
  if (s->keys_size() > 1) {
    for (const v1::KeyStatus& k : s->keys())
      print_tier(k.tier(), k.cluster_jobs(), k.device_key());
  } else {
    print_tier(s->tier(), s->cluster_jobs(), "");
  }
  std::cout << "counters since start:\n";
  std::vector<std::pair<std::string, int64_t>> counters(s->counters().begin(),
                                                        s->counters().end());
  std::sort(counters.begin(), counters.end());
  for (const auto& [name, value] : counters) {
    std::cout << absl::StrFormat("  %-22s %d\n", name, value);
  }
  if (s->db_bytes() > 0) {
    std::cout << absl::StrFormat("database:   %.1f MiB on disk\n",
                                 s->db_bytes() / 1048576.0);
  }
  if (!s->db_mended().empty()) {
    std::cout << "database:   MENDED AT START: " << s->db_mended() << "\n";
  }
  if (!s->db_writable()) {
    std::cout << "database:   TAKES NO WRITES: finds answer but store nothing"
              << (s->db_error().empty() ? "" : " (" + s->db_error() + ")")
              << "\n";
  }
  if (s->tenants_size() > 0) {
    std::cout << (s->role() == "admin" ? "tenants:\n" : "your usage:\n");
    std::cout << absl::StrFormat("  %-20s %13s %15s %-26s %-20s %s\n", "tenant",
                                 "finds waiting", "background jobs",
                                 "prefill done/failed/queued",
                                 "device s (last min)", "executes");
    for (const v1::TenantUsage& t : s->tenants()) {
      auto limit = [](double v) {
        return v > 0 ? absl::StrFormat("/%g", v) : std::string("");
      };
      std::cout << absl::StrFormat(
          "  %-20s %13s %15s %-26s %-20s %d (%d B)\n", t.tenant(),
          absl::StrCat(t.finds_waiting(), limit(t.limit_finds_waiting())),
          absl::StrCat(t.background_jobs(), limit(t.limit_background_jobs())),
          absl::StrCat(t.prefill_done(), "/", t.prefill_failed(), "/",
                       t.prefill_queued()),
          absl::StrFormat("%.1f%s (%.1f total)", t.device_seconds_last_minute(),
                          limit(t.limit_device_seconds_per_minute()),
                          t.device_seconds_total()),
          t.executes_in_flight(), t.execute_bytes_in_flight());
    }
  }
  return kExitOk;
}

int HealthCommand(Context& context, const std::vector<std::string>& args) {
  std::string service;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--service" && i + 1 < args.size()) {
      service = args[++i];
    } else {
      return UsageError(absl::StrCat("health: unknown argument '",
                                     args[i].substr(0, 40), "'"));
    }
  }
  absl::StatusOr<std::string> s = context.client->Health(service);
  if (!s.ok()) {
    ReportError(context, s.status());
    return kExitFailed;
  }
  std::cout << *s << "\n";
  return *s == "SERVING" ? kExitOk : kExitFailed;
}

}  // namespace convtune::cli
