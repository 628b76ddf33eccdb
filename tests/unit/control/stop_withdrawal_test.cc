#include "berth/control/stop_withdrawal.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

const absl::Time kSignal = absl::FromUnixSeconds(1000);

StopWithdrawal twoSecondsAfterAtMostFive() {
  return StopWithdrawal(absl::Seconds(2), absl::Seconds(5));
}

// Before a stop, nothing ends: the workers forward for as long as berthd runs.
TEST(StopWithdrawal, NothingEndsBeforeAStop) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  EXPECT_FALSE(stop.stopping());
  EXPECT_EQ(stop.forwardUntil(), absl::InfiniteFuture());
  EXPECT_FALSE(stop.done(kSignal + absl::Hours(1)));
}

// A report from before the stop is stale: the routes were announced again since.
TEST(StopWithdrawal, AReportBeforeTheStopDoesNotCount) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.withdrawalConfirmed(kSignal - absl::Seconds(1));
  stop.stopAsked(kSignal);
  EXPECT_FALSE(stop.confirmed());
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Seconds(5));
}

// The forwarding time counts from the announcer's report, however long BIRD took to get there.
TEST(StopWithdrawal, ForwardsTheGraceAfterTheReport) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.stopAsked(kSignal);
  EXPECT_TRUE(stop.stopping());
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(1500));
  EXPECT_TRUE(stop.confirmed());
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(3500));
  EXPECT_FALSE(stop.done(kSignal + absl::Milliseconds(3499)));
  EXPECT_TRUE(stop.done(kSignal + absl::Milliseconds(3500)));
}

// A fast announcer shortens the stop below the limit.
TEST(StopWithdrawal, AFastReportEndsBeforeTheLimit) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.stopAsked(kSignal);
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(100));
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(2100));
}

// Only the first report counts: the announcer repeats it every round.
TEST(StopWithdrawal, LaterReportsDoNotPushTheEndOut) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.stopAsked(kSignal);
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(200));
  stop.withdrawalConfirmed(kSignal + absl::Milliseconds(400));
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Milliseconds(2200));
}

// A second signal does not restart the stop.
TEST(StopWithdrawal, ASecondSignalChangesNothing) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.stopAsked(kSignal);
  stop.stopAsked(kSignal + absl::Seconds(3));
  EXPECT_EQ(stop.forwardUntil(), kSignal + absl::Seconds(5));
}

// Without an announcer, or with one that is stuck, the stop still ends at the limit.
TEST(StopWithdrawal, WithoutAReportTheStopEndsAtTheLimit) {
  StopWithdrawal stop = twoSecondsAfterAtMostFive();
  stop.stopAsked(kSignal);
  EXPECT_FALSE(stop.done(kSignal + absl::Milliseconds(4999)));
  EXPECT_TRUE(stop.done(kSignal + absl::Seconds(5)));
  EXPECT_FALSE(stop.confirmed());
}

}  // namespace
}  // namespace berth
