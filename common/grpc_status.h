// Conversions between absl::Status and grpc::Status. The codes are the same
// numbers, so this is a cast plus the message; a refusal's retry hint
// travels as trailing metadata (kRetryAfterKey). Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_GRPC_STATUS_H_
#define CONVTUNE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace convtune {

// The longest message a status carries over the wire. A message is trailing
// metadata, and one that runs past the client's metadata limit replaces the
// real error with a transport one; messages quote inputs by short prefixes,
// so this only ever cuts an unforeseen one.
inline constexpr size_t kMaxStatusMessageChars = 1024;

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  std::string message(s.message().substr(0, kMaxStatusMessageChars));
  if (s.message().size() > kMaxStatusMessageChars) message += "...";
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::move(message));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

// The trailing metadata key of a refusal's retry hint, in milliseconds.
inline constexpr char kRetryAfterKey[] = "convtune-retry-after-ms";
inline constexpr char kRetryAfterPayload[] = "convtune.v1/retry-after-ms";

// `s` carrying the milliseconds after which the refused call may succeed.
inline absl::Status WithRetryAfter(absl::Status s, int64_t ms) {
  s.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(ms)));
  return s;
}

// The retry hint `s` carries; 0 when none.
inline int64_t RetryAfter(const absl::Status& s) {
  const auto payload = s.GetPayload(kRetryAfterPayload);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms)) {
    return 0;
  }
  return ms;
}

}  // namespace convtune

#endif  // CONVTUNE_COMMON_GRPC_STATUS_H_
