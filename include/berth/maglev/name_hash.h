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

// SplitMix64's finalizer (Steele, Lea and Flood 2014): a bijection whose output bits each depend
// on every input bit, so consecutive keys give unrelated draws. Part of the contract too:
// rendezvous draws and the analyzer's keys for jump hashing go through it.
inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace berth
