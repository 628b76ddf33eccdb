#include "berth/dataplane/conntrack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <vector>

#include "berth/dataplane/snapshot.h"
#include "berth/net/packet_parser.h"

namespace berth {
namespace {

// A table of `entries` connections with its own zeroed buckets and counters; time is whatever
// the test passes in, so nothing sleeps.
const ConnectionHashKey kTestHashKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb,
                                      0x2545f4914f6cdd1d, 0xd6e8feb86659fd93, 0xa0761d6478bd642f}};

struct TestTable {
  explicit TestTable(uint32_t entries, uint32_t max_inserts_per_second = 0,
                     ConntrackTimeouts timeouts = {})
      : buckets(ConnectionTable::bucketsFor(entries)),
        table(buckets.data(), buckets.size(), timeouts, max_inserts_per_second, &counters,
              kTestHashKey) {}
  uint64_t count(ConntrackEvent event) const {
    return counters.values[static_cast<size_t>(event)].read();
  }
  std::vector<ConnectionBucket> buckets;
  ConntrackCounters counters;
  ConnectionTable table;
};

ConnectionKey keyOf(uint32_t client, uint16_t port, uint16_t service = 1) {
  const FlowKey flow = FlowKey::make(
      IpAddress::v4(198, 18, static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)),
      IpAddress::v4(198, 18, 100, 1), port, 80, kProtocolTcp);
  return ConnectionKey::of(flow, HashFields::kFiveTuple, service);
}

// The bucket hash depends on the secret, and spreads neighbouring clients and ports evenly.
TEST(ConntrackTest, TheBucketHashIsKeyedAndSpreadsKeys) {
  TestTable t(1 << 12);
  ConnectionHashKey other = kTestHashKey;
  other.multipliers[5] ^= 0x5555555555555555;
  std::vector<ConnectionBucket> buckets(ConnectionTable::bucketsFor(1 << 12));
  ConntrackCounters counters;
  const ConnectionTable keyed(buckets.data(), buckets.size(), {}, 0, &counters, other);
  const uint32_t mask = ConnectionTable::bucketsFor(1 << 12) - 1;
  std::vector<int> load(mask + 1);
  int differ = 0;
  for (uint32_t client = 0; client < 64; ++client) {
    for (uint16_t port = 1000; port < 1064; ++port) {
      const ConnectionKey key = keyOf(client, port);
      ++load[t.table.bucketHash(key) & mask];
      differ += (t.table.bucketHash(key) & mask) != (keyed.bucketHash(key) & mask);
    }
  }
  EXPECT_GT(differ, 4096 * 9 / 10) << "another secret, other buckets";
  // 4,096 keys over 1,024 buckets: about 4 each; none near a bucket's worth of a flood.
  EXPECT_LE(*std::max_element(load.begin(), load.end()), 14);
}

// A block of clients times a few ports is a lattice, which a linear hash maps to a lattice of
// buckets: for some secrets far more keys share overflowing buckets than random keys would. The
// mixed hash spreads it as random keys spread, whatever the secret.
TEST(ConntrackTest, AnAddressBlockTimesPortsSpreadsAsRandomKeysUnderEverySecret) {
  constexpr uint32_t kEntries = 1 << 17;
  const uint32_t mask = ConnectionTable::bucketsFor(kEntries) - 1;
  std::vector<ConnectionBucket> buckets(mask + 1);
  std::mt19937_64 secrets(7);
  for (int secret = 0; secret < 8; ++secret) {
    ConnectionHashKey key;
    for (uint64_t& multiplier : key.multipliers) multiplier = secrets();
    ConntrackCounters counters;
    const ConnectionTable table(buckets.data(), buckets.size(), {}, 0, &counters, key);
    std::vector<uint32_t> load(mask + 1);
    for (uint32_t client = 0; client < (1 << 14); ++client) {
      for (uint16_t port = 1024; port < 1028; ++port) {
        ++load[table.bucketHash(keyOf(client, port)) & mask];
      }
    }
    // 65,536 keys over 32,768 4-way buckets, 2 a bucket on average: random keys leave 14.3% of
    // them in buckets holding more than 4.
    uint32_t crowded = 0;
    for (uint32_t keys : load) crowded += keys > kConnectionsPerBucket ? keys : 0;
    const double share = crowded / 65536.0;
    EXPECT_GT(share, 0.12) << "secret " << secret;
    EXPECT_LT(share, 0.17) << "secret " << secret;
  }
}

TEST(ConntrackTest, AFlowIsFoundAfterItsInsertAndOthersAreNot) {
  TestTable t(1024);
  ASSERT_NE(t.table.insert(keyOf(1, 1000), 7, 42, ConnectionState::kTcpOpening, 0), nullptr);
  const Connection* found = t.table.find(keyOf(1, 1000), 7, 10);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->backend, 42);
  EXPECT_EQ(t.table.find(keyOf(1, 1001), 7, 10), nullptr) << "another source port";
  EXPECT_EQ(t.table.find(keyOf(1, 1000, 2), 7, 10), nullptr) << "another service";
  EXPECT_EQ(t.count(ConntrackEvent::kHit), 1u);
  EXPECT_EQ(t.count(ConntrackEvent::kMiss), 2u);
  EXPECT_EQ(t.count(ConntrackEvent::kInsert), 1u);
  EXPECT_EQ(t.table.occupied(), 1u);
}

TEST(ConntrackTest, Ipv6KeysWork) {
  TestTable t(1024);
  const FlowKey flow =
      FlowKey::make(*IpAddress::parse("2001:db8::1"), *IpAddress::parse("2001:db8:100::1"), 40000,
                    443, kProtocolTcp);
  const FlowKey neighbour =
      FlowKey::make(*IpAddress::parse("2001:db8::1:1"), *IpAddress::parse("2001:db8:100::1"), 40000,
                    443, kProtocolTcp);
  const ConnectionKey key = ConnectionKey::of(flow, HashFields::kFiveTuple, 3);
  ASSERT_NE(t.table.insert(key, 99, 5, ConnectionState::kTcpOpening, 0), nullptr);
  ASSERT_NE(t.table.find(key, 99, 1), nullptr);
  EXPECT_EQ(t.table.find(ConnectionKey::of(neighbour, HashFields::kFiveTuple, 3), 99, 1), nullptr)
      << "differs only in the address's last 8 bytes";
}

TEST(ConntrackTest, KeysFollowTheServicesHashFields) {
  const FlowKey first = FlowKey::make(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1),
                                      1000, 53, kProtocolUdp);
  FlowKey second = first;
  second.source_port = 2000;
  EXPECT_FALSE(ConnectionKey::of(first, HashFields::kFiveTuple, 1).source_port ==
               ConnectionKey::of(second, HashFields::kFiveTuple, 1).source_port);
  TestTable t(1024);
  t.table.insert(ConnectionKey::of(first, HashFields::kThreeTuple, 1), 5, 8, ConnectionState::kUdp,
                 0);
  EXPECT_NE(t.table.find(ConnectionKey::of(second, HashFields::kThreeTuple, 1), 5, 1), nullptr)
      << "a 3-tuple service's connection is the client address, whatever its port";
}

TEST(ConntrackTest, EachStateExpiresAfterItsTimeout) {
  const ConntrackTimeouts timeouts{.tcp_established_ms = 300'000,
                                   .tcp_opening_ms = 5'000,
                                   .tcp_closing_ms = 10'000,
                                   .udp_ms = 30'000};
  const std::pair<ConnectionState, uint32_t> cases[] = {
      {ConnectionState::kTcpOpening, 5'000},
      {ConnectionState::kTcpEstablished, 300'000},
      {ConnectionState::kTcpClosing, 10'000},
      {ConnectionState::kUdp, 30'000},
      {ConnectionState::kTcpUnconfirmed, 5'000},
      {ConnectionState::kUdpUnconfirmed, 5'000},  // the shorter of UDP's and opening
  };
  for (const auto& [state, timeout] : cases) {
    TestTable t(1024, 0, timeouts);
    const uint32_t start = 1'000'000;
    t.table.insert(keyOf(1, 1000), 3, 1, state, start);
    EXPECT_NE(t.table.find(keyOf(1, 1000), 3, start + timeout), nullptr)
        << "live at exactly its timeout, state " << static_cast<int>(state);
    // find() above did not refresh it: last seen is still `start`.
    EXPECT_EQ(t.table.find(keyOf(1, 1000), 3, start + timeout + 1), nullptr)
        << "expired one millisecond later, state " << static_cast<int>(state);
    EXPECT_EQ(t.count(ConntrackEvent::kExpiry), 1u);
    EXPECT_EQ(t.table.occupied(), 0u) << "reclaimed when met";
  }
}

TEST(ConntrackTest, TouchRefreshesAndMovesTcpStatesOn) {
  TestTable t(1024);
  Connection* connection =
      t.table.insert(keyOf(1, 1000), 3, 1, initialState(kProtocolTcp, kTcpSyn), 0);
  ASSERT_NE(connection, nullptr);
  EXPECT_EQ(connection->state, ConnectionState::kTcpOpening);
  t.table.touch(*connection, kTcpAck, 4'000);
  EXPECT_EQ(connection->state, ConnectionState::kTcpEstablished);
  EXPECT_NE(t.table.find(keyOf(1, 1000), 3, 200'000), nullptr)
      << "established: long past the opening timeout";
  t.table.touch(*connection, kTcpAck | kTcpFin, 200'000);
  EXPECT_EQ(connection->state, ConnectionState::kTcpClosing);
  EXPECT_EQ(t.table.find(keyOf(1, 1000), 3, 210'001), nullptr) << "closing: 10 s";

  EXPECT_EQ(initialState(kProtocolTcp, kTcpAck), ConnectionState::kTcpUnconfirmed)
      << "a flow picked up mid-way, or a spoofed ACK";
  EXPECT_EQ(initialState(kProtocolTcp, kTcpRst), ConnectionState::kTcpUnconfirmed);
  EXPECT_EQ(initialState(kProtocolTcp, kTcpSyn | kTcpAck), ConnectionState::kTcpUnconfirmed);
  EXPECT_EQ(initialState(kProtocolUdp, 0), ConnectionState::kUdpUnconfirmed);
}

// A lone ACK is tracked for the opening timeout only; a flow that ECMP moved here is confirmed
// by its second packet and then lives as an established one.
TEST(ConntrackTest, AFlowFirstSeenMidWayIsConfirmedByItsSecondPacket) {
  TestTable t(1024);
  Connection* lone = t.table.insert(keyOf(1, 1000), 3, 1, initialState(kProtocolTcp, kTcpAck), 0);
  ASSERT_NE(lone, nullptr);
  EXPECT_EQ(t.count(ConntrackEvent::kUnconfirmedInsert), 1u);
  EXPECT_EQ(t.table.find(keyOf(1, 1000), 3, 5'001), nullptr) << "spoofed: gone in 5 s";

  Connection* moved = t.table.insert(keyOf(2, 1000), 3, 1, initialState(kProtocolTcp, kTcpAck), 0);
  t.table.touch(*moved, kTcpAck, 10);
  EXPECT_EQ(moved->state, ConnectionState::kTcpEstablished);
  EXPECT_EQ(t.count(ConntrackEvent::kConfirmation), 1u);
  EXPECT_NE(t.table.find(keyOf(2, 1000), 3, 200'000), nullptr) << "established: 300 s";
}

TEST(ConntrackTest, AUdpFlowIsConfirmedByItsSecondPacket) {
  TestTable t(1024);
  Connection* flow = t.table.insert(keyOf(1, 53), 3, 1, initialState(kProtocolUdp, 0), 0);
  EXPECT_EQ(flow->state, ConnectionState::kUdpUnconfirmed);
  t.table.touch(*flow, 0, 4'000);
  EXPECT_EQ(flow->state, ConnectionState::kUdp);
  EXPECT_EQ(t.count(ConntrackEvent::kConfirmation), 1u);
  EXPECT_NE(t.table.find(keyOf(1, 53), 3, 30'000), nullptr) << "confirmed: the UDP timeout";
  TestTable short_udp(1024, 0, {.udp_ms = 2'000});
  short_udp.table.insert(keyOf(1, 53), 3, 1, initialState(kProtocolUdp, 0), 0);
  EXPECT_EQ(short_udp.table.find(keyOf(1, 53), 3, 2'001), nullptr)
      << "unconfirmed: the shorter of its own timeout and the opening timeout";
}

// A full bucket gives up unconfirmed and opening connections before established ones, each
// class least recently seen first.
TEST(ConntrackTest, AFullBucketEvictsUnconfirmedAndOpeningConnectionsFirst) {
  TestTable t(1024);
  constexpr uint32_t kSameBucket = 5;
  // The clock only moves forward.
  t.table.insert(keyOf(1, 1), kSameBucket, 1, ConnectionState::kTcpEstablished, 10);
  t.table.insert(keyOf(1, 4), kSameBucket, 1, ConnectionState::kUdp, 15);
  t.table.insert(keyOf(1, 3), kSameBucket, 1, ConnectionState::kTcpUnconfirmed, 20);
  t.table.insert(keyOf(1, 2), kSameBucket, 1, ConnectionState::kTcpOpening, 30);
  t.table.insert(keyOf(2, 1), kSameBucket, 1, ConnectionState::kTcpUnconfirmed, 40);
  EXPECT_EQ(
      t.table.peek(keyOf(1, 3)) == nullptr && t.table.find(keyOf(1, 3), kSameBucket, 41) == nullptr,
      true)
      << "the oldest unconfirmed went, though established ones are older";
  t.table.insert(keyOf(2, 2), kSameBucket, 1, ConnectionState::kTcpOpening, 50);
  EXPECT_EQ(t.table.find(keyOf(1, 2), kSameBucket, 51), nullptr) << "then the opening one";
  t.table.insert(keyOf(2, 3), kSameBucket, 1, ConnectionState::kTcpOpening, 60);
  EXPECT_EQ(t.table.find(keyOf(2, 1), kSameBucket, 61), nullptr) << "then the later unconfirmed";
  EXPECT_NE(t.table.find(keyOf(1, 1), kSameBucket, 61), nullptr) << "established ones stay";
  EXPECT_NE(t.table.find(keyOf(1, 4), kSameBucket, 61), nullptr);
  EXPECT_EQ(t.count(ConntrackEvent::kEviction), 3u);
  EXPECT_EQ(t.count(ConntrackEvent::kUnconfirmedEviction), 3u);
  t.table.insert(keyOf(3, 1), kSameBucket, 1, ConnectionState::kTcpEstablished, 70);
  t.table.insert(keyOf(3, 2), kSameBucket, 1, ConnectionState::kTcpEstablished, 80);
  t.table.insert(keyOf(3, 3), kSameBucket, 1, ConnectionState::kTcpEstablished, 90);
  EXPECT_EQ(t.table.find(keyOf(1, 1), kSameBucket, 91), nullptr)
      << "among established ones, the least recently seen";
  EXPECT_EQ(t.count(ConntrackEvent::kUnconfirmedEviction), 5u);
}

TEST(ConntrackTest, AFullBucketEvictsTheConnectionSeenLeastRecently) {
  TestTable t(1024);
  constexpr uint32_t kSameBucket = 11;
  std::vector<Connection*> ways;
  for (uint16_t i = 0; i < kConnectionsPerBucket; ++i) {
    ways.push_back(t.table.insert(keyOf(1, 1000 + i), kSameBucket, i, ConnectionState::kUdp, 100));
  }
  // Every one but the third is seen again later: the third is the least recently seen.
  for (uint16_t i = 0; i < kConnectionsPerBucket; ++i) {
    if (i != 2) t.table.touch(*ways[i], 0, 200 + i);
  }
  ASSERT_NE(t.table.insert(keyOf(2, 2000), kSameBucket, 9, ConnectionState::kUdp, 300), nullptr);
  EXPECT_EQ(t.count(ConntrackEvent::kEviction), 1u);
  EXPECT_EQ(t.table.find(keyOf(1, 1002), kSameBucket, 301), nullptr) << "the oldest went";
  for (uint16_t i : {0, 1, 3}) {
    EXPECT_NE(t.table.find(keyOf(1, 1000 + i), kSameBucket, 301), nullptr) << i;
  }
  EXPECT_NE(t.table.find(keyOf(2, 2000), kSameBucket, 301), nullptr);
}

TEST(ConntrackTest, AnExpiredWayIsReusedBeforeALiveOneIsEvicted) {
  TestTable t(1024, 0, ConntrackTimeouts{.udp_ms = 1'000});
  for (uint16_t i = 0; i < kConnectionsPerBucket; ++i) {
    t.table.insert(keyOf(1, 1000 + i), 5, i,
                   i == 1 ? ConnectionState::kUdp : ConnectionState::kTcpEstablished, 0);
  }
  t.table.insert(keyOf(2, 2000), 5, 9, ConnectionState::kUdp, 5'000);
  EXPECT_EQ(t.count(ConntrackEvent::kEviction), 0u);
  EXPECT_EQ(t.count(ConntrackEvent::kExpiry), 1u);
  for (uint16_t i : {0, 2, 3}) EXPECT_NE(t.table.find(keyOf(1, 1000 + i), 5, 5'001), nullptr);
}

TEST(ConntrackTest, TheInsertRateLimitHoldsAndRefills) {
  TestTable t(1 << 16, 100);  // 100 inserts per second, bursts of one second's worth
  uint32_t inserted = 0;
  for (uint32_t i = 0; i < 1000; ++i) {
    inserted += t.table.insert(keyOf(i, 1000), i, 1, ConnectionState::kTcpOpening, 10) != nullptr;
  }
  EXPECT_EQ(inserted, 100u);
  EXPECT_EQ(t.count(ConntrackEvent::kInsertSkipped), 900u);
  // Half a second later, half a second's worth more.
  for (uint32_t i = 1000; i < 2000; ++i) {
    inserted += t.table.insert(keyOf(i, 1000), i, 1, ConnectionState::kTcpOpening, 510) != nullptr;
  }
  EXPECT_EQ(inserted, 150u);
}

// A SYN flood against a small, full table: with a limit (10 new connections a second here, for a
// table of 256), the flood can displace at most a second's burst plus what the rate allows, and
// the established connections stay; without it, the flood pushes them out. Katran limits
// new-connection inserts per core for this reason.
TEST(ConntrackTest, EstablishedConnectionsSurviveAFloodOfNewFlowsUnderTheLimit) {
  for (const uint32_t limit : {10u, 0u}) {
    TestTable t(256, limit);
    for (uint32_t i = 0; i < 256; ++i) {
      // Hash i puts four connections in each of the 64 buckets; they arrive within the limit.
      ASSERT_NE(t.table.insert(keyOf(i, 1000), i, 1, ConnectionState::kTcpEstablished, i * 100),
                nullptr);
    }
    // Two seconds of flood, 100,000 new flows, while each established connection keeps talking.
    for (uint32_t i = 0; i < 100'000; ++i) {
      const uint32_t now = 30'000 + i / 50;
      t.table.insert(keyOf(10'000 + i, 2000), 7919 * i, 2, ConnectionState::kTcpOpening, now);
      if (i % 400 == 0) {
        for (uint32_t e = 0; e < 256; ++e) {
          if (Connection* c = t.table.find(keyOf(e, 1000), e, now)) {
            t.table.touch(*c, kTcpAck, now);
          }
        }
      }
    }
    uint32_t survivors = 0;
    for (uint32_t i = 0; i < 256; ++i) {
      survivors += t.table.find(keyOf(i, 1000), i, 32'000) != nullptr;
    }
    if (limit != 0) {
      EXPECT_GE(survivors, 256u - 10 - 2 * 10 - 1) << "at most the burst and two seconds' inserts";
      EXPECT_GT(t.count(ConntrackEvent::kInsertSkipped), 99'000u);
    } else {
      // Each bucket gives its least recently seen established connection to the flood's first
      // SYN; the flood's opening connections then push out only each other.
      EXPECT_EQ(survivors, 256u - 64) << "without a limit, one established connection a bucket";
    }
  }
}

TEST(ConntrackTest, TableFullCountsInsertsOnceEveryWayIsTaken) {
  TestTable t(8);  // two buckets
  for (uint32_t i = 0; i < 8; ++i) t.table.insert(keyOf(i, 1), i, 1, ConnectionState::kUdp, 0);
  EXPECT_EQ(t.table.occupied(), 8u);
  EXPECT_EQ(t.count(ConntrackEvent::kTableFull), 0u);
  t.table.insert(keyOf(99, 1), 0, 1, ConnectionState::kUdp, 1);
  EXPECT_EQ(t.count(ConntrackEvent::kTableFull), 1u);
  EXPECT_EQ(t.count(ConntrackEvent::kEviction), 1u);
}

// Traffic counters as a worker has them, for the connection gauges.
struct Gauges {
  Gauges() : services(CounterIds::kMaxServices), backends(CounterIds::kMaxBackends) {}
  TrafficCounters counters() { return {services.data(), backends.data()}; }
  uint64_t backend(uint16_t id) const { return backends[id].connections.read(); }
  uint64_t service(uint16_t id) const { return services[id].connections.read(); }
  std::vector<TrafficCounter> services;
  std::vector<TrafficCounter> backends;
};

TEST(ConntrackTest, GaugesCountLiveConnectionsPerServiceAndBackendThroughEveryChange) {
  const ConntrackTimeouts timeouts{
      .tcp_established_ms = 100, .tcp_opening_ms = 100, .tcp_closing_ms = 100, .udp_ms = 100};
  TestTable t(4, 0, timeouts);  // one bucket: the fifth connection evicts
  Gauges gauges;
  t.table.countConnectionsIn(gauges.counters());
  for (uint16_t port = 1; port <= 4; ++port) {
    t.table.insert(keyOf(1, port, 1), 0, port <= 2 ? 10 : 11, ConnectionState::kTcpOpening, port);
  }
  EXPECT_EQ(gauges.service(1), 4u);
  EXPECT_EQ(gauges.backend(10), 2u);
  EXPECT_EQ(gauges.backend(11), 2u);
  // An eviction (port 1's, seen least recently) hands its count over.
  t.table.insert(keyOf(1, 5, 2), 0, 12, ConnectionState::kTcpOpening, 50);
  EXPECT_EQ(gauges.backend(10), 1u);
  EXPECT_EQ(gauges.backend(12), 1u);
  EXPECT_EQ(gauges.service(1), 3u);
  EXPECT_EQ(gauges.service(2), 1u);
  // A re-pick moves one connection's count.
  t.table.reassign(*t.table.find(keyOf(1, 3, 1), 0, 60), 12);
  EXPECT_EQ(gauges.backend(11), 1u);
  EXPECT_EQ(gauges.backend(12), 2u);
  // Expiry at a lookup takes one back.
  EXPECT_EQ(t.table.find(keyOf(1, 2, 1), 0, 140), nullptr);
  EXPECT_EQ(gauges.backend(10), 0u);
  EXPECT_EQ(t.table.occupied(), 3u);
}

TEST(ConntrackTest, TheSweepReclaimsExpiredConnectionsAndKeepsLiveOnes) {
  const ConntrackTimeouts timeouts{
      .tcp_established_ms = 1000, .tcp_opening_ms = 1000, .tcp_closing_ms = 1000, .udp_ms = 1000};
  TestTable t(1024, 0, timeouts);
  Gauges gauges;
  t.table.countConnectionsIn(gauges.counters());
  for (uint32_t flow = 0; flow < 600; ++flow) {
    // Half go quiet at time 0, half are still seen at time 1500.
    const uint32_t seen = flow % 2 == 0 ? 0 : 1500;
    t.table.insert(keyOf(flow, 1000), flow * 2654435761u, 7, ConnectionState::kTcpEstablished,
                   seen);
  }
  ASSERT_EQ(gauges.backend(7), 600u);
  // One round over every bucket at time 2000: the quiet half has outlived its 1000 ms.
  for (size_t i = 0; i < t.buckets.size(); ++i) t.table.sweep(2000);
  EXPECT_EQ(gauges.backend(7), 300u);
  EXPECT_EQ(t.table.occupied(), 300u);
  EXPECT_EQ(t.count(ConntrackEvent::kExpiry), 300u);
  for (uint32_t flow = 1; flow < 600; flow += 2) {
    EXPECT_NE(t.table.find(keyOf(flow, 1000), flow * 2654435761u, 2000), nullptr) << flow;
  }
}

TEST(ConntrackTest, CapacityRoundsUpToWholePowerOfTwoBuckets) {
  EXPECT_EQ(ConnectionTable::bucketsFor(1 << 20), (1u << 20) / 4);
  EXPECT_EQ(ConnectionTable::bucketsFor(1'000'000), (1u << 20) / 4);
  EXPECT_EQ(ConnectionTable::bucketsFor(1), 1u);
  EXPECT_EQ(sizeof(ConnectionBucket) / kConnectionsPerBucket, 32u) << "bytes per connection";
}

}  // namespace
}  // namespace berth
