#include "berth/dataplane/service_map.h"

#include <gtest/gtest.h>

#include "support/packet_builder.h"

namespace berth {
namespace {

TEST(ServiceMapTest, FindsAServiceByDestinationPortAndProtocolOnly) {
  ServiceMap map;
  ASSERT_TRUE(map.insert(ServiceKey::of(FlowKey::make(kClient, kVip, 0, 80, kProtocolTcp)), 7));
  // Any client, any source port.
  EXPECT_EQ(map.find(FlowKey::make(IpAddress::v4(198, 18, 9, 9), kVip, 12345, 80, kProtocolTcp)),
            7u);
  EXPECT_FALSE(map.find(FlowKey::make(kClient, kVip, 1, 81, kProtocolTcp)).has_value());
  EXPECT_FALSE(map.find(FlowKey::make(kClient, kVip, 1, 80, kProtocolUdp)).has_value());
  EXPECT_FALSE(map.find(FlowKey::make(kClient, IpAddress::v4(198, 18, 100, 2), 1, 80, kProtocolTcp))
                   .has_value());
}

TEST(ServiceMapTest, Ipv4AndIpv6KeysNeverMatchEachOther) {
  ServiceMap map;
  // 0.0.0.0 and :: are stored as the same 16 zero bytes; the family alone keeps them apart.
  IpAddress v6_zeros = *IpAddress::parse("::");
  IpAddress v4_zeros = IpAddress::v4(0, 0, 0, 0);
  ASSERT_TRUE(
      map.insert(ServiceKey::of(FlowKey::make(kClient6, v6_zeros, 0, 80, kProtocolTcp)), 1));
  EXPECT_FALSE(map.find(FlowKey::make(kClient, v4_zeros, 0, 80, kProtocolTcp)).has_value());
  EXPECT_EQ(map.find(FlowKey::make(kClient6, v6_zeros, 0, 80, kProtocolTcp)), 1u);
}

TEST(ServiceMapTest, RefusesADuplicateKey) {
  ServiceMap map;
  const ServiceKey key = ServiceKey::of(FlowKey::make(kClient, kVip, 0, 53, kProtocolUdp));
  EXPECT_TRUE(map.insert(key, 1));
  EXPECT_FALSE(map.insert(key, 2));
  EXPECT_EQ(map.size(), 1u);
  EXPECT_EQ(map.find(FlowKey::make(kClient, kVip, 9, 53, kProtocolUdp)), 1u);
}

// The table grows as services are added and finds each of them, and none of the ports next to
// theirs, at every size up to a config's largest.
TEST(ServiceMapTest, FindsEveryOneOfThousandsOfServices) {
  ServiceMap map;
  constexpr uint32_t kServices = 4096;
  auto vip = [](uint32_t i) { return IpAddress::v4(198, 19, static_cast<uint8_t>(i / 64), 1); };
  auto port = [](uint32_t i) { return static_cast<uint16_t>(1000 + i % 64 * 2); };
  for (uint32_t i = 0; i < kServices; ++i) {
    ASSERT_TRUE(
        map.insert(ServiceKey::of(FlowKey::make(kClient, vip(i), 0, port(i), kProtocolTcp)), i));
    ASSERT_EQ(map.find(FlowKey::make(kClient, vip(i / 2), 7, port(i / 2), kProtocolTcp)), i / 2);
  }
  EXPECT_EQ(map.size(), kServices);
  for (uint32_t i = 0; i < kServices; ++i) {
    EXPECT_EQ(map.find(FlowKey::make(kClient, vip(i), 7, port(i), kProtocolTcp)), i);
    EXPECT_FALSE(
        map.find(FlowKey::make(kClient, vip(i), 7, port(i) + 1, kProtocolTcp)).has_value());
    EXPECT_FALSE(map.find(FlowKey::make(kClient, vip(i), 7, port(i), kProtocolUdp)).has_value());
  }
}

}  // namespace
}  // namespace berth
