#include "berth/control/stop_withdrawal.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

const absl::Time kSignal = absl::FromUnixSeconds(1000);

// Forwards 2 s after the announcer's report, and waits at most 5 s for it.
StopWithdrawal stopAtTheSignal() {
  return StopWithdrawal(kSignal, absl::Seconds(2), absl::Seconds(5));
}

// The forwarding time counts from the announcer's report, however long BIRD took to get there.
TEST(StopWithdrawal, ForwardsTheGraceAfterTheReport) {
  StopWithdrawal stop = stopAtTheSignal();
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(1500));
  EXPECT_TRUE(stop.confirmed());
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(3500));
  EXPECT_FALSE(stop.done(kSignal + absl::Milliseconds(3499)));
  EXPECT_TRUE(stop.done(kSignal + absl::Milliseconds(3500)));
}

// A fast announcer ends the stop before the limit would.
TEST(StopWithdrawal, AFastReportEndsBeforeTheLimit) {
  StopWithdrawal stop = stopAtTheSignal();
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(100));
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(2100));
}

// Only the first report counts: the announcer repeats it every round.
TEST(StopWithdrawal, LaterReportsDoNotPushTheEndOut) {
  StopWithdrawal stop = stopAtTheSignal();
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(200));
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(400));
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(2200));
}

// Without an announcer, or with one that is stuck, the stop still ends at the limit.
TEST(StopWithdrawal, WithoutAReportTheStopEndsAtTheLimit) {
  StopWithdrawal stop = stopAtTheSignal();
  EXPECT_FALSE(stop.confirmed());
  EXPECT_FALSE(stop.done(kSignal + absl::Milliseconds(4999)));
  EXPECT_TRUE(stop.done(kSignal + absl::Seconds(5)));
}

// forward_after_withdrawal: 0 stops as soon as the announcer reports.
TEST(StopWithdrawal, NoGraceStopsAtTheReport) {
  StopWithdrawal stop(kSignal, absl::ZeroDuration(), absl::Seconds(5));
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(300));
  EXPECT_TRUE(stop.done(kSignal + absl::Milliseconds(300)));
}

}  // namespace
}  // namespace berth
