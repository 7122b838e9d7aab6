// `convtune solvers` and `convtune db` (stats, export, import, merge).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli.h"
#include "client/cli/db_merge.h"
#include "common/file_util.h"
#include "common/vocabulary.h"
#include "kernels/driver_line.h"

namespace convtune::cli {
namespace {

void PrintSolvers(const v1::ListSolversResponse& response, bool with_problem) {
  std::cout << absl::StrFormat("%5s  %-32s  %-14s  %-7s  %-7s  %-14s", "id",
                               "solver", "algorithm", "backend", "dynamic",
                               "origin");
  if (with_problem)
    std::cout << absl::StrFormat("  %-10s  %14s  %s", "applicable",
                                 "workspace (B)", "reason");
  std::cout << "\n";
  int applicable = 0;
  for (const v1::SolverInfo& s : response.solvers()) {
    std::cout << absl::StrFormat(
        "%5u  %-32s  %-14s  %-7s  %-7s  %-14s", s.id(), s.name(),
        AlgorithmName(s.algorithm()), BackendName(s.backend()),
        s.dynamic() ? "yes" : "no", s.library().empty() ? "own" : s.library());
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

namespace {

int DbStats(Context& context, const std::vector<std::string>& args) {
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
  if (!stats->has_system_db()) {
    std::cout << "system FindDb: none\n";
  } else {
    const v1::SystemDbStats& system = stats->system_db();
    std::cout << "system FindDb: " << system.path() << "\n"
              << absl::StrFormat("  %-16s %d record(s)\n", "find_db",
                                 system.records());
    if (!system.exact()) {
      std::cout << "  tuned on " << system.source_device_key()
                << " (the nearest compute-unit count of this arch)\n";
    }
  }
  return kExitOk;
}

// A device key becomes a file name: it must not climb out of DIR.
absl::Status CheckDeviceKeyAsName(const std::string& key) {
  if (key.empty() || key == "." || key == ".." ||
      key.find('/') != std::string::npos) {
    return absl::InternalError(
        absl::StrCat("convtuned answered an unusable device key '", key, "'"));
  }
  return absl::OkStatus();
}

int DbExportSystem(Context& context, const std::string& dir) {
  absl::StatusOr<v1::DbExportResponse> exported =
      context.client->DbExport(/*system=*/true);
  absl::Status s = exported.status();
  if (s.ok()) s = CheckDeviceKeyAsName(exported->device_key());
  std::string path;
  if (s.ok()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    path = absl::StrCat(dir, "/", exported->device_key(), ".ctsys");
    s = ec ? absl::FailedPreconditionError(
                 absl::StrCat("cannot create ", dir, ": ", ec.message()))
           : WriteFileAtomically(path, exported->file());
  }
  if (!s.ok()) {
    ReportError(context, s);
    return kExitFailed;
  }
  std::cout << "exported a system FindDb of " << exported->device_key() << ": "
            << exported->entries() << " record(s), " << exported->file().size()
            << " bytes, to " << path << "\n";
  return kExitOk;
}

int DbExport(Context& context, const std::vector<std::string>& args) {
  if (args.size() == 3 && args[1] == "--system")
    return DbExportSystem(context, args[2]);
  if (args.size() != 2 || args[1].rfind("--", 0) == 0)
    return UsageError("db export needs one FILE, or --system DIR");
  const std::string& path = args[1];
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

int DbImport(Context& context, const std::vector<std::string>& args) {
  const bool overwrite = args.size() >= 2 && args[1] == "--overwrite";
  if (args.size() != (overwrite ? 3u : 2u))
    return UsageError("db import needs one FILE");
  const std::string& path = args.back();
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
            << ", " << imported->invalid() << " invalid, "
            << imported->refused() << " refused\n";
  if (imported->refused() > 0) {
    std::cout << "refused, the first: " << imported->first_refusal() << "\n";
  }
  return kExitOk;
}

// No daemon: export files are merged here.
int DbMerge(const std::vector<std::string>& args) {
  if (args.size() < 3) return UsageError("db merge needs OUT and IN files");
  std::vector<MergeInput> inputs;
  for (size_t i = 2; i < args.size(); ++i) {
    absl::StatusOr<std::string> bytes = ReadFile(args[i]);
    if (!bytes.ok()) {
      std::cerr << "convtune: " << bytes.status().message() << "\n";
      return kExitFailed;
    }
    inputs.push_back({args[i], *std::move(bytes)});
  }
  MergeStats stats;
  absl::StatusOr<v1::ExportFile> merged = MergeExportFiles(inputs, &stats);
  absl::Status s = merged.status();
  if (s.ok()) s = WriteFileAtomically(args[1], merged->SerializeAsString());
  if (!s.ok()) {
    std::cerr << "convtune: " << s.message() << "\n";
    return kExitFailed;
  }
  std::cout << absl::StrFormat(
      "merged %d file(s): %d entries in, %d out; %d identical, %d find "
      "record(s) replaced by a newer one, %d older find record(s) dropped, %d "
      "conflicting (first kept)%s; wrote %s\n",
      stats.files, stats.entries_in, stats.entries_out, stats.identical,
      stats.find_replaced, stats.find_kept, stats.conflicts,
      merged->device_key().empty()
          ? ""
          : absl::StrCat("; system FindDb of ", merged->device_key()),
      args[1]);
  return kExitOk;
}

}  // namespace

int DbCommand(Context& context, const std::vector<std::string>& args) {
  if (args.empty())
    return UsageError("db needs stats, export, import or merge");
  const std::string& verb = args[0];
  if (verb == "stats") return DbStats(context, args);
  if (verb == "export") return DbExport(context, args);
  if (verb == "import") return DbImport(context, args);
  if (verb == "merge") return DbMerge(args);
  return UsageError(absl::StrCat("unknown db action '", verb,
                                 "' (stats, export, import, merge)"));
}

}  // namespace convtune::cli
