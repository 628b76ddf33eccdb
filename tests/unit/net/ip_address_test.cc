#include "berth/net/ip_address.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(IpAddressTest, ParsesIpv4IntoTheFirstFourBytes) {
  absl::StatusOr<IpAddress> address = IpAddress::parse("198.18.100.1");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_TRUE(address->isV4());
  EXPECT_EQ(*address, IpAddress::v4(198, 18, 100, 1));
  EXPECT_EQ(address->toString(), "198.18.100.1");
}

TEST(IpAddressTest, ParsesIpv6) {
  absl::StatusOr<IpAddress> address = IpAddress::parse("2001:db8::1");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->family, IpFamily::kIpv6);
  EXPECT_EQ(address->bytes[0], 0x20);
  EXPECT_EQ(address->bytes[15], 0x01);
  EXPECT_EQ(address->toString(), "2001:db8::1");
}

TEST(IpAddressTest, RejectsAnythingElseNamingTheText) {
  for (const char* text :
       {"", "198.18.0", "198.18.0.256", "198.18.0.1/24", "fe80::1%eth0", "example.com", "1.2.3.4 ",
        "::::", "0123456789012345678901234567890123456789012345"}) {
    absl::StatusOr<IpAddress> address = IpAddress::parse(text);
    EXPECT_FALSE(address.ok()) << text;
    EXPECT_NE(address.status().message().find("is not an IPv4 or IPv6 address"),
              absl::string_view::npos);
  }
}

TEST(IpAddressTest, SameAddressesCompareEqualAcrossFamiliesOnlyWhenBothMatch) {
  IpAddress v4 = IpAddress::v4(0, 0, 0, 1);
  IpAddress v6 = *IpAddress::parse("::1");
  EXPECT_NE(v4.bytes, v6.bytes);
  EXPECT_NE(v4, v6);
}

TEST(EndpointTest, ParsesIpv4AndBracketedIpv6WithAPort) {
  const Endpoint v4 = *Endpoint::parse("198.18.0.1:8080");
  EXPECT_EQ(v4.address, IpAddress::v4(198, 18, 0, 1));
  EXPECT_EQ(v4.port, 8080);
  EXPECT_EQ(v4.toString(), "198.18.0.1:8080");
  const Endpoint v6 = *Endpoint::parse("[2001:db8::1]:0");
  EXPECT_EQ(v6.address, *IpAddress::parse("2001:db8::1"));
  EXPECT_EQ(v6.port, 0);
  EXPECT_EQ(v6.toString(), "[2001:db8::1]:0");
}

TEST(EndpointTest, RejectsAMissingOrBadPortAndUnbracketedIpv6NamingTheText) {
  for (const char* text :
       {"198.18.0.1", "198.18.0.1:", "198.18.0.1:65536", "198.18.0.1:-1", "198.18.0.1:8o",
        "2001:db8::1:80", "[198.18.0.1]:80", "[::1]80", ":80", "host:80"}) {
    absl::StatusOr<Endpoint> endpoint = Endpoint::parse(text);
    EXPECT_FALSE(endpoint.ok()) << text;
    EXPECT_NE(endpoint.status().message().find(text), absl::string_view::npos) << text;
  }
}

}  // namespace
}  // namespace berth
