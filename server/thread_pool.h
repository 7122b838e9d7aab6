// A fixed pool of worker threads running queued tasks in FIFO order, those
// of low priority after all others. The compile pool is one (N threads);
// each device's timing queue is one with a single thread, so timings on a
// device never overlap. Thread-safe.
#ifndef CONVTUNE_SERVER_THREAD_POOL_H_
#define CONVTUNE_SERVER_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace convtune {

class ThreadPool {
 public:
  // REQUIRES: threads >= 1. `nice` (0 to 19) lowers the workers' scheduling
  // priority, and that of threads they start: tuning work yields the CPU to
  // the threads that serve answers.
  ThreadPool(std::string name, int threads, int nice = 0);
  // Runs every task already queued, then joins the workers.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // kLow: work nobody waits on (background tuning), run only when no
  // kNormal task is waiting.
  enum class Priority { kNormal, kLow };
  void Schedule(std::function<void()> task,
                Priority priority = Priority::kNormal);

  int threads() const { return static_cast<int>(workers_.size()); }
  // Tasks waiting (not running).
  int queued() const;
  // Tasks of one priority waiting.
  int queued(Priority priority) const;
  // Blocks until no task is queued or running.
  void WaitIdle() const;
  // Tasks scheduled since the pool started.
  int64_t scheduled() const;

  // Waits until none of `pools` has a task queued or running, even where
  // their tasks schedule onto each other: done when one pass of waiting on
  // each saw no task scheduled anywhere. Null entries are skipped.
  static void DrainAll(std::initializer_list<ThreadPool*> pools);

 private:
  void Loop();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> low_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t scheduled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_THREAD_POOL_H_
