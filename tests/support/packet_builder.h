#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "berth/net/ip_address.h"

namespace berth {

// Byte-level builders for test frames: each returns one header in wire order, and frames are
// put together with concat(). Lengths are computed unless overridden, so a test can build the
// malformed cases on purpose. Checksums are left zero: the parser does not read them.

using Bytes = std::vector<uint8_t>;

// The hosts tests talk about: addresses from the benchmarking range 198.18.0.0/15 and the IPv6
// documentation prefix, never anyone's real network.
inline const IpAddress kClient = IpAddress::v4(198, 18, 0, 1);
inline const IpAddress kVip = IpAddress::v4(198, 18, 100, 1);
inline const IpAddress kClient6 = *IpAddress::parse("2001:db8::1");
inline const IpAddress kVip6 = *IpAddress::parse("2001:db8:100::1");

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes frame;
  for (const Bytes& part : parts) frame.insert(frame.end(), part.begin(), part.end());
  return frame;
}

inline void putBigEndian16(Bytes& bytes, size_t at, uint16_t value) {
  bytes[at] = static_cast<uint8_t>(value >> 8);
  bytes[at + 1] = static_cast<uint8_t>(value);
}

inline Bytes ethernet(uint16_t ether_type, std::initializer_list<uint16_t> vlan_ids = {},
                      uint16_t vlan_tpid = 0x8100) {
  // Sized up front and filled by index: GCC 12 warns falsely on vector::insert here at -O3.
  Bytes header(14 + 4 * vlan_ids.size(), 0);
  const uint8_t macs[12] = {0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02};  // destination, source
  std::copy(macs, macs + 12, header.begin());
  size_t at = 12;
  for (uint16_t id : vlan_ids) {
    putBigEndian16(header, at, vlan_tpid);
    putBigEndian16(header, at + 2, id);
    at += 4;
  }
  putBigEndian16(header, at, ether_type);
  return header;
}

struct Ipv4Options {
  uint8_t header_words = 5;            // IHL
  int total_length = -1;               // -1: header plus payload
  uint16_t flags_and_offset = 0x4000;  // DF
  uint8_t ttl = 64;
  uint8_t version = 4;
};

inline Bytes ipv4(const IpAddress& source, const IpAddress& destination, uint8_t protocol,
                  size_t payload_length, const Ipv4Options& options = {}) {
  const size_t header_length = std::max<size_t>(options.header_words, 5) * 4;
  Bytes header(header_length, 0);
  header[0] = static_cast<uint8_t>(options.version << 4 | (options.header_words & 0x0F));
  putBigEndian16(header, 2,
                 static_cast<uint16_t>(options.total_length >= 0 ? options.total_length
                                                                 : header_length + payload_length));
  putBigEndian16(header, 6, options.flags_and_offset);
  header[8] = options.ttl;
  header[9] = protocol;
  std::copy(source.bytes.begin(), source.bytes.begin() + 4, header.begin() + 12);
  std::copy(destination.bytes.begin(), destination.bytes.begin() + 4, header.begin() + 16);
  return header;
}

inline Bytes ipv6(const IpAddress& source, const IpAddress& destination, uint8_t next_header,
                  size_t payload_length, uint8_t hop_limit = 64) {
  Bytes header(40, 0);
  header[0] = 0x60;
  putBigEndian16(header, 4, static_cast<uint16_t>(payload_length));
  header[6] = next_header;
  header[7] = hop_limit;
  std::copy(source.bytes.begin(), source.bytes.end(), header.begin() + 8);
  std::copy(destination.bytes.begin(), destination.bytes.end(), header.begin() + 24);
  return header;
}

// An IPv6 extension header of (length_units + 1) * 8 bytes.
inline Bytes ipv6Extension(uint8_t next_header, uint8_t length_units = 0) {
  Bytes header((size_t{length_units} + 1) * 8, 0);
  header[0] = next_header;
  header[1] = length_units;
  return header;
}

inline Bytes ipv6Fragment(uint8_t next_header, uint16_t offset_units, bool more_fragments) {
  Bytes header(8, 0);
  header[0] = next_header;
  putBigEndian16(header, 2, static_cast<uint16_t>(offset_units << 3 | (more_fragments ? 1 : 0)));
  return header;
}

inline Bytes tcp(uint16_t source_port, uint16_t destination_port, uint8_t header_words = 5) {
  Bytes header(std::max<size_t>(header_words, 5) * 4, 0);
  putBigEndian16(header, 0, source_port);
  putBigEndian16(header, 2, destination_port);
  header[12] = static_cast<uint8_t>(header_words << 4);
  header[13] = 0x02;  // SYN
  return header;
}

inline Bytes udp(uint16_t source_port, uint16_t destination_port, size_t payload_length,
                 int length_field = -1) {
  Bytes header(8, 0);
  putBigEndian16(header, 0, source_port);
  putBigEndian16(header, 2, destination_port);
  putBigEndian16(header, 4,
                 static_cast<uint16_t>(length_field >= 0 ? length_field : 8 + payload_length));
  return header;
}

inline Bytes icmp(uint8_t type, uint8_t code) { return {type, code, 0, 0, 0, 0, 0, 0}; }

inline Bytes payload(size_t length) { return Bytes(length, 0xAB); }

}  // namespace berth
