// convtune-compile: fills a kernel cache for a named GPU arch without a
// device (compile-only mode), so a CPU machine can prepare a database that a
// GPU node then opens with every kernel already compiled.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/gpu/compiler.h"
#include "kernels/gpu/sources.h"
#include "server/kernel_builder.h"
#include "storage/records.h"
#include "storage/store.h"

namespace {

constexpr char kUsage[] = R"(usage: convtune-compile --target ARCH --db DIR [--file NAME]...

Compiles the embedded GPU kernel sources for ARCH (sm_90, gfx90a, ...) into
the kernel cache of the database in DIR, creating it if needed. No GPU is
needed. Sources already in the cache are not compiled again. Exits 1 if any
source fails to compile.

flags:
  --target ARCH   sm_XY (NVRTC) or gfxNNN (hiprtc)
  --db DIR        database folder (RocksDB), e.g. the daemon's --db
  --file NAME     compile only this embedded source (repeatable). default: all
  --help          this text
)";

int UsageError(const std::string& msg) {
  std::cerr << "convtune-compile: " << msg << "\n(convtune-compile --help lists the flags)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target, db;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    std::string value;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return UsageError(absl::StrCat(flag, ": missing value"));
    }
    if (flag == "--target") {
      target = value;
    } else if (flag == "--db") {
      db = value;
    } else if (flag == "--file") {
      files.push_back(value);
    } else {
      return UsageError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (target.empty()) return UsageError("--target is required");
  if (db.empty()) return UsageError("--db is required");
  const char* backend = absl::StartsWith(target, "sm_")    ? "cuda"
                        : absl::StartsWith(target, "gfx") ? "hip"
                                                          : nullptr;
  if (backend == nullptr) {
    return UsageError(absl::StrCat("--target: '", target, "' is neither sm_XY nor gfxNNN"));
  }
  absl::StatusOr<std::unique_ptr<convtune::KernelCompiler>> compiler =
      convtune::MakeCompiler(backend);
  if (!compiler.ok()) {
    std::cerr << "convtune-compile: " << compiler.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<convtune::storage::Store>> store =
      convtune::storage::OpenRocksDbStore(db);
  if (!store.ok()) {
    std::cerr << "convtune-compile: " << store.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = convtune::storage::StampMeta(store->get(), "convtune-compile"); !s.ok()) {
    std::cerr << "convtune-compile: " << s.message() << "\n";
    return 1;
  }
  if (files.empty()) files = convtune::KernelSourceFiles();
  convtune::KernelBuilder builder(nullptr, **compiler, **store, target);
  int failures = 0;
  for (const std::string& file : files) {
    convtune::v1::KernelSource source;
    source.set_file(file);
    absl::StatusOr<std::string> hash = builder.BuildSource(source);
    if (!hash.ok()) {
      ++failures;
      std::cerr << "convtune-compile: " << file << ": " << hash.status().message() << "\n";
      continue;
    }
    std::cout << file << " " << *hash << "\n";
  }
  const convtune::BuildStats stats = builder.stats();
  std::cout << "convtune-compile: " << target << " (" << (*compiler)->version() << "): "
            << stats.compiled << " compiled, " << stats.store_hits << " already cached, "
            << failures << " failed, into " << db << "\n";
  return failures == 0 ? 0 : 1;
}
