#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "berth/net/ip_address.h"

namespace berth {

inline constexpr uint8_t kProtocolIcmp = 1;
inline constexpr uint8_t kProtocolTcp = 6;
inline constexpr uint8_t kProtocolUdp = 17;
inline constexpr uint8_t kProtocolIcmpv6 = 58;
// An ICMP or ICMPv6 header: type, code, checksum and four bytes that depend on the type.
inline constexpr size_t kIcmpHeaderLength = 8;

// The 5-tuple of a packet as the parser lifts it off the wire. Addresses and ports stay in
// network byte order so that the parser copies bytes and never swaps them; an IPv4 address
// fills the first 4 bytes of its array and leaves the rest zero.
struct FlowKey {
  std::array<uint8_t, 16> source{};
  std::array<uint8_t, 16> destination{};
  uint16_t source_port = 0;       // network byte order
  uint16_t destination_port = 0;  // network byte order
  uint8_t protocol = 0;
  IpFamily family = IpFamily::kIpv4;

  // A key from host-order ports, for tests, tools and the control plane.
  static FlowKey make(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
                      uint16_t destination_port, uint8_t protocol);

  // "tcp 198.18.0.1:1234 -> 198.18.100.1:80", or "[v6]:port" for IPv6.
  std::string toString() const;

  friend bool operator==(const FlowKey&, const FlowKey&) = default;
};

}  // namespace berth
