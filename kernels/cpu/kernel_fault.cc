// cpu.fault_injection: a kernel that faults on purpose, for tests of the
// measurement worker. Its first scalar picks the fault: 1 writes through a
// null pointer (the process dies of SIGSEGV), 2 never returns. It refuses to
// run unless CONVTUNE_FAULT_SOLVER is set in the process's environment.
#include <cstdlib>

#include "kernels/cpu/kernel_conv.h"

namespace convtune::cpu {

absl::Status FaultInjectionKernel(const v1::KernelStep& step,
                                  const std::vector<void*>& buffers) {
  if (std::getenv("CONVTUNE_FAULT_SOLVER") == nullptr) {
    return absl::FailedPreconditionError(
        "cpu.fault_injection runs only under CONVTUNE_FAULT_SOLVER");
  }
  const int64_t fault = step.scalars_size() > 0 ? step.scalars(0) : 0;
  if (fault == 1) {
    volatile float* volatile null_out = nullptr;
    *null_out = 1;
  }
  if (fault == 2) {
    volatile unsigned long long spins = 0;
    for (;;) spins = spins + 1;
  }
  return absl::InvalidArgumentError("cpu.fault_injection: unknown fault");
}

}  // namespace convtune::cpu
