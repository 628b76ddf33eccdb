#pragma once

#include <cstddef>
#include <cstdint>

#include "berth/net/flow_key.h"
#include "berth/net/packet_parser.h"
#include "support/packet_builder.h"

namespace berth {

// Internet checksums (RFC 1071) written for the tests, so that expected bytes do not come from
// the helpers the code under test uses.

// The one's complement sum of `length` bytes from `sum`, folded to 16 bits.
inline uint32_t onesComplementSum(const uint8_t* bytes, size_t length, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < length; i += 2) sum += uint32_t{bytes[i]} << 8 | bytes[i + 1];
  if (length % 2 == 1) sum += uint32_t{bytes[length - 1]} << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum;
}

// Where an IP packet at `l3` of `frame` keeps what its checksums cover: the header's length,
// the transport's protocol and length, and the transport checksum's offset.
struct ChecksummedPacket {
  bool v4 = true;
  size_t header = 0;
  uint8_t protocol = 0;
  size_t transport_length = 0;
  size_t checksum_at = 0;

  ChecksummedPacket(const Bytes& frame, size_t l3) {
    v4 = (frame[l3] >> 4) == 4;
    header = v4 ? size_t{frame[l3] & 0x0Fu} * 4 : 40;
    protocol = v4 ? frame[l3 + 9] : frame[l3 + 6];
    const size_t total = v4 ? (size_t{frame[l3 + 2]} << 8 | frame[l3 + 3])
                            : 40 + (size_t{frame[l3 + 4]} << 8 | frame[l3 + 5]);
    transport_length = total - header;
    checksum_at = l3 + header + (protocol == kProtocolTcp ? 16 : protocol == kProtocolUdp ? 6 : 2);
  }
  // The pseudo-header's sum (none for ICMP over IPv4).
  uint32_t pseudoHeader(const Bytes& frame, size_t l3) const {
    if (protocol == kProtocolIcmp) return 0;
    const uint32_t addresses =
        v4 ? onesComplementSum(&frame[l3 + 12], 8) : onesComplementSum(&frame[l3 + 8], 32);
    return addresses + static_cast<uint32_t>(transport_length) + protocol;
  }
};

// `frame` with the IPv4 header checksum and the TCP, UDP, ICMP or ICMPv6 checksum of its IP
// packet at `l3` filled in.
inline Bytes withChecksums(Bytes frame, size_t l3 = 14) {
  const ChecksummedPacket packet(frame, l3);
  if (packet.v4) {
    putBigEndian16(frame, l3 + 10, 0);
    putBigEndian16(frame, l3 + 10,
                   static_cast<uint16_t>(~onesComplementSum(&frame[l3], packet.header)));
  }
  putBigEndian16(frame, packet.checksum_at, 0);
  putBigEndian16(
      frame, packet.checksum_at,
      static_cast<uint16_t>(~onesComplementSum(&frame[l3 + packet.header], packet.transport_length,
                                               packet.pseudoHeader(frame, l3))));
  return frame;
}

// A TCP segment with `flags` and `length` payload bytes, over IPv4 or IPv6 as the addresses are,
// its checksums filled in.
inline Bytes tcpFrame(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
                      uint16_t destination_port, uint8_t flags, size_t length = 100) {
  Bytes l4 = concat({tcp(source_port, destination_port), payload(length)});
  l4[13] = flags;
  const Bytes l3 = source.isV4() ? ipv4(source, destination, kProtocolTcp, l4.size())
                                 : ipv6(source, destination, kProtocolTcp, l4.size());
  return withChecksums(concat({ethernet(source.isV4() ? kEtherTypeIpv4 : kEtherTypeIpv6), l3, l4}));
}

// Whether those checksums verify.
inline bool checksumsVerify(const Bytes& frame, size_t l3 = 14) {
  const ChecksummedPacket packet(frame, l3);
  if (packet.v4 && onesComplementSum(&frame[l3], packet.header) != 0xFFFF) return false;
  return onesComplementSum(&frame[l3 + packet.header], packet.transport_length,
                           packet.pseudoHeader(frame, l3)) == 0xFFFF;
}

}  // namespace berth
