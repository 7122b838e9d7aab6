#include "kernels/gpu/cudnn_graph.h"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "kernels/dynamic_library.h"
#include "kernels/plan_args.h"

#if CONVTUNE_HAVE_CUDNN_HEADERS
#include <cudnn_graph.h>
#endif

namespace convtune::gpu {
namespace {

constexpr size_t kMaxKnobs = 64;
constexpr int64_t kKnobTypeLimit = 1000;

absl::Status BadConfig(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("cuDNN engine config: ", what));
}

absl::Status InStep(const absl::Status& s) {
  return absl::Status(
      s.code(), absl::StrCat("step ", kCudnnConvKernel, ": ", s.message()));
}

}  // namespace

std::vector<int64_t> EncodeEngineConfig(const CudnnEngineConfig& c) {
  std::vector<int64_t> v;
  v.reserve(1 + 2 * c.knobs.size());
  v.push_back(c.engine);
  for (const auto& [type, value] : c.knobs) {
    v.push_back(type);
    v.push_back(value);
  }
  return v;
}

absl::StatusOr<CudnnEngineConfig> DecodeEngineConfig(
    absl::Span<const int64_t> v) {
  if (v.empty()) return BadConfig("empty");
  if (v.size() % 2 == 0) {
    return BadConfig(absl::StrCat(
        v.size(), " values; expected an engine, then (type, value) pairs"));
  }
  if (v[0] < 0) return BadConfig(absl::StrCat("negative engine ", v[0]));
  const size_t knobs = (v.size() - 1) / 2;
  if (knobs > kMaxKnobs) {
    return BadConfig(
        absl::StrCat(knobs, " knobs; at most ", kMaxKnobs, " are accepted"));
  }
  CudnnEngineConfig c;
  c.engine = v[0];
  c.knobs.reserve(knobs);
  for (size_t i = 1; i < v.size(); i += 2) {
    if (v[i] < 0 || v[i] >= kKnobTypeLimit) {
      return BadConfig(absl::StrCat("knob type ", v[i], " is not in [0, ",
                                    kKnobTypeLimit, ")"));
    }
    c.knobs.emplace_back(v[i], v[i + 1]);
  }
  return c;
}

v1::KernelStep MakeCudnnConvStep(const ConvProblem& p,
                                 const CudnnEngineConfig& c,
                                 int64_t workspace_bytes) {
  v1::KernelStep step;
  step.set_kernel(kCudnnConvKernel);
  AddBuffer(&step, v1::BUFFER_X);
  AddBuffer(&step, v1::BUFFER_W);
  AddBuffer(&step, v1::BUFFER_Y);
  if (workspace_bytes > 0) AddBuffer(&step, v1::BUFFER_WORKSPACE);
  AppendProblemScalars(p, &step);
  step.add_scalars(std::max<int64_t>(workspace_bytes, 0));
  for (int64_t v : EncodeEngineConfig(c)) step.add_scalars(v);
  return step;
}

absl::StatusOr<CudnnConvStep> DecodeCudnnConvStep(const v1::KernelStep& step) {
  if (step.kernel() != kCudnnConvKernel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step.kernel().substr(0, 32), " is not ", kCudnnConvKernel));
  }
  absl::StatusOr<ConvProblem> p = DecodeProblemScalars(
      absl::MakeConstSpan(step.scalars().data(), step.scalars().size()));
  if (!p.ok()) return InStep(p.status());
  const absl::Span<const int64_t> params = KernelParams(step);
  if (params.empty() || params[0] < 0) {
    return InStep(absl::InvalidArgumentError(
        "the workspace scalar after the problem is missing or negative"));
  }
  RETURN_IF_ERROR(CheckConvStepBuffers(step, params[0] > 0));
  absl::StatusOr<CudnnEngineConfig> c = DecodeEngineConfig(params.subspan(1));
  if (!c.ok()) return InStep(c.status());
  return CudnnConvStep{*p, *std::move(c), params[0]};
}

#if CONVTUNE_HAVE_CUDNN_HEADERS
namespace {

// clang-format off
#define CT_CUDNN_FUNCTIONS(X)       \
  X(cudnnGetVersion)                \
  X(cudnnCreate)                    \
  X(cudnnDestroy)                   \
  X(cudnnSetStream)                 \
  X(cudnnBackendCreateDescriptor)   \
  X(cudnnBackendDestroyDescriptor)  \
  X(cudnnBackendSetAttribute)       \
  X(cudnnBackendGetAttribute)       \
  X(cudnnBackendFinalize)           \
  X(cudnnBackendExecute)
// clang-format on

// cuDNN's entry points, loaded once per process and never unloaded; only its
// header's types are used at build time.
struct CudnnApi {
#define CT_DECLARE(fn) decltype(&fn) fn##_ = nullptr;
  CT_CUDNN_FUNCTIONS(CT_DECLARE)
  CT_DECLARE(cudnnGetErrorString)      // optional
  CT_DECLARE(cudnnGetLastErrorString)  // optional
#undef CT_DECLARE
  std::string version;  // "cudnn9.19.0"
};

// The cuDNN 9 library first; an unversioned name where only that is
// installed (its version is checked after loading).
constexpr const char* kCudnnLibraries[] = {"libcudnn.so.9", "libcudnn.so"};
constexpr size_t kMinVersion = 90000;  // 9.0.0

// cuDNN 9 reports major * 10000 + minor * 100 + patch; cuDNN 8 and older
// reported major * 1000 + minor * 100 + patch.
std::string VersionText(size_t v) {
  const size_t major_unit = v >= 90000 ? 10000 : 1000;
  return absl::StrCat(v / major_unit, ".", v % major_unit / 100, ".", v % 100);
}

absl::StatusOr<const CudnnApi*> LoadCudnn() {
  static const absl::StatusOr<const CudnnApi*>* const api = []() {
    using Result = absl::StatusOr<const CudnnApi*>;
    absl::StatusOr<DynamicLibrary> lib = DynamicLibrary::Open(kCudnnLibraries);
    if (!lib.ok()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("no cuDNN: ", lib.status().message())));
    }
    auto t = std::make_unique<CudnnApi>();
#define CT_LOAD(fn) lib->Require(&t->fn##_, #fn);
    CT_CUDNN_FUNCTIONS(CT_LOAD)
#undef CT_LOAD
    if (!lib->missing().empty()) {
      return new Result(absl::UnavailableError(
          absl::StrCat("cuDNN is too old: it lacks ", lib->missing())));
    }
    t->cudnnGetErrorString_ =
        lib->Find<decltype(t->cudnnGetErrorString_)>("cudnnGetErrorString");
    t->cudnnGetLastErrorString_ =
        lib->Find<decltype(t->cudnnGetLastErrorString_)>(
            "cudnnGetLastErrorString");
    const size_t v = t->cudnnGetVersion_();
    t->version = absl::StrCat("cudnn", VersionText(v));
    if (v < kMinVersion) {
      return new Result(absl::UnavailableError(
          absl::StrCat("cuDNN ", VersionText(v),
                       " is too old: convtune needs 9.0 or later")));
    }
    return new Result(t.release());
  }();
  return *api;
}

// The status of a cuDNN call named `what`, with cuDNN's text for it and its
// last error message for this thread.
absl::Status CudnnStatus(const CudnnApi& api, cudnnStatus_t s,
                         absl::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const int code = static_cast<int>(s);
  const char* text = api.cudnnGetErrorString_ != nullptr
                         ? api.cudnnGetErrorString_(s)
                         : nullptr;
  std::string msg = absl::StrCat(what, ": ", text != nullptr ? text : "cuDNN",
                                 " (status ", code, ")");
  if (api.cudnnGetLastErrorString_ != nullptr) {
    std::array<char, 1024> last = {};
    api.cudnnGetLastErrorString_(last.data(), last.size());
    last.back() = '\0';
    if (last[0] != '\0') absl::StrAppend(&msg, ": ", last.data());
  }
  if (code == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      code == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    return absl::ResourceExhaustedError(msg);
  }
  // cuDNN 9 groups its codes by thousands.
  switch (code / 1000) {
    case 1:  // not initialized, a sub-library missing or mismatched, license
      return absl::UnavailableError(msg);
    case 2:  // bad parameter
      return absl::InvalidArgumentError(msg);
    case 3:  // not supported (shape, layout, type, architecture, ...)
      return absl::FailedPreconditionError(msg);
    default:  // internal and execution failures
      return absl::InternalError(msg);
  }
}

// Names for error messages, next to the enumerators they name.
struct Attr {
  cudnnBackendAttributeName_t id;
  const char* name;
};
struct DescType {
  cudnnBackendDescriptorType_t id;
  const char* name;
};
#define CT_ATTR(a) \
  Attr { a, #a }
#define CT_DESC(t) \
  DescType { t, #t }

// The attribute type of each C type passed as a value, so that a value and
// its declared type cannot disagree. Descriptors and data pointers are both
// void* and go through the explicit setters below.
constexpr cudnnBackendAttributeType_t TypeOf(const int64_t*) {
  return CUDNN_TYPE_INT64;
}
constexpr cudnnBackendAttributeType_t TypeOf(const float*) {
  return CUDNN_TYPE_FLOAT;
}
constexpr cudnnBackendAttributeType_t TypeOf(const cudnnDataType_t*) {
  return CUDNN_TYPE_DATA_TYPE;
}
constexpr cudnnBackendAttributeType_t TypeOf(const cudnnConvolutionMode_t*) {
  return CUDNN_TYPE_CONVOLUTION_MODE;
}
constexpr cudnnBackendAttributeType_t TypeOf(const cudnnBackendHeurMode_t*) {
  return CUDNN_TYPE_HEUR_MODE;
}
constexpr cudnnBackendAttributeType_t TypeOf(const cudnnBackendKnobType_t*) {
  return CUDNN_TYPE_KNOB_TYPE;
}
constexpr cudnnBackendAttributeType_t TypeOf(
    const cudnnBackendNumericalNote_t*) {
  return CUDNN_TYPE_NUMERICAL_NOTE;
}
constexpr cudnnBackendAttributeType_t TypeOf(const cudnnHandle_t*) {
  return CUDNN_TYPE_HANDLE;
}

// Owns one backend descriptor.
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const CudnnApi* api, cudnnBackendDescriptor_t d)
      : api_(api), d_(d) {}
  Descriptor(Descriptor&& o) noexcept
      : api_(o.api_), d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    if (this != &o) {
      Reset();
      api_ = o.api_;
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  ~Descriptor() { Reset(); }

  cudnnBackendDescriptor_t get() const { return d_; }
  // Drops the descriptor without destroying it: its context is gone.
  void Forget() { d_ = nullptr; }

 private:
  void Reset() {
    if (d_ != nullptr) api_->cudnnBackendDestroyDescriptor_(d_);
    d_ = nullptr;
  }

  const CudnnApi* api_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

absl::StatusOr<Descriptor> Create(const CudnnApi& api, DescType type) {
  cudnnBackendDescriptor_t d = nullptr;
  RETURN_IF_ERROR(CudnnStatus(
      api, api.cudnnBackendCreateDescriptor_(type.id, &d),
      absl::StrCat("cudnnBackendCreateDescriptor(", type.name, ")")));
  return Descriptor(&api, d);
}

// Creates a descriptor, sets its attributes and finalizes it, in the order
// the backend API requires, keeping the first error.
class Build {
 public:
  Build(const CudnnApi& api, DescType type) : api_(api), type_(type) {
    absl::StatusOr<Descriptor> d = Create(api, type);
    if (d.ok()) {
      d_ = *std::move(d);
    } else {
      status_ = d.status();
    }
  }

  template <typename T>
  Build& Set(Attr a, const T& value) {
    return SetRaw(a, TypeOf(&value), 1, &value);
  }
  template <typename T>
  Build& SetArray(Attr a, absl::Span<const T> values) {
    return SetRaw(a, TypeOf(values.data()), values.size(), values.data());
  }
  Build& SetDescriptors(Attr a, absl::Span<const cudnnBackendDescriptor_t> ds) {
    return SetRaw(a, CUDNN_TYPE_BACKEND_DESCRIPTOR, ds.size(), ds.data());
  }
  Build& SetDescriptor(Attr a, const Descriptor& d) {
    const cudnnBackendDescriptor_t raw = d.get();
    return SetDescriptors(a, absl::MakeConstSpan(&raw, 1));
  }
  Build& SetPointers(Attr a, absl::Span<void* const> ptrs) {
    return SetRaw(a, CUDNN_TYPE_VOID_PTR, ptrs.size(), ptrs.data());
  }

  absl::StatusOr<Descriptor> Finalize() {
    if (status_.ok()) {
      status_ =
          CudnnStatus(api_, api_.cudnnBackendFinalize_(d_.get()),
                      absl::StrCat("cudnnBackendFinalize(", type_.name, ")"));
    }
    if (!status_.ok()) return status_;
    return std::move(d_);
  }

 private:
  Build& SetRaw(Attr a, cudnnBackendAttributeType_t type, int64_t count,
                const void* values) {
    if (status_.ok()) {
      status_ = CudnnStatus(
          api_,
          api_.cudnnBackendSetAttribute_(d_.get(), a.id, type, count, values),
          absl::StrCat("cudnnBackendSetAttribute(", type_.name, ", ", a.name,
                       ")"));
    }
    return *this;
  }

  const CudnnApi& api_;
  DescType type_;
  absl::Status status_;
  Descriptor d_;
};

// Reads up to `capacity` elements of an attribute; the count it holds.
absl::StatusOr<int64_t> GetRaw(const CudnnApi& api, const Descriptor& d, Attr a,
                               cudnnBackendAttributeType_t type,
                               int64_t capacity, void* values) {
  int64_t count = 0;
  RETURN_IF_ERROR(
      CudnnStatus(api,
                  api.cudnnBackendGetAttribute_(d.get(), a.id, type, capacity,
                                                &count, values),
                  absl::StrCat("cudnnBackendGetAttribute(", a.name, ")")));
  return count;
}

template <typename T>
absl::StatusOr<T> GetOne(const CudnnApi& api, const Descriptor& d, Attr a) {
  T value{};
  ASSIGN_OR_RETURN(int64_t count, GetRaw(api, d, a, TypeOf(&value), 1, &value));
  if (count < 1) {
    return absl::InternalError(
        absl::StrCat("cudnnBackendGetAttribute(", a.name, ") has no value"));
  }
  return value;
}

// Fills the pre-created descriptors `out` from a descriptor-valued
// attribute; the number of elements the attribute holds.
absl::StatusOr<int64_t> GetDescriptors(const CudnnApi& api, const Descriptor& d,
                                       Attr a,
                                       absl::Span<const Descriptor> out) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(out.size());
  for (const Descriptor& o : out) raw.push_back(o.get());
  return GetRaw(api, d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.size(),
                raw.data());
}

cudnnDataType_t CudnnType(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return CUDNN_DATA_FLOAT;
    case DataType::kFp16:
      return CUDNN_DATA_HALF;
    case DataType::kBf16:
      return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

// The pointers cuDNN receives are cudaMalloc memory at offset 0.
constexpr int64_t kAlignment = 16;

// x, w and y as backend tensors: dims [N, C, (D,) H, W], [K, C/G, (D,) R, S]
// and [N, K, (D,) OH, OW], strides in the problem's layout, unique ids 'x',
// 'w' and 'y'. Groups follow from x's C over w's C/G.
absl::StatusOr<Descriptor> MakeTensor(const CudnnApi& api, const ConvProblem& p,
                                      Tensor t) {
  const std::array<int64_t, 5> canonical =
      t == Tensor::kX
          ? std::array<int64_t, 5>{p.n, p.c, p.in[0], p.in[1], p.in[2]}
      : t == Tensor::kW
          ? std::array<int64_t, 5>{p.k, p.c_per_group(), p.filter[0],
                                   p.filter[1], p.filter[2]}
          : std::array<int64_t, 5>{p.n, p.k, p.out(0), p.out(1), p.out(2)};
  const Strides strides = t == Tensor::kX   ? XStrides(p)
                          : t == Tensor::kW ? WStrides(p)
                                            : YStrides(p);
  // The graph API wants spatial dims + 2 dimensions: a 2-D problem drops D.
  std::array<int64_t, 5> dims = {}, dim_strides = {};
  int nd = 0;
  for (int i = 0; i < 5; ++i) {
    if (i == 2 && !p.is_3d()) continue;
    dims[nd] = canonical[i];
    dim_strides[nd] = strides[i];
    ++nd;
  }
  const int64_t uid = TensorName(t)[0];
  return Build(api, CT_DESC(CUDNN_BACKEND_TENSOR_DESCRIPTOR))
      .Set(CT_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), CudnnType(p.type))
      .SetArray(CT_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS),
                absl::MakeConstSpan(dims.data(), nd))
      .SetArray(CT_ATTR(CUDNN_ATTR_TENSOR_STRIDES),
                absl::MakeConstSpan(dim_strides.data(), nd))
      .Set(CT_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), uid)
      .Set(CT_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), kAlignment)
      .Finalize();
}

absl::StatusOr<Descriptor> MakeConvolution(const CudnnApi& api,
                                           const ConvProblem& p) {
  const int64_t spatial = p.spatial_dims;
  const int first = p.is_3d() ? 0 : 1;  // a 2-D problem uses H and W
  auto axes = [&](const std::array<int64_t, 3>& a) {
    return absl::MakeConstSpan(a.data() + first, spatial);
  };
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  return Build(api, CT_DESC(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR))
      .Set(CT_ATTR(CUDNN_ATTR_CONVOLUTION_COMP_TYPE), compute)
      .Set(CT_ATTR(CUDNN_ATTR_CONVOLUTION_CONV_MODE), mode)
      .Set(CT_ATTR(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS), spatial)
      .SetArray(CT_ATTR(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS), axes(p.pad))
      .SetArray(CT_ATTR(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS), axes(p.pad))
      .SetArray(CT_ATTR(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES), axes(p.stride))
      .SetArray(CT_ATTR(CUDNN_ATTR_CONVOLUTION_DILATIONS), axes(p.dilation))
      .Finalize();
}

// The operation descriptor of a direction and its attributes, by convtune's
// tensor roles.
struct OpKind {
  DescType type;
  Attr x, w, y, conv, alpha, beta;
};

OpKind OpFor(Direction d) {
  switch (d) {
    case Direction::kForward:
      break;
    case Direction::kBackwardData:
      return {
          CT_DESC(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA)};
    case Direction::kBackwardWeights:
      return {
          CT_DESC(
              CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA)};
  }
  return {CT_DESC(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA),
          CT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA)};
}

// A problem's operation graph and every descriptor it refers to, kept alive
// as long as any plan built on it.
struct Graph {
  Descriptor x, w, y, conv, op, graph;
  void Forget() {
    for (Descriptor* d : {&x, &w, &y, &conv, &op, &graph}) d->Forget();
  }
};

absl::StatusOr<std::shared_ptr<Graph>> BuildGraph(const CudnnApi& api,
                                                  cudnnHandle_t handle,
                                                  const ConvProblem& p) {
  auto g = std::make_shared<Graph>();
  ASSIGN_OR_RETURN(g->x, MakeTensor(api, p, Tensor::kX));
  ASSIGN_OR_RETURN(g->w, MakeTensor(api, p, Tensor::kW));
  ASSIGN_OR_RETURN(g->y, MakeTensor(api, p, Tensor::kY));
  ASSIGN_OR_RETURN(g->conv, MakeConvolution(api, p));
  const OpKind op = OpFor(p.direction);
  // A float compute type takes float scaling factors.
  const float alpha = 1.0f, beta = 0.0f;
  ASSIGN_OR_RETURN(g->op, Build(api, op.type)
                              .SetDescriptor(op.x, g->x)
                              .SetDescriptor(op.w, g->w)
                              .SetDescriptor(op.y, g->y)
                              .SetDescriptor(op.conv, g->conv)
                              .Set(op.alpha, alpha)
                              .Set(op.beta, beta)
                              .Finalize());
  ASSIGN_OR_RETURN(
      g->graph,
      Build(api, CT_DESC(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR))
          .SetDescriptor(CT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), g->op)
          .Set(CT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), handle)
          .Finalize());
  return g;
}

// An execution plan and the descriptors it was built from.
struct Plan {
  std::shared_ptr<Graph> graph;
  Descriptor engine;
  std::vector<Descriptor> knobs;
  Descriptor config;
  Descriptor plan;
  int64_t workspace_bytes = 0;
  void Forget() {
    graph->Forget();
    for (Descriptor* d : {&engine, &config, &plan}) d->Forget();
    for (Descriptor& k : knobs) k.Forget();
  }
};

std::string ConfigText(const CudnnEngineConfig& c) {
  return absl::StrCat("{", absl::StrJoin(EncodeEngineConfig(c), ","), "}");
}

// Rebuilds (graph, c) as a client would: engine by global index, knob
// choices, engine config, execution plan.
absl::Status FinalizePlan(const CudnnApi& api, cudnnHandle_t handle,
                          const CudnnEngineConfig& c, Plan* plan) {
  ASSIGN_OR_RETURN(
      plan->engine,
      Build(api, CT_DESC(CUDNN_BACKEND_ENGINE_DESCRIPTOR))
          .SetDescriptor(CT_ATTR(CUDNN_ATTR_ENGINE_OPERATION_GRAPH),
                         plan->graph->graph)
          .Set(CT_ATTR(CUDNN_ATTR_ENGINE_GLOBAL_INDEX), c.engine)
          .Finalize());
  std::vector<cudnnBackendDescriptor_t> choices;
  for (const auto& [type, value] : c.knobs) {
    const auto knob_type = static_cast<cudnnBackendKnobType_t>(type);
    ASSIGN_OR_RETURN(
        Descriptor knob,
        Build(api, CT_DESC(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR))
            .Set(CT_ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE), knob_type)
            .Set(CT_ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE), value)
            .Finalize());
    choices.push_back(knob.get());
    plan->knobs.push_back(std::move(knob));
  }
  Build config(api, CT_DESC(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  config.SetDescriptor(CT_ATTR(CUDNN_ATTR_ENGINECFG_ENGINE), plan->engine);
  if (!choices.empty()) {
    config.SetDescriptors(CT_ATTR(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES), choices);
  }
  ASSIGN_OR_RETURN(plan->config, config.Finalize());
  ASSIGN_OR_RETURN(
      plan->plan,
      Build(api, CT_DESC(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR))
          .Set(CT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), handle)
          .SetDescriptor(CT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG),
                         plan->config)
          .Finalize());
  ASSIGN_OR_RETURN(
      plan->workspace_bytes,
      GetOne<int64_t>(api, plan->plan,
                      CT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)));
  if (plan->workspace_bytes < 0) {
    return absl::InternalError(absl::StrCat("cuDNN reports a workspace of ",
                                            plan->workspace_bytes, " bytes"));
  }
  return absl::OkStatus();
}

// cuDNN's "cannot" (bad parameter, not supported) for this config becomes
// InvalidArgument; running out of memory and internal errors stay as they
// are.
absl::StatusOr<std::unique_ptr<Plan>> BuildPlan(const CudnnApi& api,
                                                cudnnHandle_t handle,
                                                std::shared_ptr<Graph> graph,
                                                const ConvProblem& p,
                                                const CudnnEngineConfig& c) {
  auto plan = std::make_unique<Plan>();
  plan->graph = std::move(graph);
  const absl::Status s = FinalizePlan(api, handle, c, plan.get());
  if (absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN engine config ", ConfigText(c), " does not finalize for ",
        DescribeProblem(p), ": ", s.message()));
  }
  RETURN_IF_ERROR(s);
  return plan;
}

// NVIDIA's cudnn-frontend serializes the finalization of mode B heuristics
// across threads; sessions of other devices may run heuristics at once.
ABSL_CONST_INIT absl::Mutex heur_b_mutex(absl::kConstInit);

// The engine configs that heuristics `mode` ranks for the graph, best first.
absl::StatusOr<std::vector<Descriptor>> Heuristics(
    const CudnnApi& api, const Descriptor& graph, cudnnBackendHeurMode_t mode) {
  Build heur(api, CT_DESC(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  heur.SetDescriptor(CT_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), graph)
      .Set(CT_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), mode);
  absl::StatusOr<Descriptor> h;
  {
    std::optional<absl::MutexLock> lock;
    if (mode == CUDNN_HEUR_MODE_B) lock.emplace(&heur_b_mutex);
    h = heur.Finalize();
  }
  if (!h.ok()) return h.status();
  const Attr results = CT_ATTR(CUDNN_ATTR_ENGINEHEUR_RESULTS);
  ASSIGN_OR_RETURN(
      int64_t count,
      GetRaw(api, *h, results, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, nullptr));
  std::vector<Descriptor> configs;
  configs.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(Descriptor cfg,
                     Create(api, CT_DESC(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)));
    configs.push_back(std::move(cfg));
  }
  ASSIGN_OR_RETURN(int64_t filled, GetDescriptors(api, *h, results, configs));
  if (filled < count) configs.resize(filled);
  return configs;
}

// A heuristic result as data, with its engine's numerical notes.
struct Candidate {
  CudnnEngineConfig config;
  std::vector<cudnnBackendNumericalNote_t> notes;
};

absl::StatusOr<Candidate> ReadCandidate(const CudnnApi& api,
                                        const Descriptor& cfg) {
  const DescType engine_type = CT_DESC(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  std::vector<Descriptor> engine(1);
  ASSIGN_OR_RETURN(engine[0], Create(api, engine_type));
  RETURN_IF_ERROR(
      GetDescriptors(api, cfg, CT_ATTR(CUDNN_ATTR_ENGINECFG_ENGINE), engine)
          .status());
  Candidate c;
  ASSIGN_OR_RETURN(
      c.config.engine,
      GetOne<int64_t>(api, engine[0], CT_ATTR(CUDNN_ATTR_ENGINE_GLOBAL_INDEX)));
  c.notes.resize(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  ASSIGN_OR_RETURN(
      int64_t notes,
      GetRaw(api, engine[0], CT_ATTR(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE),
             TypeOf(c.notes.data()), c.notes.size(), c.notes.data()));
  c.notes.resize(std::min<int64_t>(notes, c.notes.size()));

  // An engine config holds at most one choice per knob type.
  std::vector<Descriptor> knobs(CUDNN_KNOB_TYPE_COUNTS);
  for (Descriptor& k : knobs) {
    ASSIGN_OR_RETURN(
        k, Create(api, CT_DESC(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)));
  }
  ASSIGN_OR_RETURN(
      int64_t count,
      GetDescriptors(api, cfg, CT_ATTR(CUDNN_ATTR_ENGINECFG_KNOB_CHOICES),
                     knobs));
  if (count > static_cast<int64_t>(knobs.size())) {
    return absl::InternalError(
        absl::StrCat("engine ", c.config.engine, " has ", count,
                     " knob choices, more than this build reads"));
  }
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(
        cudnnBackendKnobType_t type,
        GetOne<cudnnBackendKnobType_t>(
            api, knobs[i], CT_ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE)));
    ASSIGN_OR_RETURN(
        int64_t value,
        GetOne<int64_t>(api, knobs[i],
                        CT_ATTR(CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)));
    c.config.knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  return c;
}

// fp32 problems are ranked on fp32 math: no TF32 tensor cores and no inputs
// converted to a narrower type.
bool ExcludedForFp32(const Candidate& c) {
  for (cudnnBackendNumericalNote_t n : c.notes) {
    if (n == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
        n == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) {
      return true;
    }
  }
  return false;
}

constexpr size_t kMaxConfigs = 32;
constexpr size_t kMaxCachedProblems = 4096;
constexpr size_t kMaxCachedPlans = 256;

absl::Status Abandoned() {
  return absl::FailedPreconditionError(
      "the cuDNN session was abandoned with its CUDA context");
}

}  // namespace

struct CudnnSession::State {
  const CudnnApi* api = nullptr;
  cudnnHandle_t handle = nullptr;  // null once abandoned
  absl::flat_hash_map<std::string,
                      absl::StatusOr<std::vector<CudnnEngineConfig>>>
      configs;
  absl::flat_hash_map<std::string, std::unique_ptr<Plan>> plans;
  std::deque<std::string> plan_order;  // oldest first

  static std::string PlanKey(const std::string& problem_key,
                             const CudnnEngineConfig& c) {
    return absl::StrCat(problem_key, "/", ConfigText(c));
  }

  // The cached plan of (p, c), built on `graph` (or on a new graph when
  // null) when missing.
  absl::StatusOr<const Plan*> PlanFor(const ConvProblem& p,
                                      const std::string& problem_key,
                                      std::shared_ptr<Graph> graph,
                                      const CudnnEngineConfig& c) {
    const std::string key = PlanKey(problem_key, c);
    if (auto it = plans.find(key); it != plans.end()) return it->second.get();
    if (graph == nullptr) {
      ASSIGN_OR_RETURN(graph, GraphFor(p));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                     BuildPlan(*api, handle, std::move(graph), p, c));
    if (plans.size() >= kMaxCachedPlans) {
      plans.erase(plan_order.front());
      plan_order.pop_front();
    }
    plan_order.push_back(key);
    return plans.emplace(key, std::move(plan)).first->second.get();
  }

  // p's operation graph; FailedPrecondition when cuDNN rejects it.
  absl::StatusOr<std::shared_ptr<Graph>> GraphFor(const ConvProblem& p) {
    absl::StatusOr<std::shared_ptr<Graph>> g = BuildGraph(*api, handle, p);
    if (absl::IsInvalidArgument(g.status()) ||
        absl::IsFailedPrecondition(g.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cuDNN has no engine for ", DescribeProblem(p),
          " (it rejects the operation graph: ", g.status().message(), ")"));
    }
    return g;
  }

  absl::StatusOr<std::vector<CudnnEngineConfig>> FindConfigs(
      const ConvProblem& p, const std::string& problem_key);
};

absl::StatusOr<std::vector<CudnnEngineConfig>> CudnnSession::State::FindConfigs(
    const ConvProblem& p, const std::string& problem_key) {
  ASSIGN_OR_RETURN(std::shared_ptr<Graph> graph, GraphFor(p));
  std::vector<CudnnEngineConfig> kept, seen;
  int excluded = 0, failed = 0;
  absl::Status last_failure;
  for (cudnnBackendHeurMode_t mode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
    if (kept.size() >= kMaxConfigs) break;
    absl::StatusOr<std::vector<Descriptor>> results =
        Heuristics(*api, graph->graph, mode);
    if (absl::IsResourceExhausted(results.status())) return results.status();
    // A mode that has nothing for this graph leaves the others to answer.
    if (!results.ok()) {
      last_failure = results.status();
      continue;
    }
    for (const Descriptor& result : *results) {
      if (kept.size() >= kMaxConfigs) break;
      absl::StatusOr<Candidate> c = ReadCandidate(*api, result);
      if (!c.ok()) {
        ++failed;
        last_failure = c.status();
        continue;
      }
      if (absl::c_linear_search(seen, c->config)) continue;
      seen.push_back(c->config);
      if (p.type == DataType::kFp32 && ExcludedForFp32(*c)) {
        ++excluded;
        continue;
      }
      absl::StatusOr<const Plan*> plan =
          PlanFor(p, problem_key, graph, c->config);
      if (absl::IsResourceExhausted(plan.status())) return plan.status();
      if (!plan.ok()) {
        ++failed;
        last_failure = plan.status();
        continue;
      }
      kept.push_back(c->config);
    }
  }
  if (kept.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuDNN has no engine for ", DescribeProblem(p), " (", seen.size(),
        " offered, ", excluded,
        " left out for fp32 as TF32 or down-converting, ", failed, " failed",
        last_failure.ok() ? "" : "; last: ", last_failure.message(), ")"));
  }
  return kept;
}

CudnnSession::CudnnSession(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

CudnnSession::~CudnnSession() {
  if (state_->handle == nullptr) return;
  state_->plans.clear();
  state_->api->cudnnDestroy_(state_->handle);
}

absl::StatusOr<std::unique_ptr<CudnnSession>> CudnnSession::Create(
    void* stream) {
  ASSIGN_OR_RETURN(const CudnnApi* api, LoadCudnn());
  cudnnHandle_t handle = nullptr;
  RETURN_IF_ERROR(CudnnStatus(*api, api->cudnnCreate_(&handle), "cudnnCreate"));
  const absl::Status bound = CudnnStatus(
      *api, api->cudnnSetStream_(handle, static_cast<cudaStream_t>(stream)),
      "cudnnSetStream");
  if (!bound.ok()) {
    api->cudnnDestroy_(handle);
    return bound;
  }
  auto state = std::make_unique<State>();
  state->api = api;
  state->handle = handle;
  return std::unique_ptr<CudnnSession>(new CudnnSession(std::move(state)));
}

absl::StatusOr<std::string> CudnnSession::Version() {
  ASSIGN_OR_RETURN(const CudnnApi* api, LoadCudnn());
  return api->version;
}

absl::Status CudnnSession::SetStream(void* stream) {
  if (state_->handle == nullptr) {
    return absl::FailedPreconditionError("the cuDNN session was abandoned");
  }
  return CudnnStatus(*state_->api,
                     state_->api->cudnnSetStream_(
                         state_->handle, static_cast<cudaStream_t>(stream)),
                     "cudnnSetStream");
}

void CudnnSession::Abandon() {
  for (auto& [key, plan] : state_->plans) plan->Forget();
  state_->plans.clear();
  state_->plan_order.clear();
  state_->handle = nullptr;
}

absl::StatusOr<std::vector<CudnnEngineConfig>> CudnnSession::Configs(
    const ConvProblem& p) {
  if (state_->handle == nullptr) return Abandoned();
  RETURN_IF_ERROR(ValidateProblem(p));
  const std::string key = ProblemKey(p);
  if (auto it = state_->configs.find(key); it != state_->configs.end()) {
    return it->second;
  }
  absl::StatusOr<std::vector<CudnnEngineConfig>> configs =
      state_->FindConfigs(p, key);
  // "No engine" is an answer about the problem; other errors may pass.
  if (configs.ok() || absl::IsFailedPrecondition(configs.status())) {
    if (state_->configs.size() >= kMaxCachedProblems) state_->configs.clear();
    state_->configs.emplace(key, configs);
  }
  return configs;
}

absl::StatusOr<int64_t> CudnnSession::WorkspaceBytes(
    const ConvProblem& p, const CudnnEngineConfig& c) {
  if (state_->handle == nullptr) return Abandoned();
  RETURN_IF_ERROR(ValidateProblem(p));
  ASSIGN_OR_RETURN(const Plan* plan,
                   state_->PlanFor(p, ProblemKey(p), nullptr, c));
  return plan->workspace_bytes;
}

absl::Status CudnnSession::Run(const ConvProblem& p, const CudnnEngineConfig& c,
                               void* x, void* w, void* y, void* workspace,
                               int64_t workspace_bytes) {
  if (state_->handle == nullptr) return Abandoned();
  RETURN_IF_ERROR(ValidateProblem(p));
  ASSIGN_OR_RETURN(const Plan* plan,
                   state_->PlanFor(p, ProblemKey(p), nullptr, c));
  if (workspace_bytes < plan->workspace_bytes ||
      (plan->workspace_bytes > 0 && workspace == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN engine config ", ConfigText(c), " needs a workspace of ",
        plan->workspace_bytes, " bytes; given ", workspace_bytes,
        workspace == nullptr ? " (null)" : ""));
  }
  const int64_t uids[] = {TensorName(Tensor::kX)[0], TensorName(Tensor::kW)[0],
                          TensorName(Tensor::kY)[0]};
  void* const pointers[] = {x, w, y};
  const State& s = *state_;
  ASSIGN_OR_RETURN(
      Descriptor pack,
      Build(*s.api, CT_DESC(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR))
          .SetArray(CT_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS),
                    absl::MakeConstSpan(uids))
          .SetPointers(CT_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), pointers)
          .SetPointers(CT_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE),
                       absl::MakeConstSpan(&workspace, 1))
          .Finalize());
  return CudnnStatus(
      *s.api,
      s.api->cudnnBackendExecute_(s.handle, plan->plan.get(), pack.get()),
      "cudnnBackendExecute");
}

#else  // !CONVTUNE_HAVE_CUDNN_HEADERS

namespace {
absl::Status NoHeaders() {
  return absl::UnavailableError("built without the cuDNN headers");
}
}  // namespace

struct CudnnSession::State {};

CudnnSession::CudnnSession(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
CudnnSession::~CudnnSession() = default;

absl::StatusOr<std::unique_ptr<CudnnSession>> CudnnSession::Create(
    void* stream) {
  return NoHeaders();
}
absl::StatusOr<std::string> CudnnSession::Version() { return NoHeaders(); }
absl::Status CudnnSession::SetStream(void* stream) { return NoHeaders(); }
void CudnnSession::Abandon() {}
absl::StatusOr<std::vector<CudnnEngineConfig>> CudnnSession::Configs(
    const ConvProblem& p) {
  return NoHeaders();
}
absl::StatusOr<int64_t> CudnnSession::WorkspaceBytes(
    const ConvProblem& p, const CudnnEngineConfig& c) {
  return NoHeaders();
}
absl::Status CudnnSession::Run(const ConvProblem& p, const CudnnEngineConfig& c,
                               void* x, void* w, void* y, void* workspace,
                               int64_t workspace_bytes) {
  return NoHeaders();
}

#endif  // CONVTUNE_HAVE_CUDNN_HEADERS

}  // namespace convtune::gpu
