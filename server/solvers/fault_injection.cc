#include "server/solvers/fault_injection.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "kernels/cpu/kernel_conv.h"
#include "server/solvers/cpu_solver_util.h"
#include "server/solvers/gpu_solver_util.h"

namespace convtune {
namespace {

enum class Fault { kCrash = 1, kHang = 2 };

class FaultInjection final : public Solver {
 public:
  FaultInjection(v1::Backend backend, Fault fault)
      : backend_(backend), fault_(fault) {}

  uint32_t id() const override { return kFaultInjectionId; }
  absl::string_view name() const override { return "fault_injection"; }
  v1::AlgorithmFamily family() const override { return v1::DIRECT; }
  v1::Backend backend() const override { return backend_; }
  bool dynamic() const override { return true; }
  absl::Status IsApplicable(const ConvProblem&) const override {
    return absl::OkStatus();
  }
  int64_t WorkspaceBytes(const ConvProblem&) const override { return 0; }
  // Estimated fastest, so it is timed before the solvers that work.
  double Efficiency(const ConvProblem&) const override { return 1e6; }

  absl::StatusOr<v1::ExecutionPlan> MakePlan(
      const ConvProblem& p, const PerfConfig& config) const override {
    v1::ExecutionPlan plan = NewPlan(p, config);
    if (backend_ == v1::CPU) {
      v1::KernelStep* step = plan.add_steps();
      step->set_kernel(std::string(cpu::kFaultInjectionKernel));
      *step->add_buffers() = RoleRef(v1::BUFFER_Y);
      step->add_scalars(static_cast<int64_t>(fault_));
      return plan;
    }
    const int source = AddSource(&plan, "fill_test.cu", {});
    const int64_t n = p.y_elements();
    v1::KernelStep* step =
        fault_ == Fault::kCrash
            ? AddGpuStep(&plan, "fault_null_write", source,
                         {(n + 255) / 256, 1, 1}, 256)
            : AddGpuStep(&plan, "spin_forever", source, {1, 1, 1}, 1);
    v1::BufferRef* y = step->add_buffers();
    y->set_role(v1::BUFFER_Y);
    step->add_scalars(n);
    return plan;
  }

 private:
  const v1::Backend backend_;
  const Fault fault_;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Solver>>> MakeFaultInjectionSolvers(
    v1::Backend backend) {
  std::vector<std::unique_ptr<Solver>> out;
  const char* env = std::getenv("CONVTUNE_FAULT_SOLVER");
  if (env == nullptr || *env == '\0') return out;
  const std::string name = env;
  if (name != "crash" && name != "hang") {
    return absl::InvalidArgumentError(
        absl::StrCat("CONVTUNE_FAULT_SOLVER: expected crash or hang, got '",
                     QuotePrefix(name), "'"));
  }
  const Fault fault = name == "crash" ? Fault::kCrash : Fault::kHang;
  out.push_back(std::make_unique<FaultInjection>(
      backend == v1::CPU ? v1::CPU : v1::GPU, fault));
  return out;
}

}  // namespace convtune
