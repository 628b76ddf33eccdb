#include "berth/dataplane/counters.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "support/counters.h"

namespace berth {
namespace {

TEST(CountersTest, SumsEveryWorkerByName) {
  WorkerCounters first;
  WorkerCounters second;
  first.rx_packets.add(3);
  second.rx_packets.add(4);
  first.count(ParseError::kShortFrame);
  second.count(ParseError::kShortFrame);
  second.count(DropReason::kNoService);
  const std::vector<const WorkerCounters*> workers = {&first, &second};
  const auto totals = sumCounters(workers);
  EXPECT_EQ(counterNamed(totals, "rx_packets"), 7u);
  EXPECT_EQ(counterNamed(totals, "parse_short_frame"), 2u);
  EXPECT_EQ(counterNamed(totals, "drop_no_service"), 1u);
  EXPECT_EQ(counterNamed(totals, "drop_no_backend"), 0u);
}

TEST(CountersTest, EveryCounterHasADistinctName) {
  WorkerCounters worker;
  const std::vector<const WorkerCounters*> workers = {&worker};
  const auto totals = sumCounters(workers);
  std::set<std::string> names;
  for (const auto& [name, value] : totals) names.insert(name);
  EXPECT_EQ(names.size(), totals.size());
  // Traffic (4), replies (2), idle sleeps (2), and one per reason, error, event and class.
  EXPECT_EQ(totals.size(), 8 + (kParseErrorCount - 1) + kDropReasonCount + kConntrackEventCount +
                               kNatEventCount + kNeighborRefusalCount + kExceptionClassCount);
  EXPECT_EQ(names.count("conntrack_evictions"), 1u);
  EXPECT_EQ(names.count("nat_ports_exhausted"), 1u);
  EXPECT_EQ(names.count("idle_sleep_us"), 1u);
}

TEST(CountersTest, WorkersDoNotShareCacheLines) {
  EXPECT_EQ(alignof(WorkerCounters), 64u);
  WorkerCounters workers[2];
  EXPECT_GE(reinterpret_cast<uintptr_t>(&workers[1]) - reinterpret_cast<uintptr_t>(&workers[0]),
            64u);
}

// One writer, one reader, as a worker and the management thread run: the reader sees the count
// only grow, and the final sum is exact.
TEST(CountersTest, ReaderSeesAMonotonicCountFromASingleWriter) {
  WorkerCounters worker;
  constexpr uint64_t kIncrements = 2'000'000;
  std::thread writer([&] {
    for (uint64_t i = 0; i < kIncrements; ++i) worker.rx_packets.add(1);
  });
  uint64_t last = 0;
  while (last < kIncrements) {
    const uint64_t now = worker.rx_packets.read();
    ASSERT_GE(now, last);
    last = now;
  }
  writer.join();
  EXPECT_EQ(worker.rx_packets.read(), kIncrements);
}

}  // namespace
}  // namespace berth
