#include "server/kernel_builder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "kernels/gpu/blas_step.h"
#include "kernels/gpu/sources.h"

namespace convtune {

struct KernelBuilder::InFlight {
  absl::Notification done;
  absl::StatusOr<CodeObject> result;
};

KernelBuilder::KernelBuilder(Device* device, const KernelCompiler& compiler,
                             storage::Store& store, std::string arch)
    : compiler_(compiler), cache_(&store), arch_(std::move(arch)) {
  if (device != nullptr) devices_.push_back(device);
}

BuildStats KernelBuilder::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status KernelBuilder::BuildPlan(v1::ExecutionPlan* plan, int* compiled) {
  if (compiled != nullptr) *compiled = 0;
  if (plan->sources_size() == 0) return absl::OkStatus();
  if (plan->backend() != compiler_.backend()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan of solver ", plan->solver_id(), " is for backend '",
        BackendName(plan->backend()), "'; this builder compiles for '",
        BackendName(compiler_.backend()), "'"));
  }
  for (const v1::KernelStep& step : plan->steps()) {
    if (gpu::IsLibraryStep(step)) continue;
    if (step.source_index() < 0 ||
        step.source_index() >= plan->sources_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step ", step.kernel(), ": source_index ", step.source_index(),
          " out of range (the plan has ", plan->sources_size(), " sources)"));
    }
  }
  std::vector<std::string> hashes;
  hashes.reserve(plan->sources_size());
  for (const v1::KernelSource& source : plan->sources()) {
    bool ran = false;
    ASSIGN_OR_RETURN(std::string hash, BuildSource(source, &ran));
    if (ran && compiled != nullptr) ++*compiled;
    hashes.push_back(std::move(hash));
  }
  for (v1::KernelStep& step : *plan->mutable_steps()) {
    // Library steps run on the device's BLAS: they have no code object.
    if (gpu::IsLibraryStep(step)) continue;
    step.set_code_object_hash(hashes[step.source_index()]);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> KernelBuilder::BuildSource(
    const v1::KernelSource& source, bool* compiled) {
  if (compiled != nullptr) *compiled = false;
  CompileRequest req;
  req.file = source.file();
  ASSIGN_OR_RETURN(req.source,
                   KernelSourceText(source.file(), compiler_.backend()));
  req.options.assign(source.options().begin(), source.options().end());
  ASSIGN_OR_RETURN(req.arch, SourceArch(arch_, source.arch_suffix()));
  std::string hash = CodeObjectHash(compiler_.backend(), req.arch, req.source,
                                    req.options, compiler_.version());
  ASSIGN_OR_RETURN(CodeObject code, Lookup(hash, req, compiled));
  std::vector<Device*> devices;
  {
    absl::MutexLock lock(&mu_);
    devices = devices_;
  }
  for (Device* device : devices) {
    if (device->HasCodeObject(hash)) continue;
    RETURN_IF_ERROR(device->LoadCodeObject(hash, *code));
    absl::MutexLock lock(&mu_);
    ++stats_.loaded;
  }
  return hash;
}

void KernelBuilder::DropDevice(Device* device) {
  absl::MutexLock lock(&mu_);
  devices_.erase(std::remove(devices_.begin(), devices_.end(), device),
                 devices_.end());
}

absl::StatusOr<std::string> KernelBuilder::CodeObjectFor(
    const std::string& hash) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = memory_.find(hash); it != memory_.end()) return *it->second;
  }
  absl::StatusOr<std::string> stored = FromStore(hash);
  if (stored.ok()) return stored;
  return absl::NotFoundError(
      absl::StrCat("no code object ", hash.substr(0, 16), " was built"));
}

absl::StatusOr<std::string> KernelBuilder::FromStore(const std::string& hash) {
  absl::StatusOr<v1::KernelCacheRecord> stored = cache_.Get(hash);
  if (!stored.ok()) return stored.status();
  if (stored->backend() != BackendName(compiler_.backend()) ||
      (stored->arch() != arch_ && stored->arch() != arch_ + "a") ||
      stored->code_object().empty()) {
    return absl::NotFoundError("built for another backend or arch");
  }
  return std::move(*stored->mutable_code_object());
}

absl::StatusOr<KernelBuilder::CodeObject> KernelBuilder::Lookup(
    const std::string& hash, const CompileRequest& req, bool* compiled) {
  std::shared_ptr<InFlight> flight;
  bool owner = false;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = memory_.find(hash); it != memory_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
    auto [it, inserted] = in_flight_.try_emplace(hash);
    if (inserted) it->second = std::make_shared<InFlight>();
    flight = it->second;
    owner = inserted;
  }
  if (!owner) {
    flight->done.WaitForNotification();
    if (flight->result.ok()) {
      absl::MutexLock lock(&mu_);
      ++stats_.memory_hits;
    }
    return flight->result;
  }
  flight->result = FetchOrCompile(hash, req, compiled);
  {
    absl::MutexLock lock(&mu_);
    // A failure is not remembered: a later build tries again.
    if (flight->result.ok()) memory_.emplace(hash, *flight->result);
    in_flight_.erase(hash);
  }
  flight->done.Notify();
  return flight->result;
}

absl::StatusOr<KernelBuilder::CodeObject> KernelBuilder::FetchOrCompile(
    const std::string& hash, const CompileRequest& req, bool* compiled) {
  absl::StatusOr<std::string> stored = FromStore(hash);
  if (stored.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.store_hits;
    return std::make_shared<const std::string>(*std::move(stored));
  }
  // NotFound and DataLoss (the record was dropped) both mean: compile again.
  if (!absl::IsNotFound(stored.status()) &&
      !absl::IsDataLoss(stored.status())) {
    return stored.status();
  }
  ASSIGN_OR_RETURN(std::string code, compiler_.Compile(req));
  v1::KernelCacheRecord record;
  record.set_backend(std::string(BackendName(compiler_.backend())));
  record.set_arch(req.arch);
  record.set_code_object(code);
  RETURN_IF_ERROR(cache_.Put(hash, record));
  if (compiled != nullptr) *compiled = true;
  absl::MutexLock lock(&mu_);
  ++stats_.compiled;
  return std::make_shared<const std::string>(std::move(code));
}

}  // namespace convtune
