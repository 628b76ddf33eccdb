#include "berth/dataplane/icmp_reply.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_ip.h>

#include <cstring>
#include <vector>

#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:10");

// A client's full-size TCP segment with DF set that would not fit once encapsulated.
TEST(IcmpReplyTest, Ipv4FragmentationNeededGoesBackToTheClientFromTheVip) {
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv4, {100}), ipv4(kClient, kVip, kProtocolTcp, 1480),
              tcp(40000, 80), payload(1460)}),
      128);
  ASSERT_TRUE(buildTooBigReply(received.frame, received.packet, 1480, kPortMac));

  const uint8_t* reply = received.frame.data;
  // Back to the sender's MAC, from the port's, on the same VLAN.
  EXPECT_EQ(Bytes(reply, reply + 6),
            Bytes(received.original.begin() + 6, received.original.begin() + 12));
  EXPECT_EQ(Bytes(reply + 6, reply + 12), Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
  EXPECT_EQ(Bytes(reply + 12, reply + 18),
            Bytes(received.original.begin() + 12, received.original.begin() + 18));
  EXPECT_EQ(received.frame.length, 18 + kIcmpv4ReplyLimit);

  ParsedPacket parsed;
  ASSERT_EQ(parsePacket(reply, received.frame.length, parsed), ParseError::kNone);
  EXPECT_TRUE(parsed.icmp_error);
  // The parser reverses the quoted flow: this is the reply direction of the client's flow.
  EXPECT_EQ(parsed.flow.toString(), "tcp 198.18.100.1:80 -> 198.18.0.1:40000");

  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(reply + 18);
  EXPECT_EQ(rte_ipv4_cksum(ip), 0);
  EXPECT_EQ(ip->next_proto_id, IPPROTO_ICMP);
  EXPECT_EQ(std::memcmp(&ip->src_addr, kVip.bytes.data(), 4), 0);
  EXPECT_EQ(std::memcmp(&ip->dst_addr, kClient.bytes.data(), 4), 0);
  const uint8_t* icmp = reply + 18 + 20;
  EXPECT_EQ(icmp[0], 3);
  EXPECT_EQ(icmp[1], 4);
  EXPECT_EQ(icmp[6] << 8 | icmp[7], 1480);
  EXPECT_EQ(static_cast<uint16_t>(~rte_raw_cksum(icmp, kIcmpv4ReplyLimit - 20)), 0);
  // The quoted packet is the start of the client's packet, byte for byte.
  EXPECT_EQ(Bytes(icmp + 8, reply + received.frame.length),
            Bytes(received.original.begin() + 18,
                  received.original.begin() + 18 + kIcmpv4ReplyLimit - 28));
}

TEST(IcmpReplyTest, Ipv6PacketTooBigCarriesTheMtuAndAValidChecksum) {
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 1440), tcp(40000, 443),
              payload(1420)}),
      128);
  ASSERT_TRUE(buildTooBigReply(received.frame, received.packet, 1440, kPortMac));
  const uint8_t* reply = received.frame.data;
  EXPECT_EQ(received.frame.length, 14 + kIcmpv6ReplyLimit);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(received.frame.data + 14);
  EXPECT_EQ(ip->proto, IPPROTO_ICMPV6);
  EXPECT_EQ(std::memcmp(ip->src_addr, kVip6.bytes.data(), 16), 0);
  EXPECT_EQ(std::memcmp(ip->dst_addr, kClient6.bytes.data(), 16), 0);
  uint8_t* icmp = received.frame.data + 14 + 40;
  EXPECT_EQ(icmp[0], 2);
  EXPECT_EQ(icmp[4] << 24 | icmp[5] << 16 | icmp[6] << 8 | icmp[7], 1440);
  const uint16_t sent = static_cast<uint16_t>(icmp[2] << 8 | icmp[3]);
  icmp[2] = icmp[3] = 0;
  EXPECT_EQ(rte_be_to_cpu_16(rte_ipv6_udptcp_cksum(ip, icmp)), sent);

  ParsedPacket parsed;
  ASSERT_EQ(parsePacket(reply, received.frame.length, parsed), ParseError::kNone);
  EXPECT_EQ(parsed.flow.toString(), "tcp [2001:db8:100::1]:443 -> [2001:db8::1]:40000");
}

TEST(IcmpReplyTest, ShortPacketsAreQuotedWhole) {
  ReceivedFrame received(concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8 + 4),
                                 udp(5353, 53, 4), payload(4)}),
                         64);
  ASSERT_TRUE(buildTooBigReply(received.frame, received.packet, 1400, kPortMac));
  EXPECT_EQ(received.frame.length, 14 + 20 + 8 + 32);
}

TEST(IcmpReplyTest, WithoutHeadroomTheFrameIsLeftAlone) {
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80)}), 16);
  const Bytes before(received.frame.data, received.frame.data + received.frame.length);
  EXPECT_FALSE(buildTooBigReply(received.frame, received.packet, 1400, kPortMac));
  EXPECT_EQ(Bytes(received.frame.data, received.frame.data + received.frame.length), before);
}

// A client's oversized TCP segment with DF set, from `source`.
ReceivedFrame oversizedFrom(const IpAddress& source) {
  if (source.family == IpFamily::kIpv4) {
    return ReceivedFrame(concat({ethernet(kEtherTypeIpv4), ipv4(source, kVip, kProtocolTcp, 1480),
                                 tcp(40000, 80), payload(1460)}));
  }
  return ReceivedFrame(concat({ethernet(kEtherTypeIpv6), ipv6(source, kVip6, kProtocolTcp, 1440),
                               tcp(40000, 443), payload(1420)}));
}

TEST(IcmpReplyTest, AnOrdinaryClientMayBeAnswered) {
  EXPECT_TRUE(mayAnswerWithIcmpError(oversizedFrom(kClient).frame, oversizedFrom(kClient).packet));
  ReceivedFrame v6 = oversizedFrom(kClient6);
  EXPECT_TRUE(mayAnswerWithIcmpError(v6.frame, v6.packet));
}

// An error to a forged source that is not one host would land on a network, on a group, or on
// berth itself.
TEST(IcmpReplyTest, NoErrorGoesToASourceThatIsNotOneHost) {
  for (const char* source : {"0.0.0.0", "0.1.2.3", "127.0.0.1", "224.0.0.1", "239.255.255.250",
                             "240.0.0.1", "255.255.255.255", "::", "::1", "ff02::1", "ff0e::5"}) {
    ReceivedFrame received = oversizedFrom(*IpAddress::parse(source));
    ASSERT_EQ(received.parse_error, ParseError::kNone) << source;
    EXPECT_FALSE(mayAnswerWithIcmpError(received.frame, received.packet)) << source;
  }
}

TEST(IcmpReplyTest, NoErrorAnswersAFrameSentToAGroupMac) {
  for (uint8_t first : {0xff, 0x01, 0x33}) {  // broadcast, IPv4 and IPv6 multicast MACs
    ReceivedFrame received = oversizedFrom(kClient);
    received.frame.data[0] = first;
    EXPECT_FALSE(mayAnswerWithIcmpError(received.frame, received.packet)) << int{first};
  }
}

TEST(IcmpReplyTest, NoErrorAnswersAnIcmpErrorOrALaterFragment) {
  // An oversized "port unreachable" about a packet the VIP sent the client.
  Bytes quoted = concat({ipv4(kVip, kClient, kProtocolUdp, 8 + 1400), udp(53, 5353, 1400)});
  ReceivedFrame error(concat({ethernet(kEtherTypeIpv4),
                              ipv4(kClient, kVip, kProtocolIcmp, 8 + quoted.size() + 1400),
                              icmp(3, 3), quoted, payload(1400)}));
  ASSERT_EQ(error.parse_error, ParseError::kNone);
  ASSERT_TRUE(error.packet.icmp_error);
  EXPECT_FALSE(mayAnswerWithIcmpError(error.frame, error.packet));

  Ipv4Options later;
  later.flags_and_offset = 0x4000 | 185;  // DF and offset 1480
  ReceivedFrame fragment(concat(
      {ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 1480, later), payload(1480)}));
  ASSERT_TRUE(fragment.packet.later_fragment);
  EXPECT_FALSE(mayAnswerWithIcmpError(fragment.frame, fragment.packet));
}

}  // namespace
}  // namespace berth
