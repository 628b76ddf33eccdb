// The management loop's fleet subsystem (control/fleet_binding.h), without an etcd. Pinned:
// - without a fleet section it stays inactive: it offers no version and no change, reports
//   nothing and has no status, and services are served by their own probes;
// - started on a cached version and table generation, it serves them fail-safe until etcd
//   answers: a build's base is the cached generation's table, and while etcd stays out of reach
//   no change is reported and status says so;
// - the local file's part and the version applied are kept for the builds that compose them;
// - flow sync's peers are the config's and every other instance's reported endpoint (not this
//   instance's own, not an unparsable one), their addresses each once.

#include "berth/control/fleet_binding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ServiceConfig web(size_t count) {
  ServiceConfig config;
  config.name = "web";
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 251;
  for (size_t i = 0; i < count; ++i) {
    BackendConfig backend;
    backend.name = absl::StrFormat("web-%d", i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(1 + i));
    config.backends.push_back(backend);
  }
  return config;
}

std::unique_ptr<HealthMonitor> monitorOf(const Config& config) {
  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor = HealthMonitor::create(
      config, [] { return uint64_t{0}; }, [] { return 0.0; });
  EXPECT_TRUE(monitor.ok()) << monitor.status();
  return *std::move(monitor);
}

std::vector<ServiceState> statesOf(const Config& config) {
  absl::StatusOr<std::vector<ServiceState>> states = createServiceStates(config.services);
  EXPECT_TRUE(states.ok()) << states.status();
  return *std::move(states);
}

class FleetBindingTest : public testing::Test {
 protected:
  std::vector<std::string> log_;
  FleetBinding fleet_{[this](const std::string& line) { log_.push_back(line); }};
};

TEST_F(FleetBindingTest, WithoutAFleetSectionItStaysInactive) {
  Config config;
  config.services = {web(3)};
  const std::unique_ptr<HealthMonitor> health = monitorOf(config);
  ASSERT_TRUE(fleet_.start(config, statesOf(config), *health).ok());
  EXPECT_FALSE(fleet_.active());
  fleet_.turn(absl::Now());
  fleet_.forgetRefusal();
  fleet_.reportVerdicts(config, *health);
  fleet_.reportServices(config);
  fleet_.reportFailSafe(config, *health);
  EXPECT_FALSE(fleet_.takeVersion());
  EXPECT_FALSE(fleet_.takeChange(config, *health));
  EXPECT_FALSE(fleet_.statusRow(config, *health));
  EXPECT_TRUE(fleet_.generationBase(statesOf(config)) == nullptr);
  const std::vector<bool> local = {true, false, true};
  EXPECT_EQ(fleet_.serving().verdicts(config.services[0], local, nullptr), local);
  EXPECT_THAT(log_, IsEmpty());
}

TEST_F(FleetBindingTest, StartedOnItsCachesItServesThemFailSafeWhileEtcdIsOutOfReach) {
  Config config;
  config.services = {web(4)};
  // Generation 1 as the cache holds it, with web-3 down by the fleet's word.
  AgreedHealth agreed;
  for (const BackendConfig& backend : config.services[0].backends) {
    agreed.judged["web"].insert(backend.name);
  }
  agreed.down["web"] = {"web-3"};
  absl::StatusOr<std::optional<PlannedGeneration>> planned =
      planGeneration(GenerationKeys("/berth"), nullptr, config.services, 4, agreed, "lb-a", 1);
  ASSERT_TRUE(planned.ok() && planned->has_value());
  auto generation = std::make_shared<const FleetGeneration>((*planned)->generation);
  Config local;
  local.fleet.emplace();
  local.fleet->name = "lb-b";
  local.fleet->endpoints = {"http://127.0.0.1:9"};  // the discard port: nothing answers
  char directory[] = "/tmp/berth-fleet-binding-XXXXXX";
  ASSERT_NE(mkdtemp(directory), nullptr);
  local.fleet->cache = std::string(directory) + "/version.yaml";
  config.fleet = local.fleet;
  FleetVersionText cached{FleetHead{4, "push-4"}, "services: []\n", "fleet version 4 (cache)"};
  fleet_.setStart(local, cached, generation);
  EXPECT_TRUE(fleet_.serving().fail_safe);
  EXPECT_EQ(fleet_.version()->head.version, 4u);
  EXPECT_EQ(fleet_.local().fleet->name, "lb-b");

  const std::unique_ptr<HealthMonitor> health = monitorOf(config);
  const std::vector<ServiceState> states = statesOf(config);
  ASSERT_TRUE(fleet_.start(config, states, *health).ok());
  EXPECT_TRUE(fleet_.active());
  ASSERT_FALSE(log_.empty());
  EXPECT_THAT(log_.back(), HasSubstr("fleet: instance lb-b joining through http://127.0.0.1:9"));
  EXPECT_THAT(log_.back(), HasSubstr("serving fleet version 4 from its cache"));
  EXPECT_THAT(log_.back(), HasSubstr("table generation 1 from its cache"));
  // A build's base is the cached generation's table.
  GenerationBase base = fleet_.generationBase(states);
  ASSERT_TRUE(base != nullptr);
  absl::StatusOr<std::optional<Table>> table = base(config.services[0]);
  ASSERT_TRUE(table.ok() && table->has_value());
  EXPECT_EQ((*table)->slotCounts()[*(*table)->indexOf("web-3")], 0u);
  // etcd stays out of reach: no change, fail-safe all along.
  for (int turn = 0; turn < 20; ++turn) {
    fleet_.turn(absl::Now());
    EXPECT_FALSE(fleet_.takeChange(config, *health));
  }
  EXPECT_TRUE(fleet_.serving().fail_safe);
  const std::optional<FleetStatusRow> row = fleet_.statusRow(config, *health);
  ASSERT_TRUE(row);
  JsonWriter json;
  json.beginObject();
  const std::string text = writeFleetStatus(*row, json);
  EXPECT_THAT(text, HasSubstr("fleet: instance lb-b, version 4"));
  EXPECT_THAT(text, HasSubstr("fleet: fail-safe: etcd out of reach"));
  EXPECT_THAT(text, HasSubstr("fleet: table generation 1"));
  fleet_.stop();
  EXPECT_FALSE(fleet_.active());
  std::filesystem::remove_all(directory);
}

TEST(SyncPeersTest, TheConfigsPeersAndEveryOtherInstancesEndpoint) {
  const Endpoint configured = *Endpoint::parse("198.18.5.1:7400");
  std::vector<InstanceReport> reports(4);
  reports[0].name = "lb-1";
  reports[0].sync = "198.18.5.1:7400";  // this instance's own
  reports[1].name = "lb-2";
  reports[1].sync = "198.18.5.2:7400";
  reports[2].name = "lb-3";  // reports no sync endpoint
  reports[3].name = "lb-4";
  reports[3].sync = "not an endpoint";
  const std::vector<Endpoint> peers = syncPeersOf({configured}, reports, "lb-1");
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers[0].toString(), "198.18.5.1:7400");
  EXPECT_EQ(peers[1].toString(), "198.18.5.2:7400");
  std::vector<Endpoint> twice = peers;
  twice.push_back(*Endpoint::parse("198.18.5.2:7401"));
  const std::vector<IpAddress> addresses = syncPeerAddresses(twice);
  ASSERT_EQ(addresses.size(), 2u);
  EXPECT_EQ(addresses[1], IpAddress::v4(198, 18, 5, 2));
}

}  // namespace
}  // namespace berth
