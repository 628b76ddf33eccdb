#include "berth/dataplane/nat_rewrite.h"

#include <gtest/gtest.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <cstring>

#include "berth/net/checksum.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

uint16_t net(uint16_t port) { return static_cast<uint16_t>(port >> 8 | port << 8); }

// A frame whose IP and L4 checksums are filled in, by DPDK's own functions.
Bytes withChecksums(Bytes frame, size_t l3, bool v4, bool udp) {
  uint8_t* ip = frame.data() + l3;
  const size_t l4 = l3 + (v4 ? 20 : 40);
  uint8_t* checksum = frame.data() + l4 + (udp ? 6 : 16);
  checksum[0] = checksum[1] = 0;
  uint16_t value;
  if (v4) {
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(ip);
    header->hdr_checksum = 0;
    header->hdr_checksum = rte_ipv4_cksum(header);
    value = rte_ipv4_udptcp_cksum(header, frame.data() + l4);
  } else {
    value = rte_ipv6_udptcp_cksum(reinterpret_cast<rte_ipv6_hdr*>(ip), frame.data() + l4);
  }
  std::memcpy(checksum, &value, 2);
  return frame;
}

// Whether the frame's IP and L4 checksums are what DPDK computes over the rewritten bytes (0x0000
// and 0xffff being one's complement's two zeros).
void expectChecksumsVerify(const uint8_t* frame, size_t length, size_t l3, bool v4) {
  const uint8_t* ip = frame + l3;
  const size_t l4 = l3 + (v4 ? 20 : 40);
  const bool udp = ip[v4 ? 9 : 6] == kProtocolUdp;
  Bytes copy(frame, frame + length);
  uint8_t* checksum = copy.data() + l4 + (udp ? 6 : 16);
  uint16_t sent;
  std::memcpy(&sent, checksum, 2);
  checksum[0] = checksum[1] = 0;
  uint16_t computed;
  if (v4) {
    EXPECT_EQ(rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip)), 0);
    computed = rte_ipv4_udptcp_cksum(reinterpret_cast<const rte_ipv4_hdr*>(copy.data() + l3),
                                     copy.data() + l4);
  } else {
    computed = rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(copy.data() + l3),
                                     copy.data() + l4);
  }
  if (computed == 0 || computed == 0xffff) {
    EXPECT_TRUE(sent == 0 || sent == 0xffff);
  } else {
    EXPECT_EQ(sent, computed);
  }
}

NatEndpoints endpoints(const IpAddress& source, uint16_t source_port, const IpAddress& destination,
                       uint16_t destination_port) {
  NatEndpoints to;
  to.source = source.bytes;
  to.destination = destination.bytes;
  to.source_port = net(source_port);
  to.destination_port = net(destination_port);
  return to;
}

const IpAddress kLocal = IpAddress::v4(198, 18, 0, 100);
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 10);
const IpAddress kLocal6 = *IpAddress::parse("2001:db8::100");
const IpAddress kBackend6 = *IpAddress::parse("2001:db8:1::10");

// Client to backend and back, each of IPv4 and IPv6, TCP and UDP, with payloads of odd and even
// lengths: the addresses and ports are the endpoints', both checksums verify, the payload and
// the TTL are as they came, and the frame goes to the next hop's MAC from the port's.
TEST(NatRewriteTest, BothChecksumsVerifyAfterTheRewriteForEveryFamilyAndProtocol) {
  for (const bool v4 : {true, false}) {
    for (const bool is_udp : {false, true}) {
      for (const size_t length : {0u, 1u, 37u, 1400u}) {
        const IpAddress& client = v4 ? kClient : kClient6;
        const IpAddress& vip = v4 ? kVip : kVip6;
        const uint8_t protocol = is_udp ? kProtocolUdp : kProtocolTcp;
        const Bytes l4 = is_udp ? udp(40000, 53, length) : tcp(40000, 80);
        const Bytes l3 = v4 ? ipv4(client, vip, protocol, l4.size() + length)
                            : ipv6(client, vip, protocol, l4.size() + length);
        Bytes bytes = concat({ethernet(v4 ? kEtherTypeIpv4 : kEtherTypeIpv6), l3, l4,
                              payload(length)});
        bytes = withChecksums(bytes, 14, v4, is_udp);
        ReceivedFrame received(bytes);
        ASSERT_EQ(received.parse_error, ParseError::kNone);
        const NatEndpoints to = endpoints(v4 ? kLocal : kLocal6, 20001, v4 ? kBackend : kBackend6,
                                          8080);
        const ForwardingTarget hop = testTarget(v4 ? kBackend : kBackend6);
        ASSERT_EQ(forwardFullNat(received.frame, received.packet, hop, to), ForwardResult::kSend);
        const uint8_t* frame = received.frame.data;
        const size_t address = v4 ? 4 : 16;
        const uint8_t* source = frame + 14 + (v4 ? 12 : 8);
        EXPECT_EQ(std::memcmp(source, to.source.data(), address), 0);
        EXPECT_EQ(std::memcmp(source + address, to.destination.data(), address), 0);
        const uint8_t* ports = frame + 14 + (v4 ? 20 : 40);
        EXPECT_EQ(loadBigEndian16(ports), 20001);
        EXPECT_EQ(loadBigEndian16(ports + 2), 8080);
        expectChecksumsVerify(frame, received.frame.length, 14, v4);
        EXPECT_EQ(frame[14 + (v4 ? 8 : 7)], 64) << "the TTL is left as it came";
        EXPECT_EQ(Bytes(frame + received.frame.length - length, frame + received.frame.length),
                  payload(length));
        EXPECT_EQ(std::memcmp(frame, hop.destination_mac.bytes.data(), 6), 0);
        EXPECT_EQ(std::memcmp(frame + 6, hop.source_mac.bytes.data(), 6), 0);

        // And the reply's way back: the backend's answer rewritten to come from the VIP.
        ReceivedFrame reply(received.sent());
        const NatEndpoints back = endpoints(vip, is_udp ? 53 : 80, client, 40000);
        rewriteEndpoints(reply.frame, reply.packet, back);
        expectChecksumsVerify(reply.frame.data, reply.frame.length, 14, v4);
      }
    }
  }
}

// RFC 768: over IPv4, a UDP checksum of 0 means none was sent, and none is after the rewrite.
TEST(NatRewriteTest, AUdpDatagramSentWithoutAChecksumKeepsNone) {
  Bytes bytes = concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolUdp, 8 + 20),
                        udp(40000, 53, 20), payload(20)});
  bytes = withChecksums(bytes, 14, true, true);
  bytes[14 + 20 + 6] = bytes[14 + 20 + 7] = 0;
  ReceivedFrame received(bytes);
  rewriteEndpoints(received.frame, received.packet, endpoints(kLocal, 20001, kBackend, 5353));
  EXPECT_EQ(loadBigEndian16(received.frame.data + 14 + 20 + 6), 0);
  EXPECT_EQ(rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(received.frame.data + 14)), 0);
}

// A frame that came tagged leaves on the next hop's VLAN, its checksums still right.
TEST(NatRewriteTest, ATaggedFrameLeavesOnTheNextHopsVlan) {
  Bytes bytes = concat({ethernet(kEtherTypeIpv4, {100}), ipv4(kClient, kVip, kProtocolTcp, 20),
                        tcp(40000, 80)});
  bytes = withChecksums(bytes, 18, true, false);
  ReceivedFrame received(bytes);
  const ForwardingTarget hop = testTarget(kBackend, 200);
  ASSERT_EQ(forwardFullNat(received.frame, received.packet, hop,
                           endpoints(kLocal, 20001, kBackend, 8080)),
            ForwardResult::kSend);
  EXPECT_EQ(loadBigEndian16(received.frame.data + 14) & 0x0fff, 200);
  expectChecksumsVerify(received.frame.data, received.frame.length, 18, true);
}

}  // namespace
}  // namespace berth
