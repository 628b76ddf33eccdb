// The pipeline against crafted ARP and neighbour discovery frames: only a reply to berth's own
// request, to berth's MAC, from the MAC it claims, reaches the next hop's slot; every other claim
// of another MAC for a next hop is refused and counted under its reason, and the next hop's MAC
// in use keeps carrying traffic. What the management thread then decides is pinned in
// control/neighbor_cache_test.cc.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "berth/config/loader.h"
#include "berth/dataplane/pipeline.h"
#include "support/counters.h"
#include "support/frames.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's dst
const MacAddress kGatewayMac = *MacAddress::parse("02:00:00:00:00:fe");
const MacAddress kAttackerMac = *MacAddress::parse("02:00:00:00:0b:ad");
const MacAddress kRelayMac = *MacAddress::parse("02:00:00:00:0c:01");
const MacAddress kOtherMac = *MacAddress::parse("02:00:00:00:0d:01");
const MacAddress kBroadcast = *MacAddress::parse("ff:ff:ff:ff:ff:ff");
const MacAddress kNobody = *MacAddress::parse("00:00:00:00:00:00");
const IpAddress kPort4 = IpAddress::v4(198, 18, 0, 10);
const IpAddress kGateway4 = IpAddress::v4(198, 18, 0, 254);
const IpAddress kOther4 = IpAddress::v4(198, 18, 0, 77);
const IpAddress kPort6 = *IpAddress::parse("2001:db8::10");
const IpAddress kGateway6 = *IpAddress::parse("2001:db8::fe");

constexpr char kConfig[] = R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, ipv6: "2001:db8::10", gateway: GATEWAY,
        learn_announcements: LEARN EXCEPTION }
services:
  - { name: web4, vip: 198.18.100.1, port: 80, protocol: tcp,
      backends: [ { name: a, address: 198.18.1.2 } ] }
  - { name: web6, vip: "2001:db8:100::1", port: 80, protocol: tcp,
      backends: [ { name: b, address: "2001:db8:1::2" } ] }
)";

Bytes ethernetBetween(const MacAddress& destination, const MacAddress& source,
                      uint16_t ether_type) {
  Bytes header = ethernet(ether_type);
  std::copy(destination.bytes.begin(), destination.bytes.end(), header.begin());
  std::copy(source.bytes.begin(), source.bytes.end(), header.begin() + 6);
  return header;
}

struct ArpFrame {
  uint16_t opcode;
  MacAddress ethernet_source;
  MacAddress ethernet_destination;
  MacAddress sender_mac;
  IpAddress sender;
  MacAddress target_mac;
  IpAddress target;
};

Bytes arp(const ArpFrame& a) {
  Bytes body(28, 0);
  const uint8_t fixed[8] = {0, 1, 0x08, 0, 6, 4, 0, static_cast<uint8_t>(a.opcode)};
  std::copy(fixed, fixed + 8, body.begin());
  std::copy(a.sender_mac.bytes.begin(), a.sender_mac.bytes.end(), body.begin() + 8);
  std::copy(a.sender.bytes.begin(), a.sender.bytes.begin() + 4, body.begin() + 14);
  std::copy(a.target_mac.bytes.begin(), a.target_mac.bytes.end(), body.begin() + 18);
  std::copy(a.target.bytes.begin(), a.target.bytes.begin() + 4, body.begin() + 24);
  return concat({ethernetBetween(a.ethernet_destination, a.ethernet_source, kEtherTypeArp), body});
}

// A neighbour advertisement of `target` at `mac`, from `target`'s address.
Bytes advertisement(const MacAddress& ethernet_source, const MacAddress& ethernet_destination,
                    const IpAddress& destination, const IpAddress& target, const MacAddress& mac,
                    bool solicited) {
  Bytes message(32, 0);
  message[0] = 136;
  message[4] = solicited ? 0x60 : 0x20;  // S and O, or O alone
  std::copy(target.bytes.begin(), target.bytes.end(), message.begin() + 8);
  message[24] = 2;  // target link-layer address
  message[25] = 1;
  std::copy(mac.bytes.begin(), mac.bytes.end(), message.begin() + 26);
  return concat({ethernetBetween(ethernet_destination, ethernet_source, kEtherTypeIpv6),
                 ipv6(target, destination, kProtocolIcmpv6, message.size(), 255), message});
}

// A neighbour solicitation for `target` from `source` at `mac`, to the target's group.
Bytes solicitation(const MacAddress& ethernet_source, const IpAddress& source,
                   const IpAddress& target, const MacAddress& mac) {
  Bytes message(32, 0);
  message[0] = 135;
  std::copy(target.bytes.begin(), target.bytes.end(), message.begin() + 8);
  message[24] = 1;  // source link-layer address
  message[25] = 1;
  std::copy(mac.bytes.begin(), mac.bytes.end(), message.begin() + 26);
  IpAddress group = *IpAddress::parse("ff02::1:ff00:0");
  std::copy(target.bytes.begin() + 13, target.bytes.end(), group.bytes.begin() + 13);
  const MacAddress group_mac{
      {0x33, 0x33, 0xFF, target.bytes[13], target.bytes[14], target.bytes[15]}};
  return concat({ethernetBetween(group_mac, ethernet_source, kEtherTypeIpv6),
                 ipv6(source, group, kProtocolIcmpv6, message.size(), 255), message});
}

// A worker on port p0 with the gateway as its one next hop to resolve, and that next hop's slot.
class NeighborHarness {
 public:
  NeighborHarness(const IpAddress& gateway, std::optional<MacAddress> known,
                  bool learn_announcements = false, bool kernel_interface = false)
      : gateway_(gateway),
        services_(CounterIds::kMaxServices),
        backends_(CounterIds::kMaxBackends),
        slot_(std::make_shared<NeighborSlot>()) {
    const std::string yaml = absl::StrReplaceAll(
        kConfig, {{"GATEWAY", absl::StrCat("\"", gateway.toString(), "\"")},
                  {"LEARN", learn_announcements ? "true" : "false"},
                  {"EXCEPTION", kernel_interface ? ", exception: { name: b0 }" : ""}});
    absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    tables_ = *buildServiceTables(config_);
    NeighborTable neighbors;
    neighbors.attach(0, gateway, slot_);
    if (known) neighbors.learn(0, gateway, *known);
    const MacAddress port_macs[] = {kPortMac};
    snapshot_ = *buildSnapshot(config_, tables_, port_macs, neighbors, ids_, 1);
    state_.counters = &counters_;
    state_.traffic = {services_.data(), backends_.data()};
  }

  Verdict process(const Bytes& bytes) {
    ReceivedFrame received(bytes);
    EXPECT_EQ(received.parse_error, ParseError::kNone);
    const Verdict verdict = processFrame(*snapshot_, 0, received.frame, state_);
    last_sent_ = received.sent();
    return verdict;
  }
  uint64_t read(const std::string& name) const { return counterNamed(counters_, name); }
  uint64_t refusals() const {
    uint64_t total = 0;
    for (size_t i = 0; i < kNeighborRefusalCount; ++i) {
      total += read(absl::StrCat("neighbor_refused_", toString(static_cast<NeighborRefusal>(i))));
    }
    return total;
  }
  // A client's SYN to the service of the gateway's family: where the worker sends it.
  std::optional<MacAddress> dataGoesTo() {
    const Bytes syn = gateway_.isV4()
                          ? concat({ethernet(kEtherTypeIpv4),
                                    ipv4(IpAddress::v4(198, 18, 7, 7),
                                         IpAddress::v4(198, 18, 100, 1), kProtocolTcp, 20),
                                    tcp(40000, 80)})
                          : concat({ethernet(kEtherTypeIpv6),
                                    ipv6(*IpAddress::parse("2001:db8:7::7"),
                                         *IpAddress::parse("2001:db8:100::1"), kProtocolTcp, 20),
                                    tcp(40000, 80)});
    if (process(syn) != Verdict::kTransmit) return std::nullopt;
    MacAddress destination;
    std::copy(last_sent_.begin(), last_sent_.begin() + 6, destination.bytes.begin());
    return destination;
  }
  NeighborSlot& slot() { return *slot_; }

 private:
  IpAddress gateway_;
  Config config_;
  std::vector<Table> tables_;
  CounterIds ids_;
  std::unique_ptr<const Snapshot> snapshot_;
  WorkerCounters counters_;
  std::vector<TrafficCounter> services_;
  std::vector<TrafficCounter> backends_;
  WorkerState state_;
  std::shared_ptr<NeighborSlot> slot_;
  Bytes last_sent_;
};

ArpFrame gatewayReply() {
  return {2, kGatewayMac, kPortMac, kGatewayMac, kGateway4, kPortMac, kPort4};
}

TEST(PipelineNeighborTest, AReplyToBerthsRequestReachesTheSlot) {
  NeighborHarness worker(kGateway4, std::nullopt);
  EXPECT_EQ(worker.dataGoesTo(), std::nullopt) << "unresolved";
  worker.slot().openRequest();
  EXPECT_EQ(worker.process(arp(gatewayReply())), Verdict::kDrop);
  EXPECT_EQ(worker.read("drop_arp_nd_not_answered"), 1u);
  EXPECT_EQ(worker.slot().otherAnswer(), kGatewayMac);
  EXPECT_EQ(worker.refusals(), 0u);
}

TEST(PipelineNeighborTest, TheMacInUseAnsweringIsRecordedAsSuch) {
  NeighborHarness worker(kGateway4, kGatewayMac);
  worker.slot().openRequest();
  worker.process(arp(gatewayReply()));
  EXPECT_TRUE(worker.slot().knownAnswered());
  EXPECT_EQ(worker.slot().otherAnswer(), std::nullopt);
}

TEST(PipelineNeighborTest, EachSpoofedArpIsRefusedUnderItsReason) {
  NeighborHarness worker(kGateway4, kGatewayMac);
  // An unsolicited reply: no request of berth's waits.
  worker.process(arp({2, kAttackerMac, kPortMac, kAttackerMac, kGateway4, kPortMac, kPort4}));
  EXPECT_EQ(worker.read("neighbor_refused_unsolicited"), 1u);

  worker.slot().openRequest();
  // While a request waits: a reply whose Ethernet source is not the MAC it claims.
  worker.process(arp({2, kRelayMac, kPortMac, kAttackerMac, kGateway4, kPortMac, kPort4}));
  EXPECT_EQ(worker.read("neighbor_refused_source_mismatch"), 1u);
  // A reply broadcast, or sent to another host: not an answer to berth.
  worker.process(arp({2, kAttackerMac, kBroadcast, kAttackerMac, kGateway4, kNobody, kPort4}));
  EXPECT_EQ(worker.read("neighbor_refused_unsolicited"), 2u);
  // A gratuitous request: "who has the gateway? tell the gateway, at the attacker's MAC".
  worker.process(arp({1, kAttackerMac, kBroadcast, kAttackerMac, kGateway4, kNobody, kGateway4}));
  EXPECT_EQ(worker.read("neighbor_refused_announcement"), 1u);
  // A request about another host that carries the gateway's address as its sender.
  worker.process(arp({1, kAttackerMac, kBroadcast, kAttackerMac, kGateway4, kNobody, kOther4}));
  EXPECT_EQ(worker.read("neighbor_refused_not_a_reply"), 1u);

  EXPECT_EQ(worker.slot().otherAnswer(), std::nullopt) << "nothing reached the management thread";
  EXPECT_FALSE(worker.slot().knownAnswered());
  EXPECT_EQ(worker.slot().takeAnnouncement(), std::nullopt);
  EXPECT_EQ(worker.slot().refused(), 5u) << "counted for the next hop too";
  EXPECT_EQ(worker.dataGoesTo(), kGatewayMac);
}

// With a kernel interface, ARP the kernel may learn from goes up to it, but a claim berth
// refused about one of its next hops does not: the kernel's entry for the gateway (often its
// BGP peer) cannot be taken over by what berth's own rules keep out.
TEST(PipelineNeighborTest, ClaimsBerthRefusesDoNotReachTheKernelEither) {
  NeighborHarness worker(kGateway4, kGatewayMac, false, true);
  EXPECT_EQ(
      worker.process(arp({2, kAttackerMac, kPortMac, kAttackerMac, kGateway4, kPortMac, kPort4})),
      Verdict::kDrop)
      << "unsolicited";
  EXPECT_EQ(worker.process(
                arp({1, kAttackerMac, kBroadcast, kAttackerMac, kGateway4, kNobody, kGateway4})),
            Verdict::kDrop)
      << "gratuitous";
  EXPECT_EQ(worker.refusals(), 2u);
  worker.slot().openRequest();
  EXPECT_EQ(worker.process(arp(gatewayReply())), toKernel(ExceptionClass::kNeighbor))
      << "the MAC in use answering: the kernel may learn it too";
  EXPECT_EQ(worker.process(arp({2, kOtherMac, kPortMac, kOtherMac, kOther4, kPortMac, kPort4})),
            toKernel(ExceptionClass::kNeighbor))
      << "a reply about a host berth does not resolve: the kernel's to judge";
  EXPECT_EQ(worker.refusals(), 2u);
  EXPECT_EQ(worker.dataGoesTo(), kGatewayMac);
}

TEST(PipelineNeighborTest, EachSpoofedNeighborDiscoveryFrameIsRefusedUnderItsReason) {
  NeighborHarness worker(kGateway6, kGatewayMac);
  // A solicited advertisement while no request waits.
  worker.process(
      advertisement(kAttackerMac, kPortMac, kPort6, kGateway6, kAttackerMac, /*solicited=*/true));
  EXPECT_EQ(worker.read("neighbor_refused_unsolicited"), 1u);

  worker.slot().openRequest();
  // Its target link-layer address is not the frame's Ethernet source.
  worker.process(
      advertisement(kRelayMac, kPortMac, kPort6, kGateway6, kAttackerMac, /*solicited=*/true));
  EXPECT_EQ(worker.read("neighbor_refused_source_mismatch"), 1u);
  // An unsolicited advertisement to all nodes.
  worker.process(advertisement(kAttackerMac, *MacAddress::parse("33:33:00:00:00:01"),
                               *IpAddress::parse("ff02::1"), kGateway6, kAttackerMac,
                               /*solicited=*/false));
  EXPECT_EQ(worker.read("neighbor_refused_announcement"), 1u);
  // A solicitation for another host from the gateway's address, at the attacker's MAC.
  worker.process(
      solicitation(kAttackerMac, kGateway6, *IpAddress::parse("2001:db8::77"), kAttackerMac));
  EXPECT_EQ(worker.read("neighbor_refused_not_a_reply"), 1u);

  EXPECT_EQ(worker.slot().otherAnswer(), std::nullopt);
  EXPECT_EQ(worker.slot().takeAnnouncement(), std::nullopt);
  EXPECT_EQ(worker.slot().refused(), 4u);
  EXPECT_EQ(worker.dataGoesTo(), kGatewayMac);

  // The gateway's own solicited advertisement answers the request.
  worker.process(
      advertisement(kGatewayMac, kPortMac, kPort6, kGateway6, kGatewayMac, /*solicited=*/true));
  EXPECT_TRUE(worker.slot().knownAnswered());
}

TEST(PipelineNeighborTest, ClaimsOfTheMacInUseAreNeitherRecordedNorRefused) {
  NeighborHarness worker(kGateway4, kGatewayMac);
  // The gateway asks for berth's address: answered, as ever.
  EXPECT_EQ(
      worker.process(arp({1, kGatewayMac, kBroadcast, kGatewayMac, kGateway4, kNobody, kPort4})),
      Verdict::kTransmit);
  EXPECT_EQ(worker.read("arp_nd_replies"), 1u);
  // It announces itself, and replies late to a request long closed.
  worker.process(arp({1, kGatewayMac, kBroadcast, kGatewayMac, kGateway4, kNobody, kGateway4}));
  worker.process(arp(gatewayReply()));
  EXPECT_EQ(worker.refusals(), 0u);
  EXPECT_EQ(worker.slot().refused(), 0u);
  EXPECT_EQ(worker.dataGoesTo(), kGatewayMac);
}

TEST(PipelineNeighborTest, APortThatLearnsAnnouncementsRecordsThemFromTheirOwnMac) {
  NeighborHarness worker(kGateway4, kGatewayMac, /*learn_announcements=*/true);
  const MacAddress replacement = *MacAddress::parse("02:00:00:00:00:ef");
  worker.process(arp({1, kRelayMac, kBroadcast, replacement, kGateway4, kNobody, kGateway4}));
  EXPECT_EQ(worker.read("neighbor_refused_source_mismatch"), 1u);
  EXPECT_EQ(worker.slot().takeAnnouncement(), std::nullopt);
  worker.process(arp({1, replacement, kBroadcast, replacement, kGateway4, kNobody, kGateway4}));
  EXPECT_EQ(worker.slot().takeAnnouncement(), replacement);
  // An unsolicited advertisement counts as an announcement too.
  NeighborHarness worker6(kGateway6, kGatewayMac, /*learn_announcements=*/true);
  worker6.process(advertisement(replacement, *MacAddress::parse("33:33:00:00:00:01"),
                                *IpAddress::parse("ff02::1"), kGateway6, replacement,
                                /*solicited=*/false));
  EXPECT_EQ(worker6.slot().takeAnnouncement(), replacement);
  // Requests claiming the gateway's address are still refused there.
  worker.process(arp({1, kAttackerMac, kBroadcast, kAttackerMac, kGateway4, kNobody, kOther4}));
  EXPECT_EQ(worker.read("neighbor_refused_not_a_reply"), 1u);
}

TEST(PipelineNeighborTest, AFloodOfAnswersKeepsOnlyTheFirstBesideTheMacInUse) {
  NeighborHarness worker(kGateway4, kGatewayMac);
  worker.slot().openRequest();
  for (int i = 0; i < 1000; ++i) {
    const MacAddress random{
        {0x02, 0x10, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i), 0, 1}};
    worker.process(arp({2, random, kPortMac, random, kGateway4, kPortMac, kPort4}));
  }
  worker.process(arp(gatewayReply()));
  EXPECT_EQ(worker.slot().otherAnswer(), (MacAddress{{0x02, 0x10, 0, 0, 0, 1}}));
  EXPECT_TRUE(worker.slot().knownAnswered()) << "so the management thread keeps the gateway";
  EXPECT_EQ(worker.read("neighbor_refused_late_answer"), 999u);
  EXPECT_EQ(worker.dataGoesTo(), kGatewayMac);
}

}  // namespace
}  // namespace berth
