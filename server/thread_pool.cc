#include "server/thread_pool.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

namespace convtune {

ThreadPool::ThreadPool(std::string name, int threads, int nice)
    : name_(std::move(name)) {
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this, nice] {
      // Linux keeps a nice value per thread; the worker sets its own.
      if (nice > 0) setpriority(PRIO_PROCESS, gettid(), nice);
      Loop();
    });
    // Thread names show in top/gdb; Linux caps them at 15 characters.
    pthread_setname_np(workers_.back().native_handle(),
                       name_.substr(0, 15).c_str());
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task, Priority priority,
                          absl::string_view tenant) {
  absl::MutexLock lock(&mu_);
  Level& level = LevelOf(priority);
  auto [it, first] = level.by_tenant.try_emplace(tenant);
  if (first) level.turns.emplace_back(tenant);
  it->second.push_back(std::move(task));
  ++level.size;
  ++scheduled_;
}

std::function<void()> ThreadPool::Level::Pop() {
  std::string tenant = std::move(turns.front());
  turns.pop_front();
  auto it = by_tenant.find(tenant);
  std::function<void()> task = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) {
    by_tenant.erase(it);
  } else {
    turns.push_back(std::move(tenant));
  }
  --size;
  return task;
}

int ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(normal_.size + low_.size);
}

int ThreadPool::queued(Priority priority) const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(priority == Priority::kLow ? low_.size
                                                     : normal_.size);
}

int64_t ThreadPool::scheduled() const {
  absl::MutexLock lock(&mu_);
  return scheduled_;
}

void ThreadPool::DrainAll(absl::Span<ThreadPool* const> pools) {
  auto total = [&] {
    int64_t n = 0;
    for (ThreadPool* p : pools) n += p != nullptr ? p->scheduled() : 0;
    return n;
  };
  for (int64_t before = total();;) {
    for (ThreadPool* p : pools) {
      if (p != nullptr) p->WaitIdle();
    }
    const int64_t after = total();
    if (after == before) return;
    before = after;
  }
}

void ThreadPool::WaitIdle() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](const ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->normal_.size == 0 && p->low_.size == 0 && p->running_ == 0;
      },
      this));
}

void ThreadPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || p->normal_.size > 0 || p->low_.size > 0;
          },
          this));
      // Low-priority tasks wait for every other task queued.
      Level& from = normal_.size > 0 ? normal_ : low_;
      if (from.size == 0) return;  // stopping and drained
      task = from.Pop();
      ++running_;
    }
    task();
    // What the task captured goes before the pool may count as idle.
    task = nullptr;
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace convtune
