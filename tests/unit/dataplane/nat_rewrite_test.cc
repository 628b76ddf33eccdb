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
        Bytes bytes =
            concat({ethernet(v4 ? kEtherTypeIpv4 : kEtherTypeIpv6), l3, l4, payload(length)});
        bytes = withChecksums(bytes, 14, v4, is_udp);
        ReceivedFrame received(bytes);
        ASSERT_EQ(received.parse_error, ParseError::kNone);
        const NatEndpoints to =
            endpoints(v4 ? kLocal : kLocal6, 20001, v4 ? kBackend : kBackend6, 8080);
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
  Bytes bytes = concat(
      {ethernet(kEtherTypeIpv4, {100}), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(40000, 80)});
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

namespace berth {
namespace {

// An ICMP error from `router` to `to` about `embedded_packet` (an IP packet, kept whole so that
// its own checksums can be checked), with every checksum filled in by DPDK.
Bytes icmpError(bool v4, const IpAddress& router, const IpAddress& to, const Bytes& embedded) {
  const Bytes message = concat({v4 ? Bytes{3, 4, 0, 0, 0, 0, 0x05, 0x78}   // frag needed, 1400
                                   : Bytes{2, 0, 0, 0, 0, 0, 0x05, 0x78},  // packet too big
                                embedded});
  Bytes frame = concat({ethernet(v4 ? kEtherTypeIpv4 : kEtherTypeIpv6),
                        v4 ? ipv4(router, to, kProtocolIcmp, message.size())
                           : ipv6(router, to, kProtocolIcmpv6, message.size()),
                        message});
  uint8_t* ip = frame.data() + 14;
  uint8_t* icmp = ip + (v4 ? 20 : 40);
  uint16_t checksum;
  if (v4) {
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(ip);
    header->hdr_checksum = rte_ipv4_cksum(header);
    checksum = static_cast<uint16_t>(~rte_raw_cksum(icmp, message.size()));
  } else {
    checksum = rte_ipv6_udptcp_cksum(reinterpret_cast<rte_ipv6_hdr*>(ip), icmp);
  }
  std::memcpy(icmp + 2, &checksum, 2);
  return frame;
}

// The session's packet toward the backend (local -> backend) as the backend's side's router
// embeds it, whole: its checksums filled in.
Bytes embeddedPacket(bool v4, bool is_udp, const IpAddress& source, uint16_t source_port,
                     const IpAddress& destination, uint16_t destination_port) {
  const Bytes l4 =
      is_udp ? udp(source_port, destination_port, 16) : tcp(source_port, destination_port);
  const uint8_t protocol = is_udp ? kProtocolUdp : kProtocolTcp;
  Bytes frame = concat({ethernet(v4 ? kEtherTypeIpv4 : kEtherTypeIpv6),
                        v4 ? ipv4(source, destination, protocol, l4.size() + 16)
                           : ipv6(source, destination, protocol, l4.size() + 16),
                        l4, payload(16)});
  frame = withChecksums(frame, 14, v4, is_udp);
  return Bytes(frame.begin() + 14, frame.end());
}

// Every checksum of an error frame is right: the outer IPv4 header's, the ICMP message's (with
// ICMPv6's pseudo-header), the embedded IP header's and the embedded TCP or UDP checksum.
void expectErrorChecksumsVerify(const Bytes& frame, bool v4) {
  const uint8_t* ip = frame.data() + 14;
  const size_t outer = v4 ? 20 : 40;
  const uint8_t* icmp = ip + outer;
  const size_t message = frame.size() - 14 - outer;
  if (v4) {
    EXPECT_EQ(rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip)), 0);
    EXPECT_EQ(static_cast<uint16_t>(~rte_raw_cksum(icmp, message)), 0) << "ICMP checksum";
    EXPECT_EQ(rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(icmp + 8)), 0) << "embedded";
  } else {
    Bytes copy = frame;
    uint8_t* checksum = copy.data() + 14 + outer + 2;
    uint16_t sent;
    std::memcpy(&sent, checksum, 2);
    checksum[0] = checksum[1] = 0;
    EXPECT_EQ(rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(copy.data() + 14),
                                    copy.data() + 14 + outer),
              sent)
        << "ICMPv6 checksum";
  }
  // The embedded packet as a frame of its own: its L4 checksum checks as any packet's does.
  const Bytes embedded = concat({ethernet(v4 ? kEtherTypeIpv4 : kEtherTypeIpv6),
                                 Bytes(icmp + 8, frame.data() + frame.size())});
  expectChecksumsVerify(embedded.data(), embedded.size(), 14, v4);
}

// An error from a router on the backend's side about the session's packet (local -> backend)
// goes to the client, about the client's packet as the client sent it (client -> VIP); one from
// the client's side about a reply (VIP -> client) goes to the backend, about the backend's reply
// as it sent it (backend -> local). Every checksum stays right, IPv4 and IPv6, TCP and UDP.
TEST(NatRewriteTest, AnIcmpErrorIsTranslatedForTheOtherSideWithEveryChecksumRight) {
  for (const bool v4 : {true, false}) {
    for (const bool is_udp : {false, true}) {
      const IpAddress& client = v4 ? kClient : kClient6;
      const IpAddress& vip = v4 ? kVip : kVip6;
      const IpAddress& local = v4 ? kLocal : kLocal6;
      const IpAddress& backend = v4 ? kBackend : kBackend6;
      const IpAddress router =
          v4 ? IpAddress::v4(198, 18, 1, 254) : *IpAddress::parse("2001:db8:1::fe");
      // From the backend's side: about local:20001 -> backend:8080, to the local address.
      ReceivedFrame from_backend(
          icmpError(v4, router, local, embeddedPacket(v4, is_udp, local, 20001, backend, 8080)));
      ASSERT_EQ(from_backend.parse_error, ParseError::kNone);
      ASSERT_TRUE(from_backend.packet.icmp_error);
      ASSERT_TRUE(rewriteIcmpError(from_backend.frame, from_backend.packet, client.bytes,
                                   endpoints(client, 40000, vip, 80)));
      const Bytes sent = from_backend.sent();
      expectErrorChecksumsVerify(sent, v4);
      ReceivedFrame to_client(sent);
      ASSERT_TRUE(to_client.packet.icmp_error);
      // It embeds the client's packet to the VIP (which the parser gives, as for any error, as
      // the flow of its reply).
      EXPECT_EQ(to_client.packet.flow.source, vip.bytes);
      EXPECT_EQ(to_client.packet.flow.destination, client.bytes);
      EXPECT_EQ(to_client.packet.flow.source_port, net(80));
      EXPECT_EQ(to_client.packet.flow.destination_port, net(40000));
      EXPECT_EQ(std::memcmp(sent.data() + 14 + (v4 ? 12 : 8), router.bytes.data(), v4 ? 4 : 16), 0)
          << "the outer source stays the router's";

      // From the client's side: about VIP:80 -> client:40000, to the VIP.
      ReceivedFrame from_client(
          icmpError(v4, router, vip, embeddedPacket(v4, is_udp, vip, 80, client, 40000)));
      ASSERT_TRUE(rewriteIcmpError(from_client.frame, from_client.packet, backend.bytes,
                                   endpoints(backend, 8080, local, 20001)));
      expectErrorChecksumsVerify(from_client.sent(), v4);
    }
  }
}

// An error that carries only the embedded header and eight bytes (all RFC 792 asks) still has
// its ports and addresses translated, and its ICMP checksum right; one too short for the ports
// is refused untouched.
TEST(NatRewriteTest, AShortErrorIsTranslatedAsFarAsItGoesOrRefused) {
  const Bytes whole = embeddedPacket(true, false, kLocal, 20001, kBackend, 8080);
  ReceivedFrame minimal(
      icmpError(true, kBackend, kLocal, Bytes(whole.begin(), whole.begin() + 28)));
  ASSERT_EQ(minimal.parse_error, ParseError::kNone);
  ASSERT_TRUE(rewriteIcmpError(minimal.frame, minimal.packet, kClient.bytes,
                               endpoints(kClient, 40000, kVip, 80)));
  const Bytes sent = minimal.sent();
  EXPECT_EQ(static_cast<uint16_t>(~rte_raw_cksum(sent.data() + 34, sent.size() - 34)), 0);
  EXPECT_EQ(rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(sent.data() + 34 + 8)), 0);
  EXPECT_EQ(loadBigEndian16(sent.data() + 34 + 8 + 20), 40000);
}

}  // namespace
}  // namespace berth
