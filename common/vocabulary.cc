#include "common/vocabulary.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace convtune {
namespace {

constexpr v1::FindMode kModes[] = {v1::NORMAL,       v1::FAST,
                                   v1::HYBRID,       v1::DYNAMIC_HYBRID,
                                   v1::TRUST_VERIFY, v1::TRUST_VERIFY_FULL};
constexpr v1::AlgorithmFamily kFamilies[] = {v1::GEMM, v1::DIRECT, v1::FFT,
                                             v1::WINOGRAD, v1::IMPLICIT_GEMM};
constexpr v1::Backend kBackends[] = {v1::CPU, v1::CUDA, v1::HIP, v1::GPU};

absl::Status NotAFindMode(absl::string_view field, absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": '", text.substr(0, 32),
      "' is not a find mode; use NORMAL (1), FAST (2), HYBRID (3), "
      "DYNAMIC_HYBRID (5), TRUST_VERIFY (6) or TRUST_VERIFY_FULL (7); 4 is "
      "reserved"));
}

}  // namespace

std::string FindModeName(v1::FindMode mode) {
  if (mode == v1::FIND_MODE_UNSPECIFIED) return "DEFAULT";
  const std::string& name = v1::FindMode_Name(mode);
  return name.empty() ? absl::StrCat(static_cast<int>(mode)) : name;
}

absl::StatusOr<v1::FindMode> FindModeFromNumber(int number,
                                                absl::string_view field) {
  for (v1::FindMode m : kModes) {
    if (static_cast<int>(m) == number) return m;
  }
  return NotAFindMode(field, absl::StrCat(number));
}

absl::StatusOr<v1::FindMode> ParseFindMode(absl::string_view text,
                                           absl::string_view field) {
  const std::string upper =
      absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  int number;
  if (absl::SimpleAtoi(upper, &number)) {
    if (FindModeFromNumber(number, field).ok()) {
      return static_cast<v1::FindMode>(number);
    }
    return NotAFindMode(field, text);
  }
  for (v1::FindMode m : kModes) {
    if (v1::FindMode_Name(m) == upper) return m;
  }
  return NotAFindMode(field, text);
}

absl::StatusOr<v1::FindMode> FindModeFromEnvironment() {
  const char* env = std::getenv("CONVTUNE_FIND_MODE");
  if (env == nullptr || *env == '\0') return kDefaultFindMode;
  return ParseFindMode(env, "CONVTUNE_FIND_MODE");
}

absl::string_view ProvenanceName(v1::Provenance p, bool measured) {
  switch (p) {
    case v1::MEASURED:
      return "measured";
    case v1::LEARNED:
      return "learned";
    case v1::ESTIMATED:
      return "estimated";
    default:
      return measured ? "measured" : "estimated";
  }
}

absl::string_view AlgorithmName(v1::AlgorithmFamily family) {
  switch (family) {
    case v1::GEMM:
      return "gemm";
    case v1::DIRECT:
      return "direct";
    case v1::FFT:
      return "fft";
    case v1::WINOGRAD:
      return "winograd";
    case v1::IMPLICIT_GEMM:
      return "implicit_gemm";
    default:
      return "?";
  }
}

absl::StatusOr<v1::AlgorithmFamily> ParseAlgorithm(absl::string_view name,
                                                   absl::string_view field) {
  for (v1::AlgorithmFamily f : kFamilies) {
    if (AlgorithmName(f) == name) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", name.substr(0, 32),
                   "' is not an algorithm family (gemm, direct, fft, winograd, "
                   "implicit_gemm)"));
}

absl::string_view BackendName(v1::Backend backend) {
  switch (backend) {
    case v1::CPU:
      return "cpu";
    case v1::CUDA:
      return "cuda";
    case v1::HIP:
      return "hip";
    case v1::GPU:
      return "gpu";
    default:
      return "unspecified";
  }
}

absl::StatusOr<v1::Backend> ParseBackend(absl::string_view name,
                                         absl::string_view field) {
  for (v1::Backend b : kBackends) {
    if (BackendName(b) == name) return b;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown backend '", name.substr(0, 32),
                   "' (expected cpu, cuda, hip or gpu)"));
}

}  // namespace convtune
