// NAT64 (RFC 7915) for Full-NAT sessions with an IPv6 client and an IPv4 backend: each packet's
// IP header replaced by the other version's in place, the transport header and data left where
// they lie and the Ethernet header moved to meet the new IP header, so no payload byte is copied.

#include "berth/dataplane/nat64.h"

#include <rte_ip.h>

#include <algorithm>
#include <cstring>

#include "berth/net/checksum.h"
#include "berth/net/flow_key.h"
#include "dataplane/ip_headers.h"

namespace berth {
namespace {

constexpr size_t kIpv4Header = 20;
constexpr size_t kIpv6Header = 40;
constexpr size_t kIcmpHeader = 8;
constexpr size_t kTcpChecksum = 16;
constexpr size_t kUdpChecksum = 6;
constexpr size_t kIcmpv4ErrorLimit = 576;   // RFC 1812, 4.3.2.3
constexpr size_t kIcmpv6ErrorLimit = 1280;  // RFC 4443, 2.4 (c)
constexpr uint32_t kIpv6MinimumMtu = 1280;

// Checksums here are handled as they lie in the packet (memcpy, no byte swap), as DPDK's
// rte_raw_cksum sums them: the one's complement sum is the same in either byte order (RFC 1071,
// 2.(B)).
uint16_t checksumAt(const uint8_t* at) {
  uint16_t checksum;
  std::memcpy(&checksum, at, 2);
  return checksum;
}
void storeChecksum(uint8_t* at, uint16_t checksum) { std::memcpy(at, &checksum, 2); }

// A checksum whose sum had `old_length` bytes replaced by `new_length` others (RFC 1624's
// equation 3 over sums of different lengths: both start at even offsets).
uint16_t replacedInChecksum(uint16_t checksum, const uint8_t* old_bytes, size_t old_length,
                            const uint8_t* new_bytes, size_t new_length) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint16_t>(~rte_raw_cksum(old_bytes, old_length));
  sum += rte_raw_cksum(new_bytes, new_length);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The ports' four bytes as they lie.
uint32_t portsOf(const NatEndpoints& endpoints) {
  uint32_t ports;
  std::memcpy(&ports, &endpoints.source_port, 2);
  std::memcpy(reinterpret_cast<uint8_t*>(&ports) + 2, &endpoints.destination_port, 2);
  return ports;
}

uint8_t trafficClassOf(const uint8_t* ipv6) {
  return static_cast<uint8_t>((ipv6[0] & 0x0F) << 4 | ipv6[1] >> 4);
}

// The frame's Ethernet header (`l2_length` bytes, VLAN tags and all) moved by `shift` bytes to
// meet an IP header of the other version, its ethertype set, and the frame's bounds with it:
// `ip_length` bytes of IP packet after it, within a buffer that ends where it ended.
void moveEthernet(Frame& frame, size_t l2_length, std::ptrdiff_t shift, uint16_t ether_type,
                  size_t ip_length) {
  uint8_t* const buffer_end = frame.data + frame.length + frame.tailroom;
  std::memmove(frame.data + shift, frame.data, l2_length);
  frame.data += shift;
  frame.headroom = static_cast<size_t>(static_cast<std::ptrdiff_t>(frame.headroom) + shift);
  storeBigEndian16(frame.data + l2_length - 2, ether_type);
  frame.length = l2_length + ip_length;
  frame.tailroom = static_cast<size_t>(buffer_end - (frame.data + frame.length));
}

// The embedded packet's transport header: its ports rewritten to `embedded`'s and its checksum,
// where the error carries it, adjusted for the new ports and for addresses that change from
// `old_addresses` to `new_addresses` (both pairs, source then destination).
void rewriteEmbeddedTransport(uint8_t* l4, const uint8_t* end, uint8_t protocol,
                              const uint8_t* old_addresses, size_t old_length,
                              const uint8_t* new_addresses, size_t new_length,
                              const NatEndpoints& embedded) {
  const uint32_t ports = portsOf(embedded);
  uint8_t* checksum_at = l4 + (protocol == kProtocolUdp ? kUdpChecksum : kTcpChecksum);
  if (checksum_at + 2 <= end) {
    uint16_t checksum = checksumAt(checksum_at);
    if (!(protocol == kProtocolUdp && checksum == 0)) {
      uint32_t old_ports;
      std::memcpy(&old_ports, l4, 4);
      checksum = replacedInChecksum(checksum, old_addresses, old_length, new_addresses, new_length);
      storeChecksum(checksum_at, adjustChecksumForWord(checksum, old_ports, ports));
    }
  }
  std::memcpy(l4, &ports, 4);
}

// ICMPv6 to ICMPv4's type and code (RFC 7915, 5.2), and the four bytes after the checksum:
// false for what has no IPv4 counterpart berth translates.
bool icmpv4Of(const uint8_t* icmpv6, uint8_t& type, uint8_t& code, uint8_t rest[4]) {
  std::memset(rest, 0, 4);
  switch (icmpv6[0]) {
    case 1:  // destination unreachable
      type = 3;
      switch (icmpv6[1]) {
        case 0:
        case 2:
        case 3:
          code = 1;  // host unreachable
          return true;
        case 1:
          code = 10;  // communication with the host administratively prohibited
          return true;
        case 4:
          code = 3;  // port unreachable
          return true;
        default:
          return false;
      }
    case 2: {  // packet too big: fragmentation needed, the MTU less the headers' difference
      type = 3;
      code = 4;
      const uint32_t mtu = loadBigEndian32(icmpv6 + 4);
      const uint32_t ipv4_mtu =
          std::min<uint32_t>(mtu > kNat64Growth ? mtu - kNat64Growth : 0, UINT16_MAX);
      storeBigEndian16(rest + 2, static_cast<uint16_t>(ipv4_mtu));
      return true;
    }
    case 3:  // time exceeded
      type = 11;
      code = icmpv6[1];
      return code <= 1;
    case 4:  // parameter problem: only an unrecognized next header has an IPv4 counterpart
      type = 3;
      code = 2;  // protocol unreachable
      return icmpv6[1] == 1;
    default:
      return false;
  }
}

// ICMPv4 to ICMPv6 (RFC 7915, 4.2), as icmpv4Of().
bool icmpv6Of(const uint8_t* icmpv4, uint8_t& type, uint8_t& code, uint8_t rest[4]) {
  std::memset(rest, 0, 4);
  switch (icmpv4[0]) {
    case 3:  // destination unreachable
      switch (icmpv4[1]) {
        case 0:
        case 1:
        case 5:
        case 6:
        case 7:
        case 8:
        case 11:
        case 12:
          type = 1;
          code = 0;  // no route to destination
          return true;
        case 9:
        case 10:
        case 13:
        case 15:
          type = 1;
          code = 1;  // administratively prohibited
          return true;
        case 3:
          type = 1;
          code = 4;  // port unreachable
          return true;
        case 2:  // protocol unreachable: a parameter problem at the next header
          type = 4;
          code = 1;
          rest[3] = 6;
          return true;
        case 4: {  // fragmentation needed: packet too big, the MTU plus the headers' difference
          type = 2;
          code = 0;
          const uint32_t mtu = loadBigEndian16(icmpv4 + 6);
          storeBigEndian32(rest, std::max(kIpv6MinimumMtu, mtu + kNat64Growth));
          return true;
        }
        default:
          return false;
      }
    case 11:  // time exceeded
      type = 3;
      code = icmpv4[1];
      return code <= 1;
    default:
      return false;
  }
}

}  // namespace

void translateToIpv4(Frame& frame, ParsedPacket& packet, const NatEndpoints& to,
                     uint16_t identification) {
  uint8_t* ipv6 = frame.data + packet.l3_offset;
  uint8_t* l4 = frame.data + packet.l4_offset;
  const size_t transport_length = size_t{packet.l3_offset} + packet.ip_length - packet.l4_offset;
  const bool udp = packet.flow.protocol == kProtocolUdp;
  uint8_t addresses[8];
  std::memcpy(addresses, to.source.data(), 4);
  std::memcpy(addresses + 4, to.destination.data(), 4);
  const uint32_t ports = portsOf(to);
  uint32_t old_ports;
  std::memcpy(&old_ports, l4, 4);
  // The two pseudo-headers sum alike but for their addresses.
  uint8_t* checksum_at = l4 + (udp ? kUdpChecksum : kTcpChecksum);
  uint16_t checksum =
      replacedInChecksum(checksumAt(checksum_at), ipv6 + 8, 32, addresses, sizeof(addresses));
  checksum = adjustChecksumForWord(checksum, old_ports, ports);
  if (udp && checksum == 0) checksum = 0xffff;
  storeChecksum(checksum_at, checksum);
  std::memcpy(l4, &ports, 4);

  const size_t total_length = kIpv4Header + transport_length;
  uint8_t header[kIpv4Header];
  writeIpv4Header(header, trafficClassOf(ipv6), total_length, identification,
                  total_length > kNat64DontFragmentAbove, ipv6[7], packet.flow.protocol, addresses,
                  addresses + 4);
  const size_t l2_length = packet.l3_offset;
  moveEthernet(frame, l2_length, packet.l4_offset - kIpv4Header - packet.l3_offset, kEtherTypeIpv4,
               total_length);
  std::memcpy(frame.data + l2_length, header, kIpv4Header);
  packet.l4_offset = static_cast<uint16_t>(l2_length + kIpv4Header);
  packet.ip_length = static_cast<uint16_t>(total_length);
  packet.flow.family = IpFamily::kIpv4;
}

bool translateToIpv6(Frame& frame, ParsedPacket& packet, const NatEndpoints& to) {
  const size_t header_length = packet.l4_offset - packet.l3_offset;  // with options
  if (header_length < kIpv6Header && frame.headroom < kIpv6Header - header_length) return false;
  uint8_t* ipv4 = frame.data + packet.l3_offset;
  uint8_t* l4 = frame.data + packet.l4_offset;
  const size_t transport_length = packet.ip_length - header_length;
  const bool udp = packet.flow.protocol == kProtocolUdp;
  const uint32_t ports = portsOf(to);
  uint32_t old_ports;
  std::memcpy(&old_ports, l4, 4);
  uint8_t* checksum_at = l4 + (udp ? kUdpChecksum : kTcpChecksum);
  const uint16_t checksum = checksumAt(checksum_at);
  // Sent without one, which IPv6 does not allow: summed whole once the IPv6 header is written.
  const bool unchecked = udp && checksum == 0;
  if (!unchecked) {
    uint8_t addresses[32];
    std::memcpy(addresses, to.source.data(), 16);
    std::memcpy(addresses + 16, to.destination.data(), 16);
    uint16_t adjusted = replacedInChecksum(checksum, ipv4 + 12, 8, addresses, sizeof(addresses));
    adjusted = adjustChecksumForWord(adjusted, old_ports, ports);
    if (udp && adjusted == 0) adjusted = 0xffff;
    storeChecksum(checksum_at, adjusted);
  }
  std::memcpy(l4, &ports, 4);
  const uint8_t tos = ipv4[1];
  const uint8_t ttl = ipv4[8];

  const size_t l2_length = packet.l3_offset;
  moveEthernet(
      frame, l2_length,
      static_cast<std::ptrdiff_t>(header_length) - static_cast<std::ptrdiff_t>(kIpv6Header),
      kEtherTypeIpv6, kIpv6Header + transport_length);
  uint8_t* ipv6 = frame.data + l2_length;
  writeIpv6Header(ipv6, tos, transport_length, packet.flow.protocol, ttl, to.source.data(),
                  to.destination.data());
  if (unchecked) {
    storeChecksum(checksum_at,
                  rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(ipv6), l4));
  }
  packet.l4_offset = static_cast<uint16_t>(l2_length + kIpv6Header);
  packet.ip_length = static_cast<uint16_t>(kIpv6Header + transport_length);
  packet.flow.family = IpFamily::kIpv6;
  return true;
}

bool translateIcmpErrorToIpv4(Frame& frame, ParsedPacket& packet,
                              const std::array<uint8_t, 16>& outer_source,
                              const std::array<uint8_t, 16>& outer_destination,
                              const NatEndpoints& embedded) {
  uint8_t* ipv6 = frame.data + packet.l3_offset;
  uint8_t* icmp = frame.data + packet.l4_offset;
  const uint8_t* end =
      frame.data + std::min<size_t>(frame.length, size_t{packet.l3_offset} + packet.ip_length);
  uint8_t* inner = icmp + kIcmpHeader;
  if (inner + kIpv6Header + 8 > end) return false;
  const uint8_t inner_protocol = inner[6];
  if (inner_protocol != kProtocolTcp && inner_protocol != kProtocolUdp) return false;
  uint8_t type = 0;
  uint8_t code = 0;
  uint8_t rest[4];
  if (!icmpv4Of(icmp, type, code, rest)) return false;
  uint8_t* inner_l4 = inner + kIpv6Header;

  uint8_t inner_addresses[8];
  std::memcpy(inner_addresses, embedded.source.data(), 4);
  std::memcpy(inner_addresses + 4, embedded.destination.data(), 4);
  rewriteEmbeddedTransport(inner_l4, end, inner_protocol, inner + 8, 32, inner_addresses, 8,
                           embedded);
  size_t quoted = static_cast<size_t>(end - inner_l4);
  quoted = std::min(quoted, kIcmpv4ErrorLimit - kIpv4Header - kIcmpHeader - kIpv4Header);
  const size_t inner_total = kIpv4Header + loadBigEndian16(inner + 4);
  uint8_t inner_header[kIpv4Header];
  writeIpv4Header(inner_header, trafficClassOf(inner), inner_total, 0, true, inner[7],
                  inner_protocol, inner_addresses, inner_addresses + 4);
  const uint8_t outer_traffic_class = trafficClassOf(ipv6);
  const uint8_t outer_hop_limit = ipv6[7];

  // The transport header stays where it is; the ICMPv4 message and both IPv4 headers end at it.
  const size_t message_length = kIcmpHeader + kIpv4Header + quoted;
  const size_t total_length = kIpv4Header + message_length;
  const size_t l2_length = packet.l3_offset;
  moveEthernet(frame, l2_length, packet.l4_offset - packet.l3_offset, kEtherTypeIpv4, total_length);
  uint8_t* outer = frame.data + l2_length;
  uint8_t* message = outer + kIpv4Header;
  writeIpv4Header(outer, outer_traffic_class, total_length, 0, false, outer_hop_limit,
                  kProtocolIcmp, outer_source.data(), outer_destination.data());
  message[0] = type;
  message[1] = code;
  storeChecksum(message + 2, 0);
  std::memcpy(message + 4, rest, 4);
  std::memcpy(message + kIcmpHeader, inner_header, kIpv4Header);
  storeChecksum(message + 2, static_cast<uint16_t>(~rte_raw_cksum(message, message_length)));
  packet.l4_offset = static_cast<uint16_t>(l2_length + kIpv4Header);
  packet.ip_length = static_cast<uint16_t>(total_length);
  packet.flow.family = IpFamily::kIpv4;
  return true;
}

bool translateIcmpErrorToIpv6(Frame& frame, ParsedPacket& packet,
                              const std::array<uint8_t, 16>& outer_source,
                              const std::array<uint8_t, 16>& outer_destination,
                              const NatEndpoints& embedded) {
  uint8_t* ipv4 = frame.data + packet.l3_offset;
  uint8_t* icmp = frame.data + packet.l4_offset;
  const uint8_t* end =
      frame.data + std::min<size_t>(frame.length, size_t{packet.l3_offset} + packet.ip_length);
  uint8_t* inner = icmp + kIcmpHeader;
  if (inner + kIpv4Header > end) return false;
  const size_t inner_header_length = static_cast<size_t>(inner[0] & 0x0F) * 4;
  const uint8_t inner_protocol = inner[9];
  if (inner_header_length < kIpv4Header ||
      (inner_protocol != kProtocolTcp && inner_protocol != kProtocolUdp)) {
    return false;
  }
  uint8_t* inner_l4 = inner + inner_header_length;
  if (inner_l4 + 8 > end) return false;
  uint8_t type = 0;
  uint8_t code = 0;
  uint8_t rest[4];
  if (!icmpv6Of(icmp, type, code, rest)) return false;
  // The whole headers' growth comes out of the headroom.
  const size_t outer_header_length = packet.l4_offset - packet.l3_offset;
  const std::ptrdiff_t shift = static_cast<std::ptrdiff_t>(outer_header_length) +
                               static_cast<std::ptrdiff_t>(inner_header_length) -
                               static_cast<std::ptrdiff_t>(2 * kIpv6Header);
  if (shift < 0 && frame.headroom < static_cast<size_t>(-shift)) return false;

  uint8_t inner_addresses[32];
  std::memcpy(inner_addresses, embedded.source.data(), 16);
  std::memcpy(inner_addresses + 16, embedded.destination.data(), 16);
  rewriteEmbeddedTransport(inner_l4, end, inner_protocol, inner + 12, 8, inner_addresses, 32,
                           embedded);
  size_t quoted = static_cast<size_t>(end - inner_l4);
  quoted = std::min(quoted, kIcmpv6ErrorLimit - kIpv6Header - kIcmpHeader - kIpv6Header);
  const size_t inner_total = loadBigEndian16(inner + 2);
  const size_t inner_payload =
      inner_total > inner_header_length ? inner_total - inner_header_length : 0;
  uint8_t inner_header[kIpv6Header];
  writeIpv6Header(inner_header, inner[1], inner_payload, inner_protocol, inner[8], inner_addresses,
                  inner_addresses + 16);
  const uint8_t outer_tos = ipv4[1];
  const uint8_t outer_ttl = ipv4[8];

  const size_t message_length = kIcmpHeader + kIpv6Header + quoted;
  const size_t l2_length = packet.l3_offset;
  moveEthernet(frame, l2_length, shift, kEtherTypeIpv6, kIpv6Header + message_length);
  uint8_t* outer = frame.data + l2_length;
  uint8_t* message = outer + kIpv6Header;
  writeIpv6Header(outer, outer_tos, message_length, kProtocolIcmpv6, outer_ttl, outer_source.data(),
                  outer_destination.data());
  message[0] = type;
  message[1] = code;
  storeChecksum(message + 2, 0);
  std::memcpy(message + 4, rest, 4);
  std::memcpy(message + kIcmpHeader, inner_header, kIpv6Header);
  // ICMPv6's checksum covers the pseudo-header, as TCP's and UDP's do (RFC 4443, 2.3).
  storeChecksum(message + 2,
                rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(outer), message));
  packet.l4_offset = static_cast<uint16_t>(l2_length + kIpv6Header);
  packet.ip_length = static_cast<uint16_t>(kIpv6Header + message_length);
  packet.flow.family = IpFamily::kIpv6;
  return true;
}

}  // namespace berth
