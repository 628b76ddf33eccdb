// VLAN ports on one device (docs/vlans.md): a frame is for the device's port on its outer VLAN
// tag, and is then served as that port's alone: VIP traffic leaves through the port's gateway,
// from its address, tagged with its VLAN; ARP is answered for its addresses only, keeping the
// tag; what is not berth's goes to its kernel interface, or is dropped where it has none. A
// VLAN none of the device's ports has is dropped and counted.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "berth/dataplane/pipeline.h"
#include "support/built_snapshot.h"
#include "support/counters.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_worker.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's
const IpAddress kVip = IpAddress::v4(198, 18, 100, 1);
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);

// An untagged port and two VLAN ports on one device, each with its own address and gateway;
// only VLAN 10 has a kernel interface.
constexpr char kTrunk[] = R"(
dataplane:
  ports:
    - { name: trunk, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
    - { name: v10, device: net_null0, vlan: 10, ipv4: 198.18.10.10,
        gateway_mac: "02:00:00:00:10:fe", exception: { name: berth10 } }
    - { name: v20, device: net_null0, vlan: 20, ipv4: 198.18.20.10,
        gateway_mac: "02:00:00:00:20:fe" }
    - { name: other, device: net_null1, vlan: 10, ipv4: 198.19.10.10,
        gateway_mac: "02:00:00:01:10:fe" }
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp,
      backends: [ { name: a, address: 198.18.1.2 } ] }
  - { name: dsr, vip: 198.18.100.1, port: 81, protocol: tcp, forwarding: l2dsr,
      backends: [ { name: d, address: 198.18.1.3, mac: "02:00:00:00:01:03" } ] }
)";

const BuiltSnapshot& trunk() {
  static const std::unique_ptr<BuiltSnapshot> built = buildSnapshotFrom(kTrunk, kPortMac);
  return *built;
}

Bytes tcpTo(const IpAddress& destination, uint16_t port, std::initializer_list<uint16_t> vlans) {
  return concat({ethernet(kEtherTypeIpv4, vlans), ipv4(kClient, destination, kProtocolTcp, 26),
                 tcp(40000, port), payload(6)});
}

Bytes pingOf(const IpAddress& destination, std::initializer_list<uint16_t> vlans) {
  return concat(
      {ethernet(kEtherTypeIpv4, vlans), ipv4(kClient, destination, kProtocolIcmp, 8), icmp(8, 0)});
}

Bytes arpRequestFor(const IpAddress& asked, std::initializer_list<uint16_t> vlans) {
  Bytes body(28, 0);
  const uint8_t fixed[14] = {0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0x02};
  std::copy(fixed, fixed + 14, body.begin());
  std::copy(kClient.bytes.begin(), kClient.bytes.begin() + 4, body.begin() + 14);
  std::copy(asked.bytes.begin(), asked.bytes.begin() + 4, body.begin() + 24);
  Bytes header = ethernet(kEtherTypeArp, vlans);
  std::fill(header.begin(), header.begin() + 6, 0xFF);
  return concat({header, body});
}

struct Outcome {
  Verdict verdict;
  uint32_t port;
  Bytes sent;
  uint64_t vlan_drops;
};

// Runs `input` through the pipeline as received on the device of port `device`.
Outcome receive(const Bytes& input, uint32_t device = 0) {
  TestWorker worker;
  ReceivedFrame received(input);
  const Verdict verdict = processFrame(*trunk().snapshot, device, received.frame, worker.state);
  return {verdict, received.frame.port, received.sent(),
          counterNamed(worker.counters, "drop_vlan_not_configured")};
}

// The outer Ethernet header of an encapsulated frame and the outer IPv4 source and destination.
struct Outer {
  Bytes destination_mac;
  Bytes tag_and_type;  // the 802.1Q tag, if any, and the EtherType
  Bytes source;
  Bytes destination;
};

Outer outerOf(const Bytes& sent) {
  const size_t ip = sent[12] == 0x81 ? 18 : 14;
  return {Bytes(sent.begin(), sent.begin() + 6), Bytes(sent.begin() + 12, sent.begin() + ip),
          Bytes(sent.begin() + ip + 12, sent.begin() + ip + 16),
          Bytes(sent.begin() + ip + 16, sent.begin() + ip + 20)};
}

TEST(PipelineVlanTest, TheDeviceKnowsItsPortsByVlan) {
  const Snapshot& snapshot = *trunk().snapshot;
  EXPECT_EQ(snapshot.port(1).device, 0u);
  EXPECT_EQ(snapshot.port(2).device, 0u);
  EXPECT_EQ(snapshot.port(3).device, 3u) << "another device, though on a VLAN of the same ID";
  EXPECT_EQ(snapshot.port(1).vlan, 10);
  EXPECT_TRUE(snapshot.port(1).port_by_vlan.empty()) << "the map is on the device's first port";
}

TEST(PipelineVlanTest, VipTrafficLeavesThroughItsVlansGatewayTaggedFromItsAddress) {
  struct Case {
    std::initializer_list<uint16_t> tags;
    uint32_t port;
    Bytes gateway;
    Bytes tag_and_type;
    Bytes source;
  };
  const Case cases[] = {
      {{}, 0, {0x02, 0, 0, 0, 0, 0xfe}, {0x08, 0x00}, {198, 18, 0, 10}},
      {{0}, 0, {0x02, 0, 0, 0, 0, 0xfe}, {0x08, 0x00}, {198, 18, 0, 10}},
      {{10}, 1, {0x02, 0, 0, 0, 0x10, 0xfe}, {0x81, 0x00, 0x00, 10, 0x08, 0x00}, {198, 18, 10, 10}},
      // QinQ: the outer tag chooses the port; the frame leaves with the port's tag alone.
      {{20, 99},
       2,
       {0x02, 0, 0, 0, 0x20, 0xfe},
       {0x81, 0x00, 0x00, 20, 0x08, 0x00},
       {198, 18, 20, 10}},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(::testing::Message() << test.tags.size() << " tag(s), port " << test.port);
    const Outcome outcome = receive(tcpTo(kVip, 80, test.tags));
    ASSERT_EQ(outcome.verdict, Verdict::kTransmit);
    EXPECT_EQ(outcome.port, test.port);
    const Outer outer = outerOf(outcome.sent);
    EXPECT_EQ(outer.destination_mac, test.gateway);
    EXPECT_EQ(outer.tag_and_type, test.tag_and_type);
    EXPECT_EQ(outer.source, test.source);
    EXPECT_EQ(outer.destination, Bytes(kBackend.bytes.begin(), kBackend.bytes.begin() + 4));
  }
}

TEST(PipelineVlanTest, AVlanNoPortOfTheDeviceHasIsDroppedAndCounted) {
  const Outcome on_30 = receive(tcpTo(kVip, 80, {30}));
  EXPECT_EQ(on_30.verdict, Verdict::kDrop);
  EXPECT_EQ(on_30.vlan_drops, 1u);
  // The other device has VLAN 10 alone: untagged frames there are no port's.
  const Outcome untagged = receive(tcpTo(kVip, 80, {}), 3);
  EXPECT_EQ(untagged.verdict, Verdict::kDrop);
  EXPECT_EQ(untagged.vlan_drops, 1u);
  const Outcome on_10 = receive(tcpTo(kVip, 80, {10}), 3);
  EXPECT_EQ(on_10.verdict, Verdict::kTransmit);
  EXPECT_EQ(on_10.port, 3u);
}

TEST(PipelineVlanTest, L2DsrKeepsTheTagItCameWith) {
  const Bytes input = tcpTo(kVip, 81, {10});
  const Outcome outcome = receive(input);
  ASSERT_EQ(outcome.verdict, Verdict::kTransmit);
  EXPECT_EQ(Bytes(outcome.sent.begin(), outcome.sent.begin() + 6),
            (Bytes{0x02, 0, 0, 0, 0x01, 0x03}));
  EXPECT_EQ(Bytes(outcome.sent.begin() + 12, outcome.sent.end()),
            Bytes(input.begin() + 12, input.end()));
}

TEST(PipelineVlanTest, ArpIsAnsweredOnlyOnTheVlanOfTheAddressAskedFor) {
  const Outcome on_10 = receive(arpRequestFor(IpAddress::v4(198, 18, 10, 10), {10}));
  ASSERT_EQ(on_10.verdict, Verdict::kTransmit);
  EXPECT_EQ(Bytes(on_10.sent.begin() + 12, on_10.sent.begin() + 16), (Bytes{0x81, 0x00, 0x00, 10}))
      << "the reply keeps the asker's tag";
  // VLAN 20's port does not hold 198.18.10.10, and has no kernel interface to pass it to.
  const Outcome on_20 = receive(arpRequestFor(IpAddress::v4(198, 18, 10, 10), {20}));
  EXPECT_EQ(on_20.verdict, Verdict::kDrop);
  const Outcome untagged = receive(arpRequestFor(IpAddress::v4(198, 18, 10, 10), {}));
  EXPECT_EQ(untagged.verdict, Verdict::kDrop);
  const Outcome own = receive(arpRequestFor(IpAddress::v4(198, 18, 20, 10), {20}));
  EXPECT_EQ(own.verdict, Verdict::kTransmit);
}

TEST(PipelineVlanTest, WhatIsNotBerthsGoesToItsVlansKernelInterface) {
  const Outcome to_10 = receive(pingOf(IpAddress::v4(198, 18, 10, 10), {10}));
  EXPECT_EQ(to_10.verdict, toKernel(ExceptionClass::kIcmp));
  EXPECT_EQ(to_10.port, 1u) << "the worker hands it to port v10's interface";
  // The same address on the untagged port's segment is not a port address there.
  const Outcome untagged = receive(pingOf(IpAddress::v4(198, 18, 10, 10), {}));
  EXPECT_EQ(untagged.verdict, Verdict::kDrop);
  // VLAN 20's port has no interface: dropped, as on any port without one.
  const Outcome to_20 = receive(pingOf(IpAddress::v4(198, 18, 20, 10), {20}));
  EXPECT_EQ(to_20.verdict, Verdict::kDrop);
}

}  // namespace
}  // namespace berth
