// fault_injection: a solver that faults on purpose, for tests of the
// measurement worker and of quarantine. It exists only when the daemon's
// environment has CONVTUNE_FAULT_SOLVER=crash (its kernel writes through a
// null pointer) or =hang (its kernel never returns). It applies to every
// problem and is estimated fastest, so it is timed first; on the CPU it runs
// cpu.fault_injection, on a GPU fill_test.cu's fault_null_write or
// spin_forever.
#ifndef CONVTUNE_SERVER_SOLVERS_FAULT_INJECTION_H_
#define CONVTUNE_SERVER_SOLVERS_FAULT_INJECTION_H_

#include <memory>
#include <vector>

#include "server/solver.h"

namespace convtune {

inline constexpr uint32_t kFaultInjectionId = 900;

// The fault-injection solver for `backend`'s devices when
// CONVTUNE_FAULT_SOLVER names a fault; none otherwise. InvalidArgument
// naming the variable for another value.
absl::StatusOr<std::vector<std::unique_ptr<Solver>>> MakeFaultInjectionSolvers(
    v1::Backend backend);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_FAULT_INJECTION_H_
