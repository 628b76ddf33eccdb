#pragma once

// Shared by the encapsulating modes: the outer Ethernet and IP headers and the MTU rule.

#include <cstddef>
#include <cstdint>

#include "berth/dataplane/forwarding.h"

namespace berth {

inline constexpr size_t kEthernetLength = 14;
inline constexpr size_t kVlanTagLength = 4;

// The outer Ethernet header's length: with the target's 802.1Q tag where it has a VLAN.
inline size_t outerEthernetLength(const ForwardingTarget& target) {
  return target.vlan != 0 ? kEthernetLength + kVlanTagLength : kEthernetLength;
}
inline constexpr size_t kOuterIpv4Length = 20;
inline constexpr size_t kOuterIpv6Length = 40;
inline constexpr size_t kUdpLength = 8;
inline constexpr size_t kGreLength = 4;

inline size_t outerIpLength(IpFamily family) {
  return family == IpFamily::kIpv4 ? kOuterIpv4Length : kOuterIpv6Length;
}

// Checks the MTU and headroom, makes room in front of the inner IP packet (which stays where it
// is) and writes the target's prepared Ethernet header (tagged with its VLAN, if any) and outer IP
// header there (ForwardingTarget::outer_headers), for a mode whose own header of `extra` bytes
// sits between the outer IP header and the inner packet. On kSend,
// `mode_header` points where that header goes and `inner_length` is the inner packet's length;
// otherwise the frame is untouched.
ForwardResult encapsulate(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                          size_t extra, uint8_t protocol, uint32_t flow_hash, uint8_t*& mode_header,
                          size_t& inner_length);

}  // namespace berth
