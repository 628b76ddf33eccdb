#pragma once

// Shared by the encapsulating modes: the outer Ethernet and IP headers and the MTU rule.

#include <cstddef>
#include <cstdint>

#include "berth/dataplane/forwarding.h"

namespace berth {

inline constexpr size_t kEthernetLength = 14;
inline constexpr size_t kOuterIpv4Length = 20;
inline constexpr size_t kOuterIpv6Length = 40;
inline constexpr size_t kUdpLength = 8;
inline constexpr size_t kGreLength = 4;

inline size_t outerIpLength(IpFamily family) {
  return family == IpFamily::kIpv4 ? kOuterIpv4Length : kOuterIpv6Length;
}

// Where the outer headers go and how long the result is, after the MTU and headroom checks.
struct OuterLayout {
  uint8_t* start = nullptr;  // the new first byte of the frame
  const uint8_t* inner = nullptr;
  size_t inner_length = 0;  // the inner IP packet, without Ethernet padding
};

// Makes room for `extra` bytes of headers between a fresh Ethernet header and the inner IP
// packet, which stays where it is. On kSend, `layout` says where to write.
ForwardResult prepareOuter(Frame& frame, const ParsedPacket& packet, size_t extra,
                           const ForwardingTarget& target, OuterLayout& layout);

// Writes the Ethernet header at `start` (untagged) and the outer IP header after it, for a
// payload of `payload_length` bytes of protocol `protocol`. Returns the byte after the IP header.
uint8_t* writeOuterHeaders(uint8_t* start, const ForwardingTarget& target,
                           const ParsedPacket& packet, const uint8_t* inner, uint8_t protocol,
                           size_t payload_length, uint32_t flow_hash);

}  // namespace berth
