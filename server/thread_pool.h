// A fixed pool of worker threads running queued tasks, those of low priority
// after all others. Within a priority, tasks are grouped by the tenant they
// are done for and the tenants take turns, one task each, so that one
// tenant's hundred queued tasks do not hold up another's one; a tenant's own
// tasks run in the order they were queued. The compile pool is one (N
// threads); each device's timing queue is one with a single thread, so
// timings on a device never overlap. Thread-safe.
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
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

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
  // `tenant`: who the task is done for; tasks of the daemon itself have "".
  void Schedule(std::function<void()> task,
                Priority priority = Priority::kNormal,
                absl::string_view tenant = {});

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
  static void DrainAll(absl::Span<ThreadPool* const> pools);

 private:
  // The tasks of one priority: a FIFO per tenant, and the tenants with
  // tasks waiting, whose turn is next first.
  struct Level {
    absl::flat_hash_map<std::string, std::deque<std::function<void()>>>
        by_tenant;
    std::deque<std::string> turns;
    size_t size = 0;
    // The next tenant's first task; the tenant goes to the back of the
    // turns if it has more. REQUIRES: size > 0.
    std::function<void()> Pop();
  };

  void Loop();
  Level& LevelOf(Priority p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return p == Priority::kLow ? low_ : normal_;
  }

  const std::string name_;
  mutable absl::Mutex mu_;
  Level normal_ ABSL_GUARDED_BY(mu_);
  Level low_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t scheduled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace convtune

#endif  // CONVTUNE_SERVER_THREAD_POOL_H_
