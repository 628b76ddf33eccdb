// The PROXY protocol version 2 header berth writes (net/proxy_protocol.h): byte for byte as the
// specification lays it out, for TCP over IPv4 and IPv6, and the LOCAL header a probe sends.

#include "berth/net/proxy_protocol.h"

#include <gtest/gtest.h>

#include <vector>

namespace berth {
namespace {

uint16_t network(uint16_t port) { return static_cast<uint16_t>(port >> 8 | port << 8); }

TEST(ProxyProtocolTest, AnIpv4HeaderNamesTheClientAndTheVipIn28Bytes) {
  ProxyEndpoints endpoints;
  endpoints.source = IpAddress::v4(198, 18, 0, 1).bytes;
  endpoints.destination = IpAddress::v4(198, 18, 100, 1).bytes;
  endpoints.source_port = network(40000);
  endpoints.destination_port = network(80);
  uint8_t out[kProxyHeaderMaxLength];
  ASSERT_EQ(encodeProxyHeader(endpoints, out), 28u);
  const std::vector<uint8_t> expected = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                         0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,  // signature
                                         0x21,                                // v2, PROXY
                                         0x11,                                // TCP over IPv4
                                         0x00, 0x0C,                          // 12 bytes follow
                                         198,  18,   0,    1,                 // source
                                         198,  18,   100,  1,                 // destination
                                         0x9C, 0x40,                          // 40000
                                         0x00, 0x50};                         // 80
  EXPECT_EQ(std::vector<uint8_t>(out, out + 28), expected);
  EXPECT_EQ(proxyHeaderLength(IpFamily::kIpv4), 28u);
}

TEST(ProxyProtocolTest, AnIpv6HeaderNamesTheClientAndTheVipIn52Bytes) {
  ProxyEndpoints endpoints;
  endpoints.family = IpFamily::kIpv6;
  endpoints.source = IpAddress::parse("2001:db8::1")->bytes;
  endpoints.destination = IpAddress::parse("2001:db8:100::1")->bytes;
  endpoints.source_port = network(443);
  endpoints.destination_port = network(8443);
  uint8_t out[kProxyHeaderMaxLength];
  ASSERT_EQ(encodeProxyHeader(endpoints, out), 52u);
  EXPECT_EQ(out[12], 0x21);
  EXPECT_EQ(out[13], 0x21);  // TCP over IPv6
  EXPECT_EQ(out[14], 0x00);
  EXPECT_EQ(out[15], 36);
  EXPECT_EQ(std::vector<uint8_t>(out + 16, out + 32),
            std::vector<uint8_t>(endpoints.source.begin(), endpoints.source.end()));
  EXPECT_EQ(std::vector<uint8_t>(out + 32, out + 48),
            std::vector<uint8_t>(endpoints.destination.begin(), endpoints.destination.end()));
  EXPECT_EQ(std::vector<uint8_t>(out + 48, out + 52),
            (std::vector<uint8_t>{0x01, 0xBB, 0x20, 0xFB}));
  EXPECT_EQ(proxyHeaderLength(IpFamily::kIpv6), 52u);
}

TEST(ProxyProtocolTest, ALocalHeaderCarriesNoAddresses) {
  const std::vector<uint8_t> expected = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51,
                                         0x55, 0x49, 0x54, 0x0A, 0x20, 0x00, 0x00, 0x00};
  const auto header = proxyLocalHeader();
  EXPECT_EQ(std::vector<uint8_t>(header.begin(), header.end()), expected);
}

}  // namespace
}  // namespace berth
