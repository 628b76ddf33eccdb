// Two-arm (docs/two-arm.md): VIP traffic received on the uplink leaves through the downlink's
// next hop, from the downlink's address and on its VLAN, and the worker sends it from the
// downlink (frame.port); berth's own replies to clients (ICMP "fragmentation needed", ARP)
// leave through the port the frame came in on. A service may name its own egress, which wins
// over the receiving port's.

#include <gtest/gtest.h>

#include <memory>

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
constexpr uint32_t kUplink = 0;
constexpr uint32_t kDownlink = 1;
constexpr uint32_t kManagement = 2;

constexpr char kTwoArm[] = R"(
dataplane:
  ports:
    - { name: uplink, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
        egress: downlink }
    - { name: downlink, device: net_null1, vlan: 30, ipv4: 198.18.1.10, mtu: 1400,
        gateway_mac: "02:00:00:00:01:fe" }
    - { name: management, device: net_null2, ipv4: 198.18.2.10,
        gateway_mac: "02:00:00:00:02:fe" }
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp,
      backends: [ { name: a, address: 198.18.1.2 } ] }
  - { name: dsr, vip: 198.18.100.1, port: 81, protocol: tcp, forwarding: l2dsr,
      backends: [ { name: d, address: 198.18.1.3, mac: "02:00:00:00:01:03" } ] }
  - { name: pinned, vip: 198.18.100.1, port: 82, protocol: tcp, egress: management,
      backends: [ { name: p, address: 198.18.2.2 } ] }
)";

const Snapshot& twoArm() {
  static const std::unique_ptr<BuiltSnapshot> built = buildSnapshotFrom(kTwoArm, kPortMac);
  return *built->snapshot;
}

Bytes tcpTo(uint16_t port, size_t payload_length = 6) {
  return concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20 + payload_length),
                 tcp(40000, port), payload(payload_length)});
}

struct Sent {
  Verdict verdict;
  uint32_t port;
  Bytes frame;
};

Sent receiveOn(uint32_t port, const Bytes& input) {
  TestWorker worker;
  ReceivedFrame received(input);
  const Verdict verdict = processFrame(twoArm(), port, received.frame, worker.state);
  return {verdict, received.frame.port, received.sent()};
}

TEST(PipelineTwoArmTest, VipTrafficLeavesThroughTheDownlinksNextHopFromItsAddress) {
  const Sent sent = receiveOn(kUplink, tcpTo(80));
  ASSERT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kDownlink) << "the worker sends it from the downlink";
  EXPECT_EQ(Bytes(sent.frame.begin(), sent.frame.begin() + 6), (Bytes{2, 0, 0, 0, 1, 0xfe}));
  EXPECT_EQ(Bytes(sent.frame.begin() + 12, sent.frame.begin() + 18),
            (Bytes{0x81, 0x00, 0x00, 30, 0x08, 0x00}))
      << "on the downlink's VLAN";
  EXPECT_EQ(Bytes(sent.frame.begin() + 18 + 12, sent.frame.begin() + 18 + 16),
            (Bytes{198, 18, 1, 10}))
      << "from the downlink's address";
}

TEST(PipelineTwoArmTest, L2DsrTakesTheFrameOntoTheDownlinksVlan) {
  const Bytes input = tcpTo(81);
  const Sent sent = receiveOn(kUplink, input);
  ASSERT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kDownlink);
  EXPECT_EQ(Bytes(sent.frame.begin(), sent.frame.begin() + 6), (Bytes{2, 0, 0, 0, 1, 3}));
  EXPECT_EQ(Bytes(sent.frame.begin() + 12, sent.frame.begin() + 16), (Bytes{0x81, 0x00, 0x00, 30}));
  EXPECT_EQ(Bytes(sent.frame.begin() + 16, sent.frame.end()),
            Bytes(input.begin() + 12, input.end()))
      << "the IP packet unchanged";
}

TEST(PipelineTwoArmTest, AServicesOwnEgressWinsOverThePorts) {
  const Sent sent = receiveOn(kUplink, tcpTo(82));
  ASSERT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kManagement);
  EXPECT_EQ(Bytes(sent.frame.begin(), sent.frame.begin() + 6), (Bytes{2, 0, 0, 0, 2, 0xfe}));
}

TEST(PipelineTwoArmTest, TheDownlinksOwnTrafficStaysOnIt) {
  const Sent sent = receiveOn(
      kDownlink, concat({ethernet(kEtherTypeIpv4, {30}), ipv4(kClient, kVip, kProtocolTcp, 26),
                         tcp(40000, 80), payload(6)}));
  ASSERT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kDownlink);
}

TEST(PipelineTwoArmTest, FragmentationNeededGoesBackThroughTheUplinkWithTheDownlinksMtu) {
  // 1400 on the downlink, less IPIP's 20: a 1400-byte packet with DF does not fit.
  const Sent sent = receiveOn(kUplink, tcpTo(80, 1400 - 40));
  ASSERT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kUplink) << "ICMP to the client leaves where the client is";
  ASSERT_GE(sent.frame.size(), 14u + 20 + 8);
  EXPECT_EQ(Bytes(sent.frame.begin() + 12, sent.frame.begin() + 14), (Bytes{0x08, 0x00}))
      << "untagged, as the uplink is";
  EXPECT_EQ(sent.frame[14 + 9], kProtocolIcmp);
  const uint8_t* icmp_header = sent.frame.data() + 14 + 20;
  EXPECT_EQ(icmp_header[0], 3);
  EXPECT_EQ(icmp_header[1], 4);
  EXPECT_EQ(icmp_header[6] << 8 | icmp_header[7], 1380) << "the next-hop MTU is the downlink's";
}

TEST(PipelineTwoArmTest, ArpForTheUplinksAddressIsAnsweredOnTheUplink) {
  Bytes body(28, 0);
  const uint8_t fixed[14] = {0, 1, 0x08, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0x02};
  std::copy(fixed, fixed + 14, body.begin());
  std::copy(kClient.bytes.begin(), kClient.bytes.begin() + 4, body.begin() + 14);
  const uint8_t asked[4] = {198, 18, 0, 10};
  std::copy(asked, asked + 4, body.begin() + 24);
  Bytes header = ethernet(kEtherTypeArp);
  std::fill(header.begin(), header.begin() + 6, 0xFF);
  const Sent sent = receiveOn(kUplink, concat({header, body}));
  EXPECT_EQ(sent.verdict, Verdict::kTransmit);
  EXPECT_EQ(sent.port, kUplink);
}

}  // namespace
}  // namespace berth
