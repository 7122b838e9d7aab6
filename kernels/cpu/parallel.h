// A process-wide pool of worker threads for CPU kernels. ParallelFor splits a
// range into chunks and runs them on the pool plus the calling thread.
// Thread-safe; nested calls run inline on the caller.
#ifndef CONVTUNE_KERNELS_CPU_PARALLEL_H_
#define CONVTUNE_KERNELS_CPU_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace convtune::cpu {

// Number of threads ParallelFor uses: SetNumThreads's, else
// CONVTUNE_CPU_THREADS when set, else the hardware threads.
int NumThreads();

// Sets NumThreads() for this process. Only before the first ParallelFor
// (the pool is made once); false, changing nothing, after it or for n < 1.
bool SetNumThreads(int n);

// Calls fn(begin, end) over disjoint chunks covering [0, n); returns when all
// are done. `grain` is the smallest chunk worth a thread.
void ParallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace convtune::cpu

#endif  // CONVTUNE_KERNELS_CPU_PARALLEL_H_
