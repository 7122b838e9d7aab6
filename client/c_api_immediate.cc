// The C API's immediate mode (solution count, solutions, workspace of a
// solution, compile, immediate run) for the three directions, and the
// handle's find mode.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/c_api_internal.h"
#include "common/vocabulary.h"

namespace convtune::capi {
namespace {

// One direction's descriptors in their forward roles (x, w, y).
struct Descs {
  Direction direction;
  const TensorNames& names;
  const convtuneTensorDescriptor* x;
  const convtuneTensorDescriptor* w;
  const convtuneTensorDescriptor* y;
  const convtuneConvolutionDescriptor* conv;
};

convtuneStatus_t Problem(convtuneHandle_t handle, const Descs& d,
                         ConvProblem* p) {
  return MakeProblem(handle, d.direction, d.names, d.x, d.w, d.y, d.conv, p);
}

convtuneStatus_t SolutionCount(convtuneHandle_t handle, const Descs& d,
                               size_t* count) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {{count, "solutionCount"}}); s)
      return s;
    ConvProblem p;
    if (convtuneStatus_t s = Problem(handle, d, &p); s) return s;
    absl::StatusOr<v1::GetSolutionsResponse> r =
        handle->client->GetSolutions(p);
    if (!r.ok()) return FailWith(handle, r.status());
    *count = static_cast<size_t>(r->solutions_size());
    return convtuneStatusSuccess;
  });
}

convtuneStatus_t GetSolutions(convtuneHandle_t handle, const Descs& d,
                              size_t max_count, size_t* count,
                              convtuneConvSolution_t* solutions) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(
            handle, {{count, "solutionCount"}, {solutions, "solutions"}});
        s) {
      return s;
    }
    if (max_count < 1) {
      return Fail(handle, convtuneStatusBadParm,
                  "maxSolutionCount must be >= 1, got 0");
    }
    ConvProblem p;
    if (convtuneStatus_t s = Problem(handle, d, &p); s) return s;
    const int32_t request = static_cast<int32_t>(
        std::min<size_t>(max_count, std::numeric_limits<int32_t>::max()));
    absl::StatusOr<v1::GetSolutionsResponse> r =
        handle->client->GetSolutions(p, request);
    if (!r.ok()) return FailWith(handle, r.status());
    const size_t n =
        std::min<size_t>(max_count, static_cast<size_t>(r->solutions_size()));
    for (size_t i = 0; i < n; ++i) {
      const v1::Solution& in = r->solutions(static_cast<int>(i));
      convtuneConvSolution_t& out = solutions[i];
      std::memset(&out, 0, sizeof(out));
      out.time = static_cast<float>(in.time_ms());
      out.workspace_size = static_cast<size_t>(in.workspace_bytes());
      out.solution_id = in.solution_id();
      out.algorithm = static_cast<convtuneConvAlgorithm_t>(in.algorithm());
      out.measured = in.measured() ? 1 : 0;
      out.provenance =
          in.provenance() == v1::PROVENANCE_UNSPECIFIED
              ? (in.measured() ? convtuneSolutionMeasured
                               : convtuneSolutionEstimated)
              : static_cast<convtuneSolutionProvenance_t>(in.provenance());
      out.confidence =
          in.measured() && in.provenance() == 0 ? 1.0f : in.confidence();
      std::strncpy(out.solver_name, in.solver_name().c_str(),
                   sizeof(out.solver_name) - 1);
    }
    *count = n;
    return convtuneStatusSuccess;
  });
}

convtuneStatus_t SolutionWorkspace(convtuneHandle_t handle, const Descs& d,
                                   uint64_t solution_id, size_t* size) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {{size, "workSpaceSize"}}); s)
      return s;
    ConvProblem p;
    if (convtuneStatus_t s = Problem(handle, d, &p); s) return s;
    absl::StatusOr<int64_t> bytes =
        handle->client->GetSolutionWorkspaceSize(p, solution_id);
    if (!bytes.ok()) return FailWith(handle, bytes.status());
    *size = static_cast<size_t>(*bytes);
    return convtuneStatusSuccess;
  });
}

convtuneStatus_t Compile(convtuneHandle_t handle, const Descs& d,
                         uint64_t solution_id) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {}); s) return s;
    ConvProblem p;
    if (convtuneStatus_t s = Problem(handle, d, &p); s) return s;
    absl::StatusOr<v1::CompileSolutionResponse> r =
        handle->client->CompileSolution(p, solution_id);
    if (!r.ok()) return FailWith(handle, r.status());
    return convtuneStatusSuccess;
  });
}

// `buffers` holds the two inputs and the output of the direction; `args`
// names them for the NULL checks.
convtuneStatus_t Immediate(convtuneHandle_t handle, const Descs& d,
                           std::initializer_list<Arg> args, PlanBuffers buffers,
                           void* workspace, size_t workspace_size,
                           uint64_t solution_id) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, args); s) return s;
    if (workspace == nullptr && workspace_size > 0) {
      return Fail(handle, convtuneStatusBadParm,
                  absl::StrCat("workSpace is NULL but workSpaceSize is ",
                               workspace_size));
    }
    ConvProblem p;
    if (convtuneStatus_t s = Problem(handle, d, &p); s) return s;
    buffers.workspace = workspace;
    buffers.workspace_bytes = static_cast<int64_t>(
        std::min<size_t>(workspace_size, std::numeric_limits<int64_t>::max()));
    absl::Status s = handle->client->RunImmediate(p, solution_id, buffers);
    if (!s.ok()) return FailWith(handle, s);
    return convtuneStatusSuccess;
  });
}

}  // namespace
}  // namespace convtune::capi

using convtune::Direction;
using convtune::PlanBuffers;
using namespace convtune::capi;  // NOLINT: the C entry points below are thin.

// Descriptor sets in forward roles (x, w, y) per direction.
#define CONVTUNE_FWD_DESCS \
  Descs { Direction::kForward, kFwdNames, xDesc, wDesc, yDesc, convDesc }
#define CONVTUNE_BWD_DATA_DESCS                                              \
  Descs {                                                                    \
    Direction::kBackwardData, kBwdDataNames, dxDesc, wDesc, dyDesc, convDesc \
  }
#define CONVTUNE_BWD_WEIGHTS_DESCS                                        \
  Descs {                                                                 \
    Direction::kBackwardWeights, kBwdWeightsNames, xDesc, dwDesc, dyDesc, \
        convDesc                                                          \
  }

extern "C" {

convtuneStatus_t convtuneSetFindMode(convtuneHandle_t handle,
                                     convtuneFindMode_t findMode) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  const int mode = static_cast<int>(findMode);
  // 0 leaves the mode to the daemon.
  if (mode != 0 && !convtune::FindModeFromNumber(mode).ok()) {
    return Fail(handle, convtuneStatusBadParm,
                absl::StrCat(
                    "findMode ", mode,
                    mode == 4 ? " is reserved" : " is not a convtuneFindMode_t",
                    " (use 1, 2, 3, 5, 6 or 7, or 0 for the "
                    "daemon's default)"));
  }
  handle->find_mode = mode;
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneSetStream(convtuneHandle_t handle, void* stream) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  handle->client->SetStream(stream);
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneSetTimeouts(convtuneHandle_t handle, double call,
                                     double find) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  const convtune::ClientOptions defaults;
  absl::Duration timeouts[2];
  const double seconds[2] = {call, find};
  const char* names[2] = {"call", "find"};
  const absl::Duration fallback[2] = {defaults.call_timeout,
                                      defaults.find_timeout};
  for (int i = 0; i < 2; ++i) {
    // Deadlines past a year are a mistake, and overflow microseconds.
    if (!std::isfinite(seconds[i]) || seconds[i] < 0 || seconds[i] > 3.2e7) {
      return Fail(
          handle, convtuneStatusBadParm,
          absl::StrCat(names[i], ": expected seconds in [0, 3.2e7], got ",
                       seconds[i]));
    }
    timeouts[i] = seconds[i] == 0 ? fallback[i] : absl::Seconds(seconds[i]);
  }
  handle->client->SetTimeouts(timeouts[0], timeouts[1]);
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneGetDeviceKey(convtuneHandle_t handle, char* key,
                                      size_t size) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  if (key == nullptr) return Fail(handle, convtuneStatusBadParm, "key is NULL");
  return Guard(handle, [&] {
    if (handle->device_key.empty()) {
      absl::StatusOr<convtune::v1::GetStatusResponse> status =
          handle->client->GetStatus();
      if (!status.ok())
        return convtune::capi::FailWith(handle, status.status());
      handle->device_key = status->device_key();
    }
    if (handle->device_key.size() + 1 > size) {
      return Fail(handle, convtuneStatusResourceExhausted,
                  absl::StrCat("key: ", size, " bytes given, ",
                               handle->device_key.size() + 1, " needed"));
    }
    std::memcpy(key, handle->device_key.c_str(), handle->device_key.size() + 1);
    return convtuneStatusSuccess;
  });
}

convtuneStatus_t convtuneGetFindMode(convtuneHandle_t handle,
                                     convtuneFindMode_t* findMode) {
  if (convtuneStatus_t s = CheckArgs(handle, {{findMode, "findMode"}}); s)
    return s;
  *findMode = static_cast<convtuneFindMode_t>(handle->find_mode);
  return convtuneStatusSuccess;
}

convtuneStatus_t convtuneConvolutionForwardGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t* solutionCount) {
  return SolutionCount(handle, CONVTUNE_FWD_DESCS, solutionCount);
}

convtuneStatus_t convtuneConvolutionForwardGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions) {
  return GetSolutions(handle, CONVTUNE_FWD_DESCS, maxSolutionCount,
                      solutionCount, solutions);
}

convtuneStatus_t convtuneConvolutionForwardGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, uint64_t solution_id,
    size_t* workSpaceSize) {
  return SolutionWorkspace(handle, CONVTUNE_FWD_DESCS, solution_id,
                           workSpaceSize);
}

convtuneStatus_t convtuneConvolutionForwardCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, uint64_t solution_id) {
  return Compile(handle, CONVTUNE_FWD_DESCS, solution_id);
}

convtuneStatus_t convtuneConvolutionForwardImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const void* w, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, void* y, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id) {
  return Immediate(handle, CONVTUNE_FWD_DESCS, {{w, "w"}, {x, "x"}, {y, "y"}},
                   PlanBuffers{const_cast<void*>(x), const_cast<void*>(w), y},
                   workSpace, workSpaceSize, solution_id);
}

convtuneStatus_t convtuneConvolutionBackwardDataGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t* solutionCount) {
  return SolutionCount(handle, CONVTUNE_BWD_DATA_DESCS, solutionCount);
}

convtuneStatus_t convtuneConvolutionBackwardDataGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions) {
  return GetSolutions(handle, CONVTUNE_BWD_DATA_DESCS, maxSolutionCount,
                      solutionCount, solutions);
}

convtuneStatus_t convtuneConvolutionBackwardDataGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, uint64_t solution_id,
    size_t* workSpaceSize) {
  return SolutionWorkspace(handle, CONVTUNE_BWD_DATA_DESCS, solution_id,
                           workSpaceSize);
}

convtuneStatus_t convtuneConvolutionBackwardDataCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, uint64_t solution_id) {
  return Compile(handle, CONVTUNE_BWD_DATA_DESCS, solution_id);
}

convtuneStatus_t convtuneConvolutionBackwardDataImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, void* dx, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id) {
  return Immediate(handle, CONVTUNE_BWD_DATA_DESCS,
                   {{dy, "dy"}, {w, "w"}, {dx, "dx"}},
                   PlanBuffers{dx, const_cast<void*>(w), const_cast<void*>(dy)},
                   workSpace, workSpaceSize, solution_id);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolutionCount(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t* solutionCount) {
  return SolutionCount(handle, CONVTUNE_BWD_WEIGHTS_DESCS, solutionCount);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t maxSolutionCount,
    size_t* solutionCount, convtuneConvSolution_t* solutions) {
  return GetSolutions(handle, CONVTUNE_BWD_WEIGHTS_DESCS, maxSolutionCount,
                      solutionCount, solutions);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsGetSolutionWorkspaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, uint64_t solution_id,
    size_t* workSpaceSize) {
  return SolutionWorkspace(handle, CONVTUNE_BWD_WEIGHTS_DESCS, solution_id,
                           workSpaceSize);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsCompileSolution(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, uint64_t solution_id) {
  return Compile(handle, CONVTUNE_BWD_WEIGHTS_DESCS, solution_id);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsImmediate(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, void* dw, void* workSpace,
    size_t workSpaceSize, uint64_t solution_id) {
  return Immediate(handle, CONVTUNE_BWD_WEIGHTS_DESCS,
                   {{dy, "dy"}, {x, "x"}, {dw, "dw"}},
                   PlanBuffers{const_cast<void*>(x), dw, const_cast<void*>(dy)},
                   workSpace, workSpaceSize, solution_id);
}

}  // extern "C"
