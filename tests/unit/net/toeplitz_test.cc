#include "berth/net/toeplitz.h"

#include <gtest/gtest.h>
#include <rte_thash.h>

#include <array>
#include <random>
#include <vector>

namespace berth {
namespace {

std::vector<uint8_t> ipv4Input(std::array<uint8_t, 4> source, std::array<uint8_t, 4> destination,
                               uint16_t source_port, uint16_t destination_port, bool ports) {
  std::vector<uint8_t> input(ports ? 12 : 8);
  for (size_t i = 0; i < 4; ++i) {
    input[i] = source[i];
    input[4 + i] = destination[i];
  }
  if (ports) {
    input[8] = static_cast<uint8_t>(source_port >> 8);
    input[9] = static_cast<uint8_t>(source_port);
    input[10] = static_cast<uint8_t>(destination_port >> 8);
    input[11] = static_cast<uint8_t>(destination_port);
  }
  return input;
}

// The IPv4 cases of the Microsoft RSS specification's verification suite ("Verifying the RSS
// Hash Calculation"), with its key: the hash of the addresses alone, and with the ports.
TEST(ToeplitzTest, MatchesTheRssSpecificationsVerificationSuite) {
  struct Case {
    std::array<uint8_t, 4> source;
    uint16_t source_port;
    std::array<uint8_t, 4> destination;
    uint16_t destination_port;
    uint32_t addresses_only;
    uint32_t with_ports;
  };
  const Case cases[] = {
      {{66, 9, 149, 187}, 2794, {161, 142, 100, 80}, 1766, 0x323e8fc2, 0x51ccc178},
      {{199, 92, 111, 2}, 14230, {65, 69, 140, 83}, 4739, 0xd718262a, 0xc626b0ea},
      {{24, 19, 198, 95}, 12898, {12, 22, 207, 184}, 38024, 0xd2d0a5de, 0x5c2b394a},
      {{38, 27, 205, 30}, 48228, {209, 142, 163, 6}, 2217, 0x82989176, 0xafc7327f},
      {{153, 39, 163, 191}, 44251, {202, 188, 127, 2}, 1303, 0x5d1809c5, 0x10e828a2},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(toeplitzHash(kMicrosoftRssKey, ipv4Input(c.source, c.destination, c.source_port,
                                                       c.destination_port, false)),
              c.addresses_only);
    EXPECT_EQ(toeplitzHash(kMicrosoftRssKey, ipv4Input(c.source, c.destination, c.source_port,
                                                       c.destination_port, true)),
              c.with_ports);
  }
}

// DPDK's rte_softrss is what the runtime would reach for; berth's must equal it for any key and
// input, IPv4 and IPv6 lengths, so that either can stand for what the NIC computes.
TEST(ToeplitzTest, EqualsDpdksSoftwareRss) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 2000; ++round) {
    std::array<uint8_t, 52> key;
    for (uint8_t& b : key) b = static_cast<uint8_t>(byte(random));
    const size_t length = round % 2 == 0 ? 12 : 36;
    std::vector<uint8_t> input(length);
    for (uint8_t& b : input) b = static_cast<uint8_t>(byte(random));
    // rte_softrss takes the tuple as host-order 32-bit words.
    std::vector<uint32_t> words(length / 4);
    for (size_t i = 0; i < words.size(); ++i) {
      words[i] = uint32_t{input[4 * i]} << 24 | uint32_t{input[4 * i + 1]} << 16 |
                 uint32_t{input[4 * i + 2]} << 8 | input[4 * i + 3];
    }
    ASSERT_EQ(toeplitzHash(key, input),
              rte_softrss(words.data(), static_cast<uint32_t>(words.size()), key.data()))
        << "round " << round;
  }
}

// What Full-NAT's choice of local port rests on (docs/architecture.md): the hash of a XOR b is the
// hash of a XOR the hash of b, so a reply's hash is its fixed fields' hash XOR its port's alone.
TEST(ToeplitzTest, IsLinear) {
  std::mt19937 random(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 500; ++round) {
    std::vector<uint8_t> a(36), b(36), both(36);
    for (size_t i = 0; i < 36; ++i) {
      a[i] = static_cast<uint8_t>(byte(random));
      b[i] = static_cast<uint8_t>(byte(random));
      both[i] = a[i] ^ b[i];
    }
    std::array<uint8_t, 40> key;
    for (uint8_t& k : key) k = static_cast<uint8_t>(byte(random));
    ASSERT_EQ(toeplitzHash(key, both), toeplitzHash(key, a) ^ toeplitzHash(key, b));
  }
}

}  // namespace
}  // namespace berth
