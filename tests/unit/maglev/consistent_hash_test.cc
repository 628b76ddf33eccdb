#include "berth/maglev/consistent_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

__extension__ using Uint128 = unsigned __int128;

std::vector<Backend> named(size_t count, const std::string& prefix = "be-") {
  std::vector<Backend> backends;
  for (size_t i = 0; i < count; ++i) backends.push_back({absl::StrCat(prefix, i), 1});
  return backends;
}

// Each slot's backend by name, so tables over different backend lists compare.
std::vector<std::string> owners(const std::vector<uint16_t>& entries,
                                const std::vector<Backend>& backends) {
  std::vector<std::string> names;
  for (uint16_t entry : entries) names.push_back(entry == kNoBackend ? "" : backends[entry].name);
  return names;
}

std::vector<uint32_t> slotsPerBackend(const std::vector<uint16_t>& entries, size_t backends) {
  std::vector<uint32_t> counts(backends, 0);
  for (uint16_t entry : entries) ++counts[entry];
  return counts;
}

TEST(HashRingTest, TheSlotTableKeepsTheRingsBalanceForAHundredBackends) {
  // The ring's own imbalance, from its exact arc lengths, against the M-slot table's: sampling
  // the ring at M evenly spaced points must not distort it.
  const HashRing ring = *HashRing::build(named(100), 160);
  ASSERT_EQ(ring.points().size(), 16000u);
  const std::vector<double> shares = ring.shares();
  const double ring_max = *std::max_element(shares.begin(), shares.end()) * 100;
  const double ring_min = *std::min_element(shares.begin(), shares.end()) * 100;
  for (uint32_t table_size : {65537u, 655373u}) {
    const std::vector<uint32_t> slots = slotsPerBackend(ring.slotTable(table_size), 100);
    const double ideal = table_size / 100.0;
    const double table_max = *std::max_element(slots.begin(), slots.end()) / ideal;
    const double table_min = *std::min_element(slots.begin(), slots.end()) / ideal;
    EXPECT_NEAR(table_max, ring_max, 0.02) << "M=" << table_size;
    EXPECT_NEAR(table_min, ring_min, 0.02) << "M=" << table_size;
    // Sampling moves each of a backend's 160 arcs by less than a slot either way (variance
    // about 1/6 each): five standard deviations of the sum, whatever M.
    const double sampling = 5 * std::sqrt(160 / 6.0);
    for (size_t b = 0; b < 100; ++b) {
      EXPECT_NEAR(slots[b], shares[b] * table_size, sampling) << ring.backends()[b].name;
    }
  }
  // What 160 virtual nodes give: a max/ideal well above Maglev's 1.00.
  EXPECT_GT(ring_max, 1.05);
  EXPECT_LT(ring_max, 1.40);
  EXPECT_GT(ring_min, 0.65);
}

TEST(HashRingTest, LookupIsTheSlotTablesOwnerAtTheSlotsPosition) {
  const HashRing ring = *HashRing::build(named(10), 40);
  const std::vector<uint16_t> table = ring.slotTable(65537);
  for (uint32_t slot = 0; slot < 65537; slot += 97) {
    const auto position = static_cast<uint64_t>((Uint128{slot} << 64) / 65537);
    EXPECT_EQ(ring.lookup(position), table[slot]) << slot;
  }
  EXPECT_EQ(ring.lookup(ring.points().back().position + 1), ring.points().front().backend)
      << "past the last point wraps to the first";
}

TEST(HashRingTest, RemovingABackendMovesOnlyItsKeys) {
  std::vector<Backend> backends = named(50);
  const HashRing before = *HashRing::build(backends);
  backends.erase(backends.begin() + 17);
  const HashRing after = *HashRing::build(backends);
  const std::vector<std::string> old_owners = owners(before.slotTable(65537), before.backends());
  const std::vector<std::string> new_owners = owners(after.slotTable(65537), after.backends());
  size_t moved = 0;
  for (size_t slot = 0; slot < old_owners.size(); ++slot) {
    if (old_owners[slot] == "be-17") {
      ++moved;
    } else {
      EXPECT_EQ(new_owners[slot], old_owners[slot]) << slot;
    }
  }
  EXPECT_GT(moved, 65537u / 50 / 2);
}

TEST(HashRingTest, WeightScalesPointsAndDrainedBackendsOwnNothing) {
  const HashRing ring = *HashRing::build({{"a", 1}, {"b", 3}, {"c", 0}}, 100);
  EXPECT_EQ(ring.points().size(), 400u);
  const std::vector<double> shares = ring.shares();
  EXPECT_NEAR(shares[1] / shares[0], 3.0, 0.9) << "about three times the ring";
  EXPECT_EQ(shares[2], 0.0);
  const std::vector<uint32_t> slots = slotsPerBackend(ring.slotTable(65537), 3);
  EXPECT_EQ(slots[2], 0u);
}

TEST(HashRingTest, BadInputIsRefused) {
  EXPECT_FALSE(HashRing::build(named(3), 0).ok());
  EXPECT_FALSE(HashRing::build({{"a", 1}, {"a", 1}}).ok());
  EXPECT_FALSE(HashRing::build({{"a", 1'000'000}}, 10'000).ok()) << "too many points";
  const HashRing empty = *HashRing::build({});
  EXPECT_EQ(empty.lookup(42), kNoBackend);
  EXPECT_EQ(empty.slotTable(7), std::vector<uint16_t>(7, kNoBackend));
}

TEST(RendezvousTest, RemovingABackendMovesOnlyItsKeys) {
  std::vector<Backend> backends = named(20);
  const Rendezvous before = *Rendezvous::build(backends);
  backends.erase(backends.begin() + 5);
  const Rendezvous after = *Rendezvous::build(backends);
  const std::vector<std::string> old_owners = owners(before.slotTable(65537), before.backends());
  const std::vector<std::string> new_owners = owners(after.slotTable(65537), after.backends());
  for (size_t slot = 0; slot < old_owners.size(); ++slot) {
    if (old_owners[slot] != "be-5") {
      EXPECT_EQ(new_owners[slot], old_owners[slot]) << slot;
    }
  }
  // Equal weights: each of the 20 holds close to M/20.
  for (uint32_t count : slotsPerBackend(before.slotTable(65537), 20)) {
    EXPECT_NEAR(count, 65537 / 20.0, 65537 / 20.0 * 0.06);
  }
}

TEST(RendezvousTest, WeightsHoldWithinOnePercent) {
  const Rendezvous rendezvous = *Rendezvous::build({{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}});
  const std::vector<uint32_t> slots = slotsPerBackend(rendezvous.slotTable(kMaxTableSize), 4);
  for (size_t b = 0; b < 4; ++b) {
    const double ideal = kMaxTableSize * (b + 1) / 10.0;
    EXPECT_NEAR(slots[b] / ideal, 1.0, 0.01) << rendezvous.backends()[b].name;
  }
}

TEST(RendezvousTest, DrainedBackendsWinNothingAndNoneLeftMeansNoBackend) {
  const Rendezvous rendezvous = *Rendezvous::build({{"a", 2}, {"b", 0}, {"c", 1}});
  const std::vector<uint32_t> slots = slotsPerBackend(rendezvous.slotTable(65537), 3);
  EXPECT_EQ(slots[1], 0u);
  EXPECT_NEAR(static_cast<double>(slots[0]) / slots[2], 2.0, 0.1);
  EXPECT_EQ(Rendezvous::build({{"a", 0}})->lookup(1), kNoBackend);
}

// Each slot's backend name in a Table.
std::vector<std::string> tableOwners(const Table& table) {
  std::vector<std::string> names;
  for (uint16_t entry : table.entries()) {
    names.push_back(entry == kNoBackend ? "" : table.backends()[entry].name);
  }
  return names;
}

class AlgorithmTableTest : public testing::TestWithParam<Algorithm> {
 protected:
  TableOptions options(uint32_t table_size = 65537) const {
    return {.algorithm = GetParam(), .table_size = table_size, .ring_replicas = 100};
  }
};

TEST_P(AlgorithmTableTest, TheTableIsTheAlgorithmsOwnSlotTable) {
  // Input order never matters: the table sorts backends by name, as Maglev's does.
  std::vector<Backend> backends = {{"c", 3}, {"a", 1}, {"b", 2}};
  const Table table = *buildTable(backends, options());
  EXPECT_EQ(table.algorithm(), GetParam());
  ASSERT_EQ(table.backends().size(), 3u);
  EXPECT_EQ(table.backends()[0].name, "a");
  std::vector<uint16_t> expected;
  if (GetParam() == Algorithm::kRing) {
    EXPECT_EQ(table.ringReplicas(), 100u);
    expected = HashRing::build(backends, 100)->slotTable(65537);
  } else if (GetParam() == Algorithm::kRendezvous) {
    expected = Rendezvous::build(backends)->slotTable(65537);
  } else {
    const Table maglev = *build(backends, 65537);
    expected.assign(maglev.entries().begin(), maglev.entries().end());
  }
  EXPECT_EQ(std::vector<uint16_t>(table.entries().begin(), table.entries().end()), expected);
  EXPECT_EQ(optionsOf(table).algorithm, GetParam());
  EXPECT_EQ(optionsOf(table).table_size, 65537u);
}

TEST_P(AlgorithmTableTest, FailoverMovesOnlyTheFailedBackendsSlotsAndRecoveryRestoresAll) {
  const std::vector<Backend> backends = named(50);
  const Table full = *buildTable(backends, options());
  std::vector<bool> healthy(50, true);
  healthy[*full.indexOf("be-7")] = healthy[*full.indexOf("be-31")] = false;
  const Table failover = *withHealth(full, healthy);
  const std::vector<std::string> before = tableOwners(full);
  const std::vector<std::string> after = tableOwners(failover);
  uint32_t vacated = 0;
  for (size_t slot = 0; slot < before.size(); ++slot) {
    const bool was_failed = before[slot] == "be-7" || before[slot] == "be-31";
    vacated += was_failed;
    if (!was_failed) {
      EXPECT_EQ(after[slot], before[slot]) << slot;
    } else {
      EXPECT_NE(after[slot], before[slot]) << slot;
      EXPECT_NE(after[slot], "") << slot;
    }
  }
  EXPECT_GT(vacated, 0u);
  EXPECT_EQ(failover.slotCounts()[*full.indexOf("be-7")], 0u);
  EXPECT_EQ(failover.slotCounts()[*full.indexOf("be-31")], 0u);
  const Table recovered = *withHealth(failover, std::vector<bool>(50, true));
  EXPECT_EQ(tableOwners(recovered), before);
}

class StatelessAlgorithmTest : public AlgorithmTableTest {};

TEST_P(StatelessAlgorithmTest, FailoverIsTheTableOfTheHealthyBackendsAlone) {
  // What makes every instance agree, and a rebuild never move more than failover: the
  // incremental recomputation gives exactly what a build without the failed backends gives.
  // (Maglev's capped failover differs from its rebuild by design; table.h.)
  std::vector<Backend> backends = named(40);
  backends[3].weight = 3;
  backends[9].weight = 2;
  const Table full = *buildTable(backends, options());
  std::vector<bool> healthy(40, true);
  std::vector<Backend> survivors;
  for (size_t b = 0; b < 40; ++b) {
    healthy[b] = b % 7 != 2;
    if (healthy[b]) survivors.push_back(full.backends()[b]);
  }
  const Table failover = *withHealth(full, healthy);
  const Table rebuilt = *buildTable(survivors, options());
  EXPECT_EQ(tableOwners(failover), tableOwners(rebuilt));
}

TEST_P(AlgorithmTableTest, AllBackendsDownLeavesEverySlotWithoutABackend) {
  const Table full = *buildTable(named(4), options(101));
  const Table down = *withHealth(full, std::vector<bool>(4, false));
  for (uint16_t entry : down.entries()) EXPECT_EQ(entry, kNoBackend);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, AlgorithmTableTest,
                         testing::Values(Algorithm::kMaglev, Algorithm::kRing,
                                         Algorithm::kRendezvous),
                         [](const testing::TestParamInfo<Algorithm>& info) {
                           return std::string(toString(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(RingAndRendezvous, StatelessAlgorithmTest,
                         testing::Values(Algorithm::kRing, Algorithm::kRendezvous),
                         [](const testing::TestParamInfo<Algorithm>& info) {
                           return std::string(toString(info.param));
                         });

TEST(BuildTableTest, RingLimitsAreCheckedBeforeBuilding) {
  const TableOptions ring = {
      .algorithm = Algorithm::kRing, .table_size = 65537, .ring_replicas = 0};
  EXPECT_FALSE(validateTable(named(3), ring).ok());
  EXPECT_FALSE(buildTable(named(3), ring).ok());
  const TableOptions many = {
      .algorithm = Algorithm::kRing, .table_size = 65537, .ring_replicas = 10'000};
  const absl::Status status = validateTable({{"a", 10'000}}, many);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("ring points"), std::string::npos) << status;
  // The table-size rules are Maglev's for every algorithm: the loader checks one set.
  EXPECT_FALSE(
      validateTable(named(3), {.algorithm = Algorithm::kRendezvous, .table_size = 100}).ok());
}

TEST(BuildTableTest, AlgorithmNamesParseAndUnknownOnesAreNamed) {
  EXPECT_EQ(*parseAlgorithm("ring"), Algorithm::kRing);
  EXPECT_EQ(*parseAlgorithm("rendezvous"), Algorithm::kRendezvous);
  EXPECT_EQ(*parseAlgorithm("maglev"), Algorithm::kMaglev);
  const absl::StatusOr<Algorithm> bad = parseAlgorithm("jump");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("'jump'"), std::string::npos);
}

}  // namespace
}  // namespace berth
