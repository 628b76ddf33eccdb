// The log's flood bound: at most N lines a second through, and the first line after a hold
// says how many were held back.

#include "berth/control/line_limiter.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(LineLimiterTest, AFloodGetsAtMostTheRateThrough) {
  LineLimiter limiter(10);
  absl::Time now = absl::FromUnixSeconds(100);
  int through = 0;
  for (int ms = 0; ms < 10'000; ++ms, now += absl::Milliseconds(1)) {
    for (int i = 0; i < 5; ++i) through += limiter.admit(now, "line").has_value() ? 1 : 0;
  }
  EXPECT_LE(through, 10 + 10 * 10) << "a burst of 10, then 10 a second";
  EXPECT_GE(through, 10 * 10);
  EXPECT_EQ(limiter.heldBack(), 50'000u - through);
}

TEST(LineLimiterTest, TheFirstLineAfterAHoldSaysHowManyWereHeldBack) {
  LineLimiter limiter(2);
  const absl::Time start = absl::FromUnixSeconds(100);
  EXPECT_EQ(limiter.admit(start, "a"), "a");
  EXPECT_EQ(limiter.admit(start, "b"), "b");
  EXPECT_EQ(limiter.admit(start, "c"), std::nullopt);
  EXPECT_EQ(limiter.admit(start, "d"), std::nullopt);
  EXPECT_EQ(limiter.admit(start + absl::Seconds(1), "e"),
            "e (2 similar line(s) held back before this one)");
  EXPECT_EQ(limiter.admit(start + absl::Seconds(1), "f"), "f");
}

}  // namespace
}  // namespace berth
