#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace convtune::cpu {
namespace {

thread_local bool in_parallel_region = false;

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Loop(); });
  }
  // Workers are detached at exit: the pool lives for the process.

  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    in_parallel_region = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

// 0 until NumThreads() is first read or SetNumThreads sets it; fixed once
// the pool is made.
std::atomic<int> num_threads{0};
std::mutex pool_mu;
bool pool_made = false;  // guarded by pool_mu

Pool& GetPool() {
  static Pool* pool = [] {
    std::lock_guard<std::mutex> lock(pool_mu);
    pool_made = true;
    return new Pool(NumThreads() - 1);
  }();
  return *pool;
}

}  // namespace

int NumThreads() {
  int n = num_threads.load();
  if (n > 0) return n;
  n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* env = std::getenv("CONVTUNE_CPU_THREADS")) {
    if (const int v = std::atoi(env); v > 0) n = v;
  }
  int expected = 0;
  num_threads.compare_exchange_strong(expected, n);
  return num_threads.load();
}

bool SetNumThreads(int n) {
  std::lock_guard<std::mutex> lock(pool_mu);
  if (n < 1 || pool_made) return false;
  num_threads = n;
  return true;
}

void ParallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks =
      std::min<int64_t>(NumThreads(), (n + grain - 1) / grain);
  if (in_parallel_region || max_chunks <= 1) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + max_chunks - 1) / max_chunks;
  std::mutex mu;
  std::condition_variable done_cv;
  int64_t pending = 0;
  for (int64_t begin = chunk; begin < n; begin += chunk) {
    ++pending;
    const int64_t end = std::min(n, begin + chunk);
    GetPool().Submit([&, begin, end] {
      fn(begin, end);
      std::lock_guard<std::mutex> lock(mu);
      if (--pending == 0) done_cv.notify_one();
    });
  }
  in_parallel_region = true;
  fn(0, std::min(n, chunk));
  in_parallel_region = false;
  std::unique_lock<std::mutex> lock(mu);
  done_cv.wait(lock, [&] { return pending == 0; });
}

}  // namespace convtune::cpu
