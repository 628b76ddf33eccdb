#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "berth/net/ip_address.h"

namespace berth {

// The PROXY protocol's binary header, version 2 (HAProxy's "The PROXY protocol", section 2.2),
// as berth writes it in front of a Full-NAT connection's first byte toward its backend
// (docs/fullnat.md, "PROXY protocol"): the 12-byte signature, version 2 with the PROXY command,
// TCP over the client's address family, then the client's address and port and the VIP's. No
// TLV follows, so a header's length is fixed by the family: 28 bytes for IPv4, 52 for IPv6, and
// a session's sequence offset follows from its client's family alone.

inline constexpr size_t kProxyHeaderIpv4Length = 28;
inline constexpr size_t kProxyHeaderIpv6Length = 52;
inline constexpr size_t kProxyHeaderMaxLength = kProxyHeaderIpv6Length;
// The signature, version-and-command byte, family byte and length: what a LOCAL header is.
inline constexpr size_t kProxyHeaderLocalLength = 16;

inline constexpr uint32_t proxyHeaderLength(IpFamily client_family) {
  return client_family == IpFamily::kIpv4 ? kProxyHeaderIpv4Length : kProxyHeaderIpv6Length;
}

// The two ends a header names: the connection's source (the client) and its destination (the
// VIP), of one family; ports in network byte order, as in a packet.
struct ProxyEndpoints {
  IpFamily family = IpFamily::kIpv4;
  std::array<uint8_t, 16> source{};
  std::array<uint8_t, 16> destination{};
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
};

// Writes the header for `endpoints` to `out` (room for proxyHeaderLength(endpoints.family)
// bytes) and returns its length.
size_t encodeProxyHeader(const ProxyEndpoints& endpoints, uint8_t* out);

// The header of a connection the sender opened itself (the LOCAL command, no addresses): what a
// health probe sends first to a backend that expects the PROXY protocol, so that the backend
// reads it as the balancer's own connection rather than a malformed client's.
std::array<uint8_t, kProxyHeaderLocalLength> proxyLocalHeader();

}  // namespace berth
