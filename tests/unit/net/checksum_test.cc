#include "berth/net/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace berth {
namespace {

// RFC 1071's checksum of `bytes` (even length), summed from scratch.
uint16_t fullChecksum(const std::vector<uint8_t>& bytes) {
  uint32_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 2) sum += loadBigEndian16(&bytes[i]);
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// 64 random bytes, runs of 0xff and 0x00 among them in some rounds, with their checksum in the
// first word.
std::vector<uint8_t> checksummedRandomData(std::mt19937& random, int round) {
  std::vector<uint8_t> data(64);
  for (uint8_t& b : data) b = static_cast<uint8_t>(random());
  if (round % 7 == 0) std::fill(data.begin() + 8, data.begin() + 24, 0xff);
  if (round % 11 == 0) std::fill(data.begin() + 8, data.begin() + 24, 0x00);
  data[0] = data[1] = 0;
  storeBigEndian16(data.data(), fullChecksum(data));
  return data;
}

// An adjusted checksum against the one summed again over the same data. One's complement has
// two zeros: 0x0000 and 0xffff stand for the same sum.
void expectSameChecksum(uint16_t adjusted, uint16_t summed, int round) {
  if (summed == 0 || summed == 0xffff) {
    ASSERT_TRUE(adjusted == 0 || adjusted == 0xffff) << "round " << round;
  } else {
    ASSERT_EQ(adjusted, summed) << "round " << round;
  }
}

// Random data with a checksum field, random even runs of it changed: the adjusted checksum is
// the one summed from scratch over the new data, for every kind of word, 0x0000 and 0xffff too.
TEST(ChecksumTest, AnAdjustedChecksumEqualsTheOneSummedAgain) {
  std::mt19937 random(5);
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> data = checksummedRandomData(random, round);
    const size_t at = 2 + 2 * (random() % 20);
    const size_t length = 2 * (1 + random() % 8);
    std::vector<uint8_t> changed(length);
    for (uint8_t& b : changed) b = static_cast<uint8_t>(round % 13 == 0 ? 0 : random());
    const uint16_t adjusted =
        adjustChecksum(loadBigEndian16(data.data()), &data[at], changed.data(), length);
    std::copy(changed.begin(), changed.end(), data.begin() + at);
    data[0] = data[1] = 0;
    expectSameChecksum(adjusted, fullChecksum(data), round);
  }
}

// The 32-bit form works on the checksum and the words as they lie (no byte swap), as a shifted
// sequence number is written: it must give what summing the data again gives.
TEST(ChecksumTest, AWordAdjustedAsItLiesEqualsTheOneSummedAgain) {
  std::mt19937 random(7);
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> data = checksummedRandomData(random, round);
    const size_t at = 4 * (1 + random() % 15);
    uint32_t old_word;
    std::memcpy(&old_word, &data[at], 4);
    const auto new_word = static_cast<uint32_t>(round % 13 == 0 ? 0 : random());
    uint16_t checksum;
    std::memcpy(&checksum, data.data(), 2);
    checksum = adjustChecksumForWord(checksum, old_word, new_word);
    std::memcpy(&data[at], &new_word, 4);
    uint8_t adjusted_bytes[2];
    std::memcpy(adjusted_bytes, &checksum, 2);
    const uint16_t adjusted = loadBigEndian16(adjusted_bytes);
    data[0] = data[1] = 0;
    expectSameChecksum(adjusted, fullChecksum(data), round);
  }
}

}  // namespace
}  // namespace berth
