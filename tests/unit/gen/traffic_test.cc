// berthgen's traffic: the flows it makes, the frames that carry them (as berth's own parser reads
// them), and the malformed frames of a storm.

// The checksum checks use DPDK's *_cksum_verify helpers, still experimental in 22.11.
#define ALLOW_EXPERIMENTAL_API 1

#include "berth/gen/traffic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rte_ip.h>

#include <algorithm>
#include <set>
#include <vector>

#include "berth/net/packet_parser.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

const MacAddress kGenMac = *MacAddress::parse("02:00:00:00:00:02");
const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");

SourceNet net(const char* text) { return *SourceNet::parse(text); }

TEST(VipTargetTest, ParsesAddressPortAndProtocol) {
  const VipTarget v4 = *VipTarget::parse("198.18.100.1:80/tcp");
  EXPECT_EQ(v4.address, IpAddress::v4(198, 18, 100, 1));
  EXPECT_EQ(v4.port, 80);
  EXPECT_EQ(v4.protocol, kProtocolTcp);
  const VipTarget v6 = *VipTarget::parse("[2001:db8::1]:53/UDP");
  EXPECT_EQ(v6.protocol, kProtocolUdp);
  EXPECT_EQ(v6.toString(), "[2001:db8::1]:53/udp");
  for (const char* bad : {"198.18.100.1:80", "198.18.100.1/tcp", "198.18.100.1:0/tcp",
                          "198.18.100.1:80/sctp", "host:80/tcp"}) {
    absl::StatusOr<VipTarget> vip = VipTarget::parse(bad);
    ASSERT_FALSE(vip.ok()) << bad;
    EXPECT_THAT(std::string(vip.status().message()), HasSubstr(bad));
  }
}

TEST(SourceNetTest, ParsesClearsHostBitsAndCounts) {
  const SourceNet v4 = net("198.18.7.9/15");
  EXPECT_EQ(v4.toString(), "198.18.0.0/15");
  EXPECT_EQ(v4.size(), 131072u);
  EXPECT_EQ(v4.at(258).toString(), "198.18.1.2");
  const SourceNet v6 = net("2001:db8:1::/64");
  EXPECT_EQ(v6.size(), uint64_t{1} << 32) << "capped";
  EXPECT_EQ(v6.at(65536).toString(), "2001:db8:1::1:0");
  for (const char* bad : {"198.18.0.0", "198.18.0.0/33", "example/8", "198.18.0.0/x"}) {
    absl::StatusOr<SourceNet> parsed = SourceNet::parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--src-net"));
  }
}

TEST(MakeFlowsTest, FlowsAreDistinctRoundRobinOverVipsAndTheirIndexFollowsFromTheTuple) {
  const std::vector<VipTarget> vips = {*VipTarget::parse("198.18.100.1:80/tcp"),
                                       *VipTarget::parse("[2001:db8::53]:53/udp")};
  const std::vector<GenFlow> flows =
      *makeFlows(vips, net("198.18.0.0/15"), net("2001:db8:1::/64"), 150'000);
  std::set<std::string> tuples;
  for (size_t i = 0; i < flows.size(); ++i) {
    EXPECT_EQ(flows[i].vip, i % 2);
    tuples.insert(flows[i].key.toString());
    const SourceNet& source =
        flows[i].key.family == IpFamily::kIpv4 ? net("198.18.0.0/15") : net("2001:db8:1::/64");
    ASSERT_EQ(flowIndexOf(flows[i].key, source, flows), static_cast<int64_t>(i));
  }
  EXPECT_EQ(tuples.size(), flows.size());
  FlowKey stranger = flows[0].key;
  stranger.destination_port = 9;
  EXPECT_EQ(flowIndexOf(stranger, net("198.18.0.0/15"), flows), -1);
}

TEST(MakeFlowsTest, ANetworkTooSmallForTheFlowsIsAClearError) {
  absl::StatusOr<std::vector<GenFlow>> flows =
      makeFlows({*VipTarget::parse("198.18.100.1:80/tcp")}, net("198.18.0.0/31"),
                net("2001:db8::/64"), 200'000);
  ASSERT_FALSE(flows.ok());
  EXPECT_THAT(std::string(flows.status().message()),
              HasSubstr("--src-net 198.18.0.0/31 has 2 addresses; 200000 flows need 4"));
}

TEST(BuildFrameTest, BerthsParserReadsTheFlowFlagsAndLengthsAndChecksumsHold) {
  const std::vector<VipTarget> vips = {*VipTarget::parse("198.18.100.1:80/tcp"),
                                       *VipTarget::parse("198.18.100.2:53/udp"),
                                       *VipTarget::parse("[2001:db8::1]:443/tcp")};
  const std::vector<GenFlow> flows =
      *makeFlows(vips, net("198.18.0.0/15"), net("2001:db8:1::/64"), 3);
  uint8_t frame[2048];
  for (const GenFlow& flow : flows) {
    for (uint32_t sequence : {0u, 7u}) {
      const size_t length = buildFrame(flow, 0, sequence, 123456789, 64, kGenMac, kPortMac, frame);
      EXPECT_EQ(length, std::max<size_t>(64, minimumFrameSize(flow)));
      ParsedPacket packet;
      ASSERT_EQ(parsePacket(frame, length, packet), ParseError::kNone) << flow.key.toString();
      EXPECT_EQ(packet.flow, flow.key);
      EXPECT_EQ(packet.ip_length, length - 14);
      if (flow.key.protocol == kProtocolTcp) {
        EXPECT_EQ(packet.tcp_flags, sequence == 0 ? 0x02 : 0x10) << "SYN first, then ACK";
      }
      if (flow.key.family == IpFamily::kIpv4) {
        const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(frame + 14);
        EXPECT_EQ(rte_ipv4_cksum(ip), 0u) << "a header with its checksum sums to zero";
        EXPECT_EQ(rte_ipv4_udptcp_cksum_verify(ip, frame + 34), 0);
      } else {
        const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(frame + 14);
        EXPECT_EQ(rte_ipv6_udptcp_cksum_verify(ip, frame + 54), 0);
      }
    }
  }
  EXPECT_EQ(minimumFrameSize(flows[0]), 62u) << "IPv4 TCP: 54 bytes of headers and the stamp";
  EXPECT_EQ(minimumFrameSize(flows[2]), 82u) << "IPv6 TCP";
  EXPECT_EQ(buildFrame(flows[0], 0, 1, 0, 1514, kGenMac, kPortMac, frame), 1514u);
}

TEST(BuildMalformedFrameTest, EveryKindIsRefusedByBerthsParser) {
  uint8_t frame[128];
  for (uint64_t kind = 0; kind < 4; ++kind) {
    const size_t length = buildMalformedFrame(kind, 99, kGenMac, kPortMac, frame);
    ParsedPacket packet;
    EXPECT_NE(parsePacket(frame, length, packet), ParseError::kNone) << kind;
  }
  EXPECT_EQ(buildMalformedFrame(4, 99, kGenMac, kPortMac, frame), 64u);
}

// The RSS verification suite of the 82599 datasheet (and Microsoft's): with the standard key,
// these tuples hash to these values on every NIC that implements Toeplitz RSS.
TEST(RssHashTest, MatchesTheRssVerificationSuite) {
  struct Vector {
    const char* source;
    uint16_t source_port;
    const char* destination;
    uint16_t destination_port;
    uint32_t hash;
  };
  for (const Vector& v : std::vector<Vector>{
           {"66.9.149.187", 2794, "161.142.100.80", 1766, 0x51ccc178},
           {"199.92.111.2", 14230, "65.69.140.83", 4739, 0xc626b0ea},
           {"24.19.198.95", 12898, "12.22.207.184", 38024, 0x5c2b394a},
           {"38.27.205.30", 48228, "209.142.163.6", 2217, 0xafc7327f},
           {"153.39.163.191", 44251, "202.188.127.2", 1303, 0x10e828a2},
           {"3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x40207d3d},
       }) {
    const FlowKey key = FlowKey::make(*IpAddress::parse(v.source), *IpAddress::parse(v.destination),
                                      v.source_port, v.destination_port, kProtocolTcp);
    EXPECT_EQ(rssHashOf(key), v.hash) << key.toString();
  }
}

TEST(SpreadOverQueuesTest, PutsEachFlowOnItsRssQueueOnceAndSharesThemEvenly) {
  const std::vector<GenFlow> flows = *makeFlows(
      {*VipTarget::parse("198.18.100.1:80/tcp"), *VipTarget::parse("[2001:db8::1]:53/udp")},
      net("198.18.0.0/16"), net("2001:db8:ff::/64"), 20000);
  const std::vector<std::vector<uint32_t>> spread =
      spreadOverQueues(flows, QueueSpread::standard(4), 4);
  ASSERT_EQ(spread.size(), 4u);
  std::set<uint32_t> seen;
  for (uint32_t q = 0; q < spread.size(); ++q) {
    EXPECT_NEAR(static_cast<double>(spread[q].size()), 5000.0, 5000.0 * 0.1) << "queue " << q;
    EXPECT_TRUE(std::is_sorted(spread[q].begin(), spread[q].end()));
    for (uint32_t f : spread[q]) {
      EXPECT_EQ(rssHashOf(flows[f].key) % 4, q);
      EXPECT_TRUE(seen.insert(f).second) << "flow " << f << " on two queues";
    }
  }
  EXPECT_EQ(seen.size(), flows.size());
  EXPECT_EQ(spreadOverQueues(flows, QueueSpread::standard(1), 1)[0].size(), flows.size())
      << "one queue carries them all";
}

TEST(QueueSpreadTest, TheStandardSpreadHashesAsRteSoftrssWithTheMicrosoftKey) {
  const QueueSpread standard = QueueSpread::standard(4);
  ASSERT_EQ(standard.table.size(), 128u);
  for (const char* vip : {"198.18.100.1:80/tcp", "[2001:db8::1]:53/udp"}) {
    const std::vector<GenFlow> flows =
        *makeFlows({*VipTarget::parse(vip)}, net("198.18.0.0/16"), net("2001:db8:ff::/64"), 200);
    for (const GenFlow& flow : flows) {
      EXPECT_EQ(standard.hashOf(flow.key), rssHashOf(flow.key)) << flow.key.toString();
      EXPECT_EQ(standard.queueOf(flow.key), rssHashOf(flow.key) % 4);
    }
  }
}

TEST(QueueSpreadTest, AGivenKeyAndTableSpreadAsANicWould) {
  const QueueSpread symmetric = *QueueSpread::parse("symmetric", "1,0,1,1", 2);
  ASSERT_EQ(symmetric.key.size(), 40u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(symmetric.key[i], i % 2 == 0 ? 0x6d : 0x5a);
  EXPECT_EQ(symmetric.table, (std::vector<uint16_t>{1, 0, 1, 1}));
  std::vector<uint32_t> per_queue(2, 0);
  const std::vector<GenFlow> flows = *makeFlows({*VipTarget::parse("198.18.100.1:80/tcp")},
                                                net("198.18.0.0/16"), net("2001:db8:ff::/64"), 400);
  for (const GenFlow& flow : flows) {
    FlowKey reverse = flow.key;
    std::swap(reverse.source, reverse.destination);
    std::swap(reverse.source_port, reverse.destination_port);
    EXPECT_EQ(symmetric.hashOf(flow.key), symmetric.hashOf(reverse))
        << "a symmetric key hashes a flow and its reverse alike";
    const uint16_t queue = symmetric.queueOf(flow.key);
    EXPECT_EQ(queue, symmetric.table[symmetric.hashOf(flow.key) & 3]);
    ++per_queue[queue];
  }
  EXPECT_NEAR(per_queue[1], 300, 60) << "three entries of four name queue 1";

  const std::string hex(80, 'c');
  EXPECT_EQ(QueueSpread::parse(hex, "", 3)->key, std::vector<uint8_t>(40, 0xcc));
  EXPECT_EQ(QueueSpread::parse(hex, "", 3)->table[5], 2) << "round robin by default";
}

TEST(QueueSpreadTest, BadKeysAndTablesNameTheOption) {
  EXPECT_THAT(QueueSpread::parse("6d5a", "", 2).status().message(),
              HasSubstr("--rss-key '6d5a': expected symmetric, or 40 to 52 bytes in hex"));
  EXPECT_THAT(QueueSpread::parse("", "0,1,0", 2).status().message(),
              HasSubstr("--rss-table '0,1,0': 3 entries; a redirection table has a power of two"));
  EXPECT_THAT(QueueSpread::parse("", "0,2", 2).status().message(),
              HasSubstr("--rss-table '0,2': '2' is not one of the 2 TX queue(s) (0 to 1)"));
}

TEST(FloodFlowTest, ASynFromARandomClientBelowTheFlowsPortsToTheVip) {
  const VipTarget vip = *VipTarget::parse("198.18.100.1:80/tcp");
  const SourceNet source = *SourceNet::parse("198.18.0.0/15");
  const std::vector<GenFlow> flows =
      *makeFlows({vip}, source, *SourceNet::parse("2001:db8:1::/64"), 1000);
  std::set<std::string> seen;
  for (uint64_t random = 0; random < 1000; ++random) {
    const GenFlow flood = floodFlow(vip, source, random * 0x9E3779B97F4A7C15ull);
    const uint16_t port = rte_be_to_cpu_16(flood.key.source_port);
    EXPECT_GE(port, 1);
    EXPECT_LT(port, kFirstSourcePort) << "never one of the generated flows' ports";
    EXPECT_EQ(flowIndexOf(flood.key, source, flows), -1);
    EXPECT_EQ(flood.key.protocol, kProtocolTcp);
    EXPECT_EQ(flood.key.destination_port, rte_cpu_to_be_16(80));
    seen.insert(flood.key.toString());
  }
  EXPECT_GE(seen.size(), 990u) << "each attempt a new flow";
}

}  // namespace
}  // namespace berth
