#pragma once

#include <array>
#include <cstdint>

#include "berth/dataplane/forwarding.h"
#include "berth/dataplane/frame.h"
#include "berth/net/ip_address.h"
#include "berth/net/packet_parser.h"

namespace berth {

// The addresses and ports a Full-NAT packet leaves with: local address and port to the
// backend for a client's packet, VIP and port to the client for a backend's reply
// (docs/architecture.md, "Connection table"). Ports in network byte order.
struct NatEndpoints {
  std::array<uint8_t, 16> source{};
  std::array<uint8_t, 16> destination{};
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
};

// Rewrites the IP source and destination and the TCP or UDP ports of `frame`, parsed as
// `packet` (TCP or UDP, not a later fragment, of the endpoints' family), and updates the IPv4
// header checksum and the TCP or UDP checksum incrementally (RFC 1624): what changed is taken
// out of the sum and the new put in, so the payload is never read. A UDP datagram sent without
// a checksum (0, IPv4 only) keeps none; a UDP checksum that comes out 0 is sent as 0xffff
// (RFC 768). The TTL is left as it came: berth stands in for the endpoints, as the
// encapsulating modes leave the inner packet's.
void rewriteEndpoints(Frame& frame, const ParsedPacket& packet, const NatEndpoints& to);

// A Full-NAT packet's whole rewrite: its endpoints, then the Ethernet header for `next_hop`
// (its MACs and VLAN, as l2dsr sets them). The IP packet does not grow.
ForwardResult forwardFullNat(Frame& frame, const ParsedPacket& packet,
                             const ForwardingTarget& next_hop, const NatEndpoints& to);

}  // namespace berth
