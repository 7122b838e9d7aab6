#include "kernels/plan_args.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {

void AppendProblemScalars(const ConvProblem& p, v1::KernelStep* step) {
  auto* s = step->mutable_scalars();
  s->Add(p.spatial_dims);
  s->Add(p.n);
  s->Add(p.c);
  s->Add(p.k);
  for (const auto* arr : {&p.in, &p.filter, &p.pad, &p.stride, &p.dilation}) {
    for (int64_t v : *arr) s->Add(v);
  }
  s->Add(p.groups);
  s->Add(static_cast<int64_t>(p.layout));
  s->Add(static_cast<int64_t>(p.type));
  s->Add(static_cast<int64_t>(p.direction));
}

absl::StatusOr<ConvProblem> DecodeProblemScalars(absl::Span<const int64_t> s) {
  if (s.size() < static_cast<size_t>(kProblemScalars)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel step has ", s.size(),
                     " scalars; the problem needs ", kProblemScalars));
  }
  ConvProblem p;
  size_t i = 0;
  p.spatial_dims = static_cast<int>(s[i++]);
  p.n = s[i++];
  p.c = s[i++];
  p.k = s[i++];
  for (auto* arr : {&p.in, &p.filter, &p.pad, &p.stride, &p.dilation}) {
    for (int64_t& v : *arr) v = s[i++];
  }
  p.groups = s[i++];
  p.layout = static_cast<Layout>(s[i++]);
  p.type = static_cast<DataType>(s[i++]);
  p.direction = static_cast<Direction>(s[i++]);
  RETURN_IF_ERROR(ValidateProblem(p));
  return p;
}

void AddBuffer(v1::KernelStep* step, v1::BufferRole role,
               int64_t offset_bytes) {
  v1::BufferRef* ref = step->add_buffers();
  ref->set_role(role);
  ref->set_offset_bytes(offset_bytes);
}

absl::Status CheckConvStepBuffers(const v1::KernelStep& step,
                                  bool with_workspace) {
  constexpr v1::BufferRole kRoles[] = {v1::BUFFER_X, v1::BUFFER_W, v1::BUFFER_Y,
                                       v1::BUFFER_WORKSPACE};
  const int want = with_workspace ? 4 : 3;
  if (step.buffers_size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step.kernel().substr(0, 32), ": ",
                     step.buffers_size(), " buffers, ", want, " expected"));
  }
  for (int i = 0; i < want; ++i) {
    if (step.buffers(i).role() != kRoles[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step ", step.kernel().substr(0, 32), ": buffer ", i, " has role ",
          v1::BufferRole_Name(step.buffers(i).role()), ", not ",
          v1::BufferRole_Name(kRoles[i])));
    }
  }
  return absl::OkStatus();
}

}  // namespace convtune
