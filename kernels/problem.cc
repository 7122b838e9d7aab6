#include "kernels/problem.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace convtune {
namespace {

constexpr const char* kAxis[3] = {"d", "h", "w"};

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Multiplies into *acc; false on int64 overflow.
bool MulInto(int64_t* acc, int64_t v) {
  return !__builtin_mul_overflow(*acc, v, acc);
}

absl::Status CheckTensorBytes(absl::string_view name,
                              std::initializer_list<int64_t> dims,
                              int64_t elem_bytes, int64_t limit) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (!MulInto(&count, d)) {
      return FieldError(name, "element count overflows int64");
    }
  }
  int64_t bytes = count;
  if (!MulInto(&bytes, elem_bytes))
    return FieldError(name, "byte size overflows int64");
  if (bytes > limit) {
    return FieldError(
        name, absl::StrCat("tensor of ", bytes, " bytes is over the limit of ",
                           limit, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ElementBytes(DataType type) { return type == DataType::kFp32 ? 4 : 2; }

absl::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFp32:
      return "FP32";
    case DataType::kFp16:
      return "FP16";
    case DataType::kBf16:
      return "BF16";
  }
  return "?";
}

absl::string_view DirectionName(Direction dir) {
  switch (dir) {
    case Direction::kForward:
      return "F";
    case Direction::kBackwardData:
      return "B";
    case Direction::kBackwardWeights:
      return "W";
  }
  return "?";
}

Tensor OutputTensor(Direction dir) {
  switch (dir) {
    case Direction::kForward:
      return Tensor::kY;
    case Direction::kBackwardData:
      return Tensor::kX;
    case Direction::kBackwardWeights:
      return Tensor::kW;
  }
  return Tensor::kY;
}

absl::string_view TensorName(Tensor t) {
  switch (t) {
    case Tensor::kX:
      return "x";
    case Tensor::kW:
      return "w";
    case Tensor::kY:
      return "y";
  }
  return "?";
}

absl::StatusOr<DataType> ParseDataType(absl::string_view s) {
  if (s == "FP32" || s == "fp32") return DataType::kFp32;
  if (s == "FP16" || s == "fp16") return DataType::kFp16;
  if (s == "BF16" || s == "bf16") return DataType::kBf16;
  return FieldError("data_type", absl::StrCat("unknown data type '", s, "'"));
}

absl::StatusOr<Direction> ParseDirection(absl::string_view s) {
  if (s == "F") return Direction::kForward;
  if (s == "B") return Direction::kBackwardData;
  if (s == "W") return Direction::kBackwardWeights;
  return FieldError("direction", absl::StrCat("unknown direction '", s, "'"));
}

namespace {

// Strides for dims (outer, inner, D, H, W) stored as channels-first or last.
Strides DenseStrides(int64_t inner, const std::array<int64_t, 3>& sp,
                     Layout layout) {
  const int64_t spatial = sp[0] * sp[1] * sp[2];
  if (layout == Layout::kNCHW) {
    return {inner * spatial, spatial, sp[1] * sp[2], sp[2], 1};
  }
  return {inner * spatial, 1, sp[1] * sp[2] * inner, sp[2] * inner, inner};
}

}  // namespace

Strides XStrides(const ConvProblem& p) {
  return DenseStrides(p.c, p.in, p.layout);
}
Strides WStrides(const ConvProblem& p) {
  return DenseStrides(p.c_per_group(), p.filter, p.layout);
}
Strides YStrides(const ConvProblem& p) {
  return DenseStrides(p.k, {p.out(0), p.out(1), p.out(2)}, p.layout);
}

absl::Status ValidateProblem(const ConvProblem& p,
                             const ProblemLimits& limits) {
  if (p.spatial_dims != 2 && p.spatial_dims != 3) {
    return FieldError("spatial_dims",
                      absl::StrCat("must be 2 or 3, got ", p.spatial_dims));
  }
  if (p.layout != Layout::kNCHW && p.layout != Layout::kNHWC) {
    return FieldError(
        "layout", absl::StrCat("unknown layout ", static_cast<int>(p.layout)));
  }
  if (p.type != DataType::kFp32 && p.type != DataType::kFp16 &&
      p.type != DataType::kBf16) {
    return FieldError("data_type", absl::StrCat("unknown data type ",
                                                static_cast<int>(p.type)));
  }
  if (p.direction != Direction::kForward &&
      p.direction != Direction::kBackwardData &&
      p.direction != Direction::kBackwardWeights) {
    return FieldError("direction", absl::StrCat("unknown direction ",
                                                static_cast<int>(p.direction)));
  }
  if (p.n < 1)
    return FieldError("n", absl::StrCat("must be positive, got ", p.n));
  if (p.c < 1)
    return FieldError("c", absl::StrCat("must be positive, got ", p.c));
  if (p.k < 1)
    return FieldError("k", absl::StrCat("must be positive, got ", p.k));
  if (p.groups < 1)
    return FieldError("groups",
                      absl::StrCat("must be positive, got ", p.groups));
  if (p.c % p.groups != 0) {
    return FieldError(
        "groups",
        absl::StrCat("c=", p.c, " is not divisible by groups=", p.groups));
  }
  if (p.k % p.groups != 0) {
    return FieldError(
        "groups",
        absl::StrCat("k=", p.k, " is not divisible by groups=", p.groups));
  }
  const int first = p.is_3d() ? 0 : 1;
  for (int i = 0; i < 3; ++i) {
    const std::string ax = kAxis[i];
    if (i < first) {
      if (p.in[i] != 1 || p.filter[i] != 1 || p.pad[i] != 0 ||
          p.stride[i] != 1 || p.dilation[i] != 1) {
        return FieldError("spatial_dims",
                          "a 2-D problem has depth fields other than "
                          "in_d=1 filter_d=1 pad_d=0 stride_d=1 dilation_d=1");
      }
      continue;
    }
    if (p.in[i] < 1)
      return FieldError("in_" + ax,
                        absl::StrCat("must be positive, got ", p.in[i]));
    if (p.filter[i] < 1) {
      return FieldError("filter_" + ax,
                        absl::StrCat("must be positive, got ", p.filter[i]));
    }
    if (p.pad[i] < 0)
      return FieldError("pad_" + ax,
                        absl::StrCat("must be >= 0, got ", p.pad[i]));
    if (p.stride[i] < 1) {
      return FieldError("stride_" + ax,
                        absl::StrCat("must be positive, got ", p.stride[i]));
    }
    if (p.dilation[i] < 1) {
      return FieldError("dilation_" + ax,
                        absl::StrCat("must be positive, got ", p.dilation[i]));
    }
    // Sizes are bounded first so the output arithmetic below cannot overflow.
    constexpr int64_t kMaxAxis = int64_t{1} << 30;
    for (auto [name, v] : {std::pair{"in_", p.in[i]},
                           {"filter_", p.filter[i]},
                           {"pad_", p.pad[i]},
                           {"stride_", p.stride[i]},
                           {"dilation_", p.dilation[i]}}) {
      if (v > kMaxAxis) {
        return FieldError(name + ax,
                          absl::StrCat(v, " is over the limit of ", kMaxAxis));
      }
    }
    const int64_t span = p.dilation[i] * (p.filter[i] - 1) + 1;
    if (p.in[i] + 2 * p.pad[i] < span) {
      return FieldError(
          "out_" + ax,
          absl::StrCat("output size is below 1: in_", ax, "=", p.in[i],
                       " + 2*pad_", ax, "=", p.pad[i],
                       " is smaller than the dilated filter extent ", span));
    }
  }
  const int64_t eb = ElementBytes(p.type);
  RETURN_IF_ERROR(CheckTensorBytes("x", {p.n, p.c, p.in[0], p.in[1], p.in[2]},
                                   eb, limits.max_tensor_bytes));
  RETURN_IF_ERROR(CheckTensorBytes(
      "w", {p.k, p.c_per_group(), p.filter[0], p.filter[1], p.filter[2]}, eb,
      limits.max_tensor_bytes));
  RETURN_IF_ERROR(CheckTensorBytes("y",
                                   {p.n, p.k, p.out(0), p.out(1), p.out(2)}, eb,
                                   limits.max_tensor_bytes));
  return absl::OkStatus();
}

namespace {

std::string LayoutName(const ConvProblem& p) {
  if (p.is_3d()) return p.layout == Layout::kNCHW ? "NCDHW" : "NDHWC";
  return p.layout == Layout::kNCHW ? "NCHW" : "NHWC";
}

// "a" for 2-D spatial fields (H, W) or "DxHxW" for 3-D, joined by 'x'.
std::string Spatial(const ConvProblem& p, const std::array<int64_t, 3>& v) {
  if (p.is_3d()) return absl::StrCat(v[0], "x", v[1], "x", v[2]);
  return absl::StrCat(v[1], "x", v[2]);
}

absl::StatusOr<int64_t> ParseInt(absl::string_view field, absl::string_view s) {
  int64_t v;
  if (!absl::SimpleAtoi(s, &v)) {
    return FieldError(field, absl::StrCat("'", s, "' is not an integer"));
  }
  return v;
}

// Parses "AxB" (2-D) or "AxBxC" (3-D) into v (D, H, W).
absl::Status ParseSpatial(absl::string_view field, absl::string_view s,
                          int dims, std::array<int64_t, 3>* v) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, 'x');
  if (static_cast<int>(parts.size()) != dims) {
    return FieldError(field, absl::StrCat("'", s, "' should have ", dims,
                                          " sizes joined by 'x'"));
  }
  for (int i = 0; i < dims; ++i) {
    ASSIGN_OR_RETURN((*v)[3 - dims + i], ParseInt(field, parts[i]));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ProblemKey(const ConvProblem& p) {
  std::vector<std::string> f;
  f.push_back(absl::StrCat(p.c));
  if (p.is_3d()) f.push_back(absl::StrCat(p.in[0]));
  f.push_back(absl::StrCat(p.in[1]));
  f.push_back(absl::StrCat(p.in[2]));
  f.push_back(Spatial(p, p.filter));
  f.push_back(absl::StrCat(p.k));
  if (p.is_3d()) f.push_back(absl::StrCat(p.out(0)));
  f.push_back(absl::StrCat(p.out(1)));
  f.push_back(absl::StrCat(p.out(2)));
  f.push_back(absl::StrCat(p.n));
  f.push_back(Spatial(p, p.pad));
  f.push_back(Spatial(p, p.stride));
  f.push_back(Spatial(p, p.dilation));
  f.push_back(absl::StrCat(p.groups));
  f.push_back(LayoutName(p));
  f.push_back(std::string(DataTypeName(p.type)));
  f.push_back(std::string(DirectionName(p.direction)));
  return absl::StrJoin(f, "-");
}

absl::StatusOr<ConvProblem> ParseProblemKey(absl::string_view key) {
  std::vector<absl::string_view> f = absl::StrSplit(key, '-');
  ConvProblem p;
  if (f.size() == 15) {
    p.spatial_dims = 2;
  } else if (f.size() == 17) {
    p.spatial_dims = 3;
  } else {
    return FieldError("key",
                      absl::StrCat("'", key, "' has ", f.size(),
                                   " fields; expected 15 (2-D) or 17 (3-D)"));
  }
  const int d = p.spatial_dims;
  size_t i = 0;
  ASSIGN_OR_RETURN(p.c, ParseInt("c", f[i++]));
  for (int a = 3 - d; a < 3; ++a) {
    ASSIGN_OR_RETURN(p.in[a], ParseInt("in", f[i++]));
  }
  RETURN_IF_ERROR(ParseSpatial("filter", f[i++], d, &p.filter));
  ASSIGN_OR_RETURN(p.k, ParseInt("k", f[i++]));
  std::array<int64_t, 3> out = {1, 1, 1};
  for (int a = 3 - d; a < 3; ++a) {
    ASSIGN_OR_RETURN(out[a], ParseInt("out", f[i++]));
  }
  ASSIGN_OR_RETURN(p.n, ParseInt("n", f[i++]));
  RETURN_IF_ERROR(ParseSpatial("pad", f[i++], d, &p.pad));
  RETURN_IF_ERROR(ParseSpatial("stride", f[i++], d, &p.stride));
  RETURN_IF_ERROR(ParseSpatial("dilation", f[i++], d, &p.dilation));
  ASSIGN_OR_RETURN(p.groups, ParseInt("groups", f[i++]));
  const absl::string_view layout = f[i++];
  if (layout == (d == 3 ? "NCDHW" : "NCHW")) {
    p.layout = Layout::kNCHW;
  } else if (layout == (d == 3 ? "NDHWC" : "NHWC")) {
    p.layout = Layout::kNHWC;
  } else {
    return FieldError("layout", absl::StrCat("unknown layout '", layout, "'"));
  }
  ASSIGN_OR_RETURN(p.type, ParseDataType(f[i++]));
  ASSIGN_OR_RETURN(p.direction, ParseDirection(f[i++]));
  RETURN_IF_ERROR(ValidateProblem(p));
  for (int a = 3 - d; a < 3; ++a) {
    if (p.out(a) != out[a]) {
      return FieldError(absl::StrCat("out_", kAxis[a]),
                        absl::StrCat("key says ", out[a],
                                     " but the other fields give ", p.out(a)));
    }
  }
  return p;
}

std::string DescribeProblem(const ConvProblem& p) {
  static constexpr const char* kDir[] = {"", "fwd", "bwd-data", "bwd-weights"};
  std::string s = absl::StrCat(kDir[static_cast<int>(p.direction)], " ",
                               DataTypeName(p.type), " ", LayoutName(p), " n",
                               p.n, " c", p.c, " ", Spatial(p, p.in), " k", p.k,
                               " f", Spatial(p, p.filter));
  absl::StrAppend(&s, " pad", Spatial(p, p.pad), " stride",
                  Spatial(p, p.stride));
  if (p.dilation != std::array<int64_t, 3>{1, 1, 1}) {
    absl::StrAppend(&s, " dil", Spatial(p, p.dilation));
  }
  if (p.groups != 1) absl::StrAppend(&s, " g", p.groups);
  return s;
}

}  // namespace convtune
