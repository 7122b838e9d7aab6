// A real convtuned whose fault-injection solver (CONVTUNE_FAULT_SOLVER)
// crashes or hangs its measurement worker, on any backend: two cold finds
// each meet the fault and complete with the other solvers, another client's
// FindDb hits meanwhile neither fail nor stall, the solver is quarantined,
// and the daemon never stops. Reports through gtest assertions.
#ifndef CONVTUNE_TESTS_SERVER_WORKER_FAULT_SCENARIO_H_
#define CONVTUNE_TESTS_SERVER_WORKER_FAULT_SCENARIO_H_

#include <functional>
#include <string>

#include "kernels/problem.h"

namespace convtune::testing {

// Sets CONVTUNE_FAULT_SOLVER for the scope: the workers and daemons started
// meanwhile inherit it.
class FaultEnv {
 public:
  explicit FaultEnv(const std::string& fault);
  ~FaultEnv();
};

struct WorkerFaultScenario {
  std::string convtuned;  // the binary
  std::string backend;    // cpu or cuda
  std::string fault;      // crash or hang
  int bound_ms = 1500;    // --measure-bound-ms
  // Distinct problems for distinct arguments.
  std::function<ConvProblem(int)> problem;
  int start_timeout_ms = 20000;
};

void RunWorkerFaultScenario(const WorkerFaultScenario& scenario);

}  // namespace convtune::testing

#endif  // CONVTUNE_TESTS_SERVER_WORKER_FAULT_SCENARIO_H_
