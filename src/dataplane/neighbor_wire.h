#pragma once

#include <cstddef>
#include <cstdint>

namespace berth {

// ARP and IPv6 neighbour discovery on the wire (RFC 826, RFC 4861): the sizes and codes the
// neighbour replies (neighbor_reply.cc) and the neighbour learning and requests
// (neighbor_discovery.cc) share.
inline constexpr size_t kArpLength = 28;
inline constexpr size_t kIpv6Length = 40;
inline constexpr size_t kNeighborMessageLength = 24;  // type, code, checksum, flags, target
inline constexpr size_t kLinkLayerOptionLength = 8;
inline constexpr uint8_t kNeighborSolicitation = 135;
inline constexpr uint8_t kNeighborAdvertisement = 136;
inline constexpr uint8_t kSourceLinkLayerOption = 1;
inline constexpr uint8_t kTargetLinkLayerOption = 2;
inline constexpr uint8_t kNeighborDiscoveryHopLimit = 255;
// In an advertisement's flags byte: sent in answer to a solicitation (RFC 4861, 4.4).
inline constexpr uint8_t kSolicitedFlag = 0x40;

}  // namespace berth
