// Conversions between absl::Status and grpc::Status. The codes are the same
// numbers, so this is a cast plus the message. Stateless; thread-safe.
#ifndef CONVTUNE_COMMON_GRPC_STATUS_H_
#define CONVTUNE_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace convtune {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

}  // namespace convtune

#endif  // CONVTUNE_COMMON_GRPC_STATUS_H_
