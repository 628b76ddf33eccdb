#include "berth/control/load_publication.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "berth/config/loader.h"
#include "berth/dataplane/pipeline.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_worker.h"

namespace berth {
namespace {

ServiceConfig service(const std::string& name, double bounded_load, int backends) {
  ServiceConfig config;
  config.name = name;
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = 1009;
  config.bounded_load = bounded_load;
  for (int i = 0; i < backends; ++i) {
    BackendConfig backend;
    backend.name = name + "-" + std::to_string(i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i + 1));
    config.backends.push_back(backend);
  }
  return config;
}

class LoadPublicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const ServiceConfig& config : {service("web", 1.25, 3), service("plain", 0, 2)}) {
      absl::StatusOr<ServiceState> state =
          ServiceState::create(config, std::vector<bool>(config.backends.size(), true));
      ASSERT_TRUE(state.ok()) << state.status();
      services_.push_back(*std::move(state));
      ASSERT_TRUE(ids_.service(config.name).ok());
      for (const BackendConfig& backend : config.backends) {
        ASSERT_TRUE(ids_.backend(config.name, backend.name).ok());
      }
    }
  }

  uint32_t id(const std::string& service, const std::string& backend) const {
    return *ids_.findBackend(service, backend);
  }

  bool publish() {
    return publishBackendLoads(
        services_, ids_,
        [&](uint32_t backend) { return active_.contains(backend) ? active_.at(backend) : 0; },
        *loads_);
  }

  std::vector<ServiceState> services_;
  CounterIds ids_;
  absl::flat_hash_map<uint32_t, uint64_t> active_;
  std::unique_ptr<BackendLoads> loads_ = std::make_unique<BackendLoads>();
};

// Each backend's flows as the workers count them, and the serving total of the healthy ones.
TEST_F(LoadPublicationTest, PublishesEachBackendAndTheServingTotal) {
  active_ = {{id("web", "web-0"), 10}, {id("web", "web-1"), 20}, {id("web", "web-2"), 30}};
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->generation.load(), 1u);
  EXPECT_EQ(loads_->active[id("web", "web-1")].load(), 20u);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 60u);

  // A failed backend's flows still show as its own, but no longer count as serving.
  ASSERT_TRUE(services_[0].setHealth({true, false, true}).ok());
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->generation.load(), 2u);
  EXPECT_EQ(loads_->active[id("web", "web-1")].load(), 20u);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 40u);

  // A drained backend (weight 0) does not serve either.
  ASSERT_TRUE(services_[0].setDrained("web-2", true).ok());
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), 10u);
}

// Services without bounded_load are left alone, and with none at all the generation stays.
TEST_F(LoadPublicationTest, OnlyBoundedLoadServices) {
  active_ = {{id("plain", "plain-0"), 7}};
  services_.erase(services_.begin());
  EXPECT_FALSE(publish());
  EXPECT_EQ(loads_->generation.load(), 0u);
  EXPECT_EQ(loads_->active[id("plain", "plain-0")].load(), 0u);
}

TEST_F(LoadPublicationTest, CountsPast32BitsAreClamped) {
  active_ = {{id("web", "web-0"), uint64_t{1} << 40}, {id("web", "web-1"), 1}};
  EXPECT_TRUE(publish());
  EXPECT_EQ(loads_->active[id("web", "web-0")].load(), UINT32_MAX);
  EXPECT_EQ(loads_->serving_total[*ids_.findService("web")].load(), UINT32_MAX);
}

// Two workers, each with its own connection table, place flows of a bounded-load service. The
// publication sums both workers' gauges, so that each worker's next choices see the other's
// flows; until then a worker counts only its own.
TEST(LoadPublicationTwoWorkersTest, PublishesTheSumOfBothWorkersFlows) {
  const std::string yaml = R"(
dataplane:
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    bounded_load: 1.25
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.2.2 }
      - { name: web-3, address: 198.18.3.2 }
)";
  const Config config = *parseConfig(yaml, "two-workers.yaml");
  const std::vector<ServiceState> services = *createServiceStates(config.services);
  CounterIds ids;
  const std::vector<Table> tables = {services[0].liveTable()};
  const MacAddress macs[] = {*MacAddress::parse("02:00:00:00:00:01")};
  const std::unique_ptr<const Snapshot> snapshot = *buildSnapshot(config, tables, macs, {}, ids, 1);
  auto loads = std::make_unique<BackendLoads>();

  // Opens the TCP flow from source port `port` on `worker`.
  auto open = [&](TestWorker& worker, uint16_t port) {
    Bytes frame = concat(
        {ethernet(kEtherTypeIpv4),
         ipv4(IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, 1), kProtocolTcp, 20),
         tcp(port, 80)});
    frame[14 + 20 + 13] = kTcpSyn;
    ReceivedFrame received(frame);
    ASSERT_EQ(processFrame(*snapshot, 0, received.frame, worker.state), Verdict::kTransmit);
  };
  TestWorker first(loads.get());
  TestWorker second(loads.get());
  for (uint16_t port = 1000; port < 1300; ++port) open(first, port);
  for (uint16_t port = 2000; port < 2600; ++port) open(second, port);

  const std::vector<TrafficCounters> workers = {first.state.traffic, second.state.traffic};
  ASSERT_TRUE(publishBackendLoads(
      services, ids, [&](uint32_t id) { return activeFlows(workers, id); }, *loads));
  uint64_t total = 0;
  for (const char* name : {"web-1", "web-2", "web-3"}) {
    const uint32_t id = *ids.findBackend("web", name);
    const uint64_t both =
        first.backends[id].connections.read() + second.backends[id].connections.read();
    EXPECT_EQ(loads->active[id].load(), both) << name;
    // Each worker kept every backend within its bound by its own counts alone, and the sum of
    // two workers within twice that: the staleness docs/architecture.md allows for.
    EXPECT_LE(both, 1.25 * 900 / 3 * 2 + 2) << name;
    total += both;
  }
  EXPECT_EQ(total, 900u);
  EXPECT_EQ(loads->serving_total[*ids.findService("web")].load(), 900u);
  // The first worker now sees the second's flows: its next 300 flows fill the backends the
  // published counts show furthest below their bound, and no backend passes 1.25 x the mean + 1.
  for (uint16_t port = 3000; port < 3300; ++port) open(first, port);
  for (const char* name : {"web-1", "web-2", "web-3"}) {
    const uint32_t id = *ids.findBackend("web", name);
    EXPECT_LE(first.backends[id].connections.read() + second.backends[id].connections.read(),
              1.25 * 1200 / 3 + 1)
        << name;
  }
}

}  // namespace
}  // namespace berth
