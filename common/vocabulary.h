// The service's enums as users, records and device keys spell them: find
// modes (the specification's numbers and names), algorithm families (MIOpen's
// numbers; "gemm", "direct", ...) and backends ("cpu", "cuda", "hip"). The
// client and the daemon both use these. Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_VOCABULARY_H_
#define CONVTUNE_COMMON_VOCABULARY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "convtune/v1/problem.pb.h"
#include "convtune/v1/records.pb.h"
#include "convtune/v1/service.pb.h"

namespace convtune {

// The mode of a find that names none, unless the daemon is told otherwise.
inline constexpr v1::FindMode kDefaultFindMode = v1::DYNAMIC_HYBRID;

// "NORMAL", ..., "DEFAULT" for FIND_MODE_UNSPECIFIED, the number otherwise.
std::string FindModeName(v1::FindMode mode);
// A name (any case: "normal", "Dynamic_Hybrid") or a number as the
// specification numbers them. InvalidArgument naming `field` for 4
// (reserved), 0 and anything unknown.
absl::StatusOr<v1::FindMode> ParseFindMode(absl::string_view text,
                                           absl::string_view field = "mode");
// The same for a number from the wire or the C API.
absl::StatusOr<v1::FindMode> FindModeFromNumber(
    int number, absl::string_view field = "mode");
// $CONVTUNE_FIND_MODE if set (an error naming it if it is bad), else
// kDefaultFindMode.
absl::StatusOr<v1::FindMode> FindModeFromEnvironment();

// "measured", "learned" or "estimated" (PROVENANCE_UNSPECIFIED, from a
// daemon that does not say: "measured" when `measured`, else "estimated").
absl::string_view ProvenanceName(v1::Provenance p, bool measured = false);

// "gemm", "direct", "fft", "winograd", "implicit_gemm"; "?" otherwise.
absl::string_view AlgorithmName(v1::AlgorithmFamily family);
// InvalidArgument naming `field` for anything else.
absl::StatusOr<v1::AlgorithmFamily> ParseAlgorithm(absl::string_view name,
                                                   absl::string_view field);

// "cpu", "cuda", "hip", "gpu"; "unspecified" otherwise.
absl::string_view BackendName(v1::Backend backend);
// InvalidArgument naming `field` for anything else.
absl::StatusOr<v1::Backend> ParseBackend(absl::string_view name,
                                         absl::string_view field);

}  // namespace convtune

#endif  // CONVTUNE_COMMON_VOCABULARY_H_
