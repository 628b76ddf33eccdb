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
// A backend configured with weight 0 takes part in the base table with the lower median of the
// positive weights (1 when there are none), and the serving table drains it.
TEST(ConfigTest, AWeightZeroBackendHashesWithTheMedianWeightAndIsDrained) {
  ServiceConfig service;
  service.name = "web";
  for (int64_t weight : {4, 0, 2, 9, 2}) {
    BackendConfig backend;
    backend.name = "b" + std::to_string(service.backends.size());
    backend.weight = weight;
    service.backends.push_back(backend);
  }
  std::vector<int64_t> weights;
  for (const Backend& backend : service.hashingBackends()) weights.push_back(backend.weight);
  EXPECT_THAT(weights, ElementsAre(4, 2, 2, 9, 2));

  absl::StatusOr<Table> table = buildServingTable(service);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(table->drained()[*table->indexOf("b1")]);
  EXPECT_EQ(table->slotCounts()[*table->indexOf("b1")], 0u);

  for (BackendConfig& backend : service.backends) backend.weight = 0;
  for (const Backend& backend : service.hashingBackends()) EXPECT_EQ(backend.weight, 1);
}

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
