#include "kernels/cpu/onednn_library.h"

#include "absl/strings/str_cat.h"
#include "kernels/plan_args.h"

#ifdef CONVTUNE_HAVE_ONEDNN

#include <dlfcn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "kernels/cpu/parallel.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace convtune::cpu {
namespace {

// oneDNN runs its primitives on OpenMP teams of the calling thread's size:
// made NumThreads(), as the own kernels' ParallelFor (a daemon leaves a
// hardware thread to serving). The OpenMP runtime is oneDNN's own
// dependency, so it is found at run time rather than linked.
void MatchOpenMpThreads() {
  using SetNumThreads = void (*)(int);
  static const SetNumThreads set = reinterpret_cast<SetNumThreads>(
      dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  thread_local int applied = 0;
  const int n = NumThreads();
  if (set != nullptr && applied != n) {
    set(n);
    applied = n;
  }
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Workspace regions start on cache-line boundaries.
constexpr int64_t kAlign = 64;
int64_t Align(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

dnnl::engine& Engine() {
  static dnnl::engine* const engine =
      new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dt DnnlType(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return dt::f32;
    case DataType::kFp16:
      return dt::f16;
    case DataType::kBf16:
      return dt::bf16;
  }
  return dt::f32;
}

dnnl::algorithm AlgorithmOf(uint32_t solver_id) {
  return solver_id == kOnednnWinogradId ? dnnl::algorithm::convolution_winograd
         : solver_id == kOnednnAutoId   ? dnnl::algorithm::convolution_auto
                                        : dnnl::algorithm::convolution_direct;
}

// Spatial values outermost first, as oneDNN takes them.
dnnl::memory::dims Spatial(const ConvProblem& p,
                           const std::array<int64_t, 3>& v, int64_t bias = 0) {
  dnnl::memory::dims out;
  for (int d = 3 - p.spatial_dims; d < 3; ++d) out.push_back(v[d] + bias);
  return out;
}

// The tensors as the caller stores them.
dnnl::memory::desc UserDesc(const ConvProblem& p, Tensor t) {
  const bool last = p.layout == Layout::kNHWC;
  const bool three = p.spatial_dims == 3;
  dnnl::memory::dims dims;
  tag f;
  if (t == Tensor::kW) {
    if (p.groups > 1) {
      dims = {p.groups, p.k / p.groups, p.c_per_group()};
      f = three ? (last ? tag::godhwi : tag::goidhw)
                : (last ? tag::gohwi : tag::goihw);
    } else {
      dims = {p.k, p.c};
      f = three ? (last ? tag::odhwi : tag::oidhw)
                : (last ? tag::ohwi : tag::oihw);
    }
    for (int64_t v : Spatial(p, p.filter)) dims.push_back(v);
  } else {
    dims = {p.n, t == Tensor::kX ? p.c : p.k};
    if (t == Tensor::kX) {
      for (int64_t v : Spatial(p, p.in)) dims.push_back(v);
    } else {
      for (int d = 3 - p.spatial_dims; d < 3; ++d) dims.push_back(p.out(d));
    }
    f = three ? (last ? tag::ndhwc : tag::ncdhw)
              : (last ? tag::nhwc : tag::nchw);
  }
  return dnnl::memory::desc(dims, DnnlType(p.type), f);
}

dnnl::memory::desc AnyDesc(const dnnl::memory::desc& user) {
  return dnnl::memory::desc(user.dims(), user.data_type(), tag::any);
}

// One prepared (problem, method, config): the primitive, the layouts it
// uses, and where in the workspace each reordered tensor and the scratchpad
// lie. Immutable once built; primitives may be executed concurrently.
struct Prepared {
  dnnl::primitive conv;
  dnnl::memory::desc user[3];  // by Tensor
  dnnl::memory::desc used[3];
  bool reordered[3] = {false, false, false};
  dnnl::reorder reorder[3];  // user -> used for inputs, used -> user out
  int64_t offset[3] = {0, 0, 0};
  int64_t scratchpad_bytes = 0;
  int64_t workspace_bytes = 0;
};

absl::Status DnnlError(const dnnl::error& e, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": ", e.what());
  return e.status == dnnl_unimplemented ? absl::FailedPreconditionError(msg)
                                        : absl::InvalidArgumentError(msg);
}

absl::StatusOr<std::shared_ptr<const Prepared>> Build(const ConvProblem& p,
                                                      uint32_t solver_id,
                                                      bool blocked) {
  const std::string what =
      absl::StrCat("oneDNN ",
                   solver_id == kOnednnWinogradId ? "Winograd"
                   : solver_id == kOnednnAutoId   ? "automatic"
                                                  : "direct",
                   " convolution", blocked ? " (blocked layouts)" : "");
  try {
    auto out = std::make_shared<Prepared>();
    for (Tensor t : kAllTensors) {
      const int i = static_cast<int>(t);
      out->user[i] = UserDesc(p, t);
    }
    auto chosen = [&](Tensor t) {
      const auto& u = out->user[static_cast<int>(t)];
      return blocked ? AnyDesc(u) : u;
    };
    const dnnl::memory::desc x = chosen(Tensor::kX), w = chosen(Tensor::kW),
                             y = chosen(Tensor::kY);
    dnnl::memory::dims pad_r;
    for (int d = 3 - p.spatial_dims; d < 3; ++d) {
      pad_r.push_back((p.out(d) - 1) * p.stride[d] +
                      (p.filter[d] - 1) * p.dilation[d] + 1 - p.in[d] -
                      p.pad[d]);
    }
    const dnnl::memory::dims strides = Spatial(p, p.stride);
    const dnnl::memory::dims dilates = Spatial(p, p.dilation, -1);
    const dnnl::memory::dims pad_l = Spatial(p, p.pad);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::algorithm alg = AlgorithmOf(solver_id);
    const bool forward = p.direction == Direction::kForward;
    const dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(
            forward ? dnnl::prop_kind::forward_inference
                    : dnnl::prop_kind::forward_training,
            alg, x, w, y, strides, dilates, pad_l, pad_r),
        attr, Engine());
    std::string impl;
    dnnl::memory::desc scratchpad;
    auto used = [&](Tensor t) -> dnnl::memory::desc& {
      return out->used[static_cast<int>(t)];
    };
    switch (p.direction) {
      case Direction::kForward:
        out->conv = dnnl::convolution_forward(fwd);
        used(Tensor::kX) = fwd.src_desc();
        used(Tensor::kW) = fwd.weights_desc();
        used(Tensor::kY) = fwd.dst_desc();
        scratchpad = fwd.scratchpad_desc();
        impl = fwd.impl_info_str();
        break;
      case Direction::kBackwardData: {
        const dnnl::convolution_backward_data::primitive_desc bwd(
            dnnl::convolution_backward_data::desc(alg, x, w, y, strides,
                                                  dilates, pad_l, pad_r),
            attr, Engine(), fwd);
        out->conv = dnnl::convolution_backward_data(bwd);
        used(Tensor::kX) = bwd.diff_src_desc();
        used(Tensor::kW) = bwd.weights_desc();
        used(Tensor::kY) = bwd.diff_dst_desc();
        scratchpad = bwd.scratchpad_desc();
        impl = bwd.impl_info_str();
        break;
      }
      case Direction::kBackwardWeights: {
        const dnnl::convolution_backward_weights::primitive_desc bwd(
            dnnl::convolution_backward_weights::desc(alg, x, w, y, strides,
                                                     dilates, pad_l, pad_r),
            attr, Engine(), fwd);
        out->conv = dnnl::convolution_backward_weights(bwd);
        used(Tensor::kX) = bwd.src_desc();
        used(Tensor::kW) = bwd.diff_weights_desc();
        used(Tensor::kY) = bwd.diff_dst_desc();
        scratchpad = bwd.scratchpad_desc();
        impl = bwd.impl_info_str();
        break;
      }
    }
    // Its reference code is there for correctness, far slower than any
    // solver here: not worth timing.
    if (absl::StartsWith(impl, "ref")) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": only oneDNN's reference implementation (", impl,
                       ") runs this problem"));
    }
    int64_t at = Align(static_cast<int64_t>(scratchpad.get_size()));
    out->scratchpad_bytes = at;
    const Tensor output = p.output();
    for (Tensor t : kAllTensors) {
      const int i = static_cast<int>(t);
      if (out->used[i] == out->user[i]) continue;
      out->reordered[i] = true;
      out->offset[i] = at;
      at += Align(static_cast<int64_t>(out->used[i].get_size()));
      out->reorder[i] =
          t == output ? dnnl::reorder(dnnl::reorder::primitive_desc(
                            Engine(), out->used[i], Engine(), out->user[i]))
                      : dnnl::reorder(dnnl::reorder::primitive_desc(
                            Engine(), out->user[i], Engine(), out->used[i]));
    }
    // The caller's workspace may start anywhere; oneDNN's JIT code needs
    // 64-byte aligned blocked tensors (Winograd's diff weights fault
    // otherwise), so the regions are placed from the first aligned byte.
    out->workspace_bytes = at > 0 ? at + kAlign - 1 : 0;
    return std::shared_ptr<const Prepared>(std::move(out));
  } catch (const dnnl::error& e) {
    return DnnlError(e, what);
  }
}

// Prepared primitives (and failures) by problem, method and config, so that
// applicability, workspace queries and every run but the first cost a
// lookup. Bounded: emptied when full.
class PreparedCache {
 public:
  absl::StatusOr<std::shared_ptr<const Prepared>> Get(const ConvProblem& p,
                                                      uint32_t solver_id,
                                                      bool blocked) {
    const std::string key =
        absl::StrCat(ProblemKey(p), "|", solver_id, "|", blocked ? 1 : 0);
    {
      absl::MutexLock lock(&mu_);
      if (auto it = map_.find(key); it != map_.end()) return it->second;
    }
    // Built outside the lock: primitive creation may take milliseconds.
    absl::StatusOr<std::shared_ptr<const Prepared>> built =
        Build(p, solver_id, blocked);
    absl::MutexLock lock(&mu_);
    if (map_.size() >= kCapacity) map_.clear();
    return map_.try_emplace(key, std::move(built)).first->second;
  }

 private:
  static constexpr size_t kCapacity = 2048;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string,
                      absl::StatusOr<std::shared_ptr<const Prepared>>>
      map_ ABSL_GUARDED_BY(mu_);
};

PreparedCache& Cache() {
  static PreparedCache* const cache = new PreparedCache;
  return *cache;
}

bool ValidMethod(uint32_t id) {
  return id == kOnednnDirectId || id == kOnednnWinogradId ||
         id == kOnednnAutoId;
}

absl::StatusOr<bool> BlockedOf(const std::vector<int64_t>& config) {
  if (config.size() != 1 || (config[0] != 0 && config[0] != 1)) {
    return absl::InvalidArgumentError(
        "a oneDNN config is {0} (the caller's layout) or {1} (oneDNN's "
        "blocked layouts)");
  }
  return config[0] == 1;
}

class OnednnLibrary final : public ConvLibrary {
 public:
  OnednnLibrary() {
    const dnnl_version_t* v = dnnl_version();
    version_ = absl::StrCat("onednn", v->major, ".", v->minor, ".", v->patch);
    methods_ = {{kOnednnDirectId, "onednn_direct", v1::DIRECT},
                {kOnednnWinogradId, "onednn_winograd", v1::WINOGRAD},
                {kOnednnAutoId, "onednn_auto", v1::DIRECT}};
  }

  absl::string_view name() const override { return "onednn"; }
  const std::string& version() const override { return version_; }
  const std::vector<LibraryMethod>& methods() const override {
    return methods_;
  }

  absl::StatusOr<std::vector<std::vector<int64_t>>> Configs(
      uint32_t solver_id, const ConvProblem& p) override {
    if (!ValidMethod(solver_id)) {
      return absl::NotFoundError(
          absl::StrCat("oneDNN has no method ", solver_id));
    }
    std::vector<std::vector<int64_t>> configs;
    absl::Status first;
    for (int64_t blocked : {0, 1}) {
      auto prepared = Cache().Get(p, solver_id, blocked == 1);
      if (prepared.ok()) {
        configs.push_back({blocked});
      } else if (first.ok()) {
        first = prepared.status();
      }
    }
    if (configs.empty()) {
      return absl::FailedPreconditionError(first.message());
    }
    return configs;
  }

  absl::StatusOr<LibraryStep> Step(
      uint32_t solver_id, const ConvProblem& p,
      const std::vector<int64_t>& config) override {
    if (!ValidMethod(solver_id)) {
      return absl::NotFoundError(
          absl::StrCat("oneDNN has no method ", solver_id));
    }
    ASSIGN_OR_RETURN(const bool blocked, BlockedOf(config));
    absl::StatusOr<std::shared_ptr<const Prepared>> prepared =
        Cache().Get(p, solver_id, blocked);
    if (!prepared.ok()) {
      return absl::InvalidArgumentError(prepared.status().message());
    }
    LibraryStep out;
    out.workspace_bytes = (*prepared)->workspace_bytes;
    out.step.set_kernel(std::string(kOnednnConvKernel));
    AddBuffer(&out.step, v1::BUFFER_X);
    AddBuffer(&out.step, v1::BUFFER_W);
    AddBuffer(&out.step, v1::BUFFER_Y);
    if (out.workspace_bytes > 0) AddBuffer(&out.step, v1::BUFFER_WORKSPACE);
    AppendProblemScalars(p, &out.step);
    out.step.add_scalars(solver_id);
    out.step.add_scalars(blocked ? 1 : 0);
    out.step.add_scalars(out.workspace_bytes);
    return out;
  }

 private:
  std::string version_;
  std::vector<LibraryMethod> methods_;
};

// The argument ids of x, w and y in each direction.
void ArgIds(Direction dir, int ids[3]) {
  switch (dir) {
    case Direction::kForward:
      ids[0] = DNNL_ARG_SRC, ids[1] = DNNL_ARG_WEIGHTS, ids[2] = DNNL_ARG_DST;
      return;
    case Direction::kBackwardData:
      ids[0] = DNNL_ARG_DIFF_SRC, ids[1] = DNNL_ARG_WEIGHTS,
      ids[2] = DNNL_ARG_DIFF_DST;
      return;
    case Direction::kBackwardWeights:
      ids[0] = DNNL_ARG_SRC, ids[1] = DNNL_ARG_DIFF_WEIGHTS,
      ids[2] = DNNL_ARG_DIFF_DST;
      return;
  }
}

}  // namespace

ConvLibrary* Onednn() {
  static OnednnLibrary* const library = new OnednnLibrary;
  return library;
}

absl::Status OnednnConvKernel(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) {
  ASSIGN_OR_RETURN(const ConvProblem p,
                   DecodeProblemScalars(absl::Span<const int64_t>(
                       step.scalars().data(), step.scalars().size())));
  const absl::Span<const int64_t> params = KernelParams(step);
  if (params.size() != 3 || !ValidMethod(static_cast<uint32_t>(params[0])) ||
      (params[1] != 0 && params[1] != 1) || params[2] < 0) {
    return absl::InvalidArgumentError(
        "onednn.conv: scalars after the problem must be a oneDNN solver id, "
        "0 or 1, and the workspace bytes");
  }
  const int64_t given = params[2];
  RETURN_IF_ERROR(CheckConvStepBuffers(step, given > 0));
  if (buffers.size() != static_cast<size_t>(step.buffers_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("onednn.conv: ", buffers.size(), " buffers resolved, ",
                     step.buffers_size(), " named"));
  }
  ASSIGN_OR_RETURN(
      std::shared_ptr<const Prepared> prep,
      Cache().Get(p, static_cast<uint32_t>(params[0]), params[1] == 1));
  if (prep->workspace_bytes > given) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "onednn.conv: this process's oneDNN needs ", prep->workspace_bytes,
        " bytes of workspace for the config; the plan gives ", given));
  }
  char* workspace = nullptr;
  if (prep->workspace_bytes > 0) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(buffers[3]);
    workspace = static_cast<char*>(buffers[3]) +
                (Align(static_cast<int64_t>(base % kAlign)) -
                 static_cast<int64_t>(base % kAlign));
  }
  MatchOpenMpThreads();
  try {
    dnnl::stream stream(Engine());
    int ids[3];
    ArgIds(p.direction, ids);
    std::unordered_map<int, dnnl::memory> args;
    dnnl::memory user[3], used[3];
    const int output = static_cast<int>(p.output());
    for (int i = 0; i < 3; ++i) {
      user[i] = dnnl::memory(prep->user[i], Engine(), buffers[i]);
      used[i] = prep->reordered[i] ? dnnl::memory(prep->used[i], Engine(),
                                                  workspace + prep->offset[i])
                                   : user[i];
      if (prep->reordered[i] && i != output) {
        prep->reorder[i].execute(stream, user[i], used[i]);
      }
      args.emplace(ids[i], used[i]);
    }
    if (prep->scratchpad_bytes > 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(dnnl::memory::desc({prep->scratchpad_bytes},
                                                   dt::u8, tag::x),
                                Engine(), workspace));
    }
    prep->conv.execute(stream, args);
    if (prep->reordered[output]) {
      prep->reorder[output].execute(stream, used[output], user[output]);
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("onednn.conv: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace convtune::cpu

#else  // !CONVTUNE_HAVE_ONEDNN

namespace convtune::cpu {

ConvLibrary* Onednn() { return nullptr; }

absl::Status OnednnConvKernel(const v1::KernelStep& step,
                              const std::vector<void*>& buffers) {
  return absl::UnavailableError(
      "onednn.conv: convtune was built without oneDNN");
}

}  // namespace convtune::cpu

#endif  // CONVTUNE_HAVE_ONEDNN
