// fullnat: both addresses and ports rewritten, both checksums updated incrementally (RFC 1624),
// and the frame sent on as l2dsr sends it (docs/architecture.md, "Connection table").

#include "berth/dataplane/nat_rewrite.h"

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

}  // namespace

void rewriteEndpoints(Frame& frame, const ParsedPacket& packet, const NatEndpoints& to) {
  uint8_t* ip = frame.data + packet.l3_offset;
  uint8_t* l4 = frame.data + packet.l4_offset;
  const bool v4 = packet.flow.family == IpFamily::kIpv4;
  const size_t address_length = v4 ? 4 : 16;
  uint8_t* addresses = ip + (v4 ? kIpv4Source : kIpv6Source);  // source, then destination
  uint8_t new_addresses[32];
  std::memcpy(new_addresses, to.source.data(), address_length);
  std::memcpy(new_addresses + address_length, to.destination.data(), address_length);
  uint8_t new_ports[4];
  std::memcpy(new_ports, &to.source_port, 2);
  std::memcpy(new_ports + 2, &to.destination_port, 2);

  const bool udp = packet.flow.protocol == kProtocolUdp;
  uint8_t* l4_checksum = l4 + (udp ? kUdpChecksum : kTcpChecksum);
  uint16_t checksum = loadBigEndian16(l4_checksum);
  // IPv4 UDP without a checksum stays without one.
  const bool keeps_none = udp && v4 && checksum == 0;
  if (!keeps_none) {
    // The pseudo-header's addresses and the ports both feed the L4 checksum.
    checksum = adjustChecksum(checksum, addresses, new_addresses, 2 * address_length);
    checksum = adjustChecksum(checksum, l4, new_ports, 4);
    if (udp && checksum == 0) checksum = 0xffff;
    storeBigEndian16(l4_checksum, checksum);
  }
  if (v4) {
    const uint16_t header_checksum = loadBigEndian16(ip + kIpv4Checksum);
    storeBigEndian16(ip + kIpv4Checksum,
                     adjustChecksum(header_checksum, addresses, new_addresses, 8));
  }
  std::memcpy(addresses, new_addresses, 2 * address_length);
  std::memcpy(l4, new_ports, 4);
}

ForwardResult forwardFullNat(Frame& frame, const ParsedPacket& packet,
                             const ForwardingTarget& next_hop, const NatEndpoints& to) {
  rewriteEndpoints(frame, packet, to);
  return forwardL2Dsr(frame, packet, next_hop, 0);
}

}  // namespace berth
