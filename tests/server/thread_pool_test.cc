#include "server/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace convtune {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskBeforeDestruction) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("test", 3);
    for (int i = 0; i < 1000; ++i) pool.Schedule([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ThreadPoolTest, SingleThreadPoolRunsInOrderWithoutOverlap) {
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  {
    ThreadPool queue("bench", 1);
    for (int i = 0; i < 200; ++i) {
      queue.Schedule([&, i] {
        if (++running > 1) overlapped = true;
        order.push_back(i);
        --running;
      });
    }
  }
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(overlapped.load());
}

TEST(ThreadPoolTest, LowPriorityTasksWaitForEveryOtherTaskQueued) {
  std::vector<std::string> order;
  absl::Notification started, release;
  {
    ThreadPool queue("bench", 1);
    queue.Schedule([&] {
      started.Notify();
      release.WaitForNotification();
    });
    started.WaitForNotification();
    queue.Schedule([&] { order.push_back("low 1"); },
                   ThreadPool::Priority::kLow);
    queue.Schedule([&] { order.push_back("normal 1"); });
    queue.Schedule([&] { order.push_back("low 2"); },
                   ThreadPool::Priority::kLow);
    queue.Schedule([&] {
      order.push_back("normal 2");
      // Queued while a low-priority task waits: it still runs first.
      queue.Schedule([&] { order.push_back("normal 3"); });
    });
    EXPECT_EQ(queue.queued(), 4);
    release.Notify();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"normal 1", "normal 2", "normal 3",
                                             "low 1", "low 2"}));
}

}  // namespace
}  // namespace convtune
