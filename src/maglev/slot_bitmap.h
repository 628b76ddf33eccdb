#pragma once

#include <cstdint>
#include <vector>

namespace berth {

// One bit per table slot. Builds probe it hundreds of thousands of times, and at M = 65537 the
// bits take 8 KiB and stay in L1, where a uint16_t entry array (128 KiB) would not.
class SlotBitmap {
 public:
  explicit SlotBitmap(uint32_t slots) : words_((slots + 63) / 64, 0) {}
  bool test(uint32_t slot) const { return (words_[slot >> 6] >> (slot & 63)) & 1; }
  void set(uint32_t slot) { words_[slot >> 6] |= uint64_t{1} << (slot & 63); }
  void clear(uint32_t slot) { words_[slot >> 6] &= ~(uint64_t{1} << (slot & 63)); }
  const void* data() const { return words_.data(); }

 private:
  std::vector<uint64_t> words_;
};

// The next slot in a preference list, without a division: slot < size and skip < size.
inline uint32_t advance(uint32_t slot, uint32_t skip, uint32_t size) {
  const uint32_t next = slot + skip;
  return next >= size ? next - size : next;
}

}  // namespace berth

namespace berth {

// Where a slot sits in a preference list (offset, skip): the j with (offset + j * skip) % M ==
// slot, computed as (slot - offset) * skip^-1 mod M. Lets a caller find the earliest free slot of a
// list among a few candidates without walking the list.
class PreferenceRank {
 public:
  explicit PreferenceRank(uint32_t table_size)
      : size_(table_size), reciprocal_(1.0 / static_cast<double>(table_size)) {}

  // skip^-1 mod M as skip^(M-2) (Fermat; M is prime and 0 < skip < M). About 50 multiplications
  // and no division, where Euclid's algorithm needs ~20 divisions of ~40 cycles each.
  uint32_t inverse(uint32_t skip) const {
    uint64_t result = 1;
    uint64_t base = skip;
    for (uint32_t exponent = size_ - 2; exponent != 0; exponent >>= 1) {
      if (exponent & 1) result = multiplyModulo(result, base);
      base = multiplyModulo(base, base);
    }
    return static_cast<uint32_t>(result);
  }

  uint32_t rank(uint32_t slot, uint32_t offset, uint32_t skip_inverse) const {
    const uint64_t distance = slot >= offset ? slot - offset : uint64_t{slot} + size_ - offset;
    return static_cast<uint32_t>(multiplyModulo(distance, skip_inverse));
  }

  // a * b mod M for a, b < M < 2^24.
  uint64_t multiplyModulo(uint64_t a, uint64_t b) const { return reduce(a * b); }

  // value mod M for value < 2^49. The quotient computed in double precision is off by at most
  // one, so two corrections replace a 64-bit division (~40 cycles).
  uint64_t reduce(uint64_t value) const {
    const auto quotient = static_cast<uint64_t>(static_cast<double>(value) * reciprocal_);
    auto remainder = static_cast<int64_t>(value - quotient * size_);
    if (remainder < 0) remainder += size_;
    if (remainder >= static_cast<int64_t>(size_)) remainder -= size_;
    return static_cast<uint64_t>(remainder);
  }

 private:
  uint32_t size_;
  double reciprocal_;
};

}  // namespace berth
