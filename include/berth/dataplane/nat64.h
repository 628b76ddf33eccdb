#pragma once

// NAT64 for Full-NAT (docs/fullnat.md, "NAT64"): a fullnat service with an IPv6 VIP sends to
// IPv4 backends, its packets translated between the two IP versions by RFC 7915's rules as its
// addresses and ports are rewritten, and its ICMP errors translated between ICMPv6 and ICMPv4
// (path MTU discovery among them). Pure byte work over a frame, as nat_rewrite.h is; the
// session (dataplane/nat_sessions.h) knows both sides' families.
//
// What the translation keeps and sets (RFC 7915, 4.1 and 5.1):
// - IPv6 to IPv4: traffic class to TOS; hop limit to TTL, left as it came, as Full-NAT leaves
//   it; no options; Identification from the caller; DF set on a packet over 1260 bytes, clear
//   below (so a router may fragment a small one where an IPv4 path is narrower still);
//   extension headers dropped; the flow label has no IPv4 field.
// - IPv4 to IPv6: TOS to traffic class, TTL to hop limit, flow label 0, options dropped.
// - TCP and UDP checksums adjusted incrementally for the new pseudo-header's addresses (the rest
//   of the two pseudo-headers sums alike); an IPv4 UDP datagram without a checksum gets one
//   computed, since IPv6 requires it.

#include <array>
#include <cstdint>

#include "berth/dataplane/frame.h"
#include "berth/dataplane/nat_rewrite.h"
#include "berth/net/packet_parser.h"

namespace berth {

// IPv6 packets of at most this size leave as IPv4 with DF clear (RFC 7915, 5.1).
inline constexpr uint16_t kNat64DontFragmentAbove = 1260;
// What an IPv4 packet grows by as IPv6 (its header without options).
inline constexpr uint16_t kNat64Growth = 20;

// A client's IPv6 TCP or UDP packet (not a fragment), parsed as `packet`, rewritten in place
// into an IPv4 packet with `to`'s addresses (IPv4, in the first 4 bytes) and ports and the
// Identification `identification`. The frame's Ethernet header (VLAN tags kept) moves up by
// what the IP header shrank; `packet` is updated to the IPv4 packet's offsets, family and
// length.
void translateToIpv4(Frame& frame, ParsedPacket& packet, const NatEndpoints& to,
                     uint16_t identification);

// A backend's IPv4 TCP or UDP packet (not a fragment), rewritten in place into an IPv6 packet
// with `to`'s addresses and ports; the Ethernet header moves down into the headroom. False,
// nothing changed, without the headroom.
bool translateToIpv6(Frame& frame, ParsedPacket& packet, const NatEndpoints& to);

// An ICMPv6 error from the clients' side about a reply the client was sent (packet.icmp_error),
// rewritten in place into the ICMPv4 error the backend's stack takes, from `outer_source` to
// `outer_destination` (IPv4), about the backend's own packet as it sent it (`embedded`, IPv4):
// destination unreachable (its codes as RFC 7915 4.2's table maps them back), packet too big
// as fragmentation needed with the MTU less 20, time exceeded. False, nothing changed, for
// another type or code, an embedded packet other than TCP or UDP right after its IPv6 header,
// or one too short to translate.
bool translateIcmpErrorToIpv4(Frame& frame, ParsedPacket& packet,
                              const std::array<uint8_t, 16>& outer_source,
                              const std::array<uint8_t, 16>& outer_destination,
                              const NatEndpoints& embedded);

// An ICMPv4 error from the backends' side about a client's translated packet, rewritten in
// place into the ICMPv6 error the client's stack takes (RFC 7915, 4.2): unreachable codes as its
// table maps them, fragmentation needed as packet too big with the MTU plus 20 (at least 1280),
// protocol unreachable as a parameter problem, time exceeded. The message and the embedded
// packet (the client's as it sent it, `embedded`, IPv6) grow into the headroom. False, nothing
// changed, as above or without the headroom.
bool translateIcmpErrorToIpv6(Frame& frame, ParsedPacket& packet,
                              const std::array<uint8_t, 16>& outer_source,
                              const std::array<uint8_t, 16>& outer_destination,
                              const NatEndpoints& embedded);

}  // namespace berth
