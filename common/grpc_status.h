// Conversions between absl::Status and grpc::Status. The codes are the same
// numbers, so this is a cast plus the message. Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_GRPC_STATUS_H_
#define CONVTUNE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

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

}  // namespace convtune

#endif  // CONVTUNE_COMMON_GRPC_STATUS_H_
