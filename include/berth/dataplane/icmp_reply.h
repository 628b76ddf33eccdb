#pragma once

#include <cstddef>
#include <cstdint>

#include "berth/dataplane/forwarding.h"

namespace berth {

// The answer to a packet that a forwarding mode found too big (ForwardResult::kTooBig): ICMP
// "fragmentation needed" (type 3, code 4) for IPv4 or ICMPv6 "packet too big" for IPv6, telling
// the client the MTU it must use so that the packet still fits once encapsulated.
//
// Rewrites `frame` in place into the reply: back out of the port it came in on, to the MAC it
// came from, VLAN tags kept, from the VIP the client addressed (as Katran does, so that filters
// keyed on the VIP pass it) to the client. It quotes as much of the packet as RFC 1812 (576-byte
// IPv4 reply) and RFC 4443 (1280-byte IPv6 reply) allow. Uses 28 (IPv4) or 48 (IPv6) bytes of
// headroom; returns false, leaving the frame as it was, without them.
bool buildTooBigReply(Frame& frame, const ParsedPacket& packet, uint16_t client_mtu,
                      const MacAddress& port_mac);

// Whether an ICMP error may answer `packet` at all (RFC 1122 3.2.2.; RFC 4443 2.4 (e)): never
// about an ICMP error, a frame sent to a link-layer broadcast or multicast address, or an IPv4
// fragment other than the first, and never to a source that is not one host: unspecified,
// loopback, multicast, IPv4 limited broadcast or class E. Anyone can forge such a source, and an
// error to it would land on a whole network, or on berth itself.
bool mayAnswerWithIcmpError(const Frame& frame, const ParsedPacket& packet);

inline constexpr size_t kIcmpv4ReplyLimit = 576;
inline constexpr size_t kIcmpv6ReplyLimit = 1280;

}  // namespace berth
