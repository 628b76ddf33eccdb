#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/table.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

using ::testing::ElementsAre;

Table buildOrDie(std::vector<Backend> backends, uint32_t table_size) {
  absl::StatusOr<Table> table = build(std::move(backends), table_size);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

Table withHealthOrDie(const Table& table, const std::vector<bool>& healthy) {
  absl::StatusOr<Table> result = withHealth(table, healthy);
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

std::vector<std::string> ownerNames(const Table& table) {
  std::vector<std::string> names;
  for (uint16_t entry : table.entries()) {
    names.push_back(entry == kNoBackend ? "-" : table.backends()[entry].name);
  }
  return names;
}

// The paper's example with B1 down. B1 owned slots 0 and 2. Slot 0 is B0's 2nd preference and
// B2's 5th, and slot 2 is B0's 6th and B2's 7th, so B0 takes both: in a 7-slot table the cap's
// room of 9.5 slots is out of reach, and ranks alone decide. B0 and B2 keep every slot they had.
TEST(MaglevFailoverTest, PaperExampleWithB1Down) {
  absl::StatusOr<Table> full =
      buildWithPermutations({{"B0", 1}, {"B1", 1}, {"B2", 1}}, {{3, 4}, {0, 2}, {3, 1}}, 7);
  ASSERT_TRUE(full.ok()) << full.status();
  const Table failover = withHealthOrDie(*full, {true, false, true});
  EXPECT_THAT(ownerNames(failover), ElementsAre("B0", "B0", "B0", "B0", "B2", "B2", "B0"));
}

TEST(MaglevFailoverTest, OneFailureMovesExactlyTheFailedBackendsSlots) {
  for (auto [backend_count, table_size] : {std::pair{4, 65537u}, {100, 65537u}, {1000, 655373u}}) {
    const Table full = buildOrDie(equalBackends(backend_count), table_size);
    const uint16_t failed = static_cast<uint16_t>(backend_count / 2);
    std::vector<bool> healthy(backend_count, true);
    healthy[failed] = false;
    const Table failover = withHealthOrDie(full, healthy);
    for (uint32_t slot = 0; slot < table_size; ++slot) {
      const uint16_t before = full.entries()[slot];
      const uint16_t after = failover.entries()[slot];
      if (before == failed) {
        ASSERT_NE(after, failed);
        ASSERT_NE(after, kNoBackend);
      } else {
        ASSERT_EQ(after, before) << "slot " << slot << " of a healthy backend moved";
      }
    }
  }
}

// Backends fail one after another (10% of them, in random order). Each step may move at most 1.1
// times the slots that the newly failed backend held just before, inherited ones included, and
// balance stays within the bound: 1.03 where each backend has hundreds of slots, and 1.15 for
// 1,000 backends at M = 65537, where each has 65 and a stable table cannot balance that finely.
class MaglevFailureSequenceTest
    : public ::testing::TestWithParam<std::tuple<size_t, uint32_t, double, uint32_t>> {};

TEST_P(MaglevFailureSequenceTest, EachStepMovesLittleMoreThanTheNewlyFailedSlots) {
  const auto [backend_count, table_size, max_over_ideal, order_seed] = GetParam();
  const Table full = buildOrDie(equalBackends(backend_count), table_size);
  std::vector<uint16_t> order(backend_count);
  std::iota(order.begin(), order.end(), uint16_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(order_seed));
  const size_t failures = std::max<size_t>(1, backend_count / 10);

  std::vector<bool> healthy(backend_count, true);
  Table previous = full;
  double worst_ratio = 0;
  for (size_t step = 0; step < failures; ++step) {
    const uint16_t failed = order[step];
    const uint32_t newly_vacated = previous.slotCounts()[failed];
    healthy[failed] = false;
    const Table current = withHealthOrDie(full, healthy);
    const uint32_t changed = slotsChanged(previous, current);
    ASSERT_GE(changed, newly_vacated);
    ASSERT_LE(changed, 1.1 * newly_vacated) << "step " << step;
    worst_ratio = std::max(worst_ratio, static_cast<double>(changed) / newly_vacated);
    // Backends that were already down stay at zero slots.
    const std::vector<uint32_t> counts = current.slotCounts();
    for (size_t i = 0; i < backend_count; ++i) {
      if (!healthy[i]) {
        ASSERT_EQ(counts[i], 0u);
      }
    }
    const BalanceStats balance = balanceOf(current);
    ASSERT_LE(balance.max_over_ideal, max_over_ideal) << "step " << step;
    previous = current;
  }
  RecordProperty("worst_changed_over_vacated", absl::StrFormat("%.4f", worst_ratio));
  RecordProperty("final_max_over_ideal",
                 absl::StrFormat("%.4f", balanceOf(previous).max_over_ideal));
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, MaglevFailureSequenceTest,
    ::testing::Values(std::tuple{4, 65537u, 1.03, 42u}, std::tuple{100, 65537u, 1.03, 42u},
                      std::tuple{100, 65537u, 1.03, 7u}, std::tuple{1000, 655373u, 1.03, 42u},
                      std::tuple{1000, 65537u, 1.15, 42u}, std::tuple{1000, 65537u, 1.15, 7u}));

TEST(MaglevFailoverTest, RecoveryRestoresTheOriginalTableExactly) {
  const Table full = buildOrDie(equalBackends(100), 65537);
  std::vector<bool> healthy(100, true);
  for (size_t i : {3, 17, 42, 99}) healthy[i] = false;
  const Table degraded = withHealthOrDie(full, healthy);
  ASSERT_GT(slotsChanged(full, degraded), 0u);
  const Table recovered = withHealthOrDie(degraded, std::vector<bool>(100, true));
  EXPECT_TRUE(std::equal(recovered.entries().begin(), recovered.entries().end(),
                         full.entries().begin(), full.entries().end()));
}

// The result depends only on which backends are healthy, not on the path that led there, so any
// two instances that agree on health agree on the table.
TEST(MaglevFailoverTest, ResultIsAPureFunctionOfTheHealthySet) {
  const Table full = buildOrDie(equalBackends(50), 65537);
  std::vector<bool> a_down(50, true);
  a_down[10] = false;
  std::vector<bool> b_down(50, true);
  b_down[20] = false;
  std::vector<bool> both_down = a_down;
  both_down[20] = false;
  const Table via_a = withHealthOrDie(withHealthOrDie(full, a_down), both_down);
  const Table via_b = withHealthOrDie(withHealthOrDie(full, b_down), both_down);
  const Table direct = withHealthOrDie(full, both_down);
  EXPECT_EQ(slotsChanged(via_a, direct), 0u);
  EXPECT_EQ(slotsChanged(via_b, direct), 0u);
}

TEST(MaglevFailoverTest, WeightedSharesFollowWeightsAmongTheHealthy) {
  std::vector<Backend> backends = equalBackends(20);
  for (size_t i = 0; i < backends.size(); ++i) backends[i].weight = static_cast<int64_t>(i % 4) + 1;
  const Table full = buildOrDie(backends, 65537);
  std::vector<bool> healthy(20, true);
  healthy[1] = healthy[6] = false;
  const BalanceStats balance = balanceOf(withHealthOrDie(full, healthy));
  EXPECT_EQ(balance.serving, 18u);
  EXPECT_LE(balance.max_over_ideal, 1.03);
  EXPECT_GE(balance.min_over_ideal, 0.97);
}

TEST(MaglevFailoverTest, DrainedBackendsTakeNoVacatedSlots) {
  std::vector<Backend> backends = equalBackends(5);
  backends[0].weight = 0;
  const Table full = buildOrDie(backends, 65537);
  const Table failover = withHealthOrDie(full, {true, false, true, true, true});
  const std::vector<uint32_t> counts = failover.slotCounts();
  EXPECT_EQ(counts[0], 0u);
  EXPECT_EQ(counts[1], 0u);
  EXPECT_EQ(counts[2] + counts[3] + counts[4], 65537u);
}

// A drain gives up exactly the drained backend's slots, as a failure does; no other backend's
// slot moves. 1,000 backends at the default M and at M = 655373.
TEST(MaglevDrainTest, DrainingOneOfAThousandMovesExactlyItsSlots) {
  for (uint32_t table_size : {65537u, 655373u}) {
    const Table full = buildOrDie(equalBackends(1000), table_size);
    std::vector<bool> drained(1000, false);
    drained[417] = true;
    const Table after = *withHealth(full, std::vector<bool>(1000, true), drained);
    EXPECT_EQ(slotsChanged(full, after), full.slotCounts()[417]) << "M=" << table_size;
    EXPECT_EQ(after.slotCounts()[417], 0u);
    EXPECT_TRUE(after.drained()[417]);
    EXPECT_TRUE(after.healthy()[417]);
    EXPECT_FALSE(after.serves(417));
  }
}

// Drains, undrains, failures and recoveries in any order give the table computed from the final
// sets alone, so instances that agree on the sets agree on every slot; undrain restores exactly.
TEST(MaglevDrainTest, TableIsAPureFunctionOfTheHealthyAndDrainedSets) {
  const Table full = buildOrDie(equalBackends(1000), 65537);
  const std::vector<bool> all_up(1000, true);
  std::vector<bool> drained(1000, false);
  drained[3] = true;
  const Table drained_only = *withHealth(full, all_up, drained);
  std::vector<bool> healthy = all_up;
  healthy[600] = false;
  // Drain, then a failure: equal to the table from both sets, and the failure moved only what
  // backend 600 held.
  const Table drain_then_fail = *withHealth(drained_only, healthy, drained);
  const Table fail_only = *withHealth(full, healthy);
  const Table fail_then_drain = *withHealth(fail_only, healthy, drained);
  EXPECT_EQ(slotsChanged(drain_then_fail, fail_then_drain), 0u);
  EXPECT_EQ(slotsChanged(drained_only, drain_then_fail), drained_only.slotCounts()[600]);
  // Undrain with the failure still in place gives the failure's table; recovery then the full one.
  const Table undrained = *withHealth(drain_then_fail, healthy, std::vector<bool>(1000, false));
  EXPECT_EQ(slotsChanged(undrained, fail_only), 0u);
  const Table recovered = *withHealth(undrained, all_up);
  EXPECT_TRUE(std::equal(recovered.entries().begin(), recovered.entries().end(),
                         full.entries().begin(), full.entries().end()));
}

TEST(MaglevDrainTest, DrainFlagsMustMatchTheBackendCount) {
  const Table full = buildOrDie(equalBackends(3), 65537);
  absl::StatusOr<Table> result = withHealth(full, {true, true, true}, {true});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("drain flags for 1 backends"));
}

TEST(MaglevFailoverTest, NoHealthyBackendMapsEverySlotToNoBackend) {
  const Table full = buildOrDie(equalBackends(3), 65537);
  const Table failover = withHealthOrDie(full, {false, false, false});
  EXPECT_EQ(std::count(failover.entries().begin(), failover.entries().end(), kNoBackend), 65537);
}

// withHealth() has two ways to compute one result: walking rounds of preference lists, or ranking
// each vacated slot in every list. They must agree slot for slot, caps and weights included.
TEST(MaglevFailoverTest, BothStrategiesGiveTheIdenticalTable) {
  std::mt19937 random(11);
  for (int round = 0; round < 60; ++round) {
    const size_t backend_count = std::vector<size_t>{2, 3, 7, 20, 200}[round % 5];
    const uint32_t table_size = round % 3 == 0 ? 1009 : 65537;
    std::vector<Backend> backends = equalBackends(backend_count);
    if (round % 2 == 1) {
      for (Backend& backend : backends) backend.weight = static_cast<int64_t>(random() % 6);
    }
    absl::StatusOr<Table> full = build(backends, table_size);
    ASSERT_TRUE(full.ok()) << full.status();
    std::vector<bool> healthy(backend_count);
    const uint32_t failure_percent = 5 + random() % 60;
    for (size_t i = 0; i < backend_count; ++i) healthy[i] = random() % 100 >= failure_percent;
    const Table by_rounds = *withHealth(*full, healthy, FailoverStrategy::kByRounds);
    const Table by_slots = *withHealth(*full, healthy, FailoverStrategy::kBySlots);
    ASSERT_TRUE(std::equal(by_rounds.entries().begin(), by_rounds.entries().end(),
                           by_slots.entries().begin(), by_slots.entries().end()))
        << "round " << round << ": N=" << backend_count << " M=" << table_size;
  }
}

TEST(MaglevFailoverTest, HealthFlagsMustMatchTheBackendCount) {
  const Table full = buildOrDie(equalBackends(3), 65537);
  absl::StatusOr<Table> result = withHealth(full, {true, false});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("health flags for 2 backends"));
}

}  // namespace
}  // namespace berth
