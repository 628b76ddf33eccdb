#include "berth/maglev/comparison.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/maglev/name_hash.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

constexpr ComparisonOptions kNoTiming = {.max_removals = 0, .measure_time = false};

AlgorithmComparison only(const absl::StatusOr<std::vector<AlgorithmComparison>>& results) {
  EXPECT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(results->size(), 1u);
  return results->front();
}

TEST(ComparisonTest, ModuloOnSevenSlotsAndTwoBackendsMatchesTheHandCount) {
  // Slots 0, 2, 4, 6 go to a and 1, 3, 5 to b. Ideal is 3.5 each: max/ideal 4/3.5, min/ideal
  // 3/3.5, slots/ideal is 8/7 and 6/7 with mean 1 and standard deviation 1/7. Weighted error:
  // (|4/7 - 1/2| + |3/7 - 1/2|) / 2 = 1/14.
  // A third backend c (weight 1, the mean) makes it s mod 3: a 0 3 6, b 1 4, c 2 5. Against the
  // old table slots 2, 3, 4, 5 changed: 4 moved where c's share needed 7/3, so 12/7.
  // Removing a leaves b every slot (4 moved of a's 4); removing b leaves a all (3 of 3): both 1.
  // A tenth of 2 backends is one, the first in the removal order.
  const AlgorithmComparison modulo = only(compareAlgorithms(
      {{"a", 1}, {"b", 1}}, {.table_size = 7}, {ComparedAlgorithm::kModulo}, kNoTiming));
  EXPECT_FALSE(modulo.in_datapath);
  EXPECT_DOUBLE_EQ(modulo.max_over_ideal, 4 / 3.5);
  EXPECT_DOUBLE_EQ(modulo.min_over_ideal, 3 / 3.5);
  EXPECT_NEAR(modulo.coefficient_of_variation, 1 / 7.0, 1e-12);
  EXPECT_NEAR(modulo.weighted_error, 1 / 14.0, 1e-12);
  EXPECT_NEAR(modulo.add_one, 12 / 7.0, 1e-12);
  EXPECT_DOUBLE_EQ(modulo.remove_one.mean, 1.0);
  EXPECT_DOUBLE_EQ(modulo.remove_one.worst, 1.0);
  EXPECT_EQ(modulo.remove_one.cases, 2u);
  EXPECT_EQ(modulo.tenth_removed, 1u);
  EXPECT_DOUBLE_EQ(modulo.remove_tenth, 1.0);
  EXPECT_EQ(modulo.table_bytes, 14u);
  EXPECT_EQ(modulo.state_bytes, 0u);
  EXPECT_EQ(modulo.build_ms, 0);
  ASSERT_EQ(modulo.slots_over_ideal.size(), 2u);
  EXPECT_DOUBLE_EQ(modulo.slots_over_ideal[0], 4 / 3.5);
  ASSERT_EQ(modulo.movement.size(), 2u) << "0 removed, then 1 of 2";
  EXPECT_EQ(modulo.movement[0].moved, 0);
  EXPECT_EQ(modulo.movement[1].removed, 1u);
  EXPECT_DOUBLE_EQ(modulo.movement[1].ideal, 0.5);
}

TEST(ComparisonTest, WeightsThatAnAlgorithmIgnoresShowAsWeightedError) {
  // Weights 1 and 3 ask for shares 1/4 and 3/4. Modulo on 7 slots gives 4/7 and 3/7:
  // (|4/7 - 1/4| + |3/7 - 3/4|) / 2 = 9/28. Rendezvous honours the weights.
  const std::vector<Backend> backends = {{"a", 1}, {"b", 3}};
  const AlgorithmComparison modulo =
      only(compareAlgorithms(backends, {.table_size = 7}, {ComparedAlgorithm::kModulo}, kNoTiming));
  EXPECT_NEAR(modulo.weighted_error, 9 / 28.0, 1e-12);
  EXPECT_EQ(modulo.notes.back(), "ignores weights");
  const AlgorithmComparison rendezvous = only(compareAlgorithms(
      backends, {.table_size = 655373}, {ComparedAlgorithm::kRendezvous}, kNoTiming));
  EXPECT_LT(rendezvous.weighted_error, 0.005);
  const AlgorithmComparison jump = only(
      compareAlgorithms(backends, {.table_size = 655373}, {ComparedAlgorithm::kJump}, kNoTiming));
  EXPECT_NEAR(jump.weighted_error, 0.25, 0.005) << "half each, against 1/4 and 3/4";
}

TEST(ComparisonTest, RingAndRendezvousMoveOnlyTheRemovedBackendsSlots) {
  const std::vector<ComparedAlgorithm> algorithms = {ComparedAlgorithm::kRing,
                                                     ComparedAlgorithm::kRendezvous};
  const absl::StatusOr<std::vector<AlgorithmComparison>> results = compareAlgorithms(
      equalBackends(40), {.table_size = 65537, .ring_replicas = 40}, algorithms, kNoTiming);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const AlgorithmComparison& result : *results) {
    SCOPED_TRACE(std::string(toString(result.algorithm)));
    EXPECT_TRUE(result.in_datapath);
    EXPECT_EQ(result.remove_one.cases, 40u);
    EXPECT_DOUBLE_EQ(result.remove_one.mean, 1.0);
    EXPECT_DOUBLE_EQ(result.remove_one.worst, 1.0);
    EXPECT_EQ(result.tenth_removed, 4u);
    EXPECT_DOUBLE_EQ(result.remove_tenth, 1.0);
  }
}

TEST(ComparisonTest, JumpAddsCheaplyButRemovingAnyButTheLastRenumbers) {
  const AlgorithmComparison jump = only(compareAlgorithms(equalBackends(50), {.table_size = 65537},
                                                          {ComparedAlgorithm::kJump}, kNoTiming));
  // The joining backend takes only its own share, give or take sampling.
  EXPECT_NEAR(jump.add_one, 1.0, 0.1);
  // The last backend's removal moves its slots alone; the first's renumbers all the others.
  EXPECT_GT(jump.remove_one.worst, 20);
  EXPECT_GT(jump.remove_one.mean, 10);
}

TEST(ComparisonTest, ModuloMovesAlmostEverythingOnAnyChange) {
  const AlgorithmComparison modulo = only(compareAlgorithms(
      equalBackends(100), {.table_size = 65537}, {ComparedAlgorithm::kModulo}, kNoTiming));
  // (N-1)/N of all slots, over the 1/N a removal needs: about N - 1.
  EXPECT_GT(modulo.remove_one.mean, 90);
  EXPECT_GT(modulo.add_one, 90);
}

TEST(ComparisonTest, MaglevBalancesWithinASlotAndMovesLittleBeyondTheFailedShare) {
  const AlgorithmComparison maglev = only(
      compareAlgorithms(equalBackends(100), {.table_size = 65537}, {ComparedAlgorithm::kMaglev},
                        {.max_removals = 10, .measure_time = false}));
  EXPECT_LT(maglev.max_over_ideal, 1.0 + 100.0 / 65537);
  EXPECT_GT(maglev.min_over_ideal, 1.0 - 100.0 / 65537);
  EXPECT_EQ(maglev.remove_one.cases, 10u);
  EXPECT_GE(maglev.remove_one.mean, 1.0);
  EXPECT_LT(maglev.remove_one.worst, 1.1);
}

TEST(ComparisonTest, TheMovementCurveNestsItsRemovalsAndStartsAtZero) {
  const absl::StatusOr<std::vector<AlgorithmComparison>> results =
      compareAlgorithms(equalBackends(20), {.table_size = 65537},
                        {ComparedAlgorithm::kMaglev, ComparedAlgorithm::kRendezvous}, kNoTiming);
  ASSERT_TRUE(results.ok()) << results.status();
  for (const AlgorithmComparison& result : *results) {
    SCOPED_TRACE(std::string(toString(result.algorithm)));
    ASSERT_EQ(result.movement.size(), 11u);  // 0, 1, 2, ... 10 of 20
    EXPECT_EQ(result.movement[0].removed, 0u);
    EXPECT_EQ(result.movement[0].moved, 0);
    for (size_t i = 1; i < result.movement.size(); ++i) {
      EXPECT_EQ(result.movement[i].removed, i);
      EXPECT_DOUBLE_EQ(result.movement[i].ideal, i / 20.0);
      EXPECT_GE(result.movement[i].moved, result.movement[i - 1].moved);
      EXPECT_GE(result.movement[i].moved, result.movement[i].ideal * 0.9);
    }
  }
}

TEST(ComparisonTest, TimingsAreMeasuredWhenAsked) {
  const AlgorithmComparison ring = only(
      compareAlgorithms(equalBackends(10), {.table_size = 65537, .ring_replicas = 10},
                        {ComparedAlgorithm::kRing}, {.max_removals = 1, .measure_time = true}));
  EXPECT_GT(ring.build_ms, 0);
  EXPECT_GT(ring.lookup_ns, 0);
  EXPECT_GT(ring.table_lookup_ns, 0);
  EXPECT_EQ(ring.state_bytes, 65537u * 2 + 100u * sizeof(HashRing::Point));
}

TEST(ComparisonTest, BadInputIsNamed) {
  EXPECT_FALSE(parseComparedAlgorithms("maglev,cuckoo").ok());
  EXPECT_FALSE(parseComparedAlgorithms("").ok());
  EXPECT_EQ(parseComparedAlgorithms("ring, jump,ring")->size(), 2u);
  EXPECT_FALSE(compareAlgorithms({{"a", 0}}, {.table_size = 7}, {ComparedAlgorithm::kMaglev}).ok());
  EXPECT_FALSE(compareAlgorithms({{"a", 1}}, {.table_size = 8}, {ComparedAlgorithm::kMaglev}).ok());
}

TEST(JumpHashTest, GrowingTheBucketsMovesKeysOnlyIntoTheNewOne) {
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t key = mix64(i);
    EXPECT_EQ(jumpHash(key, 1), 0);
    for (int32_t buckets = 1; buckets < 12; ++buckets) {
      const int32_t before = jumpHash(key, buckets);
      const int32_t after = jumpHash(key, buckets + 1);
      ASSERT_TRUE(after == before || after == buckets) << key << " " << buckets;
    }
  }
}

}  // namespace
}  // namespace berth
