// The flow hash against structured keys, as real traffic brings them: sequential source ports,
// one /24 of sources, and IPv6 sources each a nibble away from the last. 100,000 keys over 1,024
// equal bins of the hash space (its top 10 bits) and over 1,024 bins by the low 10 bits (what a
// table's hash % M leans on), each held to a chi-squared p-value of at least 0.001. The p-value
// comes from Boost.Math's chi-squared distribution.

#include <gtest/gtest.h>

#include <boost/math/distributions/chi_squared.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "berth/net/flow_hash.h"

namespace berth {
namespace {

constexpr uint32_t kKeys = 100'000;
constexpr uint32_t kBins = 1024;

// The p-value of the chi-squared test of `counts` against a uniform spread.
double uniformityPValue(const std::vector<uint32_t>& counts) {
  const double expected = static_cast<double>(kKeys) / counts.size();
  double statistic = 0;
  for (uint32_t count : counts) statistic += (count - expected) * (count - expected) / expected;
  const boost::math::chi_squared distribution(static_cast<double>(counts.size() - 1));
  return boost::math::cdf(boost::math::complement(distribution, statistic));
}

void expectUniform(const std::string& what, const std::function<FlowKey(uint32_t)>& key_of) {
  std::vector<uint32_t> top(kBins);
  std::vector<uint32_t> low(kBins);
  for (uint32_t i = 0; i < kKeys; ++i) {
    const uint32_t hash = flowHash(key_of(i), HashFields::kFiveTuple, kDefaultFlowHashSeed);
    ++top[hash >> 22];
    ++low[hash & (kBins - 1)];
  }
  const double top_p = uniformityPValue(top);
  const double low_p = uniformityPValue(low);
  EXPECT_GE(top_p, 0.001) << what << ": top bits";
  EXPECT_GE(low_p, 0.001) << what << ": low bits";
  std::printf("%s: p = %.3f (top 10 bits), %.3f (low 10 bits)\n", what.c_str(), top_p, low_p);
}

const IpAddress kVip = IpAddress::v4(198, 18, 100, 1);

TEST(FlowHashUniformityTest, SequentialSourcePorts) {
  expectUniform("sequential ports", [](uint32_t i) {
    // Every port of one client, then of the next.
    return FlowKey::make(IpAddress::v4(198, 18, 7, static_cast<uint8_t>(1 + i / 65536)), kVip,
                         static_cast<uint16_t>(i), 80, kProtocolTcp);
  });
}

TEST(FlowHashUniformityTest, OneSlash24OfSources) {
  expectUniform("one /24", [](uint32_t i) {
    // 256 clients, each with sequential ports from 40000.
    return FlowKey::make(IpAddress::v4(198, 18, 5, static_cast<uint8_t>(i)), kVip,
                         static_cast<uint16_t>(40000 + i / 256), 80, kProtocolTcp);
  });
}

// The base-16 reflected Gray code of i in the low five nibbles of 2001:db8:7::, so that each
// source differs from the one before in exactly one nibble.
IpAddress sourceANibbleOn(uint32_t i) {
  IpAddress source = *IpAddress::parse("2001:db8:7::");
  bool reflect = false;
  for (int d = 4; d >= 0; --d) {
    uint32_t digit = (i >> (4 * d)) & 0xF;
    if (reflect) digit = 15 - digit;
    reflect = ((i >> (4 * d)) & 1) != 0;
    uint8_t& byte = source.bytes[15 - d / 2];
    byte = static_cast<uint8_t>(d % 2 == 0 ? (byte & 0xF0) | digit : (byte & 0x0F) | digit << 4);
  }
  return source;
}

TEST(FlowHashUniformityTest, Ipv6SourcesANibbleApart) {
  for (uint32_t i = 1; i < 5000; ++i) {
    int nibbles = 0;
    const IpAddress before = sourceANibbleOn(i - 1);
    const IpAddress after = sourceANibbleOn(i);
    for (size_t b = 0; b < 16; ++b) {
      nibbles += ((before.bytes[b] ^ after.bytes[b]) & 0x0F) != 0;
      nibbles += ((before.bytes[b] ^ after.bytes[b]) & 0xF0) != 0;
    }
    ASSERT_EQ(nibbles, 1) << i;
  }
  const IpAddress vip6 = *IpAddress::parse("2001:db8:100::1");
  expectUniform("IPv6 a nibble apart", [&vip6](uint32_t i) {
    return FlowKey::make(sourceANibbleOn(i), vip6, 40000, 443, kProtocolTcp);
  });
}

}  // namespace
}  // namespace berth
