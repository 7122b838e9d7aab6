// The C API's daemon-backed calls: workspace size, find, and the convolutions
// that run the found plans on host buffers.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/c_api_internal.h"
#include "common/vocabulary.h"
#include "kernels/numeric.h"

namespace convtune::capi {

convtuneStatus_t CheckArgs(convtuneHandle_t handle,
                           std::initializer_list<Arg> args) {
  if (handle == nullptr)
    return Fail(nullptr, convtuneStatusBadParm, "handle is NULL");
  for (const Arg& a : args) {
    if (a.ptr == nullptr) {
      return Fail(handle, convtuneStatusBadParm,
                  absl::StrCat(a.name, " is NULL"));
    }
  }
  return convtuneStatusSuccess;
}

namespace {

convtuneStatus_t WorkspaceSize(convtuneHandle_t handle, Direction dir,
                               const TensorNames& names,
                               const convtuneTensorDescriptor* x,
                               const convtuneTensorDescriptor* w,
                               const convtuneTensorDescriptor* y,
                               const convtuneConvolutionDescriptor* conv,
                               size_t* size) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {{size, "workSpaceSize"}}); s)
      return s;
    ConvProblem p;
    if (convtuneStatus_t s = MakeProblem(handle, dir, names, x, w, y, conv, &p);
        s)
      return s;
    absl::StatusOr<int64_t> bytes = handle->client->WorkspaceSize(p);
    if (!bytes.ok()) return FailWith(handle, bytes.status());
    *size = static_cast<size_t>(*bytes);
    return convtuneStatusSuccess;
  });
}

struct FindArgs {
  int request_count;
  int* returned_count;
  convtuneConvAlgoPerf_t* results;
  const void* workspace;
  size_t workspace_size;
  bool exhaustive;
};

convtuneStatus_t FindAlgorithms(convtuneHandle_t handle, const ConvProblem& p,
                                const FindArgs& a) {
  if (a.request_count < 1) {
    return Fail(
        handle, convtuneStatusBadParm,
        absl::StrCat("requestAlgoCount must be >= 1, got ", a.request_count));
  }
  if (a.workspace == nullptr && a.workspace_size > 0) {
    return Fail(handle, convtuneStatusBadParm,
                absl::StrCat("workSpace is NULL but workSpaceSize is ",
                             a.workspace_size));
  }
  FindOptions options;
  options.workspace_limit =
      a.workspace_size >
              static_cast<size_t>(std::numeric_limits<int64_t>::max())
          ? -1
          : static_cast<int64_t>(a.workspace_size);
  options.exhaustive = a.exhaustive;
  options.mode = static_cast<v1::FindMode>(handle->find_mode);
  absl::StatusOr<v1::FindResponse> found = handle->client->Find(p, options);
  if (!found.ok()) return FailWith(handle, found.status());
  std::vector<v1::PerfResult> results(found->results().begin(),
                                      found->results().end());
  const int count =
      std::min<int>(a.request_count, static_cast<int>(results.size()));
  for (int i = 0; i < count; ++i) {
    const v1::PerfResult& r = results[i];
    absl::StatusOr<v1::AlgorithmFamily> algo =
        ParseAlgorithm(r.algorithm(), "algorithm");
    if (!algo.ok()) {
      return Fail(handle, convtuneStatusInternalError,
                  absl::StrCat("convtuned returned solver ", r.solver_id(),
                               " with ", algo.status().message()));
    }
    convtuneConvAlgoPerf_t& out = a.results[i];
    std::memset(&out, 0, sizeof(out));
    out.fwd_algo = static_cast<convtuneConvFwdAlgorithm_t>(*algo);
    out.time = static_cast<float>(r.time_ms());
    out.memory = static_cast<size_t>(r.workspace_bytes());
    out.solution_id = r.solver_id();
    std::strncpy(out.solver_name, r.solver_name().c_str(),
                 sizeof(out.solver_name) - 1);
  }
  *a.returned_count = count;
  handle->found[ProblemKey(p)] = std::move(results);
  return convtuneStatusSuccess;
}

// The fastest solver of `algo`'s family that fits in `workspace_size`.
convtuneStatus_t ChooseSolver(convtuneHandle_t handle, const ConvProblem& p,
                              int algo, size_t workspace_size,
                              uint32_t* solver_id) {
  if (!v1::AlgorithmFamily_IsValid(algo)) {
    return Fail(handle, convtuneStatusBadParm,
                absl::StrCat("algo ", algo, " is not a convolution algorithm"));
  }
  const absl::string_view family =
      AlgorithmName(static_cast<v1::AlgorithmFamily>(algo));
  const std::string key = ProblemKey(p);
  auto it = handle->found.find(key);
  if (it == handle->found.end()) {
    // Not found through this handle: the daemon answers from its FindDb or
    // tunes.
    FindOptions options;
    options.mode = static_cast<v1::FindMode>(handle->find_mode);
    absl::StatusOr<v1::FindResponse> found = handle->client->Find(p, options);
    if (!found.ok()) return FailWith(handle, found.status());
    it = handle->found
             .emplace(key, std::vector<v1::PerfResult>(found->results().begin(),
                                                       found->results().end()))
             .first;
  }
  std::vector<std::string> families;
  const v1::PerfResult* too_big = nullptr;
  for (const v1::PerfResult& r : it->second) {
    families.push_back(r.algorithm());
    if (r.algorithm() != family) continue;
    if (static_cast<uint64_t>(r.workspace_bytes()) <= workspace_size) {
      *solver_id = r.solver_id();
      return convtuneStatusSuccess;
    }
    if (too_big == nullptr) too_big = &r;
  }
  if (too_big != nullptr) {
    return Fail(
        handle, convtuneStatusResourceExhausted,
        absl::StrCat("the ", family, " solution (", too_big->solver_name(),
                     ") needs ", too_big->workspace_bytes(),
                     " bytes of workspace; workSpaceSize is ", workspace_size));
  }
  return Fail(
      handle, convtuneStatusNotFound,
      absl::StrCat("no ", family, " solution for ", key, "; found: ",
                   families.empty() ? "none" : absl::StrJoin(families, ", ")));
}

template <typename Load, typename Store>
void BlendTyped(void* out, const void* conv, int64_t count, float alpha,
                float beta, Load load, Store store) {
  using T = decltype(store(0.0f));
  T* o = static_cast<T*>(out);
  const T* c = static_cast<const T*>(conv);
  for (int64_t i = 0; i < count; ++i) {
    // beta == 0 overwrites: `out` may hold garbage (even NaN) on entry.
    const float prior = beta == 0.0f ? 0.0f : beta * load(o[i]);
    o[i] = store(alpha * load(c[i]) + prior);
  }
}

// out = alpha * conv + beta * out, element-wise in the tensor's type.
void Blend(DataType type, void* out, const void* conv, int64_t count,
           float alpha, float beta) {
  switch (type) {
    case DataType::kFp32:
      BlendTyped(
          out, conv, count, alpha, beta, [](float v) { return v; },
          [](float v) { return v; });
      break;
    case DataType::kFp16:
      BlendTyped(
          out, conv, count, alpha, beta,
          [](uint16_t v) { return HalfToFloat(v); },
          [](float v) { return FloatToHalf(v); });
      break;
    case DataType::kBf16:
      BlendTyped(
          out, conv, count, alpha, beta,
          [](uint16_t v) { return Bf16ToFloat(v); },
          [](float v) { return FloatToBf16(v); });
      break;
  }
}

// Runs the chosen plan with `buffers`, whose `out_role` member is the output.
convtuneStatus_t RunConvolution(convtuneHandle_t handle, const ConvProblem& p,
                                int algo, const void* alpha, const void* beta,
                                PlanBuffers buffers,
                                void* PlanBuffers::*out_role, void* workspace,
                                size_t workspace_size) {
  if (workspace == nullptr && workspace_size > 0) {
    return Fail(handle, convtuneStatusBadParm,
                absl::StrCat("workSpace is NULL but workSpaceSize is ",
                             workspace_size));
  }
  uint32_t solver_id = 0;
  if (convtuneStatus_t s =
          ChooseSolver(handle, p, algo, workspace_size, &solver_id);
      s) {
    return s;
  }
  buffers.workspace = workspace;
  buffers.workspace_bytes = static_cast<int64_t>(
      std::min<size_t>(workspace_size, std::numeric_limits<int64_t>::max()));
  const float a = *static_cast<const float*>(alpha);
  const float b = *static_cast<const float*>(beta);
  const int64_t count = p.output_elements();
  std::unique_ptr<char[]> temp;
  void* out = buffers.*out_role;
  if (a != 1.0f || b != 0.0f) {
    // The blend runs on the host; device memory cannot take it.
    absl::StatusOr<v1::ExecutionPlan> plan =
        handle->client->GetPlan(p, solver_id);
    if (!plan.ok()) return FailWith(handle, plan.status());
    if (plan->backend() != v1::CPU) {
      return Fail(
          handle, convtuneStatusNotImplemented,
          absl::StrCat("alpha ", a, " and beta ", b, ": solver ", solver_id,
                       " has a ", BackendName(plan->backend()),
                       " plan, which runs with alpha 1 and beta 0 "
                       "only"));
    }
    temp.reset(new (std::nothrow) char[count * ElementBytes(p.type)]);
    if (temp == nullptr) {
      return Fail(handle, convtuneStatusAllocFailed,
                  "cannot allocate the alpha/beta temporary");
    }
    buffers.*out_role = temp.get();
  }
  if (absl::Status s = handle->client->Run(p, solver_id, buffers); !s.ok()) {
    return FailWith(handle, s);
  }
  if (temp != nullptr) Blend(p.type, out, temp.get(), count, a, b);
  return convtuneStatusSuccess;
}

}  // namespace
}  // namespace convtune::capi

using convtune::Direction;
using convtune::PlanBuffers;
using namespace convtune::capi;  // NOLINT: the C entry points below are thin.

extern "C" {

convtuneStatus_t convtuneConvolutionForwardGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t wDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, size_t* workSpaceSize) {
  return WorkspaceSize(handle, Direction::kForward, kFwdNames, xDesc, wDesc,
                       yDesc, convDesc, workSpaceSize);
}

convtuneStatus_t convtuneConvolutionBackwardDataGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t wDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, size_t* workSpaceSize) {
  return WorkspaceSize(handle, Direction::kBackwardData, kBwdDataNames, dxDesc,
                       wDesc, dyDesc, convDesc, workSpaceSize);
}

convtuneStatus_t convtuneConvolutionBackwardWeightsGetWorkSpaceSize(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const convtuneTensorDescriptor_t xDesc,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, size_t* workSpaceSize) {
  return WorkspaceSize(handle, Direction::kBackwardWeights, kBwdWeightsNames,
                       xDesc, dwDesc, dyDesc, convDesc, workSpaceSize);
}

convtuneStatus_t convtuneFindConvolutionForwardAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t xDesc,
    const void* x, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t yDesc, void* y, const int requestAlgoCount,
    int* returnedAlgoCount, convtuneConvAlgoPerf_t* perfResults,
    void* workSpace, size_t workSpaceSize, bool exhaustiveSearch) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s =
            CheckArgs(handle, {{x, "x"},
                               {w, "w"},
                               {y, "y"},
                               {returnedAlgoCount, "returnedAlgoCount"},
                               {perfResults, "perfResults"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s = MakeProblem(handle, Direction::kForward, kFwdNames,
                                         xDesc, wDesc, yDesc, convDesc, &p);
        s) {
      return s;
    }
    return FindAlgorithms(handle, p,
                          {requestAlgoCount, returnedAlgoCount, perfResults,
                           workSpace, workSpaceSize, exhaustiveSearch});
  });
}

convtuneStatus_t convtuneFindConvolutionBackwardDataAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dxDesc, void* dx,
    const int requestAlgoCount, int* returnedAlgoCount,
    convtuneConvAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSize,
    bool exhaustiveSearch) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s =
            CheckArgs(handle, {{dy, "dy"},
                               {w, "w"},
                               {dx, "dx"},
                               {returnedAlgoCount, "returnedAlgoCount"},
                               {perfResults, "perfResults"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s =
            MakeProblem(handle, Direction::kBackwardData, kBwdDataNames, dxDesc,
                        wDesc, dyDesc, convDesc, &p);
        s) {
      return s;
    }
    return FindAlgorithms(handle, p,
                          {requestAlgoCount, returnedAlgoCount, perfResults,
                           workSpace, workSpaceSize, exhaustiveSearch});
  });
}

convtuneStatus_t convtuneFindConvolutionBackwardWeightsAlgorithm(
    convtuneHandle_t handle, const convtuneTensorDescriptor_t dyDesc,
    const void* dy, const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    const convtuneTensorDescriptor_t dwDesc, void* dw,
    const int requestAlgoCount, int* returnedAlgoCount,
    convtuneConvAlgoPerf_t* perfResults, void* workSpace, size_t workSpaceSize,
    bool exhaustiveSearch) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s =
            CheckArgs(handle, {{dy, "dy"},
                               {x, "x"},
                               {dw, "dw"},
                               {returnedAlgoCount, "returnedAlgoCount"},
                               {perfResults, "perfResults"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s =
            MakeProblem(handle, Direction::kBackwardWeights, kBwdWeightsNames,
                        xDesc, dwDesc, dyDesc, convDesc, &p);
        s) {
      return s;
    }
    return FindAlgorithms(handle, p,
                          {requestAlgoCount, returnedAlgoCount, perfResults,
                           workSpace, workSpaceSize, exhaustiveSearch});
  });
}

convtuneStatus_t convtuneConvolutionForward(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvFwdAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t yDesc, void* y, void* workSpace,
    size_t workSpaceSize) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(
            handle,
            {{alpha, "alpha"}, {beta, "beta"}, {x, "x"}, {w, "w"}, {y, "y"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s = MakeProblem(handle, Direction::kForward, kFwdNames,
                                         xDesc, wDesc, yDesc, convDesc, &p);
        s) {
      return s;
    }
    PlanBuffers b{const_cast<void*>(x), const_cast<void*>(w), y};
    return RunConvolution(handle, p, algo, alpha, beta, b, &PlanBuffers::y,
                          workSpace, workSpaceSize);
  });
}

convtuneStatus_t convtuneConvolutionBackwardData(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t dyDesc, const void* dy,
    const convtuneTensorDescriptor_t wDesc, const void* w,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvBwdDataAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t dxDesc, void* dx, void* workSpace,
    size_t workSpaceSize) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {{alpha, "alpha"},
                                                {beta, "beta"},
                                                {dy, "dy"},
                                                {w, "w"},
                                                {dx, "dx"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s =
            MakeProblem(handle, Direction::kBackwardData, kBwdDataNames, dxDesc,
                        wDesc, dyDesc, convDesc, &p);
        s) {
      return s;
    }
    PlanBuffers b{dx, const_cast<void*>(w), const_cast<void*>(dy)};
    return RunConvolution(handle, p, algo, alpha, beta, b, &PlanBuffers::x,
                          workSpace, workSpaceSize);
  });
}

convtuneStatus_t convtuneConvolutionBackwardWeights(
    convtuneHandle_t handle, const void* alpha,
    const convtuneTensorDescriptor_t dyDesc, const void* dy,
    const convtuneTensorDescriptor_t xDesc, const void* x,
    const convtuneConvolutionDescriptor_t convDesc,
    convtuneConvBwdWeightsAlgorithm_t algo, const void* beta,
    const convtuneTensorDescriptor_t dwDesc, void* dw, void* workSpace,
    size_t workSpaceSize) {
  return Guard(handle, [&] {
    if (convtuneStatus_t s = CheckArgs(handle, {{alpha, "alpha"},
                                                {beta, "beta"},
                                                {dy, "dy"},
                                                {x, "x"},
                                                {dw, "dw"}});
        s) {
      return s;
    }
    convtune::ConvProblem p;
    if (convtuneStatus_t s =
            MakeProblem(handle, Direction::kBackwardWeights, kBwdWeightsNames,
                        xDesc, dwDesc, dyDesc, convDesc, &p);
        s) {
      return s;
    }
    PlanBuffers b{const_cast<void*>(x), dw, const_cast<void*>(dy)};
    return RunConvolution(handle, p, algo, alpha, beta, b, &PlanBuffers::w,
                          workSpace, workSpaceSize);
  });
}

}  // extern "C"
