#pragma once

#include <algorithm>
#include <cstdint>

#include "berth/net/ip_address.h"
#include "support/checksums.h"
#include "support/packet_builder.h"

namespace berth {

// `frame` (Ethernet, then IPv4 or IPv6 carrying TCP or UDP) from `source`:`source_port` to
// `destination`:`destination_port`, its checksums computed again: a Full-NAT rewrite, done the
// tests' own way.
inline Bytes readdressed(Bytes frame, const IpAddress& source, uint16_t source_port,
                         const IpAddress& destination, uint16_t destination_port) {
  const bool v4 = source.isV4();
  const size_t width = v4 ? 4 : 16;
  const size_t source_at = v4 ? 14 + 12 : 14 + 8;
  std::copy_n(source.bytes.begin(), width, frame.begin() + source_at);
  std::copy_n(destination.bytes.begin(), width, frame.begin() + source_at + width);
  const size_t l4 = 14 + (v4 ? 20 : 40);
  putBigEndian16(frame, l4, source_port);
  putBigEndian16(frame, l4 + 2, destination_port);
  return withChecksums(frame);
}

}  // namespace berth
