#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
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
  // Slots 64 * i to 64 * i + 63, one bit each.
  uint64_t word(size_t i) const { return words_[i]; }
  size_t wordCount() const { return words_.size(); }

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

// A preference list (offset, skip) prepared for rank queries: see PreferenceRank::rank().
struct RankedList {
  uint64_t scale = 0;  // ceil(skip^-1 * 2^64 / M)
  uint64_t shift = 0;  // ceil(((M - offset) * skip^-1 mod M) * 2^64 / M)
};

// Where a slot sits in a preference list (offset, skip): the j with (offset + j * skip) % M ==
// slot, that is (slot - offset) * skip^-1 mod M. Lets a caller find the earliest of a few free
// slots in a list without walking the list.
class PreferenceRank {
  __extension__ using Uint128 = unsigned __int128;

 public:
  explicit PreferenceRank(uint32_t table_size)
      : size_(table_size),
        reciprocal_(1.0 / static_cast<double>(table_size)),
        two_to_64_quotient_(UINT64_MAX / table_size),
        two_to_64_remainder_(UINT64_MAX % table_size + 1) {}

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

  // Every skip's inverse with one Fermat inversion and 3(n - 1) multiplications (Montgomery's
  // batch trick): for a thousand lists, 0.01 ms instead of 0.13 ms.
  std::vector<uint32_t> inverses(const std::vector<uint32_t>& skips) const {
    std::vector<uint32_t> result(skips.size());
    if (skips.empty()) return result;
    std::vector<uint64_t> prefix(skips.size());  // prefix[i] = skips[0] * ... * skips[i]
    uint64_t product = 1;
    for (size_t i = 0; i < skips.size(); ++i)
      prefix[i] = product = multiplyModulo(product, skips[i]);
    uint64_t inverse_of_prefix = inverse(static_cast<uint32_t>(product));
    for (size_t i = skips.size(); i-- > 1;) {
      result[i] = static_cast<uint32_t>(multiplyModulo(inverse_of_prefix, prefix[i - 1]));
      inverse_of_prefix = multiplyModulo(inverse_of_prefix, skips[i]);
    }
    result[0] = static_cast<uint32_t>(inverse_of_prefix);
    return result;
  }

  RankedList prepare(uint32_t offset, uint32_t skip_inverse) const {
    const uint64_t shift = multiplyModulo(offset == 0 ? 0 : size_ - offset, skip_inverse);
    return {ceilFraction(skip_inverse), ceilFraction(shift)};
  }

  // slot * scale + shift, wrapping mod 2^64, is (slot - offset) * skip^-1 / M as a 64-bit
  // fraction, too large by less than 2^25 / 2^64 (from rounding the constants up) and so never
  // wrapping past the next whole; multiplying by M and keeping the high word gives the rank
  // exactly. Two multiplications, no division.
  uint32_t rank(uint32_t slot, const RankedList& list) const {
    const uint64_t fraction = slot * list.scale + list.shift;
    return static_cast<uint32_t>((static_cast<Uint128>(fraction) * size_) >> 64);
  }

  // a * b mod M for a, b < M < 2^24.
  uint64_t multiplyModulo(uint64_t a, uint64_t b) const { return reduce(a * b); }

  // value mod M for value < 2^49. The quotient computed in double precision is off by at most
  // one, so two corrections replace a 64-bit division (~40 cycles).
  uint64_t reduce(uint64_t value) const { return divide(value).second; }

 private:
  // (value / M, value % M) for value < 2^49.
  std::pair<uint64_t, uint64_t> divide(uint64_t value) const {
    auto quotient = static_cast<int64_t>(static_cast<double>(value) * reciprocal_);
    auto remainder = static_cast<int64_t>(value) - quotient * static_cast<int64_t>(size_);
    if (remainder < 0) {
      remainder += size_;
      --quotient;
    }
    if (remainder >= static_cast<int64_t>(size_)) {
      remainder -= size_;
      ++quotient;
    }
    return {static_cast<uint64_t>(quotient), static_cast<uint64_t>(remainder)};
  }

  // ceil(numerator * 2^64 / M) for numerator < M, as numerator * floor(2^64 / M) plus
  // ceil(numerator * (2^64 mod M) / M), all in 64 bits.
  uint64_t ceilFraction(uint64_t numerator) const {
    const auto [quotient, remainder] = divide(numerator * two_to_64_remainder_);
    return numerator * two_to_64_quotient_ + quotient + (remainder != 0);
  }

  uint32_t size_;
  double reciprocal_;
  uint64_t two_to_64_quotient_;   // floor(2^64 / M)
  uint64_t two_to_64_remainder_;  // 2^64 mod M, never 0 for an odd prime M
};

}  // namespace berth
