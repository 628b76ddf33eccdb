// Table generations (maglev/table.h nextGeneration()). Pinned, at N=100 with M=65537 and N=1,000
// with M=655373 (M >= 100 * N), and N=1,000 with M=65537 for the movement alone:
// - an added backend takes exactly its quota, a weight change moves exactly the quota
//   differences, a drained or failed backend's slots and nothing else go to the survivors, and
//   its return takes back exactly its quota: each within 1.1x the least (berthctl analyze's
//   measure), with a full rebuild's figures printed beside them for the record;
// - every serving backend ends holding exactly its quota, as build() gives it;
// - a chain of random steps (add, remove, reweight, drain, fail, recover) moves exactly the least
//   at each step, counted independently, and keeps max/ideal within 1.03;
// - the result is a pure function of the previous generation and the inputs;
// - a table of another algorithm is refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/table.h"

namespace berth {
namespace {

std::vector<Backend> backendsOf(size_t count) {
  std::vector<Backend> backends;
  for (size_t i = 0; i < count; ++i) backends.push_back({absl::StrCat("backend-", i), 1});
  return backends;
}

std::map<std::string, uint32_t> countsByName(const Table& table) {
  std::map<std::string, uint32_t> counts;
  const std::vector<uint32_t> slots = table.slotCounts();
  for (size_t b = 0; b < slots.size(); ++b) counts[table.backends()[b].name] = slots[b];
  return counts;
}

// The least any table could move to give each backend `after`'s counts: what each backend loses.
uint32_t leastMoved(const Table& before, const Table& after) {
  const std::map<std::string, uint32_t> was = countsByName(before);
  std::map<std::string, uint32_t> now = countsByName(after);
  uint32_t least = 0;
  for (const auto& [name, count] : was) least += count > now[name] ? count - now[name] : 0;
  return least;
}

struct Size {
  size_t backends;
  uint32_t table_size;
  // Within one slot of its quota, a backend is within 1.03 of its ideal once M >= 100 * N.
  bool balanced_within_3_percent;
};

class GenerationTest : public testing::TestWithParam<Size> {};

TEST_P(GenerationTest, EachChangeMovesTheLeast) {
  const auto [count, table_size, balanced] = GetParam();
  (void)balanced;
  std::vector<Backend> backends = backendsOf(count);
  const Table first = *build(backends, table_size);

  // Added.
  std::vector<Backend> added = backends;
  added.push_back({"backend-new", 1});
  const Table with_added = *nextGeneration(first, added, {}, {});
  const Table rebuilt_added = *build(added, table_size);
  EXPECT_EQ(with_added.slotCounts(), rebuilt_added.slotCounts());
  const TableMovement add = configMovement(first, with_added);
  EXPECT_LE(add.movedOverMinimum(), 1.1);
  EXPECT_EQ(slotsChanged(first, with_added),
            with_added.slotCounts()[*with_added.indexOf("backend-new")]);

  // Reweighted.
  std::vector<Backend> reweighted = backends;
  reweighted[count / 2].weight = 3;
  const Table with_weight = *nextGeneration(first, reweighted, {}, {});
  EXPECT_EQ(with_weight.slotCounts(), build(reweighted, table_size)->slotCounts());
  const TableMovement weight = configMovement(first, with_weight);
  EXPECT_LE(weight.movedOverMinimum(), 1.1);

  // Drained, then undrained.
  const std::string drained_name = backends[count / 3].name;
  const Table with_drain = *nextGeneration(first, backends, {}, {drained_name});
  const uint32_t drained_slots = first.slotCounts()[*first.indexOf(drained_name)];
  EXPECT_EQ(slotsChanged(first, with_drain), drained_slots);
  EXPECT_EQ(with_drain.slotCounts()[*with_drain.indexOf(drained_name)], 0u);
  EXPECT_TRUE(with_drain.drained()[*with_drain.indexOf(drained_name)]);
  const Table undrained = *nextGeneration(with_drain, backends, {}, {});
  EXPECT_EQ(slotsChanged(with_drain, undrained), drained_slots);

  // Failed: as drained, with the backend marked unhealthy.
  const Table with_failure = *nextGeneration(first, backends, {drained_name}, {});
  EXPECT_EQ(slotsChanged(first, with_failure), drained_slots);
  EXPECT_FALSE(with_failure.healthy()[*with_failure.indexOf(drained_name)]);

  // The same changes by a full rebuild, printed for the record.
  const TableMovement rebuild_add = configMovement(first, rebuilt_added);
  const TableMovement rebuild_weight = configMovement(first, *build(reweighted, table_size));
  std::printf(
      "N=%zu M=%u moved/least: add %.3f (rebuild %.2f), reweight %.3f (rebuild %.2f), drain "
      "%u of %u slots (%.3f)\n",
      count, table_size, add.movedOverMinimum(), rebuild_add.movedOverMinimum(),
      weight.movedOverMinimum(), rebuild_weight.movedOverMinimum(), slotsChanged(first, with_drain),
      drained_slots, double(slotsChanged(first, with_drain)) / drained_slots);
}

TEST_P(GenerationTest, RandomStepsMoveExactlyTheLeastAndStayBalanced) {
  const auto [count, table_size, balanced] = GetParam();
  std::mt19937 random(7);
  std::vector<Backend> backends = backendsOf(count);
  std::set<std::string> failed, drained;
  size_t next_name = count;
  Table table = *build(backends, table_size);
  for (int step = 0; step < 30; ++step) {
    switch (random() % 6) {
      case 0:
        backends.push_back({absl::StrCat("backend-", next_name++), 1 + int64_t(random() % 3)});
        break;
      case 1:
        if (backends.size() > count / 2)
          backends.erase(backends.begin() + random() % backends.size());
        break;
      case 2:
        backends[random() % backends.size()].weight = 1 + random() % 4;
        break;
      case 3:
        drained.insert(backends[random() % backends.size()].name);
        break;
      case 4:
        failed.insert(backends[random() % backends.size()].name);
        break;
      default:
        if (!failed.empty()) failed.erase(failed.begin());
        if (!drained.empty()) drained.erase(drained.begin());
    }
    const Table next = *nextGeneration(table, backends, {failed.begin(), failed.end()},
                                       {drained.begin(), drained.end()});
    ASSERT_EQ(slotsChanged(table, next), leastMoved(table, next)) << "step " << step;
    if (balanced) {
      ASSERT_LE(balanceOf(next).max_over_ideal, 1.03) << "step " << step;
    }
    for (uint32_t slot = 0; slot < table_size; ++slot) ASSERT_NE(next.entries()[slot], kNoBackend);
    table = next;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, GenerationTest,
                         testing::Values(Size{100, 65537, true}, Size{1000, 655373, true},
                                         Size{1000, 65537, false}),
                         [](const testing::TestParamInfo<Size>& info) {
                           return absl::StrCat("N", info.param.backends, "M",
                                               info.param.table_size);
                         });

TEST(GenerationDeterminismTest, APureFunctionOfThePreviousGenerationAndTheInputs) {
  const Table first = *build(backendsOf(50), 65537);
  std::vector<Backend> next = backendsOf(51);
  std::reverse(next.begin(), next.end());
  const Table a = *nextGeneration(first, next, {"backend-3"}, {"backend-7"});
  const Table b = *nextGeneration(first, backendsOf(51), {"backend-3"}, {"backend-7"});
  EXPECT_TRUE(std::equal(a.entries().begin(), a.entries().end(), b.entries().begin()));
}

TEST(GenerationDeterminismTest, OnlyMaglevTablesHaveGenerations) {
  TableOptions options;
  options.algorithm = Algorithm::kRing;
  const Table ring = *buildTable(backendsOf(5), options);
  EXPECT_EQ(nextGeneration(ring, backendsOf(5), {}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth
