#include "berth/net/toeplitz.h"

namespace berth {

uint32_t toeplitzHash(absl::Span<const uint8_t> key, absl::Span<const uint8_t> input) {
  uint32_t hash = 0;
  // The key's window at the current input bit; it slides one bit per input bit, taking the
  // key's next bit in at the bottom.
  uint32_t window =
      uint32_t{key[0]} << 24 | uint32_t{key[1]} << 16 | uint32_t{key[2]} << 8 | key[3];
  for (size_t i = 0; i < input.size(); ++i) {
    const uint8_t next = i + 4 < key.size() ? key[i + 4] : 0;
    const uint8_t byte = input[i];
    for (int bit = 7; bit >= 0; --bit) {
      // Branch-free: the window when the bit is set, else nothing.
      hash ^= window & (0u - ((byte >> bit) & 1u));
      window = window << 1 | ((next >> bit) & 1u);
    }
  }
  return hash;
}

}  // namespace berth
