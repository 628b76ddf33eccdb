// The peers' flows as workers read them (dataplane/peer_flows.h). Pinned:
// - every flow built in is found, under its own key only, until it expires (the clock wraps);
// - keys that differ only in source port, service or one address byte are kept apart;
// - a repeated key keeps its first flow; an empty map finds nothing;
// - at most half full, 100,000 flows sit at most a few buckets past their own;
// - the buckets' hints hold every flow and rule out at least 9 in 10 absent keys, so that a
//   lookup that misses seldom reads a bucket;
// - flows of one bucket past its room are found in the buckets after it, and keys absent from
//   both buckets are not found.

#include "berth/dataplane/peer_flows.h"

#include <gtest/gtest.h>

#include <vector>

namespace berth {
namespace {

const ConnectionHashKey kKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb,
                              0x2545f4914f6cdd1d, 0xd6e8feb86659fd93, 0xa0761d6478bd642f}};

PeerFlow flowOf(uint32_t i, uint32_t expires_ms = 100'000) {
  PeerFlow flow;
  flow.source = {198, 18, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8)};
  flow.source_port = static_cast<uint16_t>(i);
  flow.service = static_cast<uint16_t>(i % 3);
  flow.backend = static_cast<uint16_t>(i % 1000);
  flow.state = ConnectionState::kTcpEstablished;
  flow.expires_ms = expires_ms;
  return flow;
}

ConnectionKey keyOf(const PeerFlow& flow) {
  ConnectionKey key;
  key.source = flow.source;
  key.source_port = flow.source_port;
  key.service = flow.service;
  return key;
}

const PeerFlow* find(const PeerFlows& map, const ConnectionKey& key, uint32_t now_ms) {
  return map.find(key, map.hash(key.source, key.source_port, key.service), now_ms);
}

TEST(PeerFlows, EveryFlowIsFoundUnderItsKeyUntilItExpires) {
  std::vector<PeerFlow> flows;
  for (uint32_t i = 0; i < 100'000; ++i) flows.push_back(flowOf(i));
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build(flows, kKey);
  EXPECT_EQ(map->size(), flows.size());
  EXPECT_GE(map->bucketCount() * PeerFlows::kWaysPerBucket, 2 * flows.size());
  EXPECT_LE(map->longestRun(), 8u);
  for (const PeerFlow& flow : flows) {
    const PeerFlow* found = find(*map, keyOf(flow), 99'999);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->backend, flow.backend);
    EXPECT_EQ(find(*map, keyOf(flow), 100'000), nullptr) << "expired";
  }
}

TEST(PeerFlows, HintsHoldEveryFlowAndRuleOutMostAbsentKeys) {
  std::vector<PeerFlow> flows;
  for (uint32_t i = 0; i < 100'000; ++i) flows.push_back(flowOf(i));
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build(flows, kKey);
  auto hashOf = [&map](const PeerFlow& flow) {
    return map->hash(flow.source, flow.source_port, flow.service);
  };
  for (const PeerFlow& flow : flows) ASSERT_TRUE(map->mayHold(hashOf(flow)));
  uint32_t let_through = 0;
  constexpr uint32_t kAbsent = 100'000;
  for (uint32_t i = 0; i < kAbsent; ++i) {
    const PeerFlow absent = flowOf(1'000'000 + i);
    ASSERT_EQ(find(*map, keyOf(absent), 1), nullptr);
    if (map->mayHold(hashOf(absent))) ++let_through;
  }
  EXPECT_LT(let_through, kAbsent / 10);
}

TEST(PeerFlows, KeysThatDifferInOneFieldAreApart) {
  const PeerFlow flow = flowOf(7);
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build({&flow, 1}, kKey);
  ConnectionKey key = keyOf(flow);
  ASSERT_NE(find(*map, key, 0), nullptr);
  ConnectionKey other_port = key;
  other_port.source_port ^= 1;
  ConnectionKey other_service = key;
  other_service.service ^= 1;
  ConnectionKey other_address = key;
  other_address.source[15] = 1;
  for (const ConnectionKey& other : {other_port, other_service, other_address}) {
    EXPECT_EQ(find(*map, other, 0), nullptr);
  }
}

TEST(PeerFlows, TheClockWrapsAndARepeatKeepsTheFirst) {
  PeerFlow first = flowOf(1, 5);  // past the wrap of a clock now near its end
  first.backend = 11;
  PeerFlow repeat = first;
  repeat.backend = 22;
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build({first, repeat}, kKey);
  EXPECT_EQ(map->size(), 1u);
  const PeerFlow* found = find(*map, keyOf(first), UINT32_MAX - 10);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->backend, 11);
  EXPECT_EQ(find(*map, keyOf(first), 5), nullptr);
}

TEST(PeerFlows, FlowsPastAFullBucketAreFoundAndAbsentKeysAreNot) {
  // Eight flows make 8 buckets; pick five flows of one bucket, and one of the bucket after.
  const std::unique_ptr<const PeerFlows> probe =
      PeerFlows::build(std::vector<PeerFlow>(8, flowOf(0)), kKey);
  const size_t buckets = 8;
  auto bucketOf = [&](const PeerFlow& flow) {
    return probe->hash(flow.source, flow.source_port, flow.service) & (buckets - 1);
  };
  std::vector<PeerFlow> same_bucket;
  std::vector<PeerFlow> next_bucket;
  for (uint32_t i = 1; same_bucket.size() < 5 || next_bucket.size() < 2; ++i) {
    const PeerFlow flow = flowOf(i);
    if (bucketOf(flow) == 3 && same_bucket.size() < 5) same_bucket.push_back(flow);
    if (bucketOf(flow) == 4 && next_bucket.size() < 2) next_bucket.push_back(flow);
  }
  // Three of bucket 3 (one spills into 4), then one of bucket 4 (which spills into 5).
  std::vector<PeerFlow> flows = {same_bucket[0],  same_bucket[1],  same_bucket[2],
                                 next_bucket[0],  flowOf(100'000), flowOf(100'001),
                                 flowOf(100'002), flowOf(100'003)};
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build(flows, kKey);
  ASSERT_EQ(map->bucketCount(), buckets);
  for (const PeerFlow& flow : flows) {
    const PeerFlow* found = find(*map, keyOf(flow), 0);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->backend, flow.backend);
  }
  EXPECT_GE(map->longestRun(), 1u);
  // Absent keys of both buckets are not found, however far their lookups go.
  EXPECT_EQ(find(*map, keyOf(same_bucket[3]), 0), nullptr);
  EXPECT_EQ(find(*map, keyOf(next_bucket[1]), 0), nullptr);
}

TEST(PeerFlows, AnEmptyMapFindsNothing) {
  const std::unique_ptr<const PeerFlows> map = PeerFlows::build({}, kKey);
  EXPECT_EQ(map->size(), 0u);
  EXPECT_EQ(find(*map, keyOf(flowOf(1)), 0), nullptr);
}

}  // namespace
}  // namespace berth
