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

TEST(MaglevAnalysisTest, FailoverMovesTheIdealShareAndRebuildMovesMore) {
  absl::StatusOr<Table> full = build(equalBackends(100), 65537);
  ASSERT_TRUE(full.ok());
  absl::StatusOr<std::vector<FailureImpact>> impacts = singleFailureImpacts(*full);
  ASSERT_TRUE(impacts.ok()) << impacts.status();
  ASSERT_EQ(impacts->size(), 100u);
  for (const FailureImpact& impact : *impacts) {
    EXPECT_DOUBLE_EQ(impact.failover_share, impact.ideal_share) << impact.backend;
    EXPECT_GT(impact.rebuild_share, impact.ideal_share) << impact.backend;
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
  // The value is part of the contract between instances: a change here means that
  // instances of two berth versions would send flows to different backends.
  const Table maglev = *build(equalBackends(10), 65537);
  EXPECT_EQ(absl::StrFormat("%016x", fingerprintOf(maglev)), "bf8ca95685e3712e");
  const Table ring =
      *buildTable(equalBackends(10), {.algorithm = Algorithm::kRing, .table_size = 65537});
  EXPECT_EQ(absl::StrFormat("%016x", fingerprintOf(ring)), "4bf58a118ad91199");
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

  backends[0].weight = 2;
  EXPECT_NE(fingerprintOf(*build(backends, 65537)), fingerprintOf(table)) << "weight";
  EXPECT_NE(fingerprintOf(*build(equalBackends(6), 65539)), fingerprintOf(table)) << "M";
  EXPECT_NE(fingerprintOf(*buildTable(equalBackends(6), {.algorithm = Algorithm::kRendezvous})),
            fingerprintOf(table))
      << "algorithm";
}

}  // namespace
}  // namespace berth
