#include "berth/dataplane/forwarding.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <cstring>
#include <vector>

#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

constexpr uint32_t kFlowHash = 0x12345678;
constexpr size_t kHeadroom = 128;

Bytes tcp4Frame(size_t payload_length = 0, uint16_t flags_and_offset = 0x4000,
                std::initializer_list<uint16_t> vlans = {}) {
  return concat({ethernet(kEtherTypeIpv4, vlans),
                 ipv4(kClient, kVip, kProtocolTcp, 20 + payload_length,
                      {.flags_and_offset = flags_and_offset}),
                 tcp(40000, 80), payload(payload_length)});
}

Bytes tcp6Frame(size_t payload_length = 0) {
  return concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 20 + payload_length),
                 tcp(40000, 443), payload(payload_length)});
}

// The checks every encapsulating mode shares: a fresh untagged Ethernet header to the gateway,
// an outer header from the port to the backend, and the inner packet untouched after it.
void expectOuterIpv4(const ReceivedFrame& received, uint8_t protocol, size_t extra) {
  const uint8_t* frame = received.frame.data;
  EXPECT_EQ(MacAddress::parse("02:00:00:00:00:fe")->bytes,
            (std::array<uint8_t, 6>{frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]}));
  EXPECT_EQ(frame[6], 0x02);
  EXPECT_EQ(frame[11], 0x10);
  EXPECT_EQ(frame[12], 0x08);
  EXPECT_EQ(frame[13], 0x00);
  const auto* outer = reinterpret_cast<const rte_ipv4_hdr*>(frame + 14);
  EXPECT_EQ(outer->version_ihl, 0x45);
  EXPECT_EQ(outer->next_proto_id, protocol);
  EXPECT_EQ(outer->time_to_live, kOuterHopLimit);
  EXPECT_EQ(rte_be_to_cpu_16(outer->fragment_offset), RTE_IPV4_HDR_DF_FLAG);
  EXPECT_EQ(rte_be_to_cpu_16(outer->total_length), 20 + extra + received.originalIpPacket().size());
  EXPECT_EQ(std::memcmp(&outer->src_addr, IpAddress::v4(198, 18, 0, 10).bytes.data(), 4), 0);
  EXPECT_EQ(rte_ipv4_cksum(outer), 0) << "a header with a correct checksum sums to zero";
  ASSERT_EQ(received.frame.length, 14 + 20 + extra + received.originalIpPacket().size());
  EXPECT_EQ(Bytes(frame + 14 + 20 + extra, frame + received.frame.length),
            received.originalIpPacket());
}

TEST(ForwardingTest, IpipWrapsIpv4InIpv4) {
  ReceivedFrame received(tcp4Frame(100));
  const ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2));
  ASSERT_EQ(forwardIpip(received.frame, received.packet, target, kFlowHash), ForwardResult::kSend);
  expectOuterIpv4(received, IPPROTO_IPIP, 0);
  EXPECT_EQ(received.frame.headroom, kHeadroom - 20);
  const auto* outer = reinterpret_cast<const rte_ipv4_hdr*>(received.frame.data + 14);
  EXPECT_EQ(std::memcmp(&outer->dst_addr, IpAddress::v4(198, 18, 1, 2).bytes.data(), 4), 0);
}

TEST(ForwardingTest, IpipWrapsIpv6InIpv6WithAFlowLabelFromTheHash) {
  ReceivedFrame received(tcp6Frame(60));
  const ForwardingTarget target = testTarget(*IpAddress::parse("2001:db8:1::2"));
  ASSERT_EQ(forwardIpip(received.frame, received.packet, target, kFlowHash), ForwardResult::kSend);
  const uint8_t* frame = received.frame.data;
  EXPECT_EQ(frame[12], 0x86);
  EXPECT_EQ(frame[13], 0xDD);
  const auto* outer = reinterpret_cast<const rte_ipv6_hdr*>(frame + 14);
  EXPECT_EQ(rte_be_to_cpu_32(outer->vtc_flow) >> 28, 6u);
  EXPECT_EQ(rte_be_to_cpu_32(outer->vtc_flow) & 0xFFFFF, kFlowHash & 0xFFFFF);
  EXPECT_EQ(outer->proto, IPPROTO_IPV6);
  EXPECT_EQ(rte_be_to_cpu_16(outer->payload_len), received.originalIpPacket().size());
  EXPECT_EQ(std::memcmp(outer->dst_addr, IpAddress::parse("2001:db8:1::2")->bytes.data(), 16), 0);
  EXPECT_EQ(Bytes(frame + 14 + 40, frame + received.frame.length), received.originalIpPacket());
}

TEST(ForwardingTest, GreCarriesTheInnerEtherType) {
  ReceivedFrame received(tcp4Frame(10));
  ASSERT_EQ(forwardGre(received.frame, received.packet, testTarget(IpAddress::v4(198, 18, 1, 2)),
                       kFlowHash),
            ForwardResult::kSend);
  expectOuterIpv4(received, IPPROTO_GRE, 4);
  const uint8_t* gre = received.frame.data + 14 + 20;
  EXPECT_EQ(Bytes(gre, gre + 4), (Bytes{0, 0, 0x08, 0x00}));
}

TEST(ForwardingTest, GueOverIpv4SendsToTheGuePortFromAHashedSourcePort) {
  ReceivedFrame received(tcp4Frame(10));
  ASSERT_EQ(forwardGue(received.frame, received.packet, testTarget(IpAddress::v4(198, 18, 1, 2)),
                       kFlowHash),
            ForwardResult::kSend);
  expectOuterIpv4(received, IPPROTO_UDP, 8);
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(received.frame.data + 14 + 20);
  EXPECT_EQ(rte_be_to_cpu_16(udp->src_port), 0xC000 | (kFlowHash & 0x3FFF));
  EXPECT_EQ(rte_be_to_cpu_16(udp->dst_port), 6080);
  EXPECT_EQ(rte_be_to_cpu_16(udp->dgram_len), 8 + received.originalIpPacket().size());
  EXPECT_EQ(udp->dgram_cksum, 0);
}

TEST(ForwardingTest, GueOverIpv6HasAValidUdpChecksum) {
  ReceivedFrame received(tcp6Frame(33));
  ASSERT_EQ(forwardGue(received.frame, received.packet,
                       testTarget(*IpAddress::parse("2001:db8:1::2")), kFlowHash),
            ForwardResult::kSend);
  const auto* outer = reinterpret_cast<const rte_ipv6_hdr*>(received.frame.data + 14);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(received.frame.data + 14 + 40);
  EXPECT_EQ(outer->proto, IPPROTO_UDP);
  const uint16_t sent_checksum = udp->dgram_cksum;
  EXPECT_NE(sent_checksum, 0);
  udp->dgram_cksum = 0;
  EXPECT_EQ(rte_ipv6_udptcp_cksum(outer, udp), sent_checksum);
}

TEST(ForwardingTest, EncapsulationDropsVlanTagsAndEthernetPadding) {
  Bytes frame = tcp4Frame(0, 0x4000, {100, 200});
  frame.insert(frame.end(), 6, 0);  // padding up to the minimum frame size
  ReceivedFrame received(frame);
  ASSERT_EQ(forwardIpip(received.frame, received.packet, testTarget(IpAddress::v4(198, 18, 1, 2)),
                        kFlowHash),
            ForwardResult::kSend);
  expectOuterIpv4(received, IPPROTO_IPIP, 0);
  EXPECT_EQ(received.frame.headroom, kHeadroom - (34 - 22));
}

// A port on a VLAN: the outer Ethernet header carries its 802.1Q tag, whatever the client's
// frame was tagged with, and the rest follows four bytes later.
TEST(ForwardingTest, EncapsulationTagsTheOuterFrameWithThePortsVlan) {
  for (const std::initializer_list<uint16_t> received_tags :
       {std::initializer_list<uint16_t>{}, {10}, {10, 200}}) {
    ReceivedFrame received(tcp4Frame(40, 0x4000, received_tags));
    const ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2), 10);
    ASSERT_EQ(forwardIpip(received.frame, received.packet, target, kFlowHash),
              ForwardResult::kSend);
    const uint8_t* frame = received.frame.data;
    EXPECT_EQ(Bytes(frame + 12, frame + 18), (Bytes{0x81, 0x00, 0x00, 10, 0x08, 0x00}))
        << received_tags.size() << " tag(s) received";
    const auto* outer = reinterpret_cast<const rte_ipv4_hdr*>(frame + 18);
    EXPECT_EQ(outer->next_proto_id, IPPROTO_IPIP);
    EXPECT_EQ(rte_ipv4_cksum(outer), 0);
    ASSERT_EQ(received.frame.length, 18 + 20 + received.originalIpPacket().size());
    EXPECT_EQ(Bytes(frame + 38, frame + received.frame.length), received.originalIpPacket());
  }
}

TEST(ForwardingTest, TaggedGueOverIpv6KeepsAValidUdpChecksum) {
  ReceivedFrame received(tcp6Frame(33));
  const ForwardingTarget target = testTarget(*IpAddress::parse("2001:db8:1::2"), 4094);
  ASSERT_EQ(forwardGue(received.frame, received.packet, target, kFlowHash), ForwardResult::kSend);
  const uint8_t* frame = received.frame.data;
  EXPECT_EQ(Bytes(frame + 12, frame + 18), (Bytes{0x81, 0x00, 0x0F, 0xFE, 0x86, 0xDD}));
  const auto* outer = reinterpret_cast<const rte_ipv6_hdr*>(frame + 18);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(received.frame.data + 18 + 40);
  EXPECT_EQ(outer->proto, IPPROTO_UDP);
  const uint16_t sent_checksum = udp->dgram_cksum;
  udp->dgram_cksum = 0;
  EXPECT_EQ(rte_ipv6_udptcp_cksum(outer, udp), sent_checksum);
}

// What the NIC fills in when the port offloads outer checksums: the frame says which and where,
// and carries what NICs expect there (0, or the pseudo-header's sum); finishing the sum as a NIC
// does gives the bytes of the software path.
TEST(ForwardingTest, OffloadedOuterChecksumsAreLeftForTheNicToFinishAlike) {
  for (const uint16_t vlan : {uint16_t{0}, uint16_t{10}}) {
    const size_t l2 = vlan == 0 ? 14 : 18;
    const ForwardingTarget software = testTarget(IpAddress::v4(198, 18, 1, 2), vlan);
    ForwardingTarget offloaded = software;
    offloaded.checksum_offload = kChecksumOffloadIpv4Header | kChecksumOffloadUdp;
    ReceivedFrame written(tcp4Frame(40));
    ReceivedFrame left(tcp4Frame(40));
    ASSERT_EQ(forwardIpip(written.frame, written.packet, software, kFlowHash),
              ForwardResult::kSend);
    ASSERT_EQ(forwardIpip(left.frame, left.packet, offloaded, kFlowHash), ForwardResult::kSend);
    EXPECT_EQ(written.frame.tx_checksums, 0);
    EXPECT_EQ(left.frame.tx_checksums, kChecksumOffloadIpv4Header);
    EXPECT_EQ(left.frame.l2_length, l2);
    EXPECT_EQ(left.frame.l3_length, 20);
    auto* outer = reinterpret_cast<rte_ipv4_hdr*>(left.frame.data + l2);
    EXPECT_EQ(outer->hdr_checksum, 0);
    outer->hdr_checksum = rte_ipv4_cksum(outer);  // the NIC's part
    EXPECT_EQ(Bytes(left.frame.data, left.frame.data + left.frame.length),
              Bytes(written.frame.data, written.frame.data + written.frame.length));

    // GUE over IPv4 sends a zero UDP checksum either way; only the IPv4 header is the NIC's.
    ReceivedFrame gue4(tcp4Frame(40));
    ASSERT_EQ(forwardGue(gue4.frame, gue4.packet, offloaded, kFlowHash), ForwardResult::kSend);
    EXPECT_EQ(gue4.frame.tx_checksums, kChecksumOffloadIpv4Header);
    EXPECT_EQ(reinterpret_cast<const rte_udp_hdr*>(gue4.frame.data + l2 + 20)->dgram_cksum, 0);

    const ForwardingTarget software6 = testTarget(*IpAddress::parse("2001:db8:1::2"), vlan);
    ForwardingTarget offloaded6 = software6;
    offloaded6.checksum_offload = kChecksumOffloadIpv4Header | kChecksumOffloadUdp;
    ReceivedFrame written6(tcp6Frame(33));
    ReceivedFrame left6(tcp6Frame(33));
    ASSERT_EQ(forwardGue(written6.frame, written6.packet, software6, kFlowHash),
              ForwardResult::kSend);
    ASSERT_EQ(forwardGue(left6.frame, left6.packet, offloaded6, kFlowHash), ForwardResult::kSend);
    EXPECT_EQ(left6.frame.tx_checksums, kChecksumOffloadUdp);
    EXPECT_EQ(left6.frame.l2_length, l2);
    EXPECT_EQ(left6.frame.l3_length, 40);
    const auto* outer6 = reinterpret_cast<const rte_ipv6_hdr*>(left6.frame.data + l2);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(left6.frame.data + l2 + 40);
    EXPECT_EQ(udp->dgram_cksum, rte_ipv6_phdr_cksum(outer6, 0));
    udp->dgram_cksum = 0;
    udp->dgram_cksum = rte_ipv6_udptcp_cksum(outer6, udp);  // the NIC's part
    EXPECT_EQ(Bytes(left6.frame.data, left6.frame.data + left6.frame.length),
              Bytes(written6.frame.data, written6.frame.data + written6.frame.length));
  }
}

TEST(ForwardingTest, L2DsrRewritesOnlyTheMacs) {
  const Bytes original = tcp4Frame(20, 0x4000, {100});
  ReceivedFrame received(original);
  // On VLAN 100, the port it came in on, which it leaves through.
  ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2), 100);
  target.destination_mac = *MacAddress::parse("02:00:00:01:00:02");
  ASSERT_EQ(forwardL2Dsr(received.frame, received.packet, target, kFlowHash), ForwardResult::kSend);
  const Bytes sent(received.frame.data, received.frame.data + received.frame.length);
  EXPECT_EQ(Bytes(sent.begin(), sent.begin() + 6), (Bytes{0x02, 0, 0, 0x01, 0, 0x02}));
  EXPECT_EQ(Bytes(sent.begin() + 6, sent.begin() + 12), (Bytes{0x02, 0, 0, 0, 0, 0x10}));
  EXPECT_EQ(Bytes(sent.begin() + 12, sent.end()), Bytes(original.begin() + 12, original.end()));
}

// A two-arm egress on another VLAN than the frame came in on: the outer tag is rewritten (its
// priority kept), added, or taken out; the IP packet is untouched.
TEST(ForwardingTest, L2DsrPutsTheFrameOnTheTargetsVlan) {
  struct Case {
    std::initializer_list<uint16_t> received;
    uint16_t target_vlan;
    Bytes tags_sent;  // what follows the MACs, up to the EtherType
  };
  const Case cases[] = {
      {{}, 30, {0x81, 0x00, 0x00, 30}},
      {{10}, 30, {0x81, 0x00, 0x00, 30}},
      {{10, 200}, 4094, {0x81, 0x00, 0x0F, 0xFE, 0x81, 0x00, 0x00, 200}},
      {{10}, 0, {}},
      {{10}, 10, {0x81, 0x00, 0x00, 10}},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(::testing::Message()
                 << test.received.size() << " tag(s) in, VLAN " << test.target_vlan << " out");
    const Bytes original = tcp4Frame(20, 0x4000, test.received);
    ReceivedFrame received(original);
    const ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2), test.target_vlan);
    ASSERT_EQ(forwardL2Dsr(received.frame, received.packet, target, kFlowHash),
              ForwardResult::kSend);
    const Bytes sent = received.sent();
    EXPECT_EQ(Bytes(sent.begin(), sent.begin() + 6),
              Bytes(target.destination_mac.bytes.begin(), target.destination_mac.bytes.end()));
    EXPECT_EQ(Bytes(sent.begin() + 12, sent.begin() + 12 + test.tags_sent.size()), test.tags_sent);
    EXPECT_EQ(Bytes(sent.begin() + 12 + test.tags_sent.size(), sent.end()),
              Bytes(original.begin() + received.packet.l3_offset - 2, original.end()))
        << "the EtherType and the IP packet as they came";
  }
  // The priority bits of a rewritten tag stay.
  Bytes prioritised = tcp4Frame(20, 0x4000, {10});
  prioritised[14] |= 0xA0;
  ReceivedFrame received(prioritised);
  const ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2), 30);
  ASSERT_EQ(forwardL2Dsr(received.frame, received.packet, target, kFlowHash), ForwardResult::kSend);
  EXPECT_EQ(received.sent()[14], 0xA0);
  EXPECT_EQ(received.sent()[15], 30);
}

TEST(ForwardingTest, MtuDecidesBetweenSendingIcmpAndDropping) {
  const ForwardingTarget target = testTarget(IpAddress::v4(198, 18, 1, 2));
  // 1480 bytes of IP plus 20 of IPIP is exactly the MTU.
  ReceivedFrame fits(tcp4Frame(1480 - 40));
  EXPECT_EQ(forwardIpip(fits.frame, fits.packet, target, kFlowHash), ForwardResult::kSend);
  ReceivedFrame too_big_df(tcp4Frame(1481 - 40));
  EXPECT_EQ(forwardIpip(too_big_df.frame, too_big_df.packet, target, kFlowHash),
            ForwardResult::kTooBig);
  ReceivedFrame too_big_fragmentable(tcp4Frame(1481 - 40, 0));
  EXPECT_EQ(forwardIpip(too_big_fragmentable.frame, too_big_fragmentable.packet, target, kFlowHash),
            ForwardResult::kTooBigDrop);
  ReceivedFrame too_big_v6(tcp6Frame(1500 - 40 - 20));
  EXPECT_EQ(forwardIpip(too_big_v6.frame, too_big_v6.packet,
                        testTarget(*IpAddress::parse("2001:db8:1::2")), kFlowHash),
            ForwardResult::kTooBig);
  // The frame is untouched when it is not sent.
  EXPECT_EQ(too_big_df.frame.headroom, kHeadroom);
}

TEST(ForwardingTest, MissingHeadroomIsReported) {
  ReceivedFrame received(tcp4Frame(10), 5);
  EXPECT_EQ(forwardIpip(received.frame, received.packet, testTarget(IpAddress::v4(198, 18, 1, 2)),
                        kFlowHash),
            ForwardResult::kNoHeadroom);
}

TEST(ForwardingTest, OverheadAndFunctionsFollowTheMode) {
  EXPECT_EQ(encapsulationOverhead(Forwarding::kIpip, IpFamily::kIpv4), 20u);
  EXPECT_EQ(encapsulationOverhead(Forwarding::kGue, IpFamily::kIpv6), 48u);
  EXPECT_EQ(encapsulationOverhead(Forwarding::kGre, IpFamily::kIpv4), 24u);
  EXPECT_EQ(encapsulationOverhead(Forwarding::kL2Dsr, IpFamily::kIpv6), 0u);
  EXPECT_EQ(forwardFunctionFor(Forwarding::kGue), &forwardGue);
  EXPECT_EQ(forwardFunctionFor(Forwarding::kL2Dsr), &forwardL2Dsr);
}

}  // namespace
}  // namespace berth
