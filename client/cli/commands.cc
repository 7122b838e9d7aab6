// `convtune solvers` and `convtune db`.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli.h"
#include "common/file_util.h"
#include "kernels/driver_line.h"

namespace convtune::cli {
namespace {

void PrintSolvers(const v1::ListSolversResponse& response, bool with_problem) {
  std::cout << absl::StrFormat("%5s  %-32s  %-14s  %-7s  %-7s", "id", "solver",
                               "algorithm", "backend", "dynamic");
  if (with_problem)
    std::cout << absl::StrFormat("  %-10s  %14s  %s", "applicable",
                                 "workspace (B)", "reason");
  std::cout << "\n";
  int applicable = 0;
  for (const v1::SolverInfo& s : response.solvers()) {
    std::cout << absl::StrFormat("%5u  %-32s  %-14s  %-7s  %-7s", s.id(),
                                 s.name(), s.algorithm(), s.backend(),
                                 s.dynamic() ? "yes" : "no");
    if (with_problem) {
      applicable += s.applicable();
      std::cout << absl::StrFormat(
          "  %-10s  %14s  %s", s.applicable() ? "yes" : "no",
          s.applicable() ? absl::StrCat(s.workspace_bytes()) : "-",
          s.not_applicable_reason());
    }
    std::cout << "\n";
  }
  std::cout << response.solvers_size() << " solver(s)";
  if (with_problem) std::cout << ", " << applicable << " applicable";
  std::cout << " on " << response.device_key() << "\n";
}

}  // namespace

int SolversCommand(Context& context, const std::vector<std::string>& args) {
  std::vector<ConvProblem> problems;
  if (!args.empty()) {
    absl::StatusOr<std::vector<ConvProblem>> parsed = ParseDriverArgs(args);
    if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
    problems = *std::move(parsed);
  }
  if (problems.empty()) {
    absl::StatusOr<v1::ListSolversResponse> response =
        context.client->ListSolvers();
    if (!response.ok()) {
      ReportError(context, response.status());
      return kExitFailed;
    }
    PrintSolvers(*response, false);
    return kExitOk;
  }
  for (const ConvProblem& problem : problems) {
    absl::StatusOr<v1::ListSolversResponse> response =
        context.client->ListSolvers(problem);
    if (!response.ok()) {
      ReportError(context, response.status());
      return kExitFailed;
    }
    std::cout << "problem " << ProblemKey(problem) << "\n";
    PrintSolvers(*response, true);
    std::cout << "\n";
  }
  return kExitOk;
}

int DbCommand(Context& context, const std::vector<std::string>& args) {
  if (args.empty())
    return UsageError("db needs stats, export FILE or import FILE");
  const std::string& verb = args[0];
  if (verb == "stats") {
    if (args.size() != 1) return UsageError("db stats takes no arguments");
    absl::StatusOr<v1::DbStatsResponse> stats = context.client->DbStats();
    if (!stats.ok()) {
      ReportError(context, stats.status());
      return kExitFailed;
    }
    std::cout << "device key: " << stats->device_key() << "\n"
              << "database:   " << stats->path() << "\n";
    std::map<std::string, int64_t> sorted(stats->records().begin(),
                                          stats->records().end());
    for (const auto& [family, count] : sorted) {
      std::cout << absl::StrFormat("  %-16s %d record(s)\n", family, count);
    }
    if (!stats->find_records_per_device().empty()) {
      std::cout << "find records per device:\n";
      std::map<std::string, int64_t> devices(
          stats->find_records_per_device().begin(),
          stats->find_records_per_device().end());
      for (const auto& [device, count] : devices) {
        std::cout << absl::StrFormat("  %-40s %d\n", device, count);
      }
    }
    return kExitOk;
  }
  if (verb != "export" && verb != "import") {
    return UsageError(
        absl::StrCat("unknown db action '", verb, "' (stats, export, import)"));
  }
  const bool overwrite =
      verb == "import" && args.size() >= 2 && args[1] == "--overwrite";
  if (args.size() != (overwrite ? 3u : 2u)) {
    return UsageError(absl::StrCat("db ", verb, " needs one FILE"));
  }
  const std::string& path = args.back();
  if (verb == "export") {
    absl::StatusOr<v1::DbExportResponse> exported = context.client->DbExport();
    absl::Status s = exported.status();
    if (s.ok()) s = WriteFileAtomically(path, exported->file());
    if (!s.ok()) {
      ReportError(context, s);
      return kExitFailed;
    }
    std::cout << "exported " << exported->entries() << " record(s), "
              << exported->file().size() << " bytes, to " << path << "\n";
    return kExitOk;
  }
  absl::StatusOr<std::string> file = ReadFile(path);
  absl::StatusOr<v1::DbImportResponse> imported =
      file.ok() ? context.client->DbImport(*std::move(file), overwrite)
                : file.status();
  if (!imported.ok()) {
    ReportError(context, imported.status());
    return kExitFailed;
  }
  std::cout << "imported " << imported->imported() << " record(s) from "
            << path;
  if (imported->overwritten() > 0)
    std::cout << " (" << imported->overwritten() << " overwritten)";
  std::cout << "; skipped " << imported->skipped() << ": "
            << imported->unchanged() << " unchanged, "
            << imported->conflicting() << " conflicting"
            << (imported->conflicting() > 0 && !overwrite
                    ? " (kept; --overwrite replaces)"
                    : "")
            << ", " << imported->invalid() << " invalid\n";
  return kExitOk;
}

}  // namespace convtune::cli
