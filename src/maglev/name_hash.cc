#include "berth/maglev/name_hash.h"

#include <cstring>

namespace berth {
namespace {

constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;

uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Blocks are read as little-endian words whatever the host, so the hash is portable.
uint64_t loadLittleEndian64(const unsigned char* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

uint64_t mixK1(uint64_t k1) { return rotl64(k1 * kC1, 31) * kC2; }
uint64_t mixK2(uint64_t k2) { return rotl64(k2 * kC2, 33) * kC1; }

}  // namespace

Hash128 murmur3x64_128(absl::string_view data, uint32_t seed) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const size_t length = data.size();
  const size_t block_count = length / 16;
  uint64_t h1 = seed;
  uint64_t h2 = seed;

  for (size_t i = 0; i < block_count; ++i) {
    h1 ^= mixK1(loadLittleEndian64(bytes + i * 16));
    h1 = rotl64(h1, 27) + h2;
    h1 = h1 * 5 + 0x52dce729;
    h2 ^= mixK2(loadLittleEndian64(bytes + i * 16 + 8));
    h2 = rotl64(h2, 31) + h1;
    h2 = h2 * 5 + 0x38495ab5;
  }

  const unsigned char* tail = bytes + block_count * 16;
  const size_t tail_length = length & 15;
  uint64_t k1 = 0;
  uint64_t k2 = 0;
  for (size_t i = 0; i < tail_length; ++i) {
    if (i < 8) {
      k1 ^= static_cast<uint64_t>(tail[i]) << (8 * i);
    } else {
      k2 ^= static_cast<uint64_t>(tail[i]) << (8 * (i - 8));
    }
  }
  if (tail_length > 8) h2 ^= mixK2(k2);
  if (tail_length > 0) h1 ^= mixK1(k1);

  h1 ^= length;
  h2 ^= length;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  return {h1, h2};
}

uint64_t nameHash64(absl::string_view name, uint32_t seed) {
  return murmur3x64_128(name, seed).low;
}

}  // namespace berth
