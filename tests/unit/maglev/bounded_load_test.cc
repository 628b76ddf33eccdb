#include "berth/maglev/consistent_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/maglev/consistent_hash.h"
#include "support/maglev_backends.h"

namespace berth {
namespace {

// Flows placed one at a time by boundedLoadChoice(), with exact counts: what a single worker
// does, and what every worker does between two publications of the counts.
class Placement {
 public:
  Placement(const Table& table, double bound) : table_(table), bound_(bound) {
    load_.assign(table.backends().size(), 0);
    for (const Backend& backend : table.backends()) {
      total_weight_ += static_cast<double>(backend.weight);
    }
  }

  uint16_t place(uint32_t slot) {
    const double total_and_this_one = static_cast<double>(total_) + 1;
    const uint16_t backend =
        boundedLoadChoice(table_.entries().data(), table_.size(), slot, [&](uint16_t entry) {
          const double share =
              bound_ * static_cast<double>(table_.backends()[entry].weight) / total_weight_;
          return static_cast<double>(load_[entry]) < share * total_and_this_one;
        });
    ++load_[backend];
    ++total_;
    return backend;
  }
  // The highest load over C times the backend's weighted mean.
  double worstExcess() const {
    double worst = -1e9;
    for (size_t b = 0; b < load_.size(); ++b) {
      const double mean = static_cast<double>(total_) *
                          static_cast<double>(table_.backends()[b].weight) / total_weight_;
      worst = std::max(worst, static_cast<double>(load_[b]) - bound_ * mean);
    }
    return worst;
  }
  const std::vector<uint32_t>& load() const { return load_; }

 private:
  const Table& table_;
  double bound_;
  double total_weight_ = 0;
  std::vector<uint32_t> load_;
  uint64_t total_ = 0;
};

// Slots skewed as a heavy hitter skews them: half the new flows land on 8 hot slots.
std::vector<uint32_t> skewedSlots(uint32_t table_size, size_t count) {
  std::mt19937_64 random(42);
  std::uniform_int_distribution<uint32_t> any(0, table_size - 1);
  std::vector<uint32_t> hot;
  for (int i = 0; i < 8; ++i) hot.push_back(any(random));
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < count; ++i) slots.push_back(i % 2 == 0 ? hot[i % 8] : any(random));
  return slots;
}

class BoundedLoadTest : public testing::TestWithParam<Algorithm> {};

TEST_P(BoundedLoadTest, SkewedNewFlowsNeverPutABackendOverTheBoundPlusOne) {
  std::vector<Backend> backends = equalBackends(20);
  for (size_t b = 0; b < backends.size(); ++b) backends[b].weight = 1 + static_cast<int64_t>(b % 3);
  const Table table = *buildTable(backends, {.algorithm = GetParam(), .table_size = 65537});
  for (double bound : {1.05, 1.25, 2.0}) {
    Placement placement(table, bound);
    for (uint32_t slot : skewedSlots(table.size(), 50'000)) {
      placement.place(slot);
      ASSERT_LE(placement.worstExcess(), 1.0) << "C=" << bound;
    }
  }
}

TEST_P(BoundedLoadTest, ABackendUnderItsBoundKeepsTheTablesPick) {
  // With no skew and C = 2, nobody reaches the bound after the first few flows: the choice is
  // the table's own pick, so bounded load changes nothing until load is uneven.
  const Table table = *buildTable(equalBackends(10), {.algorithm = GetParam(), .table_size = 4099});
  Placement placement(table, 2.0);
  std::mt19937_64 random(7);
  std::uniform_int_distribution<uint32_t> any(0, table.size() - 1);
  uint32_t elsewhere = 0;
  for (int i = 0; i < 20'000; ++i) {
    const uint32_t slot = any(random);
    elsewhere += placement.place(slot) != table.entries()[slot];
  }
  EXPECT_LT(elsewhere, 20u);
}

TEST_P(BoundedLoadTest, InstancesWithTheSameCountsMakeTheSameChoices) {
  // Two instances build their tables apart from the same config and see the same counts.
  const std::vector<Backend> backends = equalBackends(12);
  const Table first = *buildTable(backends, {.algorithm = GetParam(), .table_size = 4099});
  const Table second = *buildTable(backends, {.algorithm = GetParam(), .table_size = 4099});
  Placement one(first, 1.1);
  Placement other(second, 1.1);
  for (uint32_t slot : skewedSlots(first.size(), 20'000)) {
    ASSERT_EQ(first.backends()[one.place(slot)].name, second.backends()[other.place(slot)].name);
  }
  EXPECT_EQ(one.load(), other.load());
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, BoundedLoadTest,
                         testing::Values(Algorithm::kMaglev, Algorithm::kRing,
                                         Algorithm::kRendezvous),
                         [](const testing::TestParamInfo<Algorithm>& info) {
                           return std::string(toString(info.param));
                         });

TEST(BoundedLoadChoiceTest, TheFallbackOrderIsTheSlotsThatFollowWrapping) {
  const uint16_t entries[] = {0, 1, 1, 2, kNoBackend, 3, 0};
  auto accepting = [](std::vector<uint16_t> open) {
    return
        [open](uint16_t entry) { return std::find(open.begin(), open.end(), entry) != open.end(); };
  };
  EXPECT_EQ(boundedLoadChoice(entries, 7, 1, accepting({1, 2, 3})), 1);  // its own pick
  EXPECT_EQ(boundedLoadChoice(entries, 7, 1, accepting({2, 3})), 2);     // slots 2, then 3
  EXPECT_EQ(boundedLoadChoice(entries, 7, 3, accepting({3})), 3);        // past the empty slot 4
  EXPECT_EQ(boundedLoadChoice(entries, 7, 5, accepting({1})), 1);        // wraps past slot 6 to 1
  // Nobody under the bound: the table's pick stands.
  EXPECT_EQ(boundedLoadChoice(entries, 7, 3, accepting({})), 2);
}

}  // namespace
}  // namespace berth
