// `convtune prefill`: a list of problems queued for tuning at background
// priority; with --follow, the list is sent as the tenant's limit on queued
// jobs allows and followed until every entry has ended.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli.h"
#include "client/cli/progress.h"

namespace convtune::cli {
namespace {

// Problems per Prefill call (the daemon takes at most 10,000).
constexpr size_t kChunk = 1000;

struct PrefillFlags {
  std::string file;
  bool follow = false;
  bool cluster = false;
  int64_t workspace_limit = -1;
  double poll_seconds = 0.5;
  ProgressDisplay::Style progress = ProgressDisplay::Style::kOff;
};

int ParsePrefillFlags(const std::vector<std::string>& args,
                      PrefillFlags* flags) {
  std::string progress = "auto";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--follow") {
      flags->follow = true;
    } else if (a == "--cluster") {
      flags->cluster = true;
    } else if (a == "--progress") {
      if (!value(&progress)) {
        return UsageError("--progress needs auto, bar, lines or off");
      }
    } else if (a == "--workspace-limit") {
      if (!value(&v) || !absl::SimpleAtoi(v, &flags->workspace_limit) ||
          flags->workspace_limit < 0) {
        return UsageError("--workspace-limit needs a number of bytes >= 0");
      }
    } else if (a == "--poll") {
      if (!value(&v) || !absl::SimpleAtod(v, &flags->poll_seconds) ||
          !(flags->poll_seconds >= 0.05 && flags->poll_seconds <= 60)) {
        return UsageError("--poll needs a number of seconds from 0.05 to 60");
      }
    } else if (!a.empty() && a[0] == '-') {
      return UsageError(
          absl::StrCat("prefill: unknown option '", a.substr(0, 40), "'"));
    } else if (flags->file.empty()) {
      flags->file = a;
    } else {
      return UsageError("prefill takes one FILE");
    }
  }
  if (flags->file.empty()) return UsageError("prefill needs a FILE");
  absl::StatusOr<ProgressDisplay::Style> style =
      ProgressDisplay::Parse(progress);
  if (!style.ok()) return UsageError(std::string(style.status().message()));
  flags->progress = *style;
  return kExitOk;
}

// The caller's own usage in a status answer; zeros if it has none.
v1::TenantUsage OwnUsage(const v1::GetStatusResponse& s) {
  for (const v1::TenantUsage& t : s.tenants()) {
    if (t.tenant() == s.tenant()) return t;
  }
  return v1::TenantUsage();
}

}  // namespace

// The list onto the fleet's job stream; with --follow, until the stream
// has no job waiting or running.
int ClusterPrefill(Context& context, const PrefillFlags& flags,
                   const std::vector<ConvProblem>& problems, bool input_ok) {
  absl::StatusOr<v1::GetStatusResponse> before =
      context.client->GetStatus(true);
  if (!before.ok()) {
    ReportError(context, before.status());
    return kExitFailed;
  }
  const int64_t done_before =
      before->cluster_jobs().done() + before->cluster_jobs().dead();
  int queued = 0;
  for (size_t sent = 0; sent < problems.size(); sent += kChunk) {
    const size_t end = std::min(problems.size(), sent + kChunk);
    absl::StatusOr<v1::PrefillResponse> r = context.client->Prefill(
        std::vector<ConvProblem>(problems.begin() + sent,
                                 problems.begin() + end),
        flags.workspace_limit, /*cluster=*/true);
    if (!r.ok()) {
      ReportError(context, r.status());
      return kExitFailed;
    }
    queued += r->queued();
  }
  std::cout << absl::StrFormat(
      "%d problem(s): %d job(s) queued on the fleet's stream\n",
      problems.size(), queued);
  if (!flags.follow) {
    std::cout << "follow it with: convtune status --cluster\n";
    return input_ok ? kExitOk : kExitUsage;
  }
  ProgressDisplay display(flags.progress, "cluster prefill", queued);
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    absl::StatusOr<v1::GetStatusResponse> s = context.client->GetStatus(true);
    if (!s.ok()) {
      display.Close();
      ReportError(context, s.status());
      return kExitFailed;
    }
    const v1::ClusterJobs& jobs = s->cluster_jobs();
    const int64_t ended = jobs.done() + jobs.dead() - done_before;
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - started)
                               .count();
    const std::string detail = absl::StrFormat(
        "%d waiting, %d running on %d node(s), %d dead; %.0f s", jobs.waiting(),
        jobs.running(), jobs.nodes_size(), jobs.dead(), seconds);
    display.Update(static_cast<int>(std::min<int64_t>(ended, queued)), detail);
    if (jobs.waiting() == 0 && jobs.running() == 0 && ended >= queued) {
      display.Close();
      std::cout << "done: " << detail << "\n";
      return jobs.dead() > before->cluster_jobs().dead() ? kExitFailed
                                                         : kExitOk;
    }
    std::this_thread::sleep_for(
        std::chrono::duration<double>(flags.poll_seconds));
  }
}

int PrefillCommand(Context& context, const std::vector<std::string>& args) {
  PrefillFlags flags;
  if (int rc = ParsePrefillFlags(args, &flags); rc != kExitOk) return rc;
  std::vector<ConvProblem> problems;
  const bool input_ok = ReadProblemFile(flags.file, &problems);
  if (problems.empty()) {
    std::cerr << "convtune: " << flags.file << ": no problems\n";
    return kExitUsage;
  }
  if (flags.cluster) return ClusterPrefill(context, flags, problems, input_ok);
  // How far the tenant's earlier prefills had got: this one counts from it.
  int64_t ended_before = 0;
  if (flags.follow) {
    absl::StatusOr<v1::GetStatusResponse> before = context.client->GetStatus();
    if (!before.ok()) {
      ReportError(context, before.status());
      return kExitFailed;
    }
    const v1::TenantUsage own = OwnUsage(*before);
    ended_before = own.prefill_done() + own.prefill_failed();
  }
  ProgressDisplay display(
      flags.follow ? flags.progress : ProgressDisplay::Style::kOff, "prefill",
      static_cast<int>(problems.size()));
  size_t sent = 0;  // problems[0, sent) were taken
  int queued = 0, already_tuned = 0;
  std::string refusal;
  const auto started = std::chrono::steady_clock::now();
  int64_t last_ended = -1;
  for (;;) {
    // The rest of the list, a chunk at a time, until the daemon takes less
    // than it is sent.
    while (sent < problems.size()) {
      const size_t end = std::min(problems.size(), sent + kChunk);
      const std::vector<ConvProblem> chunk(problems.begin() + sent,
                                           problems.begin() + end);
      absl::StatusOr<v1::PrefillResponse> r =
          context.client->Prefill(chunk, flags.workspace_limit);
      if (r.ok()) {
        sent += static_cast<size_t>(r->taken());
        queued += r->queued();
        already_tuned += r->already_tuned();
        refusal = r->refusal();
        if (static_cast<size_t>(r->taken()) < chunk.size()) break;
      } else if (r.status().code() == absl::StatusCode::kResourceExhausted) {
        refusal = std::string(r.status().message());
        break;
      } else {
        display.Close();
        ReportError(context, r.status());
        return kExitFailed;
      }
    }
    if (!flags.follow) break;
    absl::StatusOr<v1::GetStatusResponse> s = context.client->GetStatus();
    if (!s.ok()) {
      display.Close();
      ReportError(context, s.status());
      return kExitFailed;
    }
    const v1::TenantUsage own = OwnUsage(*s);
    const int64_t ended =
        own.prefill_done() + own.prefill_failed() - ended_before;
    const int64_t done = already_tuned + std::min<int64_t>(ended, queued);
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - started)
                               .count();
    std::string detail =
        absl::StrFormat("%d queued, %d tuned already, %d not yet taken; %.0f s",
                        queued, already_tuned, problems.size() - sent, seconds);
    display.Update(static_cast<int>(done), detail);
    if (display.style() == ProgressDisplay::Style::kLines &&
        ended != last_ended) {
      display.Line(absl::StrCat(done, "/", problems.size(), " done: ", detail));
      last_ended = ended;
    }
    if (sent == problems.size() && ended >= queued) break;
    std::this_thread::sleep_for(
        std::chrono::duration<double>(flags.poll_seconds));
  }
  display.Close();
  std::cout << absl::StrFormat(
      "%d problem(s): %d queued, %d tuned already, %d not taken\n",
      problems.size(), queued, already_tuned, problems.size() - sent);
  if (sent < problems.size()) {
    std::cerr << "convtune: " << refusal
              << "; send the rest again later (or follow with --follow)\n";
    return kExitFailed;
  }
  if (!flags.follow) {
    std::cout << "follow it with: convtune status (prefill: done / queued)\n";
  }
  return input_ok ? kExitOk : kExitUsage;
}

}  // namespace convtune::cli
