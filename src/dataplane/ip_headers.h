#pragma once

// IP headers written whole, for the packets the datapath makes itself rather than rewrites:
// NAT64's translations (nat64.h) and the health checks' path probes (path_probe.h).

#include <rte_ip.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "berth/net/checksum.h"

namespace berth {

// A 20-byte IPv4 header without options.
inline void writeIpv4Header(uint8_t* header, uint8_t tos, size_t total_length,
                            uint16_t identification, bool dont_fragment, uint8_t ttl,
                            uint8_t protocol, const uint8_t* source, const uint8_t* destination) {
  header[0] = 0x45;
  header[1] = tos;
  storeBigEndian16(header + 2, static_cast<uint16_t>(total_length));
  storeBigEndian16(header + 4, identification);
  storeBigEndian16(header + 6, dont_fragment ? 0x4000 : 0);
  header[8] = ttl;
  header[9] = protocol;
  header[10] = 0;
  header[11] = 0;
  std::memcpy(header + 12, source, 4);
  std::memcpy(header + 16, destination, 4);
  // As it lies in the header: rte_ipv4_cksum sums the words as they lie (RFC 1071, 2.(B)).
  const uint16_t checksum = rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(header));
  std::memcpy(header + 10, &checksum, 2);
}

inline void writeIpv6Header(uint8_t* header, uint8_t traffic_class, size_t payload_length,
                            uint8_t next_header, uint8_t hop_limit, const uint8_t* source,
                            const uint8_t* destination) {
  header[0] = static_cast<uint8_t>(0x60 | traffic_class >> 4);
  header[1] = static_cast<uint8_t>(traffic_class << 4);
  header[2] = 0;
  header[3] = 0;
  storeBigEndian16(header + 4, static_cast<uint16_t>(payload_length));
  header[6] = next_header;
  header[7] = hop_limit;
  std::memcpy(header + 8, source, 16);
  std::memcpy(header + 24, destination, 16);
}

}  // namespace berth
