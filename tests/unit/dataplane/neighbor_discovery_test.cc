#include "berth/dataplane/neighbor_discovery.h"

#include <gtest/gtest.h>

#include "berth/dataplane/neighbor_reply.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:10");
const IpAddress kPort4 = IpAddress::v4(198, 18, 0, 10);
const IpAddress kPort6 = *IpAddress::parse("2001:db8::10");
const IpAddress kGateway4 = IpAddress::v4(198, 18, 0, 254);
const IpAddress kGateway6 = *IpAddress::parse("2001:db8::fe");

ReceivedFrame receivedRequest(const IpAddress& source, const IpAddress& target) {
  uint8_t buffer[kNeighborRequestMaxLength];
  const size_t length = buildNeighborRequest(buffer, sizeof(buffer), kPortMac, source, target);
  EXPECT_GT(length, 0u);
  return ReceivedFrame(Bytes(buffer, buffer + length));
}

TEST(NeighborDiscoveryTest, ArpRequestAsksForTheTargetFromThePort) {
  ReceivedFrame request = receivedRequest(kPort4, kGateway4);
  ASSERT_EQ(request.parse_error, ParseError::kNone);
  EXPECT_EQ(request.frame.length, 60u) << "padded to the Ethernet minimum";
  EXPECT_EQ(request.original[0], 0xFF) << "broadcast";
  EXPECT_EQ(neighborQuery(request.frame, request.packet), kGateway4);
  const std::optional<NeighborObservation> seen = observeNeighbor(request.frame, request.packet);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->address, kPort4);
  EXPECT_EQ(seen->mac, kPortMac);
  EXPECT_EQ(seen->claim, NeighborClaim::kRequest);
  EXPECT_TRUE(seen->from_claimed_mac);
}

TEST(NeighborDiscoveryTest, SolicitationGoesToTheSolicitedNodeGroupWithAValidChecksum) {
  ReceivedFrame request = receivedRequest(kPort6, kGateway6);
  ASSERT_EQ(request.parse_error, ParseError::kNone);
  EXPECT_EQ(Bytes(request.original.begin(), request.original.begin() + 6),
            (Bytes{0x33, 0x33, 0xFF, 0, 0, 0xFE}));
  EXPECT_EQ(request.packet.hop_limit, 255);
  EXPECT_EQ(neighborQuery(request.frame, request.packet), kGateway6);
  // Answering it as the gateway would, and observing the answer, learns the gateway's MAC.
  const MacAddress gateway_mac = *MacAddress::parse("02:00:00:00:00:fe");
  ASSERT_TRUE(buildNeighborReply(request.frame, request.packet, kGateway6, gateway_mac));
  ReceivedFrame answer(request.sent());
  const std::optional<NeighborObservation> seen = observeNeighbor(answer.frame, answer.packet);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->address, kGateway6);
  EXPECT_EQ(seen->mac, gateway_mac);
  EXPECT_EQ(seen->claim, NeighborClaim::kReply) << "the solicited flag is set";
  EXPECT_TRUE(seen->from_claimed_mac);

  // Without the solicited flag, the same advertisement is an announcement.
  ReceivedFrame unsolicited(request.sent());
  unsolicited.frame.data[14 + 40 + 4] &= ~0x40;
  EXPECT_EQ(observeNeighbor(unsolicited.frame, unsolicited.packet)->claim,
            NeighborClaim::kAnnouncement);
  // From another Ethernet source, it speaks for someone else.
  ReceivedFrame relayed(request.sent());
  relayed.frame.data[6 + 5] ^= 0x01;
  EXPECT_FALSE(observeNeighbor(relayed.frame, relayed.packet)->from_claimed_mac);
}

TEST(NeighborDiscoveryTest, ArpRepliesTeachTheSendersMac) {
  ReceivedFrame request = receivedRequest(kPort4, kGateway4);
  const MacAddress gateway_mac = *MacAddress::parse("02:00:00:00:00:fe");
  ASSERT_TRUE(buildNeighborReply(request.frame, request.packet, kGateway4, gateway_mac));
  ReceivedFrame reply(request.sent());
  const std::optional<NeighborObservation> seen = observeNeighbor(reply.frame, reply.packet);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->address, kGateway4);
  EXPECT_EQ(seen->mac, gateway_mac);
  EXPECT_EQ(seen->claim, NeighborClaim::kReply);
  EXPECT_TRUE(seen->from_claimed_mac);

  ReceivedFrame relayed(request.sent());
  relayed.frame.data[6] ^= 0x02;  // another (still unicast) Ethernet source
  EXPECT_FALSE(observeNeighbor(relayed.frame, relayed.packet)->from_claimed_mac);
}

TEST(NeighborDiscoveryTest, ArpWhoseSenderIsItsTargetIsAnAnnouncement) {
  // A gratuitous request: "who has 198.18.0.254? tell 198.18.0.254".
  ReceivedFrame gratuitous = receivedRequest(kGateway4, kGateway4);
  EXPECT_EQ(observeNeighbor(gratuitous.frame, gratuitous.packet)->claim,
            NeighborClaim::kAnnouncement);
  // A gratuitous reply is one too.
  gratuitous.frame.data[14 + 7] = 2;
  EXPECT_EQ(observeNeighbor(gratuitous.frame, gratuitous.packet)->claim,
            NeighborClaim::kAnnouncement);
  // An opcode that is neither request nor reply claims nothing.
  ReceivedFrame odd = receivedRequest(kPort4, kGateway4);
  odd.frame.data[14 + 7] = 9;
  EXPECT_FALSE(observeNeighbor(odd.frame, odd.packet).has_value());
}

TEST(NeighborDiscoveryTest, FramesThatTeachNothingAreIgnored) {
  // A probe from the unspecified address.
  ReceivedFrame probe = receivedRequest(IpAddress::v4(0, 0, 0, 0), kGateway4);
  EXPECT_FALSE(observeNeighbor(probe.frame, probe.packet).has_value());
  // An ordinary TCP packet.
  ReceivedFrame data(
      concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(1, 80)}));
  EXPECT_FALSE(observeNeighbor(data.frame, data.packet).has_value());
  // A solicitation that crossed a router (hop limit below 255).
  ReceivedFrame forwarded = receivedRequest(kPort6, kGateway6);
  forwarded.frame.data[14 + 7] = 254;
  ParsedPacket reparsed;
  ASSERT_EQ(parsePacket(forwarded.frame.data, forwarded.frame.length, reparsed), ParseError::kNone);
  EXPECT_FALSE(observeNeighbor(forwarded.frame, reparsed).has_value());
}

TEST(NeighborDiscoveryTest, RequestsNeedRoomAndMatchingFamilies) {
  uint8_t buffer[kNeighborRequestMaxLength];
  EXPECT_EQ(buildNeighborRequest(buffer, 59, kPortMac, kPort4, kGateway4), 0u);
  EXPECT_EQ(buildNeighborRequest(buffer, 85, kPortMac, kPort6, kGateway6), 0u);
  EXPECT_EQ(buildNeighborRequest(buffer, sizeof(buffer), kPortMac, kPort4, kGateway6), 0u);
}

TEST(NeighborDiscoveryTest, TheTableReportsOnlyChangesPerPort) {
  NeighborTable table;
  const MacAddress first = *MacAddress::parse("02:00:00:00:00:01");
  const MacAddress second = *MacAddress::parse("02:00:00:00:00:02");
  EXPECT_TRUE(table.learn(0, kGateway4, first));
  EXPECT_FALSE(table.learn(0, kGateway4, first));
  EXPECT_TRUE(table.learn(0, kGateway4, second));
  EXPECT_EQ(table.find(0, kGateway4), second);
  EXPECT_EQ(table.find(1, kGateway4), std::nullopt) << "the same address behind another port";
  EXPECT_EQ(table.find(0, kGateway6), std::nullopt);
  EXPECT_EQ(table.size(), 1u);

  // Forgetting keeps the slot that snapshots share with the workers.
  auto slot = std::make_shared<NeighborSlot>();
  table.attach(0, kGateway4, slot);
  table.forget(0, kGateway4);
  EXPECT_EQ(table.find(0, kGateway4), std::nullopt);
  EXPECT_EQ(table.resolving(0, kGateway4).slot, slot);
  table.erase(0, kGateway4);
  EXPECT_EQ(table.resolving(0, kGateway4).slot, nullptr);
}

TEST(NeighborDiscoveryTest, TheSlotKeepsTheFirstOtherAnswerOfARequest) {
  NeighborSlot slot;
  const MacAddress first = *MacAddress::parse("02:00:00:00:00:0a");
  const MacAddress second = *MacAddress::parse("02:00:00:00:00:0b");
  EXPECT_FALSE(slot.asking());
  slot.openRequest();
  EXPECT_TRUE(slot.asking());
  EXPECT_TRUE(slot.recordOtherAnswer(first));
  EXPECT_FALSE(slot.recordOtherAnswer(second));
  EXPECT_TRUE(slot.recordOtherAnswer(first)) << "the answer kept, again";
  EXPECT_EQ(slot.otherAnswer(), first);
  EXPECT_FALSE(slot.knownAnswered());
  slot.recordKnownAnswered();
  EXPECT_TRUE(slot.knownAnswered());
  slot.closeRequest();
  EXPECT_FALSE(slot.asking());
  slot.openRequest();  // a new request forgets the last one's answers
  EXPECT_EQ(slot.otherAnswer(), std::nullopt);
  EXPECT_FALSE(slot.knownAnswered());

  slot.recordAnnouncement(second);
  slot.recordAnnouncement(first);
  EXPECT_EQ(slot.takeAnnouncement(), second);
  EXPECT_EQ(slot.takeAnnouncement(), std::nullopt) << "taken";
  slot.countRefused();
  slot.countRefused();
  EXPECT_EQ(slot.refused(), 2u);
}

}  // namespace
}  // namespace berth
