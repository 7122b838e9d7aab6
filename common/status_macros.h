// Small helpers for absl::Status plumbing, shared by every module.
// Header-only and stateless; safe from any thread.
#ifndef CONVTUNE_COMMON_STATUS_MACROS_H_
#define CONVTUNE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVTUNE_CONCAT_INNER_(a, b) a##b
#define CONVTUNE_CONCAT_(a, b) CONVTUNE_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)            \
  do {                                   \
    ::absl::Status _status_ = (expr);    \
    if (!_status_.ok()) return _status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(CONVTUNE_CONCAT_(_statusor_, __LINE__), lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = std::move(statusor).value()

#endif  // CONVTUNE_COMMON_STATUS_MACROS_H_
