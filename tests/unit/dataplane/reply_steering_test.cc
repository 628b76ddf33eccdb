#include "berth/dataplane/reply_steering.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "berth/net/flow_key.h"
#include "berth/net/toeplitz.h"

namespace berth {
namespace {

RssSpread spreadOf(std::vector<uint8_t> key, uint32_t entries, uint16_t queues) {
  RssSpread spread;
  spread.key = std::move(key);
  for (uint32_t i = 0; i < entries; ++i) spread.reta.push_back(static_cast<uint16_t>(i % queues));
  return spread;
}

std::vector<uint8_t> randomKey(std::mt19937& random) {
  std::vector<uint8_t> key(52);
  for (uint8_t& b : key) b = static_cast<uint8_t>(random());
  return key;
}

// A symmetric key (0x6d5a repeated) hashes both directions of a flow alike, as some operators
// configure so that a flow's two directions meet on one core.
std::vector<uint8_t> symmetricKey() {
  std::vector<uint8_t> key;
  for (int i = 0; i < 26; ++i) key.insert(key.end(), {0x6d, 0x5a});
  return key;
}

IpAddress randomAddress(std::mt19937& random, IpFamily family) {
  IpAddress address;
  address.family = family;
  for (size_t i = 0; i < (family == IpFamily::kIpv4 ? 4u : 16u); ++i) {
    address.bytes[i] = static_cast<uint8_t>(random());
  }
  return address;
}

// What the NIC computes for the whole reply: the truth the steering must agree with.
uint16_t nicQueue(const RssSpread& spread, const IpAddress& backend, uint16_t backend_port,
                  const IpAddress& local, uint16_t local_port, bool ports) {
  std::vector<uint8_t> input;
  const size_t length = backend.isV4() ? 4 : 16;
  input.insert(input.end(), backend.bytes.begin(), backend.bytes.begin() + length);
  input.insert(input.end(), local.bytes.begin(), local.bytes.begin() + length);
  if (ports) {
    input.insert(input.end(),
                 {static_cast<uint8_t>(backend_port >> 8), static_cast<uint8_t>(backend_port),
                  static_cast<uint8_t>(local_port >> 8), static_cast<uint8_t>(local_port)});
  }
  return spread.reta[toeplitzHash(spread.key, input) & (spread.reta.size() - 1)];
}

// Every port of the range, for random, symmetric and Microsoft keys, tables of 64 to 512
// entries over 1 to 16 queues, IPv4 and IPv6, TCP and UDP: the queue the steering predicts is
// the one the NIC's hash of the whole reply picks, and the shares it sums are the ports counted.
TEST(ReplySteeringTest, PredictsTheNicsQueueForEveryPortOfTheRange) {
  std::mt19937 random(3);
  const std::vector<std::vector<uint8_t>> keys = {
      randomKey(random), symmetricKey(),
      std::vector<uint8_t>(std::begin(kMicrosoftRssKey), std::end(kMicrosoftRssKey))};
  for (const std::vector<uint8_t>& key : keys) {
    for (const auto& [entries, queues] :
         {std::pair<uint32_t, uint16_t>{64, 1}, {128, 3}, {512, 16}, {256, 2}}) {
      const RssSpread spread = spreadOf(key, entries, queues);
      absl::StatusOr<ReplySteering> steering = ReplySteering::build(spread, 20000, 23999);
      ASSERT_TRUE(steering.ok()) << steering.status();
      for (IpFamily family : {IpFamily::kIpv4, IpFamily::kIpv6}) {
        for (uint8_t protocol : {kProtocolTcp, kProtocolUdp}) {
          const IpAddress backend = randomAddress(random, family);
          const IpAddress local = randomAddress(random, family);
          const auto backend_port = static_cast<uint16_t>(random());
          const uint32_t base = steering->baseOf(backend, backend_port, local, protocol);
          std::vector<uint32_t> counted(queues, 0);
          for (uint32_t port = 20000; port <= 23999; ++port) {
            const uint16_t queue =
                nicQueue(spread, backend, backend_port, local, static_cast<uint16_t>(port), true);
            ASSERT_EQ(steering->queueOf(base, static_cast<uint16_t>(port), family, protocol), queue)
                << "port " << port << ", " << queues << " queues";
            ++counted[queue];
          }
          for (uint16_t queue = 0; queue < queues; ++queue) {
            EXPECT_EQ(steering->shareOf(base, queue, family, protocol), counted[queue]);
          }
        }
      }
    }
  }
}

TEST(ReplySteeringTest, TheNextPortForAQueueIsTheFirstFromWhereTheSearchStartsWrappingRound) {
  std::mt19937 random(5);
  const RssSpread spread = spreadOf(randomKey(random), 128, 4);
  absl::StatusOr<ReplySteering> steering = ReplySteering::build(spread, 1000, 1099);
  ASSERT_TRUE(steering.ok());
  const IpAddress backend = IpAddress::v4(198, 18, 1, 10);
  const IpAddress local = IpAddress::v4(198, 18, 0, 100);
  const uint32_t base = steering->baseOf(backend, 80, local, kProtocolTcp);
  for (uint16_t queue = 0; queue < 4; ++queue) {
    std::vector<uint16_t> mine;
    for (uint16_t port = 1000; port <= 1099; ++port) {
      if (steering->queueOf(base, port, IpFamily::kIpv4, kProtocolTcp) == queue) {
        mine.push_back(port);
      }
    }
    ASSERT_FALSE(mine.empty());
    EXPECT_EQ(steering->nextPortFor(base, queue, IpFamily::kIpv4, kProtocolTcp, 1000, 100),
              mine.front());
    // From past the last of them, the search wraps round to the first.
    const auto past = static_cast<uint16_t>(mine.back() + 1);
    if (past <= 1099) {
      EXPECT_EQ(steering->nextPortFor(base, queue, IpFamily::kIpv4, kProtocolTcp, past, 100),
                mine.front());
    }
    // A search that may look at no port finds none.
    EXPECT_EQ(steering->nextPortFor(base, queue, IpFamily::kIpv4, kProtocolTcp, 1000, 0), 0);
  }
}

// A NIC that hashes UDP without its ports (rss_hf without NONFRAG_IPV4_UDP): the local port
// changes nothing, so a (local address, backend) pair's ports all come to one queue.
TEST(ReplySteeringTest, WithoutPortsInTheHashAPairsPortsAllComeToOneQueue) {
  std::mt19937 random(9);
  RssSpread spread = spreadOf(randomKey(random), 128, 4);
  spread.udp4_ports = false;
  absl::StatusOr<ReplySteering> steering = ReplySteering::build(spread, 5000, 5999);
  ASSERT_TRUE(steering.ok());
  for (int pair = 0; pair < 50; ++pair) {
    const IpAddress backend = randomAddress(random, IpFamily::kIpv4);
    const IpAddress local = randomAddress(random, IpFamily::kIpv4);
    const uint32_t base = steering->baseOf(backend, 53, local, kProtocolUdp);
    const uint16_t queue = nicQueue(spread, backend, 53, local, 0, false);
    for (uint16_t port = 5000; port < 6000; port += 97) {
      EXPECT_EQ(steering->queueOf(base, port, IpFamily::kIpv4, kProtocolUdp), queue);
    }
    for (uint16_t other = 0; other < 4; ++other) {
      EXPECT_EQ(steering->shareOf(base, other, IpFamily::kIpv4, kProtocolUdp),
                other == queue ? 1000u : 0u);
      EXPECT_EQ(steering->nextPortFor(base, other, IpFamily::kIpv4, kProtocolUdp, 5100, 1000),
                other == queue ? 5100 : 0);
    }
  }
}

TEST(ReplySteeringTest, APortWithoutRssSendsEverythingToQueueZero) {
  absl::StatusOr<ReplySteering> steering = ReplySteering::build(RssSpread{}, 1024, 65535);
  ASSERT_TRUE(steering.ok());
  const uint32_t base = steering->baseOf(IpAddress::v4(198, 18, 1, 1), 80,
                                         IpAddress::v4(198, 18, 0, 1), kProtocolTcp);
  EXPECT_EQ(steering->queueOf(base, 4242, IpFamily::kIpv4, kProtocolTcp), 0);
  EXPECT_EQ(steering->shareOf(base, 0, IpFamily::kIpv4, kProtocolTcp), 64512u);
  EXPECT_EQ(steering->shareOf(base, 1, IpFamily::kIpv4, kProtocolTcp), 0u);
}

// An ICMP error carries its session's tuple: the queue of that tuple is the NIC's for the
// session's packets, over both IP versions, with ports where the NIC hashes them. A port without
// local ports (the clients' side) steers the same, and lends no port.
TEST(ReplySteeringTest, TheQueueOfAFlowIsTheNicsForItsTuple) {
  std::mt19937 random(21);
  RssSpread spread = spreadOf(randomKey(random), 256, 8);
  spread.udp6_ports = false;
  absl::StatusOr<ReplySteering> steering = ReplySteering::withoutLocalPorts(spread);
  ASSERT_TRUE(steering.ok());
  EXPECT_EQ(steering->rangeSize(), 0u);
  for (int flow = 0; flow < 400; ++flow) {
    const IpFamily family = flow % 2 == 0 ? IpFamily::kIpv4 : IpFamily::kIpv6;
    const uint8_t protocol = flow % 4 < 2 ? kProtocolTcp : kProtocolUdp;
    const IpAddress source = randomAddress(random, family);
    const IpAddress destination = randomAddress(random, family);
    const auto source_port = static_cast<uint16_t>(random());
    const auto destination_port = static_cast<uint16_t>(random());
    const FlowKey key = FlowKey::make(source, destination, source_port, destination_port, protocol);
    const bool ports = !(family == IpFamily::kIpv6 && protocol == kProtocolUdp);
    EXPECT_EQ(steering->queueOfFlow(key),
              nicQueue(spread, source, source_port, destination, destination_port, ports))
        << key.toString();
    EXPECT_EQ(steering->shareOf(0, steering->queueOfFlow(key), family, protocol), 0u);
  }
  EXPECT_EQ(ReplySteering::withoutLocalPorts(RssSpread{})->queueOfFlow(FlowKey{}), 0)
      << "without RSS, queue 0 takes everything";
}

TEST(ReplySteeringTest, AShortKeyABadTableOrAnEmptyRangeIsRefusedWithWhy) {
  RssSpread spread = spreadOf(std::vector<uint8_t>(16, 1), 128, 2);
  EXPECT_EQ(ReplySteering::build(spread, 1024, 2047).status().message(),
            "RSS key of 16 bytes: at least 40 are needed for IPv6");
  spread = spreadOf(std::vector<uint8_t>(40, 1), 100, 2);
  EXPECT_EQ(ReplySteering::build(spread, 1024, 2047).status().message(),
            "RSS redirection table of 100 entries: a power of two up to 65536 is needed");
  spread = spreadOf(std::vector<uint8_t>(40, 1), 128, 2);
  EXPECT_EQ(ReplySteering::build(spread, 2048, 1024).status().message(),
            "local port range 2048-1024 is empty or holds 0");
}

}  // namespace
}  // namespace berth
