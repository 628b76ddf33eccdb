#include "berth/dataplane/neighbor_reply.h"

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
const IpAddress kAsker6 = *IpAddress::parse("2001:db8::1");

Bytes arp(uint16_t opcode, const IpAddress& sender, const IpAddress& target) {
  Bytes body(28, 0);
  const uint8_t fixed[8] = {0, 1, 0x08, 0, 6, 4, 0, static_cast<uint8_t>(opcode)};
  const uint8_t sender_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(body.data(), fixed, 8);
  std::memcpy(body.data() + 8, sender_mac, 6);
  std::memcpy(body.data() + 14, sender.bytes.data(), 4);
  std::memcpy(body.data() + 24, target.bytes.data(), 4);  // target MAC (18..23) unknown
  return body;
}

// A neighbour solicitation for `target` with the source link-layer option.
Bytes solicitation(const IpAddress& target, uint8_t first_target_byte_override = 0) {
  Bytes message(32, 0);
  message[0] = 135;
  std::memcpy(message.data() + 8, target.bytes.data(), 16);
  if (first_target_byte_override != 0) message[8] = first_target_byte_override;
  const uint8_t option[8] = {1, 1, 0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(message.data() + 24, option, 8);
  return message;
}

TEST(NeighborReplyTest, ArpRequestIsAnsweredWithOurMac) {
  const IpAddress asker = IpAddress::v4(198, 18, 0, 1);
  const IpAddress vip = IpAddress::v4(198, 18, 100, 1);
  ReceivedFrame received(concat({ethernet(kEtherTypeArp, {7}), arp(1, asker, vip)}));
  const std::optional<IpAddress> query = neighborQuery(received.frame, received.packet);
  ASSERT_TRUE(query.has_value());
  EXPECT_EQ(*query, vip);
  ASSERT_TRUE(buildNeighborReply(received.frame, received.packet, vip, kPortMac));

  const Bytes reply(received.frame.data, received.frame.data + received.frame.length);
  EXPECT_EQ(Bytes(reply.begin(), reply.begin() + 6), (Bytes{0x02, 0, 0, 0, 0, 0x02}));
  EXPECT_EQ(Bytes(reply.begin() + 6, reply.begin() + 12),
            Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
  EXPECT_EQ(reply[14], 0);
  EXPECT_EQ(reply[15], 7) << "the VLAN tag stays";
  const Bytes body(reply.begin() + 18, reply.end());
  Bytes expected(28, 0);
  const uint8_t fixed[8] = {0, 1, 0x08, 0, 6, 4, 0, 2};
  const uint8_t asker_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(expected.data(), fixed, 8);
  std::memcpy(expected.data() + 8, kPortMac.bytes.data(), 6);
  std::memcpy(expected.data() + 14, vip.bytes.data(), 4);
  std::memcpy(expected.data() + 18, asker_mac, 6);
  std::memcpy(expected.data() + 24, asker.bytes.data(), 4);
  EXPECT_EQ(body, expected);
}

TEST(NeighborReplyTest, ArpRepliesAndTruncatedRequestsAreNotQuestions) {
  const IpAddress a = IpAddress::v4(198, 18, 0, 1);
  ReceivedFrame reply(concat({ethernet(kEtherTypeArp), arp(2, a, a)}));
  EXPECT_FALSE(neighborQuery(reply.frame, reply.packet).has_value());
  Bytes truncated = concat({ethernet(kEtherTypeArp), arp(1, a, a)});
  truncated.resize(truncated.size() - 1);
  ReceivedFrame short_request(truncated);
  EXPECT_FALSE(neighborQuery(short_request.frame, short_request.packet).has_value());
}

TEST(NeighborReplyTest, SolicitationIsAnsweredWithASolicitedAdvertisement) {
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv6), ipv6(kAsker6, kVip6, kProtocolIcmpv6, 32, 255),
              solicitation(kVip6)}),
      /*headroom=*/0, /*tailroom=*/0);
  ASSERT_EQ(neighborQuery(received.frame, received.packet), kVip6);
  ASSERT_TRUE(buildNeighborReply(received.frame, received.packet, kVip6, kPortMac));
  ASSERT_EQ(received.frame.length, 14 + 40 + 32);

  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(received.frame.data + 14);
  EXPECT_EQ(ip->hop_limits, 255);
  EXPECT_EQ(std::memcmp(ip->src_addr, kVip6.bytes.data(), 16), 0);
  EXPECT_EQ(std::memcmp(ip->dst_addr, kAsker6.bytes.data(), 16), 0);
  uint8_t* message = received.frame.data + 54;
  EXPECT_EQ(message[0], 136);
  EXPECT_EQ(message[4], 0x60) << "solicited and override";
  EXPECT_EQ(std::memcmp(message + 8, kVip6.bytes.data(), 16), 0);
  EXPECT_EQ(message[24], 2);
  EXPECT_EQ(std::memcmp(message + 26, kPortMac.bytes.data(), 6), 0);
  uint16_t sent;
  std::memcpy(&sent, message + 2, 2);
  message[2] = message[3] = 0;
  EXPECT_EQ(rte_ipv6_udptcp_cksum(ip, message), sent);
}

TEST(NeighborReplyTest, DuplicateAddressProbeIsAnsweredToAllNodes) {
  const IpAddress unspecified = *IpAddress::parse("::");
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv6), ipv6(unspecified, kVip6, kProtocolIcmpv6, 32, 255),
              solicitation(kVip6)}));
  ASSERT_TRUE(buildNeighborReply(received.frame, received.packet, kVip6, kPortMac));
  EXPECT_EQ(Bytes(received.frame.data, received.frame.data + 6), (Bytes{0x33, 0x33, 0, 0, 0, 1}));
  EXPECT_EQ(received.frame.data[14 + 24], 0xFF);
  EXPECT_EQ(received.frame.data[54 + 4], 0x20) << "override only, not solicited";
}

TEST(NeighborReplyTest, InvalidSolicitationsAreNotQuestions) {
  ReceivedFrame forwarded(
      concat({ethernet(kEtherTypeIpv6), ipv6(kAsker6, kVip6, kProtocolIcmpv6, 32, 64),
              solicitation(kVip6)}));
  EXPECT_FALSE(neighborQuery(forwarded.frame, forwarded.packet).has_value()) << "hop limit not 255";
  ReceivedFrame multicast(
      concat({ethernet(kEtherTypeIpv6), ipv6(kAsker6, kVip6, kProtocolIcmpv6, 32, 255),
              solicitation(kVip6, 0xFF)}));
  EXPECT_FALSE(neighborQuery(multicast.frame, multicast.packet).has_value()) << "multicast target";
  Bytes cut = solicitation(kVip6);
  cut.resize(16);
  ReceivedFrame short_message(
      concat({ethernet(kEtherTypeIpv6), ipv6(kAsker6, kVip6, kProtocolIcmpv6, 16, 255), cut}));
  EXPECT_FALSE(neighborQuery(short_message.frame, short_message.packet).has_value());
}

TEST(NeighborReplyTest, AdvertisementNeedsRoomAfterAShortSolicitation) {
  // A solicitation without the source link-layer option is 8 bytes shorter than the answer.
  Bytes message = solicitation(kVip6);
  message.resize(24);
  ReceivedFrame received(
      concat({ethernet(kEtherTypeIpv6), ipv6(kAsker6, kVip6, kProtocolIcmpv6, 24, 255), message}),
      /*headroom=*/0, /*tailroom=*/4);
  EXPECT_FALSE(buildNeighborReply(received.frame, received.packet, kVip6, kPortMac));
}

}  // namespace
}  // namespace berth
