// Solvers of the vendor convolution libraries a device brings (oneDNN,
// cuDNN): one per library method, whose configs are the library's own and
// whose plans are one library step. Thread-safe as the library is.
#ifndef CONVTUNE_SERVER_SOLVERS_LIBRARY_SOLVER_H_
#define CONVTUNE_SERVER_SOLVERS_LIBRARY_SOLVER_H_

#include <memory>
#include <vector>

#include "kernels/conv_library.h"
#include "kernels/device.h"
#include "server/solver.h"

namespace convtune {

// At most this many of a library's configs are timed by a find that does
// not search, the library's first choices first: every one cuDNN's
// heuristics list (it lists up to 32), as PyTorch's benchmark mode times
// them, so that find's best is never behind the library's.
inline constexpr size_t kLibraryFindConfigs = 32;

// A solver per method of each of the device's libraries, for the device's
// backend. The libraries must outlive the solvers.
std::vector<std::unique_ptr<Solver>> MakeLibrarySolvers(Device& device);

}  // namespace convtune

#endif  // CONVTUNE_SERVER_SOLVERS_LIBRARY_SOLVER_H_
