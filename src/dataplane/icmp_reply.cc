#include "berth/dataplane/icmp_reply.h"

#include <netinet/in.h>
#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>

#include <algorithm>
#include <cstring>

#include "dataplane/encapsulation.h"

namespace berth {
namespace {

constexpr uint8_t kIcmpv4DestinationUnreachable = 3;
constexpr uint8_t kIcmpv4FragmentationNeeded = 4;
constexpr uint8_t kIcmpv6PacketTooBig = 2;

bool isSingleHostIpv4(const uint8_t* address) {
  // 0/8 "this network", 127/8 loopback, 224/4 multicast, 240/4 class E (with 255.255.255.255).
  return address[0] != 0 && address[0] != 127 && address[0] < 224;
}

bool isSingleHostIpv6(const uint8_t* address) {
  static constexpr uint8_t kZero[15] = {};
  if (address[0] == 0xff) return false;  // multicast
  // :: unspecified, ::1 loopback
  return !(std::memcmp(address, kZero, 15) == 0 && address[15] <= 1);
}

}  // namespace

bool mayAnswerWithIcmpError(const Frame& frame, const ParsedPacket& packet) {
  if (packet.icmp_error) return false;
  if ((frame.data[0] & 0x01) != 0) return false;  // a group MAC: broadcast or multicast
  if (packet.flow.family == IpFamily::kIpv4) {
    return !packet.later_fragment && isSingleHostIpv4(packet.flow.source.data()) &&
           isSingleHostIpv4(packet.flow.destination.data());
  }
  return isSingleHostIpv6(packet.flow.source.data());
}

bool buildTooBigReply(Frame& frame, const ParsedPacket& packet, uint16_t client_mtu,
                      const MacAddress& port_mac) {
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  const size_t ip_length = v4 ? kOuterIpv4Length : kOuterIpv6Length;
  const size_t added = ip_length + kIcmpHeaderLength;
  if (frame.headroom < added) return false;
  const size_t limit = v4 ? kIcmpv4ReplyLimit : kIcmpv6ReplyLimit;
  const size_t quoted = std::min<size_t>(packet.ip_length, limit - added);

  // The L2 header moves to the front; the quoted packet stays where it is, after the new headers.
  uint8_t* const start = frame.data - added;
  std::memmove(start, frame.data, packet.l3_offset);
  uint8_t source_mac[6];
  std::memcpy(source_mac, start + 6, 6);
  std::memcpy(start, source_mac, 6);  // back to where it came from
  std::memcpy(start + 6, port_mac.bytes.data(), 6);
  uint8_t* const ip = start + packet.l3_offset;
  uint8_t* const icmp = ip + ip_length;
  const size_t icmp_length = kIcmpHeaderLength + quoted;

  auto* header = reinterpret_cast<rte_icmp_hdr*>(icmp);
  if (v4) {
    auto* reply = reinterpret_cast<rte_ipv4_hdr*>(ip);
    reply->version_ihl = RTE_IPV4_VHL_DEF;
    reply->type_of_service = 0;
    reply->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(ip_length + icmp_length));
    reply->packet_id = 0;
    reply->fragment_offset = 0;
    reply->time_to_live = kOuterHopLimit;
    reply->next_proto_id = IPPROTO_ICMP;
    std::memcpy(&reply->src_addr, packet.flow.destination.data(), 4);
    std::memcpy(&reply->dst_addr, packet.flow.source.data(), 4);
    reply->hdr_checksum = 0;
    reply->hdr_checksum = rte_ipv4_cksum(reply);
    header->icmp_type = kIcmpv4DestinationUnreachable;
    header->icmp_code = kIcmpv4FragmentationNeeded;
    header->icmp_ident = 0;                              // unused
    header->icmp_seq_nb = rte_cpu_to_be_16(client_mtu);  // next-hop MTU (RFC 1191)
    header->icmp_cksum = 0;
    header->icmp_cksum = static_cast<uint16_t>(~rte_raw_cksum(icmp, icmp_length));
  } else {
    auto* reply = reinterpret_cast<rte_ipv6_hdr*>(ip);
    reply->vtc_flow = rte_cpu_to_be_32(6u << 28);
    reply->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(icmp_length));
    reply->proto = IPPROTO_ICMPV6;
    reply->hop_limits = kOuterHopLimit;
    std::memcpy(reply->src_addr, packet.flow.destination.data(), 16);
    std::memcpy(reply->dst_addr, packet.flow.source.data(), 16);
    header->icmp_type = kIcmpv6PacketTooBig;
    header->icmp_code = 0;
    const uint32_t mtu = rte_cpu_to_be_32(client_mtu);
    std::memcpy(&header->icmp_ident, &mtu, 4);  // the 32-bit MTU field (RFC 4443)
    header->icmp_cksum = 0;
    // The UDP/TCP helper sums the pseudo-header with the header's own next-header value, which
    // is exactly the ICMPv6 checksum (RFC 4443, 2.3).
    header->icmp_cksum = rte_ipv6_udptcp_cksum(reply, icmp);
  }
  frame.headroom -= added;
  frame.data = start;
  frame.length = packet.l3_offset + ip_length + icmp_length;
  return true;
}

}  // namespace berth
