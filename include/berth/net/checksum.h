#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace berth {

// The Internet checksum (RFC 1071) updated for changed bytes without summing the rest again
// (RFC 1624, equation 3: HC' = ~(~HC + ~m + m')). `checksum` and the words are as on the wire,
// big-endian; `length` is even and the bytes start at an even offset of the summed data, as
// addresses and ports do. A few additions per word: what a NAT rewrite pays per packet.
inline uint16_t adjustChecksum(uint16_t checksum, const uint8_t* old_bytes,
                               const uint8_t* new_bytes, size_t length) {
  uint32_t sum = static_cast<uint16_t>(~checksum);
  for (size_t i = 0; i < length; i += 2) {
    const auto old_word = static_cast<uint16_t>(old_bytes[i] << 8 | old_bytes[i + 1]);
    const auto new_word = static_cast<uint16_t>(new_bytes[i] << 8 | new_bytes[i + 1]);
    sum += static_cast<uint16_t>(~old_word);
    sum += new_word;
  }
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// The same for one 32-bit field, with the checksum and both words as they lie in the packet
// (loaded with memcpy, not byte-swapped): the one's complement sum comes out the same in either
// byte order (RFC 1071, 2.(B)), so the update is a few additions, whatever the machine.
inline uint16_t adjustChecksumForWord(uint16_t checksum, uint32_t old_word, uint32_t new_word) {
  uint64_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint32_t>(~old_word);
  sum += new_word;
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

inline uint16_t loadBigEndian16(const uint8_t* bytes) {
  return static_cast<uint16_t>(bytes[0] << 8 | bytes[1]);
}
inline void storeBigEndian16(uint8_t* bytes, uint16_t value) {
  bytes[0] = static_cast<uint8_t>(value >> 8);
  bytes[1] = static_cast<uint8_t>(value);
}
inline uint32_t loadBigEndian32(const uint8_t* bytes) {
  uint32_t word;
  std::memcpy(&word, bytes, 4);
  return __builtin_bswap32(word);
}
inline void storeBigEndian32(uint8_t* bytes, uint32_t value) {
  const uint32_t word = __builtin_bswap32(value);
  std::memcpy(bytes, &word, 4);
}

}  // namespace berth
