// Full-NAT's pools as metrics show them: each (local address, backend) pair's ports, and each
// worker's share, which must be what the session table's port search can take on that worker.

#include "berth/control/nat_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "berth/config/loader.h"

namespace berth {
namespace {

constexpr char kConfig[] = R"(dataplane:
  ports:
    - { name: up, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
        egress: down }
    - { name: down, device: net_null1, ipv4: 198.18.1.10,
        snat_addresses: [198.18.1.20, 198.18.1.21], snat_ports: 2000-5999 }
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,
      backends: [ { name: a, address: 198.18.1.2, mac: "02:00:00:00:01:02" },
                  { name: b, address: 198.18.1.3, mac: "02:00:00:00:01:03" } ] }
  - { name: dsr, vip: 198.18.100.1, port: 81, protocol: tcp, forwarding: ipip,
      backends: [ { name: a, address: 198.18.1.2 } ] }
)";

RssSpread fourQueues() {
  RssSpread spread;
  for (size_t i = 0; i < 40; ++i) spread.key.push_back(static_cast<uint8_t>(i * 73 + 5));
  for (uint16_t i = 0; i < 128; ++i) spread.reta.push_back(i % 4);
  return spread;
}

TEST(NatPoolTest, EachPairShowsItsPortsAndEachWorkersShareOfThem) {
  const Config config = *parseConfig(kConfig, "pool.yaml");
  const std::vector<Table> tables = *buildServiceTables(config);
  std::vector<ServiceInput> inputs;
  for (size_t s = 0; s < tables.size(); ++s) inputs.push_back({config.services[s], tables[s]});
  const std::vector<MacAddress> macs(2, *MacAddress::parse("02:00:00:00:00:01"));
  const std::vector<std::shared_ptr<const ReplySteering>> steering =
      *portReplySteering(config.dataplane, {RssSpread{}, fourQueues()});
  CounterIds ids;
  const std::unique_ptr<const Snapshot> snapshot =
      *buildSnapshot(config.dataplane, inputs, macs, {}, ids, 1, {}, steering);
  std::vector<const ServiceConfig*> services;
  for (const ServiceConfig& service : config.services) services.push_back(&service);

  NatPools pools;
  size_t omitted = 0;
  const std::vector<NatPoolRow> rows =
      pools.rows(*snapshot, config.dataplane, services, 4, 100, omitted);
  ASSERT_EQ(rows.size(), 4u) << "2 backends x 2 local addresses; the ipip service has none";
  EXPECT_EQ(omitted, 0u);
  for (const NatPoolRow& row : rows) {
    EXPECT_EQ(row.port, "down");
    EXPECT_EQ(row.service, "web");
    EXPECT_EQ(row.ports, 4000u);
    ASSERT_EQ(row.worker_ports.size(), 4u);
    EXPECT_EQ(std::accumulate(row.worker_ports.begin(), row.worker_ports.end(), 0u), 4000u)
        << "every port replies to one of the four queues";
    // The same as the steering counts for the pair itself.
    const IpAddress backend = *IpAddress::parse(row.backend == "a" ? "198.18.1.2" : "198.18.1.3");
    const uint32_t base =
        steering[1]->baseOf(backend, 80, *IpAddress::parse(row.address), kProtocolTcp);
    for (uint16_t worker = 0; worker < 4; ++worker) {
      EXPECT_EQ(row.worker_ports[worker],
                steering[1]->shareOf(base, worker, IpFamily::kIpv4, kProtocolTcp));
      EXPECT_GT(row.worker_ports[worker], 700u) << "about a quarter each";
    }
  }
  const std::vector<NatPoolRow> bounded =
      pools.rows(*snapshot, config.dataplane, services, 4, 3, omitted);
  EXPECT_EQ(bounded.size(), 3u);
  EXPECT_EQ(omitted, 1u);
}

}  // namespace
}  // namespace berth
