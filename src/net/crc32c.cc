#include "berth/net/crc32c.h"

#include <array>

namespace berth {
namespace {

constexpr std::array<uint32_t, 256> makeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = makeCrc32cTable();

}  // namespace

uint32_t crc32cPortable(uint32_t crc, const void* data, size_t length) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < length; ++i) crc = (crc >> 8) ^ kCrc32cTable[(crc ^ bytes[i]) & 0xFF];
  return crc;
}

}  // namespace berth
