#include "maglev/probe.h"

#include <gtest/gtest.h>

#include <random>

#include "maglev/slot_bitmap.h"

namespace berth {
namespace {

// The plain definition: walk the list one position at a time.
uint32_t walkToFreeSlot(const SlotBitmap& taken, uint32_t start, uint32_t skip, uint32_t size) {
  uint32_t slot = start;
  while (taken.test(slot)) slot = advance(slot, skip, size);
  return slot;
}

// Both probing strategies must find exactly the slot a one-at-a-time walk finds, from nearly
// empty to nearly full tables, including lists that wrap around M many times.
TEST(ProbeTest, FastProbesFindTheSameSlotAsAPlainWalk) {
  std::mt19937 random(5);
  for (uint32_t size : {7u, 1009u, 65537u}) {
    for (double fill : {0.0, 0.5, 0.9, 0.99, 0.999}) {
      SlotBitmap taken(size);
      uint32_t free_count = size;
      for (uint32_t slot = 0; slot < size; ++slot) {
        if (std::uniform_real_distribution<double>(0, 1)(random) < fill && free_count > 1) {
          taken.set(slot);
          --free_count;
        }
      }
      for (int trial = 0; trial < 200; ++trial) {
        const uint32_t skip = 1 + random() % (size - 1);
        const uint32_t start = random() % size;
        const ProbeStrides strides = probeStrides(skip, size);
        const uint32_t expected = walkToFreeSlot(taken, start, skip, size);
        ASSERT_EQ(firstFreeSlot(taken, start, strides, size), expected) << size << " " << fill;
        if (cpuHasAvx2()) {
          ASSERT_EQ(firstFreeSlotAvx2(taken, start, strides, size), expected)
              << size << " " << fill;
        }
      }
    }
  }
}

TEST(ProbeTest, StridesAreMultiplesOfSkipModuloM) {
  const ProbeStrides strides = probeStrides(5, 7);
  EXPECT_EQ(strides, (ProbeStrides{5, 3, 1, 6}));
}

// A slot's rank in a list is its position: rank(offset + j * skip) == j for every j.
TEST(PreferenceRankTest, RankInvertsThePermutation) {
  std::mt19937 random(9);
  for (uint32_t size : {7u, 65537u, 655373u, 16777213u}) {
    const PreferenceRank ranks(size);
    for (int trial = 0; trial < 20; ++trial) {
      const uint32_t offset = random() % size;
      const uint32_t skip = 1 + random() % (size - 1);
      const uint32_t inverse = ranks.inverse(skip);
      ASSERT_EQ(uint64_t{skip} * inverse % size, 1u);
      const RankedList list = ranks.prepare(offset, inverse);
      uint32_t slot = offset;
      for (uint32_t position = 0; position < std::min(size, 5000u); ++position) {
        ASSERT_EQ(ranks.rank(slot, list), position);
        slot = advance(slot, skip, size);
      }
      // The last positions of the list, where the 64-bit fraction comes closest to wrapping.
      slot = offset;
      for (uint32_t back = 1; back <= std::min(size - 1, 5000u); ++back) {
        slot = slot >= skip ? slot - skip : slot + size - skip;
        ASSERT_EQ(ranks.rank(slot, list), size - back);
      }
    }
  }
}

TEST(PreferenceRankTest, BatchInversesEqualSingleInverses) {
  std::mt19937 random(2);
  for (uint32_t size : {7u, 65537u, 16777213u}) {
    const PreferenceRank ranks(size);
    std::vector<uint32_t> skips;
    for (int i = 0; i < 1000; ++i) skips.push_back(1 + random() % (size - 1));
    const std::vector<uint32_t> inverses = ranks.inverses(skips);
    for (size_t i = 0; i < skips.size(); ++i) ASSERT_EQ(inverses[i], ranks.inverse(skips[i]));
  }
  EXPECT_TRUE(PreferenceRank(7).inverses({}).empty());
}

TEST(PreferenceRankTest, ReduceIsExactUpToTwoToThe49) {
  std::mt19937_64 random(4);
  for (uint32_t size : {7u, 65537u, 16777213u}) {
    const PreferenceRank ranks(size);
    for (uint64_t value :
         {uint64_t{0}, uint64_t{size} - 1, uint64_t{size}, (uint64_t{1} << 49) - 1}) {
      ASSERT_EQ(ranks.reduce(value), value % size);
    }
    for (int trial = 0; trial < 100000; ++trial) {
      const uint64_t value = random() >> 15;
      ASSERT_EQ(ranks.reduce(value), value % size);
    }
  }
}

}  // namespace
}  // namespace berth
