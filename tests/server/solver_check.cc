#include "tests/server/solver_check.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/plan_executor.h"
#include "kernels/reference.h"

namespace convtune {

ConvProblem Conv2d(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                   int64_t fh, int64_t fw, int64_t pad, int64_t stride,
                   int64_t dil, int64_t groups) {
  ConvProblem p;
  p.n = n, p.c = c, p.k = k, p.groups = groups;
  p.in = {1, h, w};
  p.filter = {1, fh, fw};
  p.pad = {0, pad, pad};
  p.stride = {1, stride, stride};
  p.dilation = {1, dil, dil};
  return p;
}

ConvProblem Conv3d(int64_t n, int64_t c, int64_t d, int64_t h, int64_t w,
                   int64_t k, int64_t f, int64_t pad, int64_t stride,
                   int64_t groups) {
  ConvProblem p;
  p.spatial_dims = 3;
  p.n = n, p.c = c, p.k = k, p.groups = groups;
  p.in = {d, h, w};
  p.filter = {f, f, f};
  p.pad = {pad, pad, pad};
  p.stride = {stride, stride, stride};
  return p;
}

std::vector<Shape> Shapes() {
  ConvProblem asym = Conv2d(1, 4, 6, 8, 3, 3, 1, 0);
  asym.pad = {0, 1, 0};
  return {
      {"3x3 pad1", Conv2d(2, 3, 7, 9, 4, 3, 3, 1)},
      {"3x3 no pad odd", Conv2d(1, 5, 9, 7, 3, 3, 3, 0)},
      {"3x3 stride2", Conv2d(1, 4, 9, 8, 6, 3, 3, 1, 2)},
      {"3x3 dilation2", Conv2d(1, 3, 10, 9, 5, 3, 3, 2, 1, 2)},
      {"3x3 pad3", Conv2d(1, 2, 5, 6, 3, 3, 3, 3)},
      {"groups2", Conv2d(2, 4, 6, 7, 6, 3, 3, 1, 1, 1, 2)},
      {"depthwise", Conv2d(1, 6, 7, 7, 6, 3, 3, 1, 1, 1, 6)},
      {"5x5", Conv2d(1, 3, 11, 10, 4, 5, 5, 2)},
      {"3x1", asym},
      {"1x1", Conv2d(2, 8, 5, 6, 5, 1, 1, 0)},
      {"1x1 groups2", Conv2d(1, 6, 4, 5, 4, 1, 1, 0, 1, 1, 2)},
      {"1x1 stride2", Conv2d(1, 6, 7, 7, 4, 1, 1, 0, 2)},
      {"resnet 3x3", Conv2d(1, 16, 14, 14, 16, 3, 3, 1)},
      {"resnet 1x1", Conv2d(1, 32, 7, 7, 16, 1, 1, 0)},
      {"many filters, few outputs", Conv2d(1, 4, 5, 5, 40, 3, 3, 0)},
      {"large image", Conv2d(1, 3, 40, 41, 10, 3, 3, 1)},
      {"resnet 7x7 s2", Conv2d(1, 3, 24, 24, 8, 7, 7, 3, 2)},
      {"3d 3x3x3", Conv3d(1, 3, 5, 6, 5, 4, 3, 1)},
      {"3d stride2 groups2", Conv3d(2, 4, 5, 5, 6, 4, 3, 1, 2, 2)},
      {"3d 1x1x1", Conv3d(1, 5, 3, 4, 5, 6, 1, 0)},
  };
}

void RunAndCheck(Device& device, const ConvProblem& p, const Solver& solver,
                 const PerfConfig& config, std::mt19937_64& rng) {
  SCOPED_TRACE(absl::StrCat("config [", PerfConfigString(config), "]"));
  std::vector<char> x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  FillRandom(x.data(), p.type, p.x_elements(), rng);
  FillRandom(w.data(), p.type, p.w_elements(), rng);
  FillRandom(y.data(), p.type, p.y_elements(), rng);
  std::vector<char>* out = &ByTensor(p.output(), x, w, y);
  FillNaN(out->data(), p.type, out->size() / ElementBytes(p.type));
  const std::vector<ReferenceValue> want =
      ReferenceOutput(p, {x.data(), w.data(), y.data()});

  absl::StatusOr<v1::ExecutionPlan> plan = solver.MakePlan(p, config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t ws_bytes = solver.ConfigWorkspaceBytes(p, config);
  ASSERT_EQ(plan->workspace_bytes(), ws_bytes);
  ASSERT_EQ(plan->solver_id(), solver.id());
  // A caller's workspace need not be aligned past its element size: start
  // it 4 bytes past a 64-byte boundary.
  std::vector<float> ws(ws_bytes / sizeof(float) + 17);
  FillNaN(ws.data(), DataType::kFp32, ws.size());
  float* ws_start = ws.data();
  while (reinterpret_cast<uintptr_t>(ws_start) % 64 != 4) ++ws_start;

  PlanBuffers buffers{x.data(), w.data(), y.data(),
                      ws_bytes > 0 ? ws_start : nullptr, ws_bytes};
  ASSERT_EQ(ExecutePlan(device, *plan, buffers), absl::OkStatus());
  EXPECT_EQ(CompareOutput(p, want, out->data()), absl::OkStatus());
}

void CheckEveryShape(Device& device, const Solver& solver, Direction direction,
                     DataType type, int* applicable,
                     std::vector<PerfConfig>* configs,
                     const std::function<void(const ConvProblem&,
                                              const absl::Status&)>& observe) {
  *applicable = 0;
  std::random_device seeds;
  for (const Shape& shape : Shapes()) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      ConvProblem p = shape.p;
      p.layout = layout;
      p.direction = direction;
      p.type = type;
      ASSERT_EQ(ValidateProblem(p), absl::OkStatus()) << shape.name;
      const absl::Status applies = solver.IsApplicable(p);
      if (observe) observe(p, applies);
      if (!applies.ok()) {
        EXPECT_EQ(applies.code(), absl::StatusCode::kFailedPrecondition)
            << applies;
        continue;
      }
      ++*applicable;
      const uint64_t seed = (uint64_t{seeds()} << 32) | seeds();
      std::mt19937_64 rng(seed);
      SCOPED_TRACE(
          absl::StrCat(shape.name, ": ", DescribeProblem(p), " seed ", seed));
      const std::vector<PerfConfig> space = solver.ConfigSpace(p);
      ASSERT_FALSE(space.empty());
      for (const PerfConfig& config : space) {
        ASSERT_EQ(solver.ValidateConfig(p, config), absl::OkStatus());
        if (configs != nullptr) configs->push_back(config);
        RunAndCheck(device, p, solver, config, rng);
      }
    }
  }
}

void PrintTo(const Combo& c, std::ostream* os) {
  *os << "solver " << c.solver_id << " " << DirectionName(c.direction) << " "
      << DataTypeName(c.type);
}

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  return absl::StrCat("solver", info.param.solver_id, "_",
                      DirectionName(info.param.direction), "_",
                      DataTypeName(info.param.type));
}

std::vector<Combo> CombosOf(std::initializer_list<uint32_t> solver_ids) {
  std::vector<Combo> combos;
  for (uint32_t id : solver_ids) {
    for (Direction d : {Direction::kForward, Direction::kBackwardData,
                        Direction::kBackwardWeights}) {
      for (DataType t : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
        combos.push_back({id, d, t});
      }
    }
  }
  return combos;
}

}  // namespace convtune
