#include "maglev/probe.h"

#include <bit>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace berth {

ProbeStrides probeStrides(uint32_t skip, uint32_t table_size) {
  ProbeStrides strides{};
  strides[0] = skip;
  for (size_t k = 1; k < strides.size(); ++k)
    strides[k] = advance(strides[k - 1], skip, table_size);
  return strides;
}

#if defined(__x86_64__)

bool cpuHasAvx2() {
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  return has_avx2;
}

__attribute__((target("avx2"))) uint32_t firstFreeSlotAvx2(const SlotBitmap& taken, uint32_t start,
                                                           const ProbeStrides& strides,
                                                           uint32_t table_size) {
  // The bitmap's 64-bit words read as twice as many 32-bit words on a little-endian host, so
  // slot s is bit s % 32 of 32-bit word s / 32.
  const auto* words = static_cast<const int*>(taken.data());
  const __m256i size = _mm256_set1_epi32(static_cast<int>(table_size));
  const __m256i low_five_bits = _mm256_set1_epi32(31);
  // Lanes 0 to 7 of a step: 0 to 7 times skip, mod M, from the four strides; a step moves 8.
  const __m128i four = _mm_set1_epi32(static_cast<int>(strides[3]));
  const __m128i low = _mm_setr_epi32(0, static_cast<int>(strides[0]), static_cast<int>(strides[1]),
                                     static_cast<int>(strides[2]));
  __m128i high = _mm_add_epi32(low, four);
  high = _mm_min_epu32(high, _mm_sub_epi32(high, _mm256_castsi256_si128(size)));
  const __m256i offsets = _mm256_set_m128i(high, low);
  const uint32_t eight = advance(strides[3], strides[3], table_size);
  uint32_t base = start;
  for (;;) {
    __m256i candidates = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base)), offsets);
    // Both terms are below 2M < 2^32: where a candidate is below M, subtracting M wraps to a
    // larger unsigned value and min keeps the candidate; elsewhere min takes candidate - M.
    candidates = _mm256_min_epu32(candidates, _mm256_sub_epi32(candidates, size));
    const __m256i gathered = _mm256_i32gather_epi32(words, _mm256_srli_epi32(candidates, 5), 4);
    const __m256i bits = _mm256_slli_epi32(
        _mm256_srlv_epi32(gathered, _mm256_and_si256(candidates, low_five_bits)), 31);
    const auto taken_mask = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(bits)));
    if (taken_mask != 0xFF) {
      alignas(32) std::array<uint32_t, 8> lanes;
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes.data()), candidates);
      return lanes[std::countr_one(taken_mask)];
    }
    base = advance(base, eight, table_size);
  }
}

#else

bool cpuHasAvx2() { return false; }

uint32_t firstFreeSlotAvx2(const SlotBitmap& taken, uint32_t start, const ProbeStrides& strides,
                           uint32_t table_size) {
  return firstFreeSlot(taken, start, strides, table_size);
}

#endif

}  // namespace berth
