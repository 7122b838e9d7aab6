// The NVRTC compiler, loaded with dlopen so that binaries run (and fall back
// to other backends) where the CUDA toolkit is absent.

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "kernels/dynamic_library.h"
#include "kernels/gpu/compiler.h"

#if CONVTUNE_HAVE_CUDA_HEADERS
#include <nvrtc.h>
#endif

namespace convtune {

#if CONVTUNE_HAVE_CUDA_HEADERS
namespace {

constexpr char kNvrtcLibrary[] = "libnvrtc.so.13";

struct NvrtcApi {
  decltype(&nvrtcVersion) Version;
  decltype(&nvrtcGetErrorString) GetErrorString;
  decltype(&nvrtcGetNumSupportedArchs) GetNumSupportedArchs;
  decltype(&nvrtcGetSupportedArchs) GetSupportedArchs;
  decltype(&nvrtcCreateProgram) CreateProgram;
  decltype(&nvrtcDestroyProgram) DestroyProgram;
  decltype(&nvrtcCompileProgram) CompileProgram;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize;
  decltype(&nvrtcGetProgramLog) GetProgramLog;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize;
  decltype(&nvrtcGetCUBIN) GetCUBIN;
};

// Loaded once per process and never unloaded.
absl::StatusOr<const NvrtcApi*> LoadNvrtc() {
  static const absl::StatusOr<const NvrtcApi*>* const api = [] {
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open({kNvrtcLibrary});
    if (!lib.ok()) {
      return new absl::StatusOr<const NvrtcApi*>(absl::UnavailableError(
          absl::StrCat("NVRTC unavailable: cannot load ", kNvrtcLibrary, ": ",
                       lib.status().message())));
    }
    auto* t = new NvrtcApi;
    auto sym = [&](auto& fn, const char* name) { lib->Require(&fn, name); };
    sym(t->Version, "nvrtcVersion");
    sym(t->GetErrorString, "nvrtcGetErrorString");
    sym(t->GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
    sym(t->GetSupportedArchs, "nvrtcGetSupportedArchs");
    sym(t->CreateProgram, "nvrtcCreateProgram");
    sym(t->DestroyProgram, "nvrtcDestroyProgram");
    sym(t->CompileProgram, "nvrtcCompileProgram");
    sym(t->GetProgramLogSize, "nvrtcGetProgramLogSize");
    sym(t->GetProgramLog, "nvrtcGetProgramLog");
    sym(t->GetCUBINSize, "nvrtcGetCUBINSize");
    sym(t->GetCUBIN, "nvrtcGetCUBIN");
    if (!lib->missing().empty()) {
      return new absl::StatusOr<const NvrtcApi*>(absl::UnavailableError(
          absl::StrCat("NVRTC unavailable: ", kNvrtcLibrary, " lacks ",
                       lib->missing())));
    }
    return new absl::StatusOr<const NvrtcApi*>(t);
  }();
  return *api;
}

class NvrtcCompiler final : public KernelCompiler {
 public:
  NvrtcCompiler(const NvrtcApi* api, std::string version,
                std::vector<int> archs)
      : api_(api), version_(std::move(version)), archs_(std::move(archs)) {}

  v1::Backend backend() const override { return v1::CUDA; }
  const std::string& version() const override { return version_; }

  absl::StatusOr<std::string> Compile(
      const CompileRequest& req) const override {
    if (absl::Status s = CheckArch(req.arch); !s.ok()) return s;
    nvrtcProgram prog = nullptr;
    nvrtcResult r = api_->CreateProgram(&prog, req.source.c_str(),
                                        req.file.c_str(), 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) {
      return absl::InternalError(absl::StrCat("nvrtcCreateProgram(", req.file,
                                              "): ", api_->GetErrorString(r)));
    }
    std::vector<std::string> options = {
        absl::StrCat("--gpu-architecture=", req.arch), "-default-device",
        "-std=c++17"};
    options.insert(options.end(), req.options.begin(), req.options.end());
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    r = api_->CompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    absl::StatusOr<std::string> out;
    if (r != NVRTC_SUCCESS) {
      out = absl::InternalError(absl::StrCat(
          "NVRTC cannot compile ", req.file, " for ", req.arch,
          req.options.empty() ? "" : " with ", absl::StrJoin(req.options, " "),
          ": ", api_->GetErrorString(r), "\n", Log(prog)));
    } else {
      size_t size = 0;
      api_->GetCUBINSize(prog, &size);
      std::string cubin(size, '\0');
      if (size == 0 || api_->GetCUBIN(prog, cubin.data()) != NVRTC_SUCCESS) {
        out = absl::InternalError(
            absl::StrCat("NVRTC produced no CUBIN for ", req.file));
      } else {
        out = std::move(cubin);
      }
    }
    api_->DestroyProgram(&prog);
    return out;
  }

 private:
  // InvalidArgument unless `arch` is "sm_XY" (optionally "sm_XYa"/"sm_XYf")
  // for an XY this NVRTC supports.
  absl::Status CheckArch(const std::string& arch) const {
    absl::string_view digits = arch;
    const bool prefixed = absl::ConsumePrefix(&digits, "sm_");
    if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
      digits.remove_suffix(1);
    }
    int sm = 0;
    if (!prefixed || !absl::SimpleAtoi(digits, &sm) ||
        std::find(archs_.begin(), archs_.end(), sm) == archs_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "arch: NVRTC ", version_, " cannot target '", arch,
          "' (supported: sm_", absl::StrJoin(archs_, ", sm_"), ")"));
    }
    return absl::OkStatus();
  }

  std::string Log(nvrtcProgram prog) const {
    size_t size = 0;
    if (api_->GetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1)
      return "";
    std::string log(size, '\0');
    api_->GetProgramLog(prog, log.data());
    log.resize(size - 1);  // drop the terminating NUL
    return log;
  }

  const NvrtcApi* api_;
  const std::string version_;
  const std::vector<int> archs_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeNvrtcCompiler() {
  absl::StatusOr<const NvrtcApi*> api = LoadNvrtc();
  if (!api.ok()) return api.status();
  int major = 0, minor = 0;
  if ((*api)->Version(&major, &minor) != NVRTC_SUCCESS) {
    return absl::UnavailableError("NVRTC unavailable: nvrtcVersion failed");
  }
  int n = 0;
  (*api)->GetNumSupportedArchs(&n);
  std::vector<int> archs(std::max(n, 0));
  if (n > 0) (*api)->GetSupportedArchs(archs.data());
  return std::make_unique<NvrtcCompiler>(
      *api, absl::StrCat("nvrtc", major, ".", minor), std::move(archs));
}

#else  // !CONVTUNE_HAVE_CUDA_HEADERS

absl::StatusOr<std::unique_ptr<KernelCompiler>> MakeNvrtcCompiler() {
  return absl::UnavailableError(
      "NVRTC unavailable: convtune was built without the CUDA headers");
}

#endif

}  // namespace convtune
