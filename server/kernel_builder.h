// Compiles the GPU kernel sources a plan needs, through the kernel cache: an
// in-memory map, then the store's kernel_cache column, then the run-time
// compiler (storing what it compiles). Loads code objects into the device and
// stamps each step with its code object's hash. A kernel compiled once is not
// compiled again on that device key, across restarts. Thread-safe: concurrent
// builds of one hash compile it once.
#ifndef CONVTUNE_SERVER_KERNEL_BUILDER_H_
#define CONVTUNE_SERVER_KERNEL_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "convtune/v1/plan.pb.h"
#include "kernels/device.h"
#include "kernels/gpu/compiler.h"
#include "storage/records.h"

namespace convtune {

struct BuildStats {
  int64_t compiled = 0;  // compiler runs that succeeded
  int64_t memory_hits =
      0;  // found in memory (or compiled by a concurrent build)
  int64_t store_hits = 0;  // read from the kernel_cache column
  int64_t loaded = 0;      // code objects loaded into the device
};

class KernelBuilder {
 public:
  // `device` may be null (compile-only: nothing is loaded). `arch` is the
  // target ("sm_90", "gfx90a"). References must outlive the builder.
  KernelBuilder(Device* device, const KernelCompiler& compiler,
                storage::Store& store, std::string arch);

  // Loads what it builds into `device` too (another device of the same key).
  // Call before the first build. Must outlive the builder.
  void AddDevice(Device* device) {
    absl::MutexLock lock(&mu_);
    devices_.push_back(device);
  }
  // Loads nothing more into `device` (it was lost); the others go on.
  void DropDevice(Device* device);

  // Compiles (or finds) every source of `plan` and sets code_object_hash on
  // every step but library steps ("blas.*"), which keep none. InvalidArgument
  // when the plan is for another backend or a compiled step's source_index
  // is out of range; NotFound for an unknown source file; Internal with the
  // compiler's log when a source does not compile.
  // Idempotent: after Device::Reset it re-loads what the device lost.
  // *compiled (may be null) counts the compiler runs this call made.
  absl::Status BuildPlan(v1::ExecutionPlan* plan, int* compiled = nullptr);

  // Compiles (or finds) one source and loads it; returns its hash. Sets
  // *compiled (may be null) when this call ran the compiler.
  absl::StatusOr<std::string> BuildSource(const v1::KernelSource& source,
                                          bool* compiled = nullptr);

  // The code object a build made under `hash`: from memory, else the
  // kernel cache. NotFound when neither holds it.
  absl::StatusOr<std::string> CodeObjectFor(const std::string& hash);

  BuildStats stats() const;
  const std::string& arch() const { return arch_; }
  const KernelCompiler& compiler() const { return compiler_; }

 private:
  using CodeObject = std::shared_ptr<const std::string>;
  struct InFlight;

  // The kernel cache's code object for `hash` when it was built for this
  // backend and arch; NotFound / DataLoss as the cache says, else NotFound.
  absl::StatusOr<std::string> FromStore(const std::string& hash);
  absl::StatusOr<CodeObject> Lookup(const std::string& hash,
                                    const CompileRequest& req, bool* compiled);
  absl::StatusOr<CodeObject> FetchOrCompile(const std::string& hash,
                                            const CompileRequest& req,
                                            bool* compiled);

  std::vector<Device*> devices_ ABSL_GUARDED_BY(mu_);  // builds load here
  const KernelCompiler& compiler_;
  storage::KernelCache cache_;
  const std::string arch_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, CodeObject> memory_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<InFlight>> in_flight_
      ABSL_GUARDED_BY(mu_);
  BuildStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_KERNEL_BUILDER_H_
