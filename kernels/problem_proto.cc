#include "kernels/problem_proto.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace convtune {
namespace {

void PutSpatial(const ConvProblem& p, const std::array<int64_t, 3>& v,
                google::protobuf::RepeatedField<int64_t>* out) {
  for (int i = p.is_3d() ? 0 : 1; i < 3; ++i) out->Add(v[i]);
}

absl::Status GetSpatial(const char* field,
                        const google::protobuf::RepeatedField<int64_t>& in,
                        int dims, bool required, int64_t fill,
                        std::array<int64_t, 3>* out) {
  if (in.empty() && !required) {
    for (int i = 3 - dims; i < 3; ++i) (*out)[i] = fill;
    return absl::OkStatus();
  }
  if (in.size() != dims) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected ", dims, " values for a ", dims,
                     "-D problem, got ", in.size()));
  }
  for (int i = 0; i < dims; ++i) (*out)[3 - dims + i] = in[i];
  return absl::OkStatus();
}

}  // namespace

void ProblemToProto(const ConvProblem& p, v1::ConvProblem* out) {
  out->Clear();
  out->set_spatial_dims(p.spatial_dims);
  out->set_n(p.n);
  out->set_c(p.c);
  out->set_k(p.k);
  PutSpatial(p, p.in, out->mutable_in_size());
  PutSpatial(p, p.filter, out->mutable_filter_size());
  PutSpatial(p, p.pad, out->mutable_pad());
  PutSpatial(p, p.stride, out->mutable_stride());
  PutSpatial(p, p.dilation, out->mutable_dilation());
  out->set_groups(p.groups);
  out->set_layout(static_cast<v1::Layout>(p.layout));
  out->set_data_type(static_cast<v1::DataType>(p.type));
  out->set_direction(static_cast<v1::Direction>(p.direction));
}

absl::StatusOr<ConvProblem> ProblemFromProto(const v1::ConvProblem& in,
                                             const ProblemLimits& limits) {
  ConvProblem p;
  p.spatial_dims = in.spatial_dims() == 0 ? 2 : in.spatial_dims();
  if (p.spatial_dims != 2 && p.spatial_dims != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("spatial_dims: must be 2 or 3, got ", in.spatial_dims()));
  }
  if (!v1::Layout_IsValid(in.layout()) ||
      in.layout() == v1::LAYOUT_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: unknown layout ", in.layout()));
  }
  if (!v1::DataType_IsValid(in.data_type()) ||
      in.data_type() == v1::DATA_TYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_type: unknown data type ", in.data_type()));
  }
  if (!v1::Direction_IsValid(in.direction()) ||
      in.direction() == v1::DIRECTION_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("direction: unknown direction ", in.direction()));
  }
  p.n = in.n();
  p.c = in.c();
  p.k = in.k();
  const int d = p.spatial_dims;
  RETURN_IF_ERROR(GetSpatial("in_size", in.in_size(), d, true, 1, &p.in));
  RETURN_IF_ERROR(
      GetSpatial("filter_size", in.filter_size(), d, true, 1, &p.filter));
  RETURN_IF_ERROR(GetSpatial("pad", in.pad(), d, false, 0, &p.pad));
  RETURN_IF_ERROR(GetSpatial("stride", in.stride(), d, false, 1, &p.stride));
  RETURN_IF_ERROR(
      GetSpatial("dilation", in.dilation(), d, false, 1, &p.dilation));
  p.groups = in.groups() == 0 ? 1 : in.groups();
  p.layout = static_cast<Layout>(in.layout());
  p.type = static_cast<DataType>(in.data_type());
  p.direction = static_cast<Direction>(in.direction());
  RETURN_IF_ERROR(ValidateProblem(p, limits));
  return p;
}

}  // namespace convtune
