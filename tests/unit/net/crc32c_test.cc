#include "berth/net/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace berth {
namespace {

// The standard CRC-32C check value: "123456789" with initial ~0 and final inversion gives
// 0xE3069283 (RFC 3720, iSCSI). Our register has no final inversion, so invert it here.
TEST(Crc32cTest, PortableMatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32cPortable(0xFFFFFFFFu, "123456789", 9) ^ 0xFFFFFFFFu, 0xE3069283u);
}

// The word-wide helpers (the SSE4.2 instruction where built with it) feed bytes in memory order.
TEST(Crc32cTest, WordHelpersEqualBytewiseOverRandomData) {
  std::mt19937_64 random(1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t value = random();
    const auto seed = static_cast<uint32_t>(random());
    EXPECT_EQ(crc32cU64(seed, value), crc32cPortable(seed, &value, 8));
    const auto word = static_cast<uint32_t>(value);
    EXPECT_EQ(crc32cU32(seed, word), crc32cPortable(seed, &word, 4));
    const auto byte = static_cast<uint8_t>(value);
    EXPECT_EQ(crc32cU8(seed, byte), crc32cPortable(seed, &byte, 1));
  }
}

}  // namespace
}  // namespace berth
