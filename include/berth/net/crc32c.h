#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace berth {

// CRC32-C (Castagnoli, reflected polynomial 0x82F63B78) as rte_hash_crc computes it: the caller's
// value goes in as the initial register and comes out with no final inversion. Words are fed
// least significant byte first, which on a little-endian host is their order in memory, so
// feeding a buffer as u64/u32/u8 words equals feeding its bytes one by one.
static_assert(std::endian::native == std::endian::little,
              "berth's flow hash assumes little endian");

// Byte-at-a-time table implementation; the reference every fast path is tested against.
uint32_t crc32cPortable(uint32_t crc, const void* data, size_t length);

inline uint32_t crc32cU8(uint32_t crc, uint8_t value) {
#if defined(__SSE4_2__)
  return _mm_crc32_u8(crc, value);
#else
  return crc32cPortable(crc, &value, 1);
#endif
}

inline uint32_t crc32cU32(uint32_t crc, uint32_t value) {
#if defined(__SSE4_2__)
  return _mm_crc32_u32(crc, value);
#else
  return crc32cPortable(crc, &value, 4);
#endif
}

inline uint32_t crc32cU64(uint32_t crc, uint64_t value) {
#if defined(__SSE4_2__)
  return static_cast<uint32_t>(_mm_crc32_u64(crc, value));
#else
  return crc32cPortable(crc, &value, 8);
#endif
}

}  // namespace berth
