#include "server/solvers/cpu_solver_util.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/kernel_conv.h"

namespace convtune {
namespace {

// Keeps each fp32 copy on a cache-line boundary.
int64_t RoundUp64(int64_t v) { return (v + 63) / 64 * 64; }

}  // namespace

v1::BufferRef RoleRef(v1::BufferRole role, int64_t offset) {
  v1::BufferRef ref;
  ref.set_role(role);
  ref.set_offset_bytes(offset);
  return ref;
}

ConvProblem AsFp32(const ConvProblem& p) {
  ConvProblem q = p;
  q.type = DataType::kFp32;
  return q;
}

int64_t Fp32KernelWorkspace(const ConvProblem& p, int64_t kernel_bytes) {
  if (p.type == DataType::kFp32) return kernel_bytes;
  const ConvProblem q = AsFp32(p);
  return RoundUp64(kernel_bytes) + RoundUp64(q.x_bytes()) +
         RoundUp64(q.w_bytes()) + q.y_bytes();
}

void AddFp32KernelSteps(const ConvProblem& p, absl::string_view kernel,
                        std::initializer_list<int64_t> params,
                        int64_t kernel_bytes, v1::ExecutionPlan* plan) {
  const v1::BufferRef ws =
      kernel_bytes > 0 ? RoleRef(v1::BUFFER_WORKSPACE) : v1::BufferRef();
  const ConvProblem q = AsFp32(p);
  if (p.type == DataType::kFp32) {
    *plan->add_steps() =
        cpu::MakeConvStep(kernel, q, params, RoleRef(v1::BUFFER_X),
                          RoleRef(v1::BUFFER_W), RoleRef(v1::BUFFER_Y), ws);
    return;
  }
  const int64_t x_off = RoundUp64(kernel_bytes);
  const int64_t w_off = x_off + RoundUp64(q.x_bytes());
  const int64_t y_off = w_off + RoundUp64(q.w_bytes());
  struct Role {
    v1::BufferRole role;
    int64_t offset, count;
    bool is_output;
  };
  const Role roles[] = {{v1::BUFFER_X, x_off, p.x_elements(),
                         p.direction == Direction::kBackwardData},
                        {v1::BUFFER_W, w_off, p.w_elements(),
                         p.direction == Direction::kBackwardWeights},
                        {v1::BUFFER_Y, y_off, p.y_elements(),
                         p.direction == Direction::kForward}};
  const int t16 = static_cast<int>(p.type),
            t32 = static_cast<int>(DataType::kFp32);
  for (const Role& r : roles) {
    if (r.is_output) continue;
    *plan->add_steps() =
        cpu::MakeConvertStep(r.count, t16, RoleRef(r.role), t32,
                             RoleRef(v1::BUFFER_WORKSPACE, r.offset));
  }
  *plan->add_steps() =
      cpu::MakeConvStep(kernel, q, params, RoleRef(v1::BUFFER_WORKSPACE, x_off),
                        RoleRef(v1::BUFFER_WORKSPACE, w_off),
                        RoleRef(v1::BUFFER_WORKSPACE, y_off), ws);
  for (const Role& r : roles) {
    if (!r.is_output) continue;
    *plan->add_steps() = cpu::MakeConvertStep(
        r.count, t32, RoleRef(v1::BUFFER_WORKSPACE, r.offset), t16,
        RoleRef(r.role));
  }
}

std::string FilterString(const ConvProblem& p) {
  return p.is_3d()
             ? absl::StrCat(p.filter[0], "x", p.filter[1], "x", p.filter[2])
             : absl::StrCat(p.filter[1], "x", p.filter[2]);
}

}  // namespace convtune
