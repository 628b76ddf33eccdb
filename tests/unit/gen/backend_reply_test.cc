// berthgen --reflect's backend (gen/backend_reply.h): a frame berthd sends a Full-NAT backend
// comes back as that backend's reply, addresses and ports swapped, a SYN answered with SYN-ACK,
// the payload followed by the backend's address, every checksum right; anything else (to or
// from a VIP, a tunnel, GUE, ICMP, a fragment, a frame shorter than its headers say) is left as
// it was.

#include "berth/gen/backend_reply.h"

#include <gtest/gtest.h>

#include <vector>

#include "berth/net/packet_parser.h"
#include "support/checksums.h"
#include "support/packet_builder.h"
#include "support/readdress.h"

namespace berth {
namespace {

const MacAddress kGenMac = *MacAddress::parse("02:00:00:00:00:02");
const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");
const IpAddress kLocal = IpAddress::v4(198, 18, 1, 20);
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);
const IpAddress kLocal6 = *IpAddress::parse("2001:db8:1::20");
const IpAddress kBackend6 = *IpAddress::parse("2001:db8:1::2");

const std::vector<VipTarget> kVips = {*VipTarget::parse("198.18.100.1:80/tcp"),
                                      *VipTarget::parse("[2001:db8:100::1]:53/udp")};

// Flow 0's packet `sequence` to `vip`, as berthd sends it on: from the local address's port
// 20001 to the backend's port 8080, from the port's MAC to berthgen's.
Bytes toBackend(const VipTarget& vip, uint32_t sequence, size_t size = 64) {
  const SourceNet v4 = *SourceNet::parse("198.18.0.0/15");
  const SourceNet v6 = *SourceNet::parse("2001:db8::/64");
  const GenFlow flow = (*makeFlows({vip}, v4, v6, 1))[0];
  Bytes frame(2048);
  frame.resize(buildFrame(flow, 0, sequence, 77, size, kPortMac, kGenMac, frame.data()));
  const bool v4_flow = vip.address.isV4();
  return readdressed(frame, v4_flow ? kLocal : kLocal6, 20001, v4_flow ? kBackend : kBackend6,
                     8080);
}

size_t reply(Bytes& frame, FlowKey& key, uint16_t gue_port = 0) {
  const size_t length = frame.size();
  frame.resize(2048);
  const size_t answered = replyAsBackend(frame.data(), length, frame.size(), kVips, gue_port, key);
  frame.resize(answered == 0 ? length : answered);
  return answered;
}

TEST(BackendReplyTest, ASynIsAnsweredWithSynAckFromTheBackendWithItsAddressAfterThePayload) {
  const Bytes request = toBackend(kVips[0], 0);
  Bytes frame = request;
  FlowKey key;
  ASSERT_EQ(reply(frame, key), request.size() + kReplyBackendBytes);
  EXPECT_EQ(key, FlowKey::make(kBackend, kLocal, 8080, 20001, kProtocolTcp));
  EXPECT_EQ(Bytes(frame.begin(), frame.begin() + 6),
            Bytes(request.begin() + 6, request.begin() + 12))
      << "back to the MAC it came from";
  EXPECT_EQ(Bytes(frame.begin() + 6, frame.begin() + 12),
            Bytes(request.begin(), request.begin() + 6));
  EXPECT_EQ(frame[14 + 8], 64) << "the TTL the backend's stack starts with";
  EXPECT_EQ(frame[14 + 20 + 13], 0x12) << "SYN-ACK";
  EXPECT_EQ(Bytes(frame.begin() + 14 + 20 + 4, frame.begin() + 14 + 20 + 8),
            Bytes(request.begin() + 14 + 20 + 4, request.begin() + 14 + 20 + 8))
      << "the request's sequence number, by which the sink places the reply";
  EXPECT_EQ(Bytes(frame.begin() + 14 + 40, frame.end() - kReplyBackendBytes),
            Bytes(request.begin() + 14 + 40, request.end()))
      << "the payload";
  EXPECT_EQ(Bytes(frame.end() - kReplyBackendBytes, frame.end() - kReplyBackendBytes + 4),
            Bytes(kBackend.bytes.begin(), kBackend.bytes.begin() + 4));
  EXPECT_TRUE(checksumsVerify(frame));

  Bytes ack = toBackend(kVips[0], 5);
  ASSERT_NE(reply(ack, key), 0u);
  EXPECT_EQ(ack[14 + 20 + 13], 0x10) << "anything but a SYN is answered with an ACK";
}

TEST(BackendReplyTest, AnIpv6UdpRequestIsAnsweredWithItsLengthsAndChecksumRight) {
  const Bytes request = toBackend(kVips[1], 3, 120);
  Bytes frame = request;
  FlowKey key;
  ASSERT_EQ(reply(frame, key), request.size() + kReplyBackendBytes);
  EXPECT_EQ(key, FlowKey::make(kBackend6, kLocal6, 8080, 20001, kProtocolUdp));
  EXPECT_EQ(frame[14 + 4] << 8 | frame[14 + 5], 120 - 14 - 40 + 16) << "payload length";
  EXPECT_EQ(frame[14 + 40 + 4] << 8 | frame[14 + 40 + 5], 120 - 14 - 40 + 16) << "UDP length";
  EXPECT_EQ(Bytes(frame.end() - kReplyBackendBytes, frame.end()),
            Bytes(kBackend6.bytes.begin(), kBackend6.bytes.end()));
  EXPECT_TRUE(checksumsVerify(frame));
}

TEST(BackendReplyTest, ASmallRequestsPaddingMakesRoomForTheBackendsAddress) {
  // 64 bytes of IPv4 UDP: 46 of IP, the rest padding; the reply is 62 bytes of IP and more.
  const VipTarget udp = *VipTarget::parse("198.18.100.9:53/udp");
  Bytes request = toBackend(udp, 1, 60);
  Bytes frame = request;
  FlowKey key;
  ASSERT_EQ(reply(frame, key), 14u + 46 + kReplyBackendBytes);
  EXPECT_EQ(frame[14 + 2] << 8 | frame[14 + 3], 46 + 16);
  EXPECT_TRUE(checksumsVerify(frame));
}

TEST(BackendReplyTest, WhatIsNoFullNatRequestIsLeftAsItWas) {
  FlowKey key;
  // To a VIP (l2dsr) or from one (berthd's translated replies).
  const Bytes request = toBackend(kVips[0], 1);
  for (const Bytes& vip_frame : {readdressed(request, kClient, 1024, kVips[0].address, 80),
                                 readdressed(request, kVips[0].address, 80, kClient, 1024)}) {
    Bytes frame = vip_frame;
    EXPECT_EQ(reply(frame, key), 0u);
    EXPECT_EQ(frame, vip_frame);
  }
  // GUE to its port, ICMP, IP in IP.
  const Bytes gue =
      withChecksums(concat({ethernet(kEtherTypeIpv4), ipv4(kLocal, kBackend, kProtocolUdp, 8 + 20),
                            udp(20001, 6080, 20), payload(20)}));
  Bytes frame = gue;
  EXPECT_EQ(reply(frame, key, 6080), 0u);
  EXPECT_EQ(frame, gue);
  frame = gue;
  EXPECT_NE(reply(frame, key), 0u) << "without a GUE port the same datagram is a request";
  const Bytes ping = withChecksums(
      concat({ethernet(kEtherTypeIpv4), ipv4(kLocal, kBackend, kProtocolIcmp, 8), icmp(8, 0)}));
  frame = ping;
  EXPECT_EQ(reply(frame, key), 0u);
  const Bytes tunnel =
      concat({ethernet(kEtherTypeIpv4), ipv4(kLocal, kBackend, 4, 40), Bytes(40, 0x45)});
  frame = tunnel;
  EXPECT_EQ(reply(frame, key), 0u);
  // A fragment, and a frame shorter than its IP header says.
  Bytes fragment = request;
  fragment[14 + 6] = 0x20;  // more fragments
  frame = fragment;
  EXPECT_EQ(reply(frame, key), 0u);
  Bytes cut(request.begin(), request.end() - 10);
  frame = cut;
  EXPECT_EQ(reply(frame, key), 0u);
  EXPECT_EQ(frame, cut);
  // No room for the reply.
  Bytes tight = request;
  EXPECT_EQ(replyAsBackend(tight.data(), tight.size(), tight.size(), kVips, 0, key), 0u);
  EXPECT_EQ(tight, request);
}

}  // namespace
}  // namespace berth
