// fullnat: both addresses and ports rewritten, both checksums updated incrementally (RFC 1624),
// and the frame sent on as l2dsr sends it (docs/architecture.md, "Connection table").

#include "berth/dataplane/nat_rewrite.h"

#include <algorithm>
#include <cstring>

#include "berth/net/checksum.h"
#include "berth/net/flow_key.h"

namespace berth {
namespace {

constexpr size_t kIpv4Checksum = 10;
constexpr size_t kIpv4Source = 12;
constexpr size_t kIpv6Source = 8;
constexpr size_t kTcpChecksum = 16;
constexpr size_t kUdpChecksum = 6;

// The endpoints as the bytes they replace: both addresses (source, then destination) and both
// ports, in wire order.
struct EndpointBytes {
  explicit EndpointBytes(const NatEndpoints& to, size_t address_length)
      : address_length(address_length) {
    std::memcpy(addresses, to.source.data(), address_length);
    std::memcpy(addresses + address_length, to.destination.data(), address_length);
    std::memcpy(ports, &to.source_port, 2);
    std::memcpy(ports + 2, &to.destination_port, 2);
  }
  uint8_t addresses[32];
  uint8_t ports[4];
  size_t address_length;
};

// A TCP or UDP checksum after its packet's addresses (`addresses`, whose pseudo-header it
// covers) and ports (at `l4`) become `to`'s; an IPv4 UDP checksum of 0 (none sent) stays 0, and
// a UDP one that comes out 0 is sent as 0xffff (RFC 768).
uint16_t adjustedL4Checksum(uint16_t checksum, const uint8_t* addresses, const uint8_t* l4,
                            const EndpointBytes& to, bool udp, bool v4) {
  if (udp && v4 && checksum == 0) return 0;
  checksum = adjustChecksum(checksum, addresses, to.addresses, 2 * to.address_length);
  checksum = adjustChecksum(checksum, l4, to.ports, 4);
  return udp && checksum == 0 ? 0xffff : checksum;
}

// The one's complement change of replacing `length` bytes (a multiple of 4) of old with new:
// the sum of ~old and new, 32 bits at a time in the machine's byte order, unfolded. The
// Internet checksum is the same in either byte order (RFC 1071, 2.(B)), so a checksum loaded
// as it lies takes the change as it is.
uint64_t changeOf(const uint8_t* old_bytes, const uint8_t* new_bytes, size_t length) {
  uint64_t sum = 0;
  for (size_t i = 0; i < length; i += 4) {
    uint32_t old_word;
    uint32_t new_word;
    std::memcpy(&old_word, old_bytes + i, 4);
    std::memcpy(&new_word, new_bytes + i, 4);
    sum += static_cast<uint32_t>(~old_word);
    sum += new_word;
  }
  return sum;
}

// The checksum at `at` (as it lies) adjusted by `change` (RFC 1624, equation 3).
uint16_t changedChecksum(const uint8_t* at, uint64_t change) {
  uint16_t checksum;
  std::memcpy(&checksum, at, 2);
  uint64_t sum = static_cast<uint16_t>(~checksum) + change;
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

void rewriteEndpoints(Frame& frame, const ParsedPacket& packet, const NatEndpoints& to) {
  uint8_t* ip = frame.data + packet.l3_offset;
  uint8_t* l4 = frame.data + packet.l4_offset;
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  const size_t address_length = v4 ? 4 : 16;
  uint8_t* addresses = ip + (v4 ? kIpv4Source : kIpv6Source);  // source, then destination
  const EndpointBytes bytes(to, address_length);
  const bool udp = packet.flow.protocol == kProtocolUdp;
  // The addresses' change counts twice over IPv4: in the header's checksum and in the TCP or
  // UDP pseudo-header's. Summed once, in 32-bit words.
  const uint64_t address_change = changeOf(addresses, bytes.addresses, 2 * address_length);
  uint8_t* l4_checksum = l4 + (udp ? kUdpChecksum : kTcpChecksum);
  // A UDP datagram sent without a checksum (0, IPv4 only) keeps none; one that comes out 0 is
  // sent as 0xffff (RFC 768).
  if (!(udp && v4 && l4_checksum[0] == 0 && l4_checksum[1] == 0)) {
    uint16_t checksum = changedChecksum(l4_checksum, address_change + changeOf(l4, bytes.ports, 4));
    if (udp && checksum == 0) checksum = 0xffff;
    std::memcpy(l4_checksum, &checksum, 2);
  }
  if (v4) {
    const uint16_t checksum = changedChecksum(ip + kIpv4Checksum, address_change);
    std::memcpy(ip + kIpv4Checksum, &checksum, 2);
  }
  std::memcpy(addresses, bytes.addresses, 2 * address_length);
  std::memcpy(l4, bytes.ports, 4);
}

bool rewriteIcmpError(Frame& frame, const ParsedPacket& packet,
                      const std::array<uint8_t, 16>& outer_destination,
                      const NatEndpoints& embedded) {
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  const size_t address_length = v4 ? 4 : 16;
  uint8_t* ip = frame.data + packet.l3_offset;
  uint8_t* icmp = frame.data + packet.l4_offset;
  uint8_t* inner_ip = icmp + 8;
  // The IP packet's end, not the frame's: Ethernet padding is no part of any checksum.
  const uint8_t* end =
      frame.data + std::min<size_t>(frame.length, size_t{packet.l3_offset} + packet.ip_length);
  if (inner_ip + (v4 ? 20 : 40) > end) return false;
  size_t inner_header_length = 40;
  uint8_t inner_protocol = inner_ip[6];
  if (v4) {
    inner_header_length = static_cast<size_t>(inner_ip[0] & 0x0F) * 4;
    inner_protocol = inner_ip[9];
    if (inner_header_length < 20) return false;
  }
  if (inner_protocol != kProtocolTcp && inner_protocol != kProtocolUdp) return false;
  uint8_t* inner_l4 = inner_ip + inner_header_length;
  if (inner_l4 + 8 > end) return false;  // the ports, and a UDP header's checksum
  const bool udp = inner_protocol == kProtocolUdp;
  uint8_t* inner_addresses = inner_ip + (v4 ? kIpv4Source : kIpv6Source);
  const EndpointBytes bytes(embedded, address_length);

  uint16_t icmp_checksum = loadBigEndian16(icmp + 2);
  // A two-byte field of the embedded packet changed: the ICMP checksum, which covers it, too.
  auto setEmbeddedWord = [&](uint8_t* at, uint16_t value) {
    uint8_t bytes[2];
    storeBigEndian16(bytes, value);
    icmp_checksum = adjustChecksum(icmp_checksum, at, bytes, 2);
    std::memcpy(at, bytes, 2);
  };
  // The embedded TCP or UDP checksum, where the error carries it (a UDP one of 0 was never
  // sent).
  uint8_t* inner_l4_checksum = inner_l4 + (udp ? kUdpChecksum : kTcpChecksum);
  if (inner_l4_checksum + 2 <= end) {
    setEmbeddedWord(inner_l4_checksum,
                    adjustedL4Checksum(loadBigEndian16(inner_l4_checksum), inner_addresses,
                                       inner_l4, bytes, udp, v4));
  }
  if (v4) {
    const uint16_t header_checksum = loadBigEndian16(inner_ip + kIpv4Checksum);
    setEmbeddedWord(inner_ip + kIpv4Checksum,
                    adjustChecksum(header_checksum, inner_addresses, bytes.addresses, 8));
  }
  icmp_checksum =
      adjustChecksum(icmp_checksum, inner_addresses, bytes.addresses, 2 * address_length);
  icmp_checksum = adjustChecksum(icmp_checksum, inner_l4, bytes.ports, 4);
  std::memcpy(inner_addresses, bytes.addresses, 2 * address_length);
  std::memcpy(inner_l4, bytes.ports, 4);

  uint8_t* destination = ip + (v4 ? kIpv4Source + 4 : kIpv6Source + 16);
  if (v4) {
    const uint16_t header_checksum = loadBigEndian16(ip + kIpv4Checksum);
    storeBigEndian16(ip + kIpv4Checksum,
                     adjustChecksum(header_checksum, destination, outer_destination.data(), 4));
  } else {
    // ICMPv6's checksum covers a pseudo-header with the outer addresses.
    icmp_checksum = adjustChecksum(icmp_checksum, destination, outer_destination.data(), 16);
  }
  storeBigEndian16(icmp + 2, icmp_checksum);
  std::memcpy(destination, outer_destination.data(), address_length);
  return true;
}

ForwardResult forwardFullNat(Frame& frame, const ParsedPacket& packet,
                             const ForwardingTarget& next_hop, const NatEndpoints& to) {
  rewriteEndpoints(frame, packet, to);
  return forwardL2Dsr(frame, packet, next_hop, 0);
}

}  // namespace berth
