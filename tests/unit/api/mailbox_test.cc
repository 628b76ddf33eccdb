#include "berth/api/mailbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace berth {
namespace {

TEST(ManagementMailboxTest, ATaskRunsOnTheServingThreadAndItsCallerSeesTheResult) {
  ManagementMailbox mailbox;
  mailbox.setOpen(true);
  std::atomic<bool> stop{false};
  std::thread::id ran_on;
  std::thread management([&] {
    while (!stop) mailbox.serve();
  });
  int answer = 0;
  const std::function<void()> task = [&] {
    ran_on = std::this_thread::get_id();
    answer = 42;
  };
  EXPECT_TRUE(mailbox.run(task, absl::Seconds(10)));
  EXPECT_EQ(answer, 42);
  EXPECT_EQ(ran_on, management.get_id());
  stop = true;
  management.join();
}

TEST(ManagementMailboxTest, NobodyServingTimesOutAndTheTaskNeverRunsLater) {
  ManagementMailbox mailbox;
  mailbox.setOpen(true);
  bool ran = false;
  const std::function<void()> task = [&] { ran = true; };
  EXPECT_FALSE(mailbox.run(task, absl::Milliseconds(20)));
  mailbox.serve();  // the management loop comes round after the caller gave up
  EXPECT_FALSE(ran) << "the caller took its task back";
}

TEST(ManagementMailboxTest, AClosedMailboxRefusesAtOnce) {
  ManagementMailbox mailbox;
  const std::function<void()> task = [] {};
  EXPECT_FALSE(mailbox.run(task, absl::Seconds(10))) << "closed until opened";
  mailbox.setOpen(true);
  mailbox.setOpen(false);
  EXPECT_FALSE(mailbox.run(task, absl::Seconds(10)));
}

}  // namespace
}  // namespace berth
