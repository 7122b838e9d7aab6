#include "kernels/driver_line.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace convtune {
namespace {

// What a flag sets. Spatial fields take the axis (0 = D, 1 = H, 2 = W).
enum class Field {
  kN,
  kC,
  kK,
  kIn,
  kFilter,
  kPad,
  kStride,
  kDilation,
  kGroups,
  kSpatialDims,
  kForw,
  kMode,
  kLayout,
  kIgnored,
};

struct FlagSpec {
  Field field;
  int axis = 0;
};

const std::map<std::string, FlagSpec, std::less<>>& LongFlags() {
  static const auto* flags = new std::map<std::string, FlagSpec, std::less<>>{
      {"batchsize", {Field::kN}},
      {"in_channels", {Field::kC}},
      {"out_channels", {Field::kK}},
      {"in_d", {Field::kIn, 0}},
      {"in_h", {Field::kIn, 1}},
      {"in_w", {Field::kIn, 2}},
      {"fil_d", {Field::kFilter, 0}},
      {"fil_h", {Field::kFilter, 1}},
      {"fil_w", {Field::kFilter, 2}},
      {"pad_d", {Field::kPad, 0}},
      {"pad_h", {Field::kPad, 1}},
      {"pad_w", {Field::kPad, 2}},
      {"conv_stride_d", {Field::kStride, 0}},
      {"conv_stride_h", {Field::kStride, 1}},
      {"conv_stride_w", {Field::kStride, 2}},
      {"dilation_d", {Field::kDilation, 0}},
      {"dilation_h", {Field::kDilation, 1}},
      {"dilation_w", {Field::kDilation, 2}},
      {"group_count", {Field::kGroups}},
      {"spatial_dim", {Field::kSpatialDims}},
      {"forw", {Field::kForw}},
      {"mode", {Field::kMode}},
      {"in_layout", {Field::kLayout}},
      {"out_layout", {Field::kLayout}},
      {"fil_layout", {Field::kLayout}},
      // Accepted, no effect on the problem.
      {"pad_mode", {Field::kIgnored}},
      {"trans_output_pad_d", {Field::kIgnored}},
      {"trans_output_pad_h", {Field::kIgnored}},
      {"trans_output_pad_w", {Field::kIgnored}},
      {"time", {Field::kIgnored}},
      {"verify", {Field::kIgnored}},
      {"iter", {Field::kIgnored}},
      {"search", {Field::kIgnored}},
      {"printconv", {Field::kIgnored}},
      {"pad_val", {Field::kIgnored}},
      {"bias", {Field::kIgnored}},
      {"wall", {Field::kIgnored}},
      {"solution", {Field::kIgnored}},
      {"in_data", {Field::kIgnored}},
      {"weights", {Field::kIgnored}},
      {"dout_data", {Field::kIgnored}},
      {"in_bias", {Field::kIgnored}},
      {"dump_output", {Field::kIgnored}},
      {"gpubuffer_check", {Field::kIgnored}},
      {"tensor_vect", {Field::kIgnored}},
      {"vector_length", {Field::kIgnored}},
      {"dilation_d_check", {Field::kIgnored}},
  };
  return *flags;
}

// MIOpenDriver's short forms.
const std::map<char, std::string>& ShortFlags() {
  static const auto* flags = new std::map<char, std::string>{
      {'n', "batchsize"},
      {'c', "in_channels"},
      {'k', "out_channels"},
      {'H', "in_h"},
      {'W', "in_w"},
      {'!', "in_d"},
      {'y', "fil_h"},
      {'x', "fil_w"},
      {'@', "fil_d"},
      {'p', "pad_h"},
      {'q', "pad_w"},
      {'$', "pad_d"},
      {'u', "conv_stride_h"},
      {'v', "conv_stride_w"},
      {'#', "conv_stride_d"},
      {'l', "dilation_h"},
      {'j', "dilation_w"},
      {'^', "dilation_d"},
      {'g', "group_count"},
      {'_', "spatial_dim"},
      {'F', "forw"},
      {'m', "mode"},
      {'I', "in_layout"},
      {'O', "out_layout"},
      {'f', "fil_layout"},
      {'z', "pad_mode"},
      {'t', "time"},
      {'V', "verify"},
      {'i', "iter"},
      {'s', "search"},
      {'P', "printconv"},
      {'r', "pad_val"},
      {'b', "bias"},
      {'w', "wall"},
      {'S', "solution"},
      {'d', "in_data"},
      {'e', "weights"},
      {'D', "dout_data"},
      {'a', "in_bias"},
      {'o', "dump_output"},
      {'C', "gpubuffer_check"},
      {'Z', "tensor_vect"},
      {'L', "vector_length"},
      {'Y', "pad_d"},
  };
  return *flags;
}

absl::Status FlagError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<ConvProblem>> ParseDriverArgs(
    const std::vector<std::string>& args) {
  if (args.empty())
    return FlagError("command", "missing (conv, convfp16 or convbfp16)");
  ConvProblem p;
  if (args[0] == "conv") {
    p.type = DataType::kFp32;
  } else if (args[0] == "convfp16") {
    p.type = DataType::kFp16;
  } else if (args[0] == "convbfp16") {
    p.type = DataType::kBf16;
  } else {
    return FlagError(
        "command",
        absl::StrCat("'", args[0], "' is not conv, convfp16 or convbfp16"));
  }
  int64_t forw = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name;
    std::string value;
    bool has_value = false;
    if (absl::StartsWith(arg, "--")) {
      name = arg.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    } else if (arg.size() == 2 && arg[0] == '-') {
      auto it = ShortFlags().find(arg[1]);
      if (it == ShortFlags().end()) return FlagError(arg, "unknown flag");
      name = it->second;
    } else {
      return FlagError(arg, "expected a flag");
    }
    auto spec_it = LongFlags().find(name);
    if (spec_it == LongFlags().end()) return FlagError(arg, "unknown flag");
    if (!has_value) {
      if (i + 1 >= args.size()) return FlagError(arg, "missing value");
      value = args[++i];
    }
    const FlagSpec spec = spec_it->second;
    if (spec.field == Field::kIgnored) continue;
    if (spec.field == Field::kMode) {
      if (value != "conv") {
        return FlagError(arg, absl::StrCat("mode '", value,
                                           "' is not supported (only conv)"));
      }
      continue;
    }
    if (spec.field == Field::kLayout) {
      if (value == "NCHW" || value == "NCDHW") {
        p.layout = Layout::kNCHW;
      } else if (value == "NHWC" || value == "NDHWC") {
        p.layout = Layout::kNHWC;
      } else {
        return FlagError(arg, absl::StrCat("unknown layout '", value, "'"));
      }
      continue;
    }
    int64_t v;
    if (!absl::SimpleAtoi(value, &v)) {
      return FlagError(arg, absl::StrCat("'", value, "' is not an integer"));
    }
    switch (spec.field) {
      case Field::kN:
        p.n = v;
        break;
      case Field::kC:
        p.c = v;
        break;
      case Field::kK:
        p.k = v;
        break;
      case Field::kIn:
        p.in[spec.axis] = v;
        break;
      case Field::kFilter:
        p.filter[spec.axis] = v;
        break;
      case Field::kPad:
        p.pad[spec.axis] = v;
        break;
      case Field::kStride:
        p.stride[spec.axis] = v;
        break;
      case Field::kDilation:
        p.dilation[spec.axis] = v;
        break;
      case Field::kGroups:
        p.groups = v;
        break;
      case Field::kSpatialDims:
        if (v != 2 && v != 3)
          return FlagError(arg, absl::StrCat("must be 2 or 3, got ", v));
        p.spatial_dims = static_cast<int>(v);
        break;
      case Field::kForw:
        if (v < 0 || v > 7)
          return FlagError(arg, absl::StrCat("must be 0 to 7, got ", v));
        forw = v;
        break;
      default:
        break;
    }
  }
  if (p.spatial_dims == 2) {
    // MIOpenDriver ignores the depth flags of a 2-D problem (its lists even
    // carry --conv_stride_d 0), and so do we.
    p.in[0] = p.filter[0] = p.stride[0] = p.dilation[0] = 1;
    p.pad[0] = 0;
  }
  std::vector<ConvProblem> out;
  const Direction dirs[] = {Direction::kForward, Direction::kBackwardData,
                            Direction::kBackwardWeights};
  for (int bit = 0; bit < 3; ++bit) {
    if (forw != 0 && (forw & (1 << bit)) == 0) continue;
    ConvProblem q = p;
    q.direction = dirs[bit];
    RETURN_IF_ERROR(ValidateProblem(q));
    out.push_back(q);
  }
  return out;
}

absl::StatusOr<std::vector<ConvProblem>> ParseDriverLine(
    absl::string_view line) {
  std::vector<std::string> args =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  if (!args.empty() && absl::EndsWith(args[0], "MIOpenDriver"))
    args.erase(args.begin());
  return ParseDriverArgs(args);
}

std::string FormatDriverLine(const ConvProblem& p) {
  static constexpr const char* kCmd[] = {"", "conv", "convfp16", "convbfp16"};
  static constexpr int kForw[] = {0, 1, 2, 4};
  std::string s =
      absl::StrCat(kCmd[static_cast<int>(p.type)], " --spatial_dim ",
                   p.spatial_dims, " -n ", p.n, " -c ", p.c, " -k ", p.k);
  if (p.is_3d()) {
    absl::StrAppend(&s, " --in_d ", p.in[0], " --fil_d ", p.filter[0],
                    " --pad_d ", p.pad[0], " --conv_stride_d ", p.stride[0],
                    " --dilation_d ", p.dilation[0]);
  }
  absl::StrAppend(&s, " -H ", p.in[1], " -W ", p.in[2], " -y ", p.filter[1],
                  " -x ", p.filter[2], " -p ", p.pad[1], " -q ", p.pad[2],
                  " -u ", p.stride[1], " -v ", p.stride[2], " -l ",
                  p.dilation[1], " -j ", p.dilation[2], " -g ", p.groups);
  absl::StrAppend(&s, " --in_layout ",
                  p.layout == Layout::kNCHW ? "NCHW" : "NHWC", " -F ",
                  kForw[static_cast<int>(p.direction)]);
  return s;
}

}  // namespace convtune
