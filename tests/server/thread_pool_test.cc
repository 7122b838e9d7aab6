#include "server/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(ThreadPoolTest, TenantsTakeTurnsWithinAPriority) {
  std::vector<std::string> order;
  absl::Notification started, release;
  {
    ThreadPool queue("bench", 1);
    queue.Schedule([&] {
      started.Notify();
      release.WaitForNotification();
    });
    started.WaitForNotification();
    // One tenant floods the queue; the others arrive later.
    for (int i = 1; i <= 4; ++i) {
      queue.Schedule([&, i] { order.push_back("a" + std::to_string(i)); },
                     ThreadPool::Priority::kNormal, "a");
    }
    queue.Schedule([&] { order.push_back("b1"); },
                   ThreadPool::Priority::kNormal, "b");
    queue.Schedule([&] { order.push_back("b2"); },
                   ThreadPool::Priority::kNormal, "b");
    queue.Schedule([&] { order.push_back("c1"); },
                   ThreadPool::Priority::kNormal, "c");
    queue.Schedule([&] { order.push_back("b low"); },
                   ThreadPool::Priority::kLow, "b");
    EXPECT_EQ(queue.queued(), 8);
    EXPECT_EQ(queue.queued(ThreadPool::Priority::kLow), 1);
    release.Notify();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3",
                                             "a4", "b low"}));
}

TEST(ThreadPoolTest, ATenantsOwnTasksKeepTheirOrder) {
  std::vector<int> order;
  {
    ThreadPool queue("bench", 1);
    for (int i = 0; i < 100; ++i) {
      queue.Schedule([&, i] { order.push_back(i); },
                     ThreadPool::Priority::kNormal, i % 2 ? "odd" : "even");
    }
  }
  ASSERT_EQ(order.size(), 100u);
  std::vector<int> even, odd;
  for (int i : order) (i % 2 ? odd : even).push_back(i);
  EXPECT_TRUE(std::is_sorted(even.begin(), even.end()));
  EXPECT_TRUE(std::is_sorted(odd.begin(), odd.end()));
}

}  // namespace
}  // namespace convtune
