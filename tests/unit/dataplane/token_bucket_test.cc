#include "berth/dataplane/token_bucket.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace berth {
namespace {

int takeAll(TokenBucket& bucket, uint32_t now_ms, uint32_t per_second, uint32_t burst) {
  int taken = 0;
  while (bucket.take(now_ms, per_second, burst)) ++taken;
  return taken;
}

TEST(TokenBucketTest, StartsFullAndRefillsAtItsRateUpToItsBurst) {
  TokenBucket bucket;
  EXPECT_EQ(takeAll(bucket, 5000, 1000, 100), 100) << "a full burst at first";
  EXPECT_EQ(takeAll(bucket, 5010, 1000, 100), 10) << "1,000 a second: 10 in 10 ms";
  EXPECT_EQ(takeAll(bucket, 6000, 1000, 100), 100) << "never more than the burst";
}

// Tokens are kept in thousandths: 10 a second gives one every 100 ms, however often it is asked.
TEST(TokenBucketTest, ARateUnderOnePerMillisecondStillRefills) {
  TokenBucket bucket;
  EXPECT_EQ(takeAll(bucket, 0, 10, 1), 1);
  int taken = 0;
  for (uint32_t ms = 1; ms <= 1000; ++ms) taken += takeAll(bucket, ms, 10, 1);
  EXPECT_EQ(taken, 10);
}

TEST(TokenBucketTest, TheMillisecondClockWrapping) {
  TokenBucket bucket;
  EXPECT_EQ(takeAll(bucket, UINT32_MAX - 4, 1000, 100), 100);
  EXPECT_EQ(takeAll(bucket, 5, 1000, 100), 10) << "10 ms across the wrap";
}

// A reload that changes the limit applies to the next take.
TEST(TokenBucketTest, ANewRateOrBurstAppliesAtOnce) {
  TokenBucket bucket;
  EXPECT_EQ(takeAll(bucket, 0, 1000, 100), 100);
  EXPECT_EQ(takeAll(bucket, 1000, 1000, 5), 5);
  EXPECT_EQ(takeAll(bucket, 2000, 2, 100), 2);
}

}  // namespace
}  // namespace berth
