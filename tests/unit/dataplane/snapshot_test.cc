#include "berth/dataplane/snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "berth/config/loader.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");

constexpr char kConfig[] = R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway: 198.18.0.254, mtu: 9000 }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    announce: arp
    backends:
      - { name: web-2, address: 198.18.2.2 }
      - { name: web-1, address: 198.18.1.2 }
  - name: dsr
    vip: 198.18.100.2
    port: 443
    protocol: tcp
    forwarding: l2dsr
    backends:
      - { name: fixed, address: 198.18.0.20, mac: "02:00:00:00:00:20" }
      - { name: learned, address: 198.18.0.21 }
)";

Config config() { return *parseConfig(kConfig, "test.yaml"); }

std::unique_ptr<const Snapshot> snapshotOf(const Config& config, const NeighborTable& neighbors,
                                           CounterIds& ids) {
  const std::vector<Table> tables = *buildServiceTables(config);
  const MacAddress macs[] = {kPortMac};
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      buildSnapshot(config, tables, macs, neighbors, ids, 7);
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *std::move(snapshot);
}

TEST(SnapshotTest, BackendsFollowTheTablesNameOrderWithTheirConfiguredAddresses) {
  CounterIds ids;
  const auto snapshot = snapshotOf(config(), {}, ids);
  EXPECT_EQ(snapshot->generation(), 7u);
  ASSERT_EQ(snapshot->serviceCount(), 2u);
  const SnapshotService& web = snapshot->service(0);
  EXPECT_EQ(web.first_backend, 0u);
  EXPECT_EQ(snapshot->backend(0).name, "web-1");
  EXPECT_EQ(snapshot->backend(0).address, IpAddress::v4(198, 18, 1, 2));
  EXPECT_EQ(snapshot->backend(1).name, "web-2");
  EXPECT_EQ(snapshot->service(1).first_backend, 2u);
}

TEST(SnapshotTest, TargetsWaitForTheirNextHopsMac) {
  CounterIds ids;
  const Config loaded = config();
  const auto unresolved = snapshotOf(loaded, {}, ids);
  EXPECT_EQ(unresolved->target(0, 0), nullptr) << "the gateway is not resolved yet";
  ASSERT_NE(unresolved->target(0, 2), nullptr) << "a fixed l2dsr MAC needs no resolution";
  EXPECT_EQ(unresolved->target(0, 2)->destination_mac, *MacAddress::parse("02:00:00:00:00:20"));
  EXPECT_EQ(unresolved->target(0, 3), nullptr);

  NeighborTable neighbors;
  neighbors.learn(0, IpAddress::v4(198, 18, 0, 254), *MacAddress::parse("02:00:00:00:00:fe"));
  neighbors.learn(0, IpAddress::v4(198, 18, 0, 21), *MacAddress::parse("02:00:00:00:00:21"));
  const auto resolved = snapshotOf(loaded, neighbors, ids);
  const ForwardingTarget* web1 = resolved->target(0, 0);
  ASSERT_NE(web1, nullptr);
  EXPECT_EQ(web1->destination_mac, *MacAddress::parse("02:00:00:00:00:fe"));
  EXPECT_EQ(web1->source_mac, kPortMac);
  EXPECT_EQ(web1->outer_source, IpAddress::v4(198, 18, 0, 10));
  EXPECT_EQ(web1->backend, IpAddress::v4(198, 18, 1, 2));
  EXPECT_EQ(web1->mtu, 9000);
  ASSERT_NE(resolved->target(0, 3), nullptr);
  EXPECT_EQ(resolved->target(0, 3)->destination_mac, *MacAddress::parse("02:00:00:00:00:21"));
}

TEST(SnapshotTest, PortsAnswerForTheirAddressAndAnnouncedVipsAndResolveTheirNextHops) {
  CounterIds ids;
  const auto snapshot = snapshotOf(config(), {}, ids);
  const SnapshotPort& port = snapshot->port(0);
  EXPECT_THAT(port.answered, ::testing::UnorderedElementsAre(IpAddress::v4(198, 18, 0, 10),
                                                             IpAddress::v4(198, 18, 100, 1)));
  EXPECT_EQ(port.resolving.size(), 2u) << "the gateway and the l2dsr backend without a MAC";
  EXPECT_TRUE(port.resolving.contains(IpAddress::v4(198, 18, 0, 254)));
  EXPECT_TRUE(port.resolving.contains(IpAddress::v4(198, 18, 0, 21)));

  const std::vector<NextHopToResolve> hops = nextHopsToResolve(config());
  ASSERT_EQ(hops.size(), 2u);
  EXPECT_EQ(hops[0].address, IpAddress::v4(198, 18, 0, 254));
  EXPECT_EQ(hops[0].source, IpAddress::v4(198, 18, 0, 10));
}

TEST(SnapshotTest, CounterIdsAreStableAcrossRebuildsAndNewNamesGetNewOnes) {
  CounterIds ids;
  const auto first = snapshotOf(config(), {}, ids);
  const auto second = snapshotOf(config(), {}, ids);
  EXPECT_EQ(first->backend(3).counter_id, second->backend(3).counter_id);
  EXPECT_EQ(ids.backendNames().size(), 4u);
  EXPECT_EQ(ids.backendNames()[first->backend(0).counter_id], "web/web-1");
  EXPECT_EQ(*ids.backend("web", "web-9"), 4u);
}

TEST(SnapshotTest, FragmentsFindTheirServiceOnlyWhereItIsUnambiguous) {
  constexpr char kFragments[] = R"(
services:
  - { name: a, vip: 198.18.100.1, port: 53, protocol: udp, hash_fields: 3-tuple,
      backends: [ { name: x, address: 198.18.1.2 } ] }
  - { name: b, vip: 198.18.100.2, port: 53, protocol: udp, hash_fields: source,
      backends: [ { name: x, address: 198.18.1.2 } ] }
  - { name: c, vip: 198.18.100.2, port: 54, protocol: udp, hash_fields: 3-tuple,
      backends: [ { name: x, address: 198.18.1.2 } ] }
  - { name: d, vip: 198.18.100.3, port: 80, protocol: tcp,
      backends: [ { name: x, address: 198.18.1.2 } ] }
)";
  const Config loaded = *parseConfig(kFragments, "test.yaml");
  CounterIds ids;
  const std::vector<Table> tables = *buildServiceTables(loaded);
  const auto snapshot = *buildSnapshot(loaded, tables, {}, {}, ids, 1);
  auto fragmentTo = [&](uint8_t last, uint8_t protocol) {
    return snapshot->findFragmentService(FlowKey::make(
        IpAddress::v4(198, 18, 0, 1), IpAddress::v4(198, 18, 100, last), 0, 0, protocol));
  };
  EXPECT_EQ(fragmentTo(1, kProtocolUdp), 0u);
  EXPECT_EQ(fragmentTo(2, kProtocolUdp), std::nullopt) << "two portless services share the VIP";
  EXPECT_EQ(fragmentTo(3, kProtocolTcp), std::nullopt) << "a 5-tuple service";
  EXPECT_EQ(fragmentTo(1, kProtocolTcp), std::nullopt);
}

}  // namespace
}  // namespace berth
