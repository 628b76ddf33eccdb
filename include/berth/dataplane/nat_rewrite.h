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

// An ICMP or ICMPv6 error about a Full-NAT packet, rewritten for the other side of the session,
// so that path MTU discovery and unreachables work through berth: the outer destination becomes
// `outer_destination` (the backend for an error from the client's side, the client for one
// from the backend's), the outer source stays the router's or host's that sent it, and the
// embedded packet's addresses and ports become `embedded` (as the embedded packet has them: the
// session's packet toward the error's sender). The embedded IPv4 header checksum, the embedded
// TCP or UDP checksum where the error carries it, the ICMP checksum (with ICMPv6's
// pseudo-header) and the outer IPv4 header checksum are updated incrementally. Returns false,
// changing nothing, for an error whose embedded packet is not TCP or UDP right after its IP
// header or whose frame is too short for what must change; the caller drops and counts it.
bool rewriteIcmpError(Frame& frame, const ParsedPacket& packet,
                      const std::array<uint8_t, 16>& outer_destination,
                      const NatEndpoints& embedded);

// A Full-NAT packet's whole rewrite: its endpoints, then the Ethernet header for `next_hop`
// (its MACs and VLAN, as l2dsr sets them). The IP packet does not grow.
ForwardResult forwardFullNat(Frame& frame, const ParsedPacket& packet,
                             const ForwardingTarget& next_hop, const NatEndpoints& to);

}  // namespace berth
