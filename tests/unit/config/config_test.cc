#include "berth/config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "berth/config/loader.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kRunning[] = R"(dataplane:
  eal: [--no-huge]
  ports:
    - name: p0
      device: net_null0
      ipv4: 198.18.0.1
      gateway: 198.18.0.254
metrics:
  listen: 127.0.0.1:9464
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: a, address: 198.18.1.2 }
)";

Config parsed(const std::string& yaml) {
  absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *std::move(config) : Config{};
}

// The settings compare equal however the file is laid out: where a setting was written is not
// part of it, so a reload that adds a comment line at the top changes nothing.
TEST(ConfigTest, SettingsOnOtherLinesAreTheSameSettings) {
  const Config running = parsed(kRunning);
  const Config shifted = parsed(std::string("# a comment\n\n") + kRunning);
  ASSERT_NE(running.dataplane.ports[0].line.number, shifted.dataplane.ports[0].line.number);
  EXPECT_EQ(running.dataplane.ports, shifted.dataplane.ports);
  EXPECT_EQ(running.services, shifted.services);
  EXPECT_THAT(sectionsNeedingRestart(running, shifted), IsEmpty());
}

TEST(ConfigTest, ServiceChangesApplyInPlace) {
  const Config running = parsed(kRunning);
  Config next = running;
  next.services[0].backends[0].weight = 3;
  next.services[0].port = 8080;
  EXPECT_NE(running.services, next.services);
  EXPECT_THAT(sectionsNeedingRestart(running, next), IsEmpty());
}

// Each of a port's settings is compared: the comparison is the struct's own (= default), so a
// field added to PortConfig later is compared too, with nothing to remember.
TEST(ConfigTest, EveryPortSettingNeedsARestart) {
  const Config running = parsed(kRunning);
  const std::function<void(PortConfig&)> changes[] = {
      [](PortConfig& p) { p.name = "p1"; },
      [](PortConfig& p) { p.device = "net_null1"; },
      [](PortConfig& p) { p.ipv4 = IpAddress::v4(198, 18, 0, 2); },
      [](PortConfig& p) { p.ipv6 = IpAddress::parse("2001:db8::1").value(); },
      [](PortConfig& p) { p.gateway = IpAddress::v4(198, 18, 0, 253); },
      [](PortConfig& p) { p.gateway_mac = MacAddress::parse("02:00:00:00:00:01").value(); },
      [](PortConfig& p) { p.mtu = 9000; },
      [](PortConfig& p) { p.queues = 2; },
  };
  for (size_t i = 0; i < std::size(changes); ++i) {
    Config next = running;
    changes[i](next.dataplane.ports[0]);
    EXPECT_THAT(sectionsNeedingRestart(running, next), ElementsAre("dataplane.ports"))
        << "change " << i;
  }
  Config more = running;
  more.dataplane.ports.push_back(running.dataplane.ports[0]);
  EXPECT_THAT(sectionsNeedingRestart(running, more), ElementsAre("dataplane.ports"));
}

TEST(ConfigTest, NamesEverySectionThatNeedsARestart) {
  const Config running = parsed(kRunning);
  Config next = running;
  next.dataplane.eal.push_back("--log-level=8");
  next.dataplane.conntrack.udp_s = 60;
  next.metrics.listen.reset();
  EXPECT_THAT(sectionsNeedingRestart(running, next),
              ElementsAre("dataplane.eal", "dataplane.conntrack", "metrics"));
}

}  // namespace
}  // namespace berth
