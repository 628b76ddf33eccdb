#include "berth/util/background_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace berth {
namespace {

// Jobs run in the order posted, on a thread that is not the poster's.
TEST(BackgroundThreadTest, RunsJobsInOrderOffTheCallersThread) {
  std::vector<int> order;
  std::promise<std::thread::id> ran_on;
  std::promise<void> finished;
  {
    BackgroundThread thread(8);
    EXPECT_TRUE(thread.post([&] { ran_on.set_value(std::this_thread::get_id()); }));
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(thread.post([&order, i] { order.push_back(i); }));
    EXPECT_TRUE(thread.post([&] { finished.set_value(); }));
    finished.get_future().wait();
  }
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

// The queue is bounded: past max_queued waiting jobs, post() refuses at once.
TEST(BackgroundThreadTest, RefusesJobsPastItsQueueWithoutWaiting) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  BackgroundThread thread(2);
  ASSERT_TRUE(thread.post([&] {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();  // the first job runs and leaves the queue
  EXPECT_TRUE(thread.post([] {}));
  EXPECT_TRUE(thread.post([] {}));
  EXPECT_FALSE(thread.post([] {})) << "two wait already";
  release.set_value();
}

// Stopping drops the jobs that have not started and waits for the running one.
TEST(BackgroundThreadTest, StoppingDropsWaitingJobsAndFinishesTheRunningOne) {
  std::atomic<int> ran{0};
  std::promise<void> started;
  {
    BackgroundThread thread(4);
    ASSERT_TRUE(thread.post([&] {
      started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ++ran;
    }));
    ASSERT_TRUE(thread.post([&] { ++ran; }));
    started.get_future().wait();
  }
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace berth
