// What the C API's opaque handles hold, and the helpers its two source files
// share: error reporting, argument checks, algorithm numbers and the problem a
// set of descriptors describes. A handle is used by one thread at a time (as
// convtune.h says).
#ifndef CONVTUNE_CLIENT_C_API_INTERNAL_H_
#define CONVTUNE_CLIENT_C_API_INTERNAL_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/client.h"
#include "client/convtune.h"
#include "convtune/v1/records.pb.h"
#include "kernels/problem.h"

struct convtuneHandle {
  std::unique_ptr<convtune::Client> client;
  std::string last_error;
  // A convtuneFindMode_t; 0 leaves the mode to the daemon.
  int find_mode = 0;
  // The daemon's device key, once asked.
  std::string device_key;
  // Find results per problem key, fastest first.
  std::map<std::string, std::vector<convtune::v1::PerfResult>> found;
};

struct convtuneTensorDescriptor {
  bool set = false;
  convtune::DataType type = convtune::DataType::kFp32;
  convtune::Layout layout = convtune::Layout::kNCHW;
  int nb_dims = 0;
  std::array<int64_t, 5> dims = {};  // logical N, C, (D,) H, W
};

struct convtuneConvolutionDescriptor {
  bool set = false;
  int spatial_dims = 2;
  // Indexed like ConvProblem: 0 = D, 1 = H, 2 = W.
  std::array<int64_t, 3> pad = {0, 0, 0};
  std::array<int64_t, 3> stride = {1, 1, 1};
  std::array<int64_t, 3> dilation = {1, 1, 1};
  int64_t groups = 1;
};

namespace convtune::capi {

// Records `message` as the last error of `handle` (if any) and of this
// thread, and returns `code`.
convtuneStatus_t Fail(convtuneHandle_t handle, convtuneStatus_t code,
                      std::string message);
// The C status for an absl::Status (InvalidArgument -> BadParm, ...).
convtuneStatus_t StatusCode(const absl::Status& status);
convtuneStatus_t FailWith(convtuneHandle_t handle, const absl::Status& status);

// The argument names of one direction's three tensors, for error messages.
struct TensorNames {
  const char* x;
  const char* w;
  const char* y;
};

inline constexpr TensorNames kFwdNames = {"xDesc", "wDesc", "yDesc"};
inline constexpr TensorNames kBwdDataNames = {"dxDesc", "wDesc", "dyDesc"};
inline constexpr TensorNames kBwdWeightsNames = {"xDesc", "dwDesc", "dyDesc"};

// A pointer argument and its name, for NULL checks.
struct Arg {
  const void* ptr;
  const char* name;
};

// BadParm naming the first NULL of `handle` and `args`.
convtuneStatus_t CheckArgs(convtuneHandle_t handle,
                           std::initializer_list<Arg> args);

// Builds and validates the problem of `direction` from descriptors (x, w, y
// in their forward roles). On failure records the error naming the
// descriptor or field and returns its code.
convtuneStatus_t MakeProblem(convtuneHandle_t handle, Direction direction,
                             const TensorNames& names,
                             const convtuneTensorDescriptor* x,
                             const convtuneTensorDescriptor* w,
                             const convtuneTensorDescriptor* y,
                             const convtuneConvolutionDescriptor* conv,
                             ConvProblem* out);

// Runs `body` and turns an escaping allocation failure (or any exception a
// library below throws) into a status: nothing crosses the C boundary.
template <typename F>
convtuneStatus_t Guard(convtuneHandle_t handle, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(handle, convtuneStatusAllocFailed, "out of memory");
  } catch (...) {
    return Fail(handle, convtuneStatusInternalError, "unexpected exception");
  }
}

}  // namespace convtune::capi

#endif  // CONVTUNE_CLIENT_C_API_INTERNAL_H_
