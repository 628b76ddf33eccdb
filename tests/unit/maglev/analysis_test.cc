#include "berth/maglev/analysis.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/consistent_hash.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

TEST(MaglevAnalysisTest, BalanceOfEqualWeightsIsWithinOneSlot) {
  absl::StatusOr<Table> table = build(equalBackends(3), 7);
  ASSERT_TRUE(table.ok());
  const BalanceStats stats = balanceOf(*table);
  EXPECT_EQ(stats.serving, 3u);
  EXPECT_EQ(stats.min_slots, 2u);
  EXPECT_EQ(stats.max_slots, 3u);
  EXPECT_DOUBLE_EQ(stats.max_over_ideal, 3 / (7 / 3.0));
  EXPECT_DOUBLE_EQ(stats.min_over_ideal, 2 / (7 / 3.0));
}

TEST(MaglevAnalysisTest, BalanceOfATableWithNoServingBackendIsEmpty) {
  absl::StatusOr<Table> table = build({}, 7);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(balanceOf(*table).serving, 0u);
}

// Backend indices shift when a rebuild drops a backend; the comparison must follow names.
TEST(MaglevAnalysisTest, SlotsChangedComparesBackendsByName) {
  absl::StatusOr<Table> full =
      buildWithPermutations({{"B0", 1}, {"B1", 1}, {"B2", 1}}, {{3, 4}, {0, 2}, {3, 1}}, 7);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<Table> rebuilt = rebuildWithout(*full, {false, true, false});
  ASSERT_TRUE(rebuilt.ok());
  // B1 B0 B1 B0 B2 B2 B0 against B0 B0 B0 B0 B2 B2 B2: slots 0, 2 and 6 differ.
  EXPECT_EQ(slotsChanged(*full, *rebuilt), 3u);
  EXPECT_EQ(slotsChanged(*full, *full), 0u);
}

TEST(MaglevAnalysisTest, FailoverMovesTheOwnedShareAndRebuildMovesMore) {
  absl::StatusOr<Table> full = build(equalBackends(100), 65537);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<std::vector<FailureImpact>> impacts = singleFailureImpacts(*full);
  ASSERT_TRUE(impacts.ok()) << impacts.status();
  ASSERT_EQ(impacts->size(), 100u);
  for (const FailureImpact& impact : *impacts) {
    EXPECT_DOUBLE_EQ(impact.failover_share, impact.owned_share) << impact.backend;
    EXPECT_GT(impact.rebuild_share, impact.owned_share) << impact.backend;
    EXPECT_DOUBLE_EQ(impact.ideal_share, 0.01) << "the weight's share, not the owned one";
    EXPECT_LE(impact.failover_balance.max_over_ideal, 1.03);
  }
}

TEST(MaglevAnalysisTest, FailureImpactSamplesEvenlyWhenAsked) {
  absl::StatusOr<Table> full = build(equalBackends(10), 1009);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<std::vector<FailureImpact>> impacts = singleFailureImpacts(*full, 4);
  ASSERT_TRUE(impacts.ok()) << impacts.status();
  ASSERT_EQ(impacts->size(), 4u);
  EXPECT_EQ((*impacts)[0].backend, "backend-00000");
  EXPECT_EQ((*impacts)[1].backend, "backend-00002");
  EXPECT_EQ((*impacts)[2].backend, "backend-00005");
  EXPECT_EQ((*impacts)[3].backend, "backend-00007");
  EXPECT_EQ(singleFailureImpacts(*full, 10)->size(), 10u);
  EXPECT_EQ(singleFailureImpacts(*full, 0)->size(), 10u);
}

TEST(MaglevAnalysisTest, FailureImpactNeedsTheAllHealthyTable) {
  absl::StatusOr<Table> full = build(equalBackends(3), 7);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<Table> degraded = withHealth(*full, {true, false, true});
  ASSERT_TRUE(degraded.ok());
  EXPECT_EQ(singleFailureImpacts(*degraded).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TableFingerprintTest, IsPinnedSoEveryMachineAndBuildAgrees) {
  // The value is part of the contract between instances: a change here without a new layout
  // version ("berth-table-v2") means that instances of two berth versions would disagree.
  const Table maglev = *build(equalBackends(10), 65537);
  EXPECT_EQ(absl::StrFormat("%016x", fingerprintOf(maglev)), "d7497da40932f9fe");
  const Table ring =
      *buildTable(equalBackends(10), {.algorithm = Algorithm::kRing, .table_size = 65537});
  EXPECT_EQ(absl::StrFormat("%016x", fingerprintOf(ring)), "d65073b01eab0d19");
}

TEST(TableFingerprintTest, SameInputsAgreeAndEveryDecidingInputChangesIt) {
  std::vector<Backend> backends = equalBackends(6);
  const Table table = *build(backends, 65537);
  std::vector<Backend> reversed(backends.rbegin(), backends.rend());
  EXPECT_EQ(fingerprintOf(*build(reversed, 65537)), fingerprintOf(table)) << "input order";

  std::vector<bool> healthy(6, true);
  healthy[2] = false;
  const Table failed = *withHealth(table, healthy);
  EXPECT_NE(fingerprintOf(failed), fingerprintOf(table)) << "health";
  EXPECT_EQ(fingerprintOf(*withHealth(table, healthy)), fingerprintOf(failed));
  EXPECT_EQ(fingerprintOf(*withHealth(failed, std::vector<bool>(6, true))), fingerprintOf(table))
      << "recovery restores the table, and so the fingerprint";
  std::vector<bool> drained(6, false);
  drained[2] = true;
  EXPECT_NE(fingerprintOf(*withHealth(table, std::vector<bool>(6, true), drained)),
            fingerprintOf(failed))
      << "a drain moves the same slots as a failure, but keeps established flows";

  backends[0].weight = 2;
  EXPECT_NE(fingerprintOf(*build(backends, 65537)), fingerprintOf(table)) << "weight";
  EXPECT_NE(fingerprintOf(*build(equalBackends(6), 65539)), fingerprintOf(table)) << "M";
  EXPECT_NE(fingerprintOf(*buildTable(equalBackends(6), {.algorithm = Algorithm::kRendezvous})),
            fingerprintOf(table))
      << "algorithm";
}

// A failure's least is the slots the failed backend held, inherited ones included; a recovery's,
// the slots the recovered backend holds after.
TEST(TableMovementTest, HealthAndDrainChangesCountTheSlotsOfTheBackendsThatChanged) {
  const Table full = *build(equalBackends(100), 65537);
  std::vector<bool> healthy(100, true);
  healthy[7] = false;
  const Table one_down = *withHealth(full, healthy);
  const TableMovement failed = availabilityMovement(full, one_down);
  EXPECT_TRUE(failed.sameSize());
  EXPECT_EQ(failed.moved_slots, full.slotCounts()[7]);
  EXPECT_DOUBLE_EQ(failed.minimumSlots(), full.slotCounts()[7]);
  EXPECT_DOUBLE_EQ(failed.movedOverMinimum(), 1.0);
  const TableMovement recovered = availabilityMovement(one_down, full);
  EXPECT_DOUBLE_EQ(recovered.minimumSlots(), full.slotCounts()[7]);
  EXPECT_EQ(availabilityMovement(full, full).movedOverMinimum(), 0.0);
}

// After a config change the least is the sum of the weighted shares' increases: an added
// backend's new share, or for a weight change the quota increases; a full rebuild moves more.
TEST(TableMovementTest, ConfigChangesCountTheIncreasesOfTheShares) {
  const Table before = *build(equalBackends(100), 65537);
  const Table added = *build(equalBackends(101), 65537);
  const TableMovement add = configMovement(before, added);
  EXPECT_NEAR(add.minimumSlots(), 65537.0 / 101, 1e-6);
  EXPECT_GE(add.movedOverMinimum(), 1.0);
  std::vector<Backend> heavier = equalBackends(100);
  heavier[3].weight = 3;  // its share goes from 1/100 to 3/102
  const TableMovement weight = configMovement(before, *build(heavier, 65537));
  EXPECT_NEAR(weight.minimum_share, 3.0 / 102 - 1.0 / 100, 1e-12);
}

// Where M changes, slots cannot be compared; the share of the hash space whose backend changed
// is 1 - sum of the products of each backend's slot shares, and for one unchanged backend it is 0.
TEST(TableMovementTest, AChangeOfSizeComparesSharesOfTheHashSpace) {
  const Table small = *build(equalBackends(1), 65537);
  const Table large = *build(equalBackends(1), 655373);
  const TableMovement same_backend = configMovement(small, large);
  EXPECT_FALSE(same_backend.sameSize());
  EXPECT_EQ(same_backend.moved_slots, 0u);
  EXPECT_NEAR(same_backend.moved_share, 0.0, 1e-12);
  const TableMovement resized =
      configMovement(*build(equalBackends(4), 65537), *build(equalBackends(4), 65539));
  EXPECT_NEAR(resized.moved_share, 0.75, 0.001);  // independent slots: 1 - 4 * (1/4)^2
  EXPECT_NEAR(resized.minimum_share, 0.0, 1e-12);
}

}  // namespace
}  // namespace berth
