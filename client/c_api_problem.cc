// The problem a set of C API descriptors describes, with every inconsistency
// reported by descriptor and field.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/c_api_internal.h"

namespace convtune::capi {
namespace {

const char* AxisName(int nb_dims, int i) {
  static const char* k4[] = {"N", "C", "H", "W"};
  static const char* k5[] = {"N", "C", "D", "H", "W"};
  return nb_dims == 5 ? k5[i] : k4[i];
}

convtuneStatus_t CheckSet(convtuneHandle_t handle, const char* name,
                          const convtuneTensorDescriptor* desc) {
  if (desc == nullptr)
    return Fail(handle, convtuneStatusBadParm, absl::StrCat(name, " is NULL"));
  if (!desc->set) {
    return Fail(handle, convtuneStatusNotInitialized,
                absl::StrCat(name, " has not been set"));
  }
  return convtuneStatusSuccess;
}

convtuneStatus_t Mismatch(convtuneHandle_t handle, const char* a,
                          const char* a_field, int64_t a_value,
                          const std::string& b_what, int64_t b_value) {
  return Fail(handle, convtuneStatusBadParm,
              absl::StrCat(a, " ", a_field, " (", a_value, ") does not match ",
                           b_what, " (", b_value, ")"));
}

}  // namespace

convtuneStatus_t MakeProblem(convtuneHandle_t handle, Direction direction,
                             const TensorNames& names,
                             const convtuneTensorDescriptor* x,
                             const convtuneTensorDescriptor* w,
                             const convtuneTensorDescriptor* y,
                             const convtuneConvolutionDescriptor* conv,
                             ConvProblem* out) {
  if (convtuneStatus_t s = CheckSet(handle, names.x, x);
      s != convtuneStatusSuccess)
    return s;
  if (convtuneStatus_t s = CheckSet(handle, names.w, w);
      s != convtuneStatusSuccess)
    return s;
  if (names.y != nullptr) {
    if (convtuneStatus_t s = CheckSet(handle, names.y, y);
        s != convtuneStatusSuccess)
      return s;
  }
  if (conv == nullptr)
    return Fail(handle, convtuneStatusBadParm, "convDesc is NULL");
  if (!conv->set)
    return Fail(handle, convtuneStatusNotInitialized,
                "convDesc has not been set");
  const int nb = conv->spatial_dims + 2;
  const std::pair<const char*, const convtuneTensorDescriptor*> tensors[] = {
      {names.x, x}, {names.w, w}, {names.y, y}};
  for (const auto& [name, desc] : tensors) {
    if (name == nullptr) continue;
    if (desc->nb_dims != nb) {
      return Fail(handle, convtuneStatusBadParm,
                  absl::StrCat(name, " has ", desc->nb_dims,
                               " dimensions; convDesc is ", conv->spatial_dims,
                               "-D so tensors need ", nb));
    }
    if (desc->type != x->type) {
      return Fail(handle, convtuneStatusBadParm,
                  absl::StrCat(name, " data type ", DataTypeName(desc->type),
                               " differs from ", names.x, " data type ",
                               DataTypeName(x->type)));
    }
    if (desc->layout != x->layout) {
      return Fail(handle, convtuneStatusBadParm,
                  absl::StrCat(name, " layout differs from ", names.x,
                               " layout (filters follow the tensor layout)"));
    }
  }
  ConvProblem p;
  p.spatial_dims = conv->spatial_dims;
  p.n = x->dims[0];
  p.c = x->dims[1];
  p.k = w->dims[0];
  const int first = 3 - conv->spatial_dims;
  for (int i = 0; i < conv->spatial_dims; ++i) {
    p.in[first + i] = x->dims[2 + i];
    p.filter[first + i] = w->dims[2 + i];
  }
  p.pad = conv->pad;
  p.stride = conv->stride;
  p.dilation = conv->dilation;
  p.groups = conv->groups;
  p.layout = x->layout;
  p.type = x->type;
  p.direction = direction;
  if (w->dims[1] * conv->groups != x->dims[1]) {
    return Mismatch(handle, names.x, "C", x->dims[1],
                    absl::StrCat(names.w, " C x group count (", w->dims[1],
                                 " x ", conv->groups, ")"),
                    w->dims[1] * conv->groups);
  }
  if (absl::Status s = ValidateProblem(p); !s.ok()) {
    return Fail(handle, convtuneStatusBadParm,
                absl::StrCat("the convolution is invalid: ", s.message()));
  }
  if (names.y != nullptr) {
    if (y->dims[0] != p.n)
      return Mismatch(handle, names.y, "N", y->dims[0], names.x, p.n);
    if (y->dims[1] != p.k) {
      return Mismatch(handle, names.y, "C", y->dims[1],
                      absl::StrCat(names.w, " K"), p.k);
    }
    for (int i = 0; i < conv->spatial_dims; ++i) {
      const int64_t want = p.out(first + i);
      if (y->dims[2 + i] != want) {
        return Mismatch(handle, names.y, AxisName(nb, 2 + i), y->dims[2 + i],
                        "the convolution's output size", want);
      }
    }
  }
  *out = p;
  return convtuneStatusSuccess;
}

}  // namespace convtune::capi
