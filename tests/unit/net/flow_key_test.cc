#include "berth/net/flow_key.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(FlowKeyTest, MakeStoresPortsInNetworkByteOrder) {
  const FlowKey key = FlowKey::make(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1),
                                    0x1234, 80, kProtocolTcp);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&key.source_port);
  EXPECT_EQ(bytes[0], 0x12);
  EXPECT_EQ(bytes[1], 0x34);
  EXPECT_EQ(key.source[0], 198);
  EXPECT_EQ(key.source[4], 0);
}

TEST(FlowKeyTest, ToStringShowsProtocolAndEndpoints) {
  EXPECT_EQ(FlowKey::make(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1), 40000, 80,
                          kProtocolTcp)
                .toString(),
            "tcp 198.18.0.1:40000 -> 198.18.100.1:80");
  EXPECT_EQ(FlowKey::make(*IpAddress::parse("2001:db8::1"), *IpAddress::parse("2001:db8::2"), 5, 53,
                          kProtocolUdp)
                .toString(),
            "udp [2001:db8::1]:5 -> [2001:db8::2]:53");
}

}  // namespace
}  // namespace berth
