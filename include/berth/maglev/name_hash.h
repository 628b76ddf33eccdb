#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace berth {

// The two seeds that turn a backend's name into its Maglev permutation. They are part of the
// on-wire contract between berth instances: changing either one reshuffles every table, so
// tests pin the hash values they produce.
inline constexpr uint32_t kOffsetHashSeed = 0x62657274;  // "bert"
inline constexpr uint32_t kSkipHashSeed = 0x6d61676c;    // "magl"

// MurmurHash3 x64_128 (Austin Appleby, public domain), the first 64-bit half. Chosen because it
// is specified byte for byte, independent of CPU and endianness of the host, and is what Katran
// uses for the same purpose. Cost: about one cycle per byte.
uint64_t nameHash64(absl::string_view name, uint32_t seed);

// Both 64-bit halves of MurmurHash3 x64_128, for test vectors against the reference.
struct Hash128 {
  uint64_t low;
  uint64_t high;
};
Hash128 murmur3x64_128(absl::string_view data, uint32_t seed);

}  // namespace berth
