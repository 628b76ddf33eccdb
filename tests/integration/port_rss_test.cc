// The RSS key a port is started with (PortConfig::rss_key, runtime/port.h), read back from the
// device: a key anyone knows lets a sender compute flows that all land on one worker, so each
// start draws a random one unless the config asks for the symmetric key or gives its own.
// net_null has RSS and keeps the key it is given, so a peer's declared RSS (peer_rss) is refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rte_ethdev.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/runtime/port.h"
#include "support/eal_environment.h"

namespace berth {
namespace {

PortConfig portWith(absl::string_view rss_key_line) {
  static int ports = 0;
  const std::string yaml =
      absl::StrCat("dataplane:\n  ports:\n    - { name: p0, device: net_null", ports++,
                   ", ipv4: 198.18.0.10, gateway_mac: \"02:00:00:00:00:fe\"", rss_key_line,
                   " }\nservices: []\n");
  absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config->dataplane.ports.at(0);
}

// Opens the port with two workers and returns the key the device holds; closes it again.
std::vector<uint8_t> keyOfStartedPort(const PortConfig& config) {
  std::vector<std::string> warnings;
  absl::StatusOr<OpenedPort> port = openPort(config, 2, warnings);
  EXPECT_TRUE(port.ok()) << port.status();
  if (!port.ok()) return {};
  EXPECT_TRUE(port->rss) << "net_null has RSS";
  EXPECT_THAT(warnings, ::testing::Not(::testing::Contains(::testing::HasSubstr("RSS key"))));
  rte_eth_dev_info info;
  EXPECT_EQ(rte_eth_dev_info_get(port->port_id, &info), 0);
  // net_null reports no key size; berth then uses the usual 40 bytes.
  std::vector<uint8_t> key(info.hash_key_size > 0 ? info.hash_key_size : 40);
  rte_eth_rss_conf conf{};
  conf.rss_key = key.data();
  conf.rss_key_len = static_cast<uint8_t>(key.size());
  EXPECT_EQ(rte_eth_dev_rss_hash_conf_get(port->port_id, &conf), 0);
  closePort(*port);
  return key;
}

TEST(PortRssTest, EachStartDrawsARandomKeyByDefault) {
  const std::vector<uint8_t> first = keyOfStartedPort(portWith(""));
  const std::vector<uint8_t> second = keyOfStartedPort(portWith(""));
  ASSERT_EQ(first.size(), 40u);
  EXPECT_NE(first, second);
  EXPECT_NE(first, symmetricRssKey(40));
  EXPECT_NE(keyOfStartedPort(portWith(", rss_key: random")), first);
}

TEST(PortRssTest, TheSymmetricKeyOnlyWhenAsked) {
  EXPECT_EQ(keyOfStartedPort(portWith(", rss_key: symmetric")), symmetricRssKey(40));
}

TEST(PortRssTest, AFixedKeyIsUsedAsGivenAndMustFitTheDevice) {
  std::string hex;
  std::vector<uint8_t> expected;
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&hex, i == 0 ? "" : ":", absl::Hex(i * 7 % 256, absl::kZeroPad2));
    expected.push_back(static_cast<uint8_t>(i * 7 % 256));
  }
  EXPECT_EQ(keyOfStartedPort(portWith(absl::StrCat(", rss_key: \"", hex, "\""))), expected);

  PortConfig longer = portWith(absl::StrCat(", rss_key: \"", hex, ":00:01:02:03\""));
  std::vector<std::string> warnings;
  absl::StatusOr<OpenedPort> refused = openPort(longer, 2, warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("rss_key has 44 bytes, but the device takes a key of 40"));
}

// peer_rss stands in for the RSS a port lacks (memif); a device that spreads by its own key
// would make the declared one a lie, and Full-NAT's replies would miss their workers.
TEST(PortRssTest, APeersRssIsRefusedOnADeviceWithRssOfItsOwn) {
  PortConfig declared = portWith(", queues: 2, peer_rss: { key: symmetric }");
  std::vector<std::string> warnings;
  absl::StatusOr<OpenedPort> refused = openPort(declared, 2, warnings);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("peer_rss is for a port without RSS of its own, such as "
                                   "memif, but net_null spreads flows by its own key"));
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::EalEnvironment("port_rss_test"));
  return RUN_ALL_TESTS();
}
