// The hiprtc compiler, from the HIP runtime library (ROCm 5 ships hiprtc in
// libamdhip64), loaded with dlopen so binaries run where HIP is absent. It
// needs no device: comgr carries the device libraries, so a CPU machine can
// fill a kernel cache for an AMD arch.

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "kernels/dynamic_library.h"
#include "kernels/gpu/compiler.h"

#if CONVTUNE_HAVE_HIP_HEADERS
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#endif

namespace convtune {

#if CONVTUNE_HAVE_HIP_HEADERS
namespace {

constexpr char kHipLibrary[] = "libamdhip64.so.5";

// Processors the ROCm 5 compiler knows. hiprtc aborts the process on an
// unknown --offload-arch instead of returning an error, so names are checked
// here first.
constexpr const char* kKnownGfx[] = {
    "gfx803",  "gfx900",  "gfx902",  "gfx904",  "gfx906",  "gfx908",  "gfx909",
    "gfx90a",  "gfx90c",  "gfx940",  "gfx1010", "gfx1011", "gfx1012", "gfx1013",
    "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
    "gfx1100", "gfx1101", "gfx1102", "gfx1103"};

struct HiprtcApi {
  decltype(&hiprtcVersion) Version;
  decltype(&hiprtcGetErrorString) GetErrorString;
  decltype(&hiprtcCreateProgram) CreateProgram;
  decltype(&hiprtcDestroyProgram) DestroyProgram;
  decltype(&hiprtcCompileProgram) CompileProgram;
  decltype(&hiprtcGetProgramLogSize) GetProgramLogSize;
  decltype(&hiprtcGetProgramLog) GetProgramLog;
  decltype(&hiprtcGetCodeSize) GetCodeSize;
  decltype(&hiprtcGetCode) GetCode;
  decltype(&hipRuntimeGetVersion) RuntimeGetVersion;
};

absl::StatusOr<const HiprtcApi*> LoadHiprtc() {
  static const absl::StatusOr<const HiprtcApi*>* const api = [] {
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open({kHipLibrary});
    if (!lib.ok()) {
      return new absl::StatusOr<const HiprtcApi*>(absl::UnavailableError(
          absl::StrCat("hiprtc unavailable: cannot load ", kHipLibrary, ": ",
                       lib.status().message())));
    }
    auto* t = new HiprtcApi;
    auto sym = [&](auto& fn, const char* name) { lib->Require(&fn, name); };
    sym(t->Version, "hiprtcVersion");
    sym(t->GetErrorString, "hiprtcGetErrorString");
    sym(t->CreateProgram, "hiprtcCreateProgram");
    sym(t->DestroyProgram, "hiprtcDestroyProgram");
    sym(t->CompileProgram, "hiprtcCompileProgram");
    sym(t->GetProgramLogSize, "hiprtcGetProgramLogSize");
    sym(t->GetProgramLog, "hiprtcGetProgramLog");
    sym(t->GetCodeSize, "hiprtcGetCodeSize");
    sym(t->GetCode, "hiprtcGetCode");
    sym(t->RuntimeGetVersion, "hipRuntimeGetVersion");
    if (!lib->missing().empty()) {
      return new absl::StatusOr<const HiprtcApi*>(
          absl::UnavailableError(absl::StrCat(
              "hiprtc unavailable: ", kHipLibrary, " lacks ", lib->missing())));
    }
    return new absl::StatusOr<const HiprtcApi*>(t);
  }();
  return *api;
}

// "gfx90a" or "gfx90a:sramecc+:xnack-".
bool KnownArch(absl::string_view arch) {
  std::vector<absl::string_view> parts = absl::StrSplit(arch, ':');
  bool known = false;
  for (const char* gfx : kKnownGfx) known = known || parts[0] == gfx;
  for (size_t i = 1; i < parts.size(); ++i) {
    known = known && (parts[i] == "sramecc+" || parts[i] == "sramecc-" ||
                      parts[i] == "xnack+" || parts[i] == "xnack-");
  }
  return known;
}

class HiprtcCompiler final : public KernelCompiler {
 public:
  HiprtcCompiler(const HiprtcApi* api, std::string version)
      : api_(api), version_(std::move(version)) {}

  v1::Backend backend() const override { return v1::HIP; }
  const std::string& version() const override { return version_; }

  absl::StatusOr<std::string> Compile(
      const CompileRequest& req) const override {
    if (!KnownArch(req.arch)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "arch: hiprtc ", version_, " cannot target '", req.arch,
          "' (expected one of ", absl::StrJoin(kKnownGfx, ", "), ")"));
    }
    std::vector<std::string> options = {
        absl::StrCat("--offload-arch=", req.arch), "-std=c++17", "-O3"};
    options.insert(options.end(), req.options.begin(), req.options.end());
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    // comgr in ROCm 5 is not safe for concurrent compiles in one process.
    absl::MutexLock lock(&mu_);
    hiprtcProgram prog = nullptr;
    hiprtcResult r = api_->CreateProgram(&prog, req.source.c_str(),
                                         req.file.c_str(), 0, nullptr, nullptr);
    if (r != HIPRTC_SUCCESS) {
      return absl::InternalError(absl::StrCat("hiprtcCreateProgram(", req.file,
                                              "): ", api_->GetErrorString(r)));
    }
    r = api_->CompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    absl::StatusOr<std::string> out;
    if (r != HIPRTC_SUCCESS) {
      out = absl::InternalError(absl::StrCat(
          "hiprtc cannot compile ", req.file, " for ", req.arch,
          req.options.empty() ? "" : " with ", absl::StrJoin(req.options, " "),
          ": ", api_->GetErrorString(r), "\n", Log(prog)));
    } else {
      size_t size = 0;
      api_->GetCodeSize(prog, &size);
      std::string code(size, '\0');
      if (size == 0 || api_->GetCode(prog, code.data()) != HIPRTC_SUCCESS) {
        out = absl::InternalError(
            absl::StrCat("hiprtc produced no code object for ", req.file));
      } else {
        out = std::move(code);
      }
    }
    api_->DestroyProgram(&prog);
    return out;
  }

 private:
  std::string Log(hiprtcProgram prog) const {
    size_t size = 0;
    if (api_->GetProgramLogSize(prog, &size) != HIPRTC_SUCCESS || size == 0)
      return "";
    std::string log(size, '\0');
    api_->GetProgramLog(prog, log.data());
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
  }

  const HiprtcApi* api_;
  const std::string version_;
  mutable absl::Mutex mu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeHiprtcCompiler() {
  absl::StatusOr<const HiprtcApi*> api = LoadHiprtc();
  if (!api.ok()) return api.status();
  int major = 0, minor = 0, runtime = 0;
  if ((*api)->Version(&major, &minor) != HIPRTC_SUCCESS) {
    return absl::UnavailableError("hiprtc unavailable: hiprtcVersion failed");
  }
  // The runtime's build number tells comgr / device-library builds apart.
  (*api)->RuntimeGetVersion(&runtime);
  return std::make_unique<HiprtcCompiler>(
      *api, absl::StrCat("hiprtc", major, ".", minor, "-hip", runtime));
}

#else  // !CONVTUNE_HAVE_HIP_HEADERS

absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeHiprtcCompiler() {
  return absl::UnavailableError(
      "hiprtc unavailable: convtune was built without the HIP headers");
}

#endif

}  // namespace convtune
