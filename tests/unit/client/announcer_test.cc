#include "berth/client/announcer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "berth/config/loader.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(RouteListTest, ParsesPrefixAndNextHopLines) {
  const absl::StatusOr<std::vector<VipRoute>> routes =
      parseRouteList("198.18.100.1/32 198.18.0.11\n\n2001:db8::80/128 2001:db8:ff::11\n");
  ASSERT_TRUE(routes.ok()) << routes.status();
  ASSERT_EQ(routes->size(), 2u);
  EXPECT_EQ((*routes)[0].vip, IpAddress::v4(198, 18, 100, 1));
  EXPECT_EQ((*routes)[0].next_hop, IpAddress::v4(198, 18, 0, 11));
  EXPECT_FALSE((*routes)[1].vip.isV4());
  EXPECT_TRUE(parseRouteList("")->empty());
}

TEST(RouteListTest, BadLinesAreNamed) {
  for (const char* bad :
       {"198.18.100.1 198.18.0.11", "198.18.100.0/24 198.18.0.11", "198.18.100.1/32",
        "198.18.100.1/32 2001:db8::1", "198.18.100.300/32 198.18.0.11"}) {
    const absl::StatusOr<std::vector<VipRoute>> routes =
        parseRouteList(std::string("198.18.100.2/32 198.18.0.11\n") + bad);
    ASSERT_FALSE(routes.ok()) << bad;
    EXPECT_THAT(std::string(routes.status().message()), HasSubstr("route line 2")) << bad;
  }
}

TEST(BirdStaticRoutesTest, OneSortedLinePerRouteOfTheFamily) {
  const std::vector<VipRoute> routes = *parseRouteList(
      "198.18.100.2/32 198.18.0.11\n2001:db8::80/128 2001:db8:ff::11\n198.18.100.1/32 "
      "198.18.0.11\n");
  const std::string v4 = birdStaticRoutes(routes, IpFamily::kIpv4);
  EXPECT_THAT(v4, HasSubstr("route 198.18.100.1/32 via 198.18.0.11;\n"
                            "route 198.18.100.2/32 via 198.18.0.11;\n"));
  EXPECT_THAT(v4, ::testing::Not(HasSubstr("2001:db8")));
  EXPECT_THAT(birdStaticRoutes(routes, IpFamily::kIpv6),
              HasSubstr("route 2001:db8::80/128 via 2001:db8:ff::11;\n"));
  EXPECT_EQ(birdStaticRoutes({}, IpFamily::kIpv4).find("route "), std::string::npos);
}

TEST(BirdConfigTest, NamesTheRouterTheRouteFilesAndEachNeighbour) {
  const absl::StatusOr<Config> config = parseConfig(R"(
dataplane:
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.11 } ]
bgp:
  asn: 64601
  router_id: 198.18.0.21
  port: p0
  hold_time: 3
  neighbors:
    - { address: 198.18.0.1, asn: 64600 }
services: []
)",
                                                    "instance.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const absl::StatusOr<std::string> bird = birdConfig(*config, "instance.yaml", "/run/berth");
  ASSERT_TRUE(bird.ok()) << bird.status();
  EXPECT_THAT(*bird, HasSubstr("router id 198.18.0.21;"));
  EXPECT_THAT(*bird, HasSubstr("include \"/run/berth/bird-routes4.conf\";"));
  EXPECT_THAT(*bird, HasSubstr("include \"/run/berth/bird-routes6.conf\";"));
  EXPECT_THAT(*bird, HasSubstr("local as 64601;\n  neighbor 198.18.0.1 as 64600;\n  hold time 3;"));
  EXPECT_THAT(*bird, HasSubstr("export where proto = \"berth_vips4\";"));
  EXPECT_THAT(*bird, HasSubstr("next hop keep;"));

  const absl::StatusOr<Config> without = parseConfig("services: []\n", "plain.yaml");
  const absl::StatusOr<std::string> refused = birdConfig(*without, "plain.yaml", "/run/berth");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("plain.yaml has no bgp section"));
}

}  // namespace
}  // namespace berth
