#include "server/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"

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

}  // namespace
}  // namespace convtune
