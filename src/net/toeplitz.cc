#include "berth/net/toeplitz.h"

#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_replace.h"

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

std::vector<uint8_t> symmetricRssKey(size_t length) {
  std::vector<uint8_t> key(length);
  for (size_t i = 0; i < length; ++i) key[i] = i % 2 == 0 ? 0x6d : 0x5a;
  return key;
}

std::vector<uint8_t> rssKeyFromHex(absl::string_view text) {
  const std::string hex = absl::StrReplaceAll(text, {{":", ""}});
  if (hex.size() % 2 != 0 || hex.size() / 2 < 40 || hex.size() / 2 > 52 ||
      !absl::c_all_of(hex, [](char c) { return absl::ascii_isxdigit(c); })) {
    return {};
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

}  // namespace berth
