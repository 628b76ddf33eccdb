#include "berth/dataplane/stall_watch.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

constexpr absl::Duration kProbe = absl::Milliseconds(100);
constexpr absl::Duration kThreshold = absl::Milliseconds(500);

TEST(StallWatchTest, AGracePeriodThatEndsInTimeIsNoStallAndTheNextStartsAfterTheInterval) {
  StallWatch watch(kProbe, kThreshold);
  const absl::Time start = absl::UnixEpoch() + absl::Hours(1);
  ASSERT_EQ(watch.next(start), StallWatch::Step::kStartGracePeriod);
  watch.started(7, start);
  EXPECT_EQ(watch.token(), 7u);
  EXPECT_EQ(watch.next(start + absl::Milliseconds(1)), StallWatch::Step::kCheck);
  watch.checked(false, start + absl::Milliseconds(50));
  EXPECT_FALSE(watch.stalled()) << "still within the threshold";
  watch.checked(true, start + absl::Milliseconds(60));
  EXPECT_FALSE(watch.stalled());
  EXPECT_EQ(watch.openFor(start + absl::Milliseconds(60)), absl::ZeroDuration());
  EXPECT_EQ(watch.next(start + absl::Milliseconds(99)), StallWatch::Step::kNothing);
  EXPECT_EQ(watch.next(start + kProbe), StallWatch::Step::kStartGracePeriod);
}

TEST(StallWatchTest, APeriodOpenPastTheThresholdIsAStallUntilItEnds) {
  StallWatch watch(kProbe, kThreshold);
  const absl::Time start = absl::UnixEpoch() + absl::Hours(1);
  watch.started(1, start);
  watch.checked(false, start + kThreshold);
  EXPECT_FALSE(watch.stalled()) << "exactly the threshold is not past it";
  watch.checked(false, start + kThreshold + absl::Milliseconds(1));
  EXPECT_TRUE(watch.stalled());
  EXPECT_EQ(watch.openFor(start + absl::Seconds(2)), absl::Seconds(2));
  EXPECT_EQ(watch.next(start + absl::Seconds(2)), StallWatch::Step::kCheck)
      << "no new period while the stuck one is open";
  watch.checked(true, start + absl::Seconds(3));
  EXPECT_FALSE(watch.stalled()) << "the workers resumed";
}

}  // namespace
}  // namespace berth
