#include "berth/net/packet_parser.h"

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/packet_builder.h"
#include "support/test_names.h"

namespace berth {
namespace {

const IpAddress kRouter = IpAddress::v4(198, 18, 0, 254);
const IpAddress kRouter6 = *IpAddress::parse("2001:db8::fe");

Bytes tcpV4(Ipv4Options options = {}) {
  return concat(
      {ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20, options), tcp(40000, 80)});
}

Bytes prefix(Bytes bytes, size_t length) {
  bytes.resize(length);
  return bytes;
}

// One fixture per case: a frame built in code, and what the parser must make of it.
struct Case {
  std::string description;
  Bytes frame;
  ParseError error = ParseError::kNone;
  FrameType type = FrameType::kIp;
  std::string flow;  // FlowKey::toString(), when the frame parses as IP
};

std::vector<Case> cases() {
  return {
      {"TCP over IPv4", tcpV4(), ParseError::kNone, FrameType::kIp,
       "tcp 198.18.0.1:40000 -> 198.18.100.1:80"},
      {"UDP over IPv4 with Ethernet padding after the datagram",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 12), udp(5353, 53, 4),
               payload(4), payload(18)}),
       ParseError::kNone, FrameType::kIp, "udp 198.18.0.1:5353 -> 198.18.100.1:53"},
      {"IPv4 options are skipped",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20, {.header_words = 7}),
               tcp(40000, 80)}),
       ParseError::kNone, FrameType::kIp, "tcp 198.18.0.1:40000 -> 198.18.100.1:80"},
      {"one VLAN tag",
       concat({ethernet(kEtherTypeIpv4, {100}), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80)}),
       ParseError::kNone, FrameType::kIp, "tcp 198.18.0.1:1 -> 198.18.100.1:80"},
      {"QinQ: two VLAN tags",
       concat({ethernet(kEtherTypeIpv4, {100, 200}, kEtherTypeQinQ),
               ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80)}),
       ParseError::kNone, FrameType::kIp, "tcp 198.18.0.1:1 -> 198.18.100.1:80"},
      {"TCP over IPv6",
       concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 20), tcp(40000, 443)}),
       ParseError::kNone, FrameType::kIp, "tcp [2001:db8::1]:40000 -> [2001:db8:100::1]:443"},
      {"IPv6 hop-by-hop, routing and destination options before UDP",
       concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 0, 8 + 24 + 16 + 8),
               ipv6Extension(43), ipv6Extension(60, 2), ipv6Extension(kProtocolUdp, 1),
               udp(1000, 53, 0)}),
       ParseError::kNone, FrameType::kIp, "udp [2001:db8::1]:1000 -> [2001:db8:100::1]:53"},
      {"ICMP echo to a VIP has no ports",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolIcmp, 8), icmp(8, 0)}),
       ParseError::kNone, FrameType::kIp, "icmp 198.18.0.1:0 -> 198.18.100.1:0"},
      {"ICMP fragmentation-needed about a backend's reply is steered by the inner flow",
       concat({ethernet(kEtherTypeIpv4), ipv4(kRouter, kVip, kProtocolIcmp, 8 + 20 + 8), icmp(3, 4),
               ipv4(kVip, kClient, kProtocolTcp, 1480), tcp(80, 40000)}),
       ParseError::kNone, FrameType::kIp, "tcp 198.18.0.1:40000 -> 198.18.100.1:80"},
      {"ICMPv6 packet-too-big is steered by the inner flow",
       concat({ethernet(kEtherTypeIpv6), ipv6(kRouter6, kVip6, kProtocolIcmpv6, 8 + 40 + 8),
               icmp(2, 0), ipv6(kVip6, kClient6, kProtocolTcp, 1400), tcp(443, 40000)}),
       ParseError::kNone, FrameType::kIp, "tcp [2001:db8::1]:40000 -> [2001:db8:100::1]:443"},
      {"ARP", concat({ethernet(kEtherTypeArp), payload(28)}), ParseError::kNone, FrameType::kArp,
       ""},
      {"another ethertype", concat({ethernet(0x88CC), payload(40)}), ParseError::kNone,
       FrameType::kOther, ""},

      {"short frame", payload(13), ParseError::kShortFrame, FrameType::kOther, ""},
      {"VLAN tag cut off", prefix(ethernet(kEtherTypeIpv4, {100}), 16), ParseError::kTruncatedVlan,
       FrameType::kOther, ""},
      {"three VLAN tags",
       concat({ethernet(kEtherTypeIpv4, {1, 2, 3}), ipv4(kClient, kVip, kProtocolTcp, 20),
               tcp(1, 80)}),
       ParseError::kTooManyVlanTags, FrameType::kOther, ""},
      {"IPv4 header cut off", concat({ethernet(kEtherTypeIpv4), payload(19)}),
       ParseError::kTruncatedIpv4, FrameType::kIp, ""},
      {"IPv4 version 6 under the IPv4 ethertype", tcpV4({.version = 6}),
       ParseError::kIpv4BadVersion, FrameType::kIp, ""},
      {"IHL below 5", tcpV4({.header_words = 4}), ParseError::kIpv4HeaderTooShort, FrameType::kIp,
       ""},
      {"IHL beyond the frame",
       prefix(concat({ethernet(kEtherTypeIpv4),
                      ipv4(kClient, kVip, kProtocolTcp, 0, {.header_words = 15})}),
              14 + 40),
       ParseError::kIpv4HeaderBeyondFrame, FrameType::kIp, ""},
      {"total length beyond the frame", tcpV4({.total_length = 1500}),
       ParseError::kIpv4TotalLengthBeyondFrame, FrameType::kIp, ""},
      {"total length below the header", tcpV4({.total_length = 16}),
       ParseError::kIpv4TotalLengthBelowHeader, FrameType::kIp, ""},
      {"IPv6 header cut off", concat({ethernet(kEtherTypeIpv6), payload(39)}),
       ParseError::kTruncatedIpv6, FrameType::kIp, ""},
      {"IPv6 payload length beyond the frame",
       concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 200), tcp(1, 80)}),
       ParseError::kIpv6PayloadLengthBeyondFrame, FrameType::kIp, ""},
      {"IPv6 extension header running off the end",
       concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 0, 8), ipv6Extension(60, 3)}),
       ParseError::kIpv6ExtensionChainTruncated, FrameType::kIp, ""},
      {"nine IPv6 extension headers",
       concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 60, 9 * 8 + 20), ipv6Extension(60),
               ipv6Extension(60), ipv6Extension(60), ipv6Extension(60), ipv6Extension(60),
               ipv6Extension(60), ipv6Extension(60), ipv6Extension(60), ipv6Extension(kProtocolTcp),
               tcp(1, 80)}),
       ParseError::kIpv6ExtensionChainTooLong, FrameType::kIp, ""},
      {"TCP header cut off",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 12), payload(12)}),
       ParseError::kTruncatedTcp, FrameType::kIp, ""},
      {"TCP data offset below 5",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80, 4)}),
       ParseError::kTruncatedTcp, FrameType::kIp, ""},
      {"TCP data offset beyond the packet",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80, 15)}),
       ParseError::kTruncatedTcp, FrameType::kIp, ""},
      {"UDP header cut off",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 6), payload(6)}),
       ParseError::kTruncatedUdp, FrameType::kIp, ""},
      {"UDP length beyond the packet",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8), udp(1, 53, 0, 100)}),
       ParseError::kTruncatedUdp, FrameType::kIp, ""},
      {"the first fragment of a UDP datagram: its UDP length covers the whole datagram",
       concat({ethernet(kEtherTypeIpv4),
               ipv4(kClient, kVip, kProtocolUdp, 16, {.flags_and_offset = 0x2000}),
               udp(5353, 53, 1000), payload(8)}),
       ParseError::kNone, FrameType::kIp, "udp 198.18.0.1:5353 -> 198.18.100.1:53"},
      {"ICMP header cut off",
       concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolIcmp, 4), payload(4)}),
       ParseError::kTruncatedIcmp, FrameType::kIp, ""},
      {"ICMP error without the inner ports",
       concat({ethernet(kEtherTypeIpv4), ipv4(kRouter, kVip, kProtocolIcmp, 8 + 20 + 2),
               icmp(11, 0), ipv4(kVip, kClient, kProtocolTcp, 20), payload(2)}),
       ParseError::kIcmpInnerTruncated, FrameType::kIp, ""},
      {"ICMP error without an inner header",
       concat({ethernet(kEtherTypeIpv4), ipv4(kRouter, kVip, kProtocolIcmp, 8 + 10), icmp(3, 1),
               payload(10)}),
       ParseError::kIcmpInnerTruncated, FrameType::kIp, ""},
  };
}

void PrintTo(const Case& fixture, std::ostream* out) { *out << fixture.description; }

class PacketParserTest : public ::testing::TestWithParam<Case> {};

TEST_P(PacketParserTest, ParsesAsTheFixtureSays) {
  const Case& fixture = GetParam();
  ParsedPacket packet;
  EXPECT_EQ(parsePacket(fixture.frame.data(), fixture.frame.size(), packet), fixture.error)
      << toString(parsePacket(fixture.frame.data(), fixture.frame.size(), packet));
  EXPECT_EQ(packet.type, fixture.type);
  if (!fixture.flow.empty()) {
    EXPECT_EQ(packet.flow.toString(), fixture.flow);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PacketParserTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return testNameOf(info.param.description);
                         });

TEST(PacketParserDetailTest, ReportsOffsetsVlansAndHopLimit) {
  const Bytes frame =
      concat({ethernet(kEtherTypeIpv4, {100, 200}, kEtherTypeQinQ),
              ipv4(kClient, kVip, kProtocolTcp, 20, {.header_words = 6, .ttl = 9}), tcp(1, 80)});
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(frame.data(), frame.size(), packet), ParseError::kNone);
  EXPECT_EQ(packet.vlan_tags, 2);
  EXPECT_EQ(packet.vlan_ids[0], 100);
  EXPECT_EQ(packet.vlan_ids[1], 200);
  EXPECT_EQ(packet.l3_offset, 22);
  EXPECT_EQ(packet.l4_offset, 22 + 24);
  EXPECT_EQ(packet.ip_length, 24 + 20);
  EXPECT_EQ(packet.hop_limit, 9);
  EXPECT_TRUE(packet.dont_fragment);
  EXPECT_FALSE(packet.fragment);
  EXPECT_FALSE(packet.icmp_error);
  EXPECT_EQ(packet.tcp_flags, kTcpSyn) << "the builder's TCP header is a SYN";
}

TEST(PacketParserDetailTest, FirstIpv4FragmentHasPortsAndLaterOnesDoNot) {
  const Bytes first = tcpV4({.flags_and_offset = 0x2000});  // MF, offset 0
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(first.data(), first.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.fragment);
  EXPECT_FALSE(packet.later_fragment);
  EXPECT_EQ(packet.flow.toString(), "tcp 198.18.0.1:40000 -> 198.18.100.1:80");

  // A later fragment carries no transport header: whatever follows is not read as one.
  const Bytes later =
      concat({ethernet(kEtherTypeIpv4),
              ipv4(kClient, kVip, kProtocolTcp, 3, {.flags_and_offset = 185}), payload(3)});
  ASSERT_EQ(parsePacket(later.data(), later.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.fragment);
  EXPECT_TRUE(packet.later_fragment);
  EXPECT_EQ(packet.l4_offset, 0);
  EXPECT_EQ(packet.flow.toString(), "tcp 198.18.0.1:0 -> 198.18.100.1:0");
}

TEST(PacketParserDetailTest, Ipv6FragmentHeaderMarksFragments) {
  const Bytes first = concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 44, 8 + 8),
                              ipv6Fragment(kProtocolUdp, 0, true), udp(1000, 53, 0)});
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(first.data(), first.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.fragment);
  EXPECT_FALSE(packet.later_fragment);
  EXPECT_EQ(packet.flow.toString(), "udp [2001:db8::1]:1000 -> [2001:db8:100::1]:53");

  const Bytes later = concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 44, 8 + 5),
                              ipv6Fragment(kProtocolUdp, 100, false), payload(5)});
  ASSERT_EQ(parsePacket(later.data(), later.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.later_fragment);
  EXPECT_EQ(packet.flow.source_port, 0);
}

TEST(PacketParserDetailTest, IcmpErrorIsMarked) {
  const Bytes frame =
      concat({ethernet(kEtherTypeIpv4), ipv4(kRouter, kVip, kProtocolIcmp, 8 + 20 + 8), icmp(11, 0),
              ipv4(kVip, kClient, kProtocolUdp, 100), udp(53, 5353, 92)});
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(frame.data(), frame.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.icmp_error);
  EXPECT_EQ(packet.flow.toString(), "udp 198.18.0.1:5353 -> 198.18.100.1:53");
}

// Every prefix of every fixture, and random bytes behind valid headers, parse without reading
// outside the buffer (the ASan build of this test checks that) and report an error or a result.
TEST(PacketParserRobustnessTest, EveryTruncationAndRandomTailIsHandled) {
  std::mt19937 random(13);
  for (const Case& fixture : cases()) {
    for (size_t length = 0; length <= fixture.frame.size(); ++length) {
      // An exact-size heap copy, so a read past the end is a read past the allocation.
      std::vector<uint8_t> copy(fixture.frame.begin(), fixture.frame.begin() + length);
      ParsedPacket packet;
      const ParseError error = parsePacket(copy.data(), copy.size(), packet);
      ASSERT_LT(static_cast<size_t>(error), kParseErrorCount) << fixture.description;
    }
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<uint8_t> mutated = fixture.frame;
      for (int flips = 0; flips < 4 && !mutated.empty(); ++flips) {
        mutated[random() % mutated.size()] = static_cast<uint8_t>(random());
      }
      ParsedPacket packet;
      ASSERT_LT(static_cast<size_t>(parsePacket(mutated.data(), mutated.size(), packet)),
                kParseErrorCount);
    }
  }
}

// Untagged IPv4 TCP and UDP take a shorter path through the parser than tagged frames, which
// walk every layer. Pins that the two agree on every frame, result and error alike: each of these
// frames, with one or two header bytes set to chosen and random values and cut to every length,
// parses as it does behind a VLAN tag, apart from the tag itself and the four bytes it moves the
// headers by.
TEST(PacketParserRobustnessTest, UntaggedIpv4ParsesAsItDoesBehindAVlanTag) {
  const std::vector<Bytes> frames = {
      concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(40000, 80)}),
      concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 26), tcp(40000, 80),
              payload(6)}),
      concat(
          {ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8 + 12), udp(5353, 53, 12)}),
      concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8), udp(5353, 53, 0)}),
  };
  // The bytes the shorter path reads or tests: EtherType, version and IHL, total length, flags
  // and fragment offset, protocol, TCP data offset, UDP length.
  const size_t watched[] = {12, 13, 14, 16, 17, 20, 21, 23, 34 + 4, 34 + 5, 34 + 12};
  const uint8_t values[] = {0x00, 0x01, 0x05, 0x06, 0x08, 0x11, 0x14, 0x1C, 0x20,
                            0x28, 0x3F, 0x40, 0x45, 0x46, 0x50, 0x60, 0xF0, 0xFF};
  std::mt19937 random(27);
  auto compare = [](const Bytes& untagged) {
    Bytes tagged(untagged.begin(), untagged.begin() + std::min<size_t>(12, untagged.size()));
    if (untagged.size() >= 12) {
      const Bytes tag = {0x81, 0x00, 0x00, 0x07};
      tagged.insert(tagged.end(), tag.begin(), tag.end());
      tagged.insert(tagged.end(), untagged.begin() + 12, untagged.end());
    }
    ParsedPacket direct;
    ParsedPacket walked;
    const ParseError direct_error = parsePacket(untagged.data(), untagged.size(), direct);
    const ParseError walked_error = parsePacket(tagged.data(), tagged.size(), walked);
    if (untagged.size() < 14) return;  // no EtherType to tag
    ASSERT_EQ(direct_error, walked_error) << testing::PrintToString(untagged);
    if (direct_error != ParseError::kNone) return;
    EXPECT_EQ(direct.type, walked.type);
    EXPECT_EQ(direct.flow, walked.flow);
    EXPECT_EQ(direct.l3_offset + 4, walked.l3_offset);
    EXPECT_EQ(direct.l4_offset == 0 ? 0 : direct.l4_offset + 4, walked.l4_offset);
    EXPECT_EQ(direct.ip_length, walked.ip_length);
    EXPECT_EQ(direct.vlan_tags, 0);
    EXPECT_EQ(direct.hop_limit, walked.hop_limit);
    EXPECT_EQ(direct.dont_fragment, walked.dont_fragment);
    EXPECT_EQ(direct.fragment, walked.fragment);
    EXPECT_EQ(direct.later_fragment, walked.later_fragment);
    EXPECT_EQ(direct.icmp_error, walked.icmp_error);
    EXPECT_EQ(direct.tcp_flags, walked.tcp_flags);
  };
  for (const Bytes& frame : frames) {
    for (size_t length = 0; length <= frame.size(); ++length) {
      compare(Bytes(frame.begin(), frame.begin() + length));
    }
    for (size_t at : watched) {
      if (at >= frame.size()) continue;
      for (uint8_t value : values) {
        Bytes mutated = frame;
        mutated[at] = value;
        compare(mutated);
        mutated[watched[random() % 8]] = static_cast<uint8_t>(random());  // within the IP header
        compare(mutated);
        compare(Bytes(mutated.begin(), mutated.end() - 1 - random() % 8));
      }
    }
  }
}

TEST(PacketParserDetailTest, EveryErrorHasADistinctCounterName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kParseErrorCount; ++i) {
    names.insert(std::string(toString(static_cast<ParseError>(i))));
  }
  EXPECT_EQ(names.size(), kParseErrorCount);
  EXPECT_EQ(toString(ParseError::kIpv4HeaderTooShort), "ipv4_ihl_below_5");
}

}  // namespace
}  // namespace berth
