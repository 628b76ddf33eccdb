// When the fleet agent grants, renews or gives up its lease (fleet/lease_clock.h). Pinned: a
// grant at once, again after the retry interval when it fails; renewal at a third of the TTL,
// again after the retry interval when it fails; lost once unrenewed for a whole TTL, the lost
// lease kept as the previous one; one call at a time.

#include "berth/fleet/lease_clock.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

using Step = LeaseClock::Step;
const absl::Time kStart = absl::FromUnixSeconds(1000);
const absl::Duration kTtl = absl::Seconds(9);
const absl::Duration kRetry = absl::Seconds(1);

TEST(LeaseClockTest, GrantsAtOnceAndRetriesAFailedGrantAfterTheInterval) {
  LeaseClock clock(kTtl, kRetry);
  ASSERT_EQ(clock.next(kStart), Step::kGrant);
  clock.asked();
  EXPECT_EQ(clock.next(kStart), Step::kNothing) << "one call at a time";
  clock.grantFailed(kStart);
  EXPECT_EQ(clock.next(kStart + kRetry - absl::Milliseconds(1)), Step::kNothing);
  EXPECT_EQ(clock.next(kStart + kRetry), Step::kGrant);
}

TEST(LeaseClockTest, RenewsAtAThirdOfTheTtl) {
  LeaseClock clock(kTtl, kRetry);
  clock.asked();
  clock.granted(42, kStart);
  EXPECT_EQ(clock.id(), 42);
  EXPECT_EQ(clock.next(kStart + absl::Seconds(2)), Step::kNothing);
  ASSERT_EQ(clock.next(kStart + absl::Seconds(3)), Step::kKeepAlive);
  clock.asked();
  clock.renewFailed(kStart + absl::Seconds(3));
  EXPECT_EQ(clock.next(kStart + absl::Seconds(4)), Step::kKeepAlive) << "after the retry";
  clock.asked();
  clock.renewed(kStart + absl::Seconds(4));
  EXPECT_EQ(clock.next(kStart + absl::Seconds(6)), Step::kNothing);
  EXPECT_EQ(clock.next(kStart + absl::Seconds(7)), Step::kKeepAlive);
}

TEST(LeaseClockTest, UnrenewedForAWholeTtlTheLeaseIsLostAndKeptAsThePreviousOne) {
  LeaseClock clock(kTtl, kRetry);
  clock.asked();
  clock.granted(42, kStart);
  EXPECT_EQ(clock.next(kStart + kTtl + absl::Milliseconds(1)), Step::kExpired);
  clock.lost();
  EXPECT_EQ(clock.id(), 0);
  EXPECT_EQ(clock.previous(), 42);
  EXPECT_EQ(clock.next(kStart + kTtl + absl::Milliseconds(1)), Step::kGrant);
  clock.asked();
  clock.granted(43, kStart + kTtl);
  clock.revoked();
  EXPECT_EQ(clock.id(), 0);
  EXPECT_EQ(clock.previous(), 42) << "a revoked lease holds nothing";
}

}  // namespace
}  // namespace berth
