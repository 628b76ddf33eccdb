// The pipeline, one fixture per case in Katran's style: a description, an input frame built in
// code, the expected verdict, the expected output frame and the counter that must move. Every
// service here has one backend, so the expected output does not depend on the table; the tests
// after the fixtures check the table's picks with many backends.

#include "berth/dataplane/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/maglev/analysis.h"
#include "support/built_snapshot.h"
#include "support/counters.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_names.h"

namespace berth {
namespace {

const MacAddress kPortMac =
    *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's destination
const MacAddress kGatewayMac = *MacAddress::parse("02:00:00:00:00:fe");
const MacAddress kDsrMac = *MacAddress::parse("02:00:00:00:04:02");
const IpAddress kPort4 = IpAddress::v4(198, 18, 0, 10);
const IpAddress kPort6 = *IpAddress::parse("2001:db8::10");
const IpAddress kVipFragments = IpAddress::v4(198, 18, 100, 4);
const IpAddress kVipUnresolved = IpAddress::v4(198, 18, 100, 2);
const IpAddress kVipDrained = IpAddress::v4(198, 18, 100, 3);

constexpr char kConfig[] = R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, ipv6: "2001:db8::10",
        gateway_mac: "02:00:00:00:00:fe", mtu: 1500 }
services:
  - { name: ipip4, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: ipip, announce: arp,
      backends: [ { name: a, address: 198.18.1.2 } ] }
  - { name: gue4, vip: 198.18.100.1, port: 81, protocol: udp, forwarding: gue, gue_port: 6080,
      backends: [ { name: a, address: 198.18.2.2 } ] }
  - { name: gre4, vip: 198.18.100.1, port: 82, protocol: tcp, forwarding: gre,
      backends: [ { name: a, address: 198.18.3.2 } ] }
  - { name: dsr4, vip: 198.18.100.1, port: 83, protocol: tcp, forwarding: l2dsr,
      backends: [ { name: a, address: 198.18.4.2, mac: "02:00:00:00:04:02" } ] }
  - { name: frag, vip: 198.18.100.4, port: 53, protocol: udp, hash_fields: 3-tuple,
      backends: [ { name: a, address: 198.18.5.2 } ] }
  - { name: unresolved, vip: 198.18.100.2, port: 80, protocol: tcp, forwarding: l2dsr,
      backends: [ { name: a, address: 198.18.0.6 } ] }
  - { name: drained, vip: 198.18.100.3, port: 80, protocol: tcp,
      backends: [ { name: a, address: 198.18.1.9, weight: 0 } ] }
  - { name: ipip6, vip: "2001:db8:100::1", port: 80, protocol: tcp, forwarding: ipip,
      backends: [ { name: a, address: "2001:db8:1::2" } ] }
  - { name: gue6, vip: "2001:db8:100::1", port: 81, protocol: udp, forwarding: gue,
      gue_port: 6080, backends: [ { name: a, address: "2001:db8:2::2" } ] }
  - { name: gre6, vip: "2001:db8:100::1", port: 82, protocol: tcp, forwarding: gre,
      backends: [ { name: a, address: "2001:db8:3::2" } ] }
  - { name: dsr6, vip: "2001:db8:100::1", port: 83, protocol: tcp, forwarding: l2dsr,
      backends: [ { name: a, address: "2001:db8:4::2", mac: "02:00:00:00:04:02" } ] }
)";

// The RFC 1071 checksum, written here so that the expected bytes do not come from DPDK's helpers
// that the code under test uses.
uint16_t internetChecksum(const Bytes& bytes, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) sum += uint32_t{bytes[i]} << 8 | bytes[i + 1];
  if (bytes.size() % 2 == 1) sum += uint32_t{bytes.back()} << 8;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

Bytes macs(const MacAddress& destination, const MacAddress& source, uint16_t ether_type) {
  Bytes header(14, 0);
  std::copy(destination.bytes.begin(), destination.bytes.end(), header.begin());
  std::copy(source.bytes.begin(), source.bytes.end(), header.begin() + 6);
  putBigEndian16(header, 12, ether_type);
  return header;
}

// What an encapsulating mode sends: Ethernet to the gateway, the outer header from the port to
// `backend` carrying `protocol`, the mode's own header, and the inner IP packet as it came.
Bytes encapsulated4(const IpAddress& backend, uint8_t protocol, const Bytes& mode_header,
                    const Bytes& inner) {
  Bytes outer = ipv4(kPort4, backend, protocol, mode_header.size() + inner.size());
  outer[1] = inner[1];  // DSCP and ECN copied outward
  putBigEndian16(outer, 10, internetChecksum(outer));
  return concat({macs(kGatewayMac, kPortMac, kEtherTypeIpv4), outer, mode_header, inner});
}

Bytes encapsulated6(const IpAddress& backend, uint8_t protocol, const Bytes& mode_header,
                    const Bytes& inner, uint32_t flow_hash) {
  Bytes outer = ipv6(kPort6, backend, protocol, mode_header.size() + inner.size());
  const uint32_t label = flow_hash & 0xFFFFF;
  outer[1] = static_cast<uint8_t>(label >> 16);
  outer[2] = static_cast<uint8_t>(label >> 8);
  outer[3] = static_cast<uint8_t>(label);
  return concat({macs(kGatewayMac, kPortMac, kEtherTypeIpv6), outer, mode_header, inner});
}

Bytes greHeader(uint16_t inner_ether_type) {
  Bytes header(4, 0);
  putBigEndian16(header, 2, inner_ether_type);
  return header;
}

// GUE's outer UDP header; over IPv6 with the checksum over the pseudo-header.
Bytes gueHeader(uint32_t flow_hash, const Bytes& inner, const IpAddress* source6 = nullptr,
                const IpAddress* backend6 = nullptr) {
  Bytes header = udp(static_cast<uint16_t>(0xC000 | (flow_hash & 0x3FFF)), 6080, inner.size());
  if (source6 != nullptr) {
    Bytes pseudo = concat({Bytes(source6->bytes.begin(), source6->bytes.end()),
                           Bytes(backend6->bytes.begin(), backend6->bytes.end())});
    const size_t length = header.size() + inner.size();
    const Bytes trailer = {0,
                           static_cast<uint8_t>(length >> 16),
                           static_cast<uint8_t>(length >> 8),
                           static_cast<uint8_t>(length),
                           0,
                           0,
                           0,
                           kProtocolUdp};
    putBigEndian16(header, 6, internetChecksum(concat({pseudo, trailer, header, inner})));
  }
  return header;
}

uint32_t hashOf(const Bytes& frame, HashFields fields = HashFields::kFiveTuple) {
  ParsedPacket packet;
  EXPECT_EQ(parsePacket(frame.data(), frame.size(), packet), ParseError::kNone);
  return flowHash(packet.flow, fields, kDefaultFlowHashSeed);
}

Bytes ipPacketOf(const Bytes& frame) {
  ParsedPacket packet;
  EXPECT_EQ(parsePacket(frame.data(), frame.size(), packet), ParseError::kNone);
  return Bytes(frame.begin() + packet.l3_offset,
               frame.begin() + packet.l3_offset + packet.ip_length);
}

Bytes tcp4To(const IpAddress& vip, uint16_t port, size_t payload_length = 6,
             std::initializer_list<uint16_t> vlans = {}) {
  return concat({ethernet(kEtherTypeIpv4, vlans),
                 ipv4(kClient, vip, kProtocolTcp, 20 + payload_length), tcp(40000, port),
                 payload(payload_length)});
}
Bytes udp4To(const IpAddress& vip, uint16_t port) {
  return concat({ethernet(kEtherTypeIpv4), ipv4(kClient, vip, kProtocolUdp, 8 + 6),
                 udp(40000, port, 6), payload(6)});
}
Bytes tcp6To(uint16_t port) {
  return concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 20 + 6),
                 tcp(40000, port), payload(6)});
}
Bytes udp6To(uint16_t port) {
  return concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolUdp, 8 + 6),
                 udp(40000, port, 6), payload(6)});
}

Bytes withDestinationMac(Bytes frame, const MacAddress& mac) {
  std::copy(mac.bytes.begin(), mac.bytes.end(), frame.begin());
  return frame;
}

Bytes arpRequest(const IpAddress& asked, const IpAddress& sender) {
  Bytes body(28, 0);
  const uint8_t fixed[8] = {0, 1, 0x08, 0, 6, 4, 0, 1};
  std::copy(fixed, fixed + 8, body.begin());
  const uint8_t sender_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::copy(sender_mac, sender_mac + 6, body.begin() + 8);
  std::copy(sender.bytes.begin(), sender.bytes.begin() + 4, body.begin() + 14);
  std::copy(asked.bytes.begin(), asked.bytes.begin() + 4, body.begin() + 24);
  return concat(
      {withDestinationMac(ethernet(kEtherTypeArp), *MacAddress::parse("ff:ff:ff:ff:ff:ff")), body});
}

Bytes neighborSolicitationFor(const IpAddress& target) {
  Bytes message(32, 0);
  message[0] = 135;
  std::copy(target.bytes.begin(), target.bytes.end(), message.begin() + 8);
  const uint8_t option[8] = {1, 1, 0x02, 0, 0, 0, 0, 0x02};
  std::copy(option, option + 8, message.begin() + 24);
  return concat(
      {withDestinationMac(ethernet(kEtherTypeIpv6), *MacAddress::parse("33:33:ff:00:00:10")),
       ipv6(kClient6, target, kProtocolIcmpv6, message.size(), 255), message});
}

struct Fixture {
  std::string description;
  std::function<Bytes()> input;
  Verdict verdict;
  std::function<Bytes(const Bytes& input)> expected_output;  // empty: checked by `check` only
  std::string counter;  // the counter that must read 1 afterwards
  std::function<void(const Bytes& output)> check = nullptr;
};

class Counters {
 public:
  Counters() : services_(CounterIds::kMaxServices), backends_(CounterIds::kMaxBackends) {
    state.counters = &counters_;
    state.traffic = {services_.data(), backends_.data()};
  }
  uint64_t read(const std::string& name) const { return counterNamed(counters_, name); }
  // Every counter but the connection table's, which the conntrack fixtures check on their own.
  uint64_t total() const {
    const WorkerCounters* workers[] = {&counters_};
    uint64_t sum = 0;
    for (const auto& [counter, value] : sumCounters(workers)) {
      if (counter.rfind("conntrack_", 0) != 0) sum += value;
    }
    return sum;
  }
  // Gives the worker a connection table.
  void trackConnections() {
    buckets_.resize(ConnectionTable::bucketsFor(1024));
    table_.emplace(buckets_.data(), buckets_.size(), ConntrackTimeouts{}, 0, &counters_.conntrack,
                   ConnectionHashKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb,
                                      0x2545f4914f6cdd1d, 0xd6e8feb86659fd93, 0xa0761d6478bd642f}});
    state.conntrack = &*table_;
  }
  WorkerState state;

 private:
  WorkerCounters counters_;
  std::vector<TrafficCounter> services_;
  std::vector<TrafficCounter> backends_;
  std::vector<ConnectionBucket> buckets_;
  std::optional<ConnectionTable> table_;
};

std::unique_ptr<BuiltSnapshot> buildFrom(absl::string_view yaml,
                                         const NeighborTable& neighbors = {}) {
  return buildSnapshotFrom(yaml, kPortMac, neighbors);
}

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> kFixtures = {
      {"ipip over IPv4: the client's packet inside an outer header to the backend",
       [] { return tcp4To(kVip, 80); }, Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 1, 2), 4, {}, ipPacketOf(in));
       },
       ""},
      {"ipip over IPv6", [] { return tcp6To(80); }, Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated6(*IpAddress::parse("2001:db8:1::2"), 41, {}, ipPacketOf(in),
                              hashOf(in));
       },
       ""},
      {"gue over IPv4: outer UDP to the GUE port, no UDP checksum", [] { return udp4To(kVip, 81); },
       Verdict::kTransmit,
       [](const Bytes& in) {
         const Bytes inner = ipPacketOf(in);
         return encapsulated4(IpAddress::v4(198, 18, 2, 2), kProtocolUdp,
                              gueHeader(hashOf(in), inner), inner);
       },
       ""},
      {"gue over IPv6: with the UDP checksum IPv6 requires", [] { return udp6To(81); },
       Verdict::kTransmit,
       [](const Bytes& in) {
         const Bytes inner = ipPacketOf(in);
         const IpAddress backend = *IpAddress::parse("2001:db8:2::2");
         return encapsulated6(backend, kProtocolUdp,
                              gueHeader(hashOf(in), inner, &kPort6, &backend), inner, hashOf(in));
       },
       ""},
      {"gre over IPv4", [] { return tcp4To(kVip, 82); }, Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 3, 2), 47, greHeader(0x0800), ipPacketOf(in));
       },
       ""},
      {"gre over IPv6", [] { return tcp6To(82); }, Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated6(*IpAddress::parse("2001:db8:3::2"), 47, greHeader(0x86DD),
                              ipPacketOf(in), hashOf(in));
       },
       ""},
      {"l2dsr over IPv4: only the MACs change", [] { return tcp4To(kVip, 83); }, Verdict::kTransmit,
       [](const Bytes& in) {
         Bytes out = in;
         std::copy(kDsrMac.bytes.begin(), kDsrMac.bytes.end(), out.begin());
         std::copy(kPortMac.bytes.begin(), kPortMac.bytes.end(), out.begin() + 6);
         return out;
       },
       ""},
      {"l2dsr over IPv6", [] { return tcp6To(83); }, Verdict::kTransmit,
       [](const Bytes& in) {
         Bytes out = in;
         std::copy(kDsrMac.bytes.begin(), kDsrMac.bytes.end(), out.begin());
         std::copy(kPortMac.bytes.begin(), kPortMac.bytes.end(), out.begin() + 6);
         return out;
       },
       ""},
      {"a tagged frame on a device whose only port is untagged: no port is on its VLAN",
       [] {
         return tcp4To(kVip, 80, 6, {100, 200});
       },
       Verdict::kDrop, nullptr, "drop_vlan_not_configured"},
      {"a priority tag (VLAN 0) is the untagged port's: the encapsulated frame leaves untagged",
       [] { return tcp4To(kVip, 80, 6, {0}); }, Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 1, 2), 4, {}, ipPacketOf(in));
       },
       ""},
      {"ICMP error about a reply: steered by the embedded flow, to the flow's backend",
       [] {
         const Bytes embedded = concat({ipv4(kVip, kClient, kProtocolTcp, 20), tcp(80, 40000)});
         return concat(
             {ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 9, 9), kVip, kProtocolIcmp, 8 + embedded.size()),
              icmp(3, 4), embedded});
       },
       Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 1, 2), 4, {}, ipPacketOf(in));
       },
       ""},
      {"first fragment of a 3-tuple service: goes with its datagram",
       [] {
         return concat(
             {ethernet(kEtherTypeIpv4),
              ipv4(kClient, kVipFragments, kProtocolUdp, 8 + 8, {.flags_and_offset = 0x2000}),
              udp(40000, 53, 100), payload(8)});
       },
       Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 5, 2), 4, {}, ipPacketOf(in));
       },
       ""},
      {"later fragment of a 3-tuple service: found without ports, same backend",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(kClient, kVipFragments, kProtocolUdp, 16, {.flags_and_offset = 2}),
                        payload(16)});
       },
       Verdict::kTransmit,
       [](const Bytes& in) {
         return encapsulated4(IpAddress::v4(198, 18, 5, 2), 4, {}, ipPacketOf(in));
       },
       ""},
      {"later fragment of a 5-tuple service: dropped, it carries no ports",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(kClient, kVip, kProtocolTcp, 16, {.flags_and_offset = 2}),
                        payload(16)});
       },
       Verdict::kDrop, nullptr, "drop_later_fragment"},
      {"DF set and too big once encapsulated: ICMP fragmentation needed, with MTU 1480",
       [] { return tcp4To(kVip, 80, 1500 - 40); }, Verdict::kTransmit, nullptr,
       "icmp_too_big_replies",
       [](const Bytes& out) {
         ASSERT_GE(out.size(), 14u + 20 + 8);
         EXPECT_EQ(Bytes(out.begin(), out.begin() + 6), (Bytes{0x02, 0, 0, 0, 0, 0x02}))
             << "back to the client's router";
         EXPECT_EQ(out[14 + 9], kProtocolIcmp);
         EXPECT_EQ(Bytes(out.begin() + 26, out.begin() + 30),
                   Bytes(kVip.bytes.begin(), kVip.bytes.begin() + 4));
         EXPECT_EQ(out[34], 3);
         EXPECT_EQ(out[35], 4);
         EXPECT_EQ(uint32_t{out[40]} << 8 | out[41], 1480u);
       }},
      {"an ICMP error too big once encapsulated: never answered with another",
       [] {
         const Bytes embedded = concat({ipv4(kVip, kClient, kProtocolTcp, 20), tcp(80, 40000)});
         return concat(
             {ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 9, 9), kVip, kProtocolIcmp, 8 + embedded.size() + 1440),
              icmp(3, 4), embedded, payload(1440)});
       },
       Verdict::kDrop, nullptr, "drop_too_big_not_answerable"},
      {"DF set and too big from a broadcast source: not answered, the error would go to all",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(IpAddress::v4(255, 255, 255, 255), kVip, kProtocolTcp, 20 + 1460),
                        tcp(40000, 80), payload(1460)});
       },
       Verdict::kDrop, nullptr, "drop_too_big_not_answerable"},
      {"DF clear and too big once encapsulated: counted and dropped, berth does not fragment",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(kClient, kVip, kProtocolTcp, 20 + 1470, {.flags_and_offset = 0}),
                        tcp(40000, 80), payload(1470)});
       },
       Verdict::kDrop, nullptr, "drop_too_big_fragmentable"},
      {"IPv6 too big once encapsulated: ICMPv6 packet too big with MTU 1460",
       [] {
         return concat({ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 1460),
                        tcp(40000, 80), payload(1440)});
       },
       Verdict::kTransmit, nullptr, "icmp_too_big_replies",
       [](const Bytes& out) {
         ASSERT_GE(out.size(), 14u + 40 + 8);
         EXPECT_EQ(out[14 + 6], kProtocolIcmpv6);
         EXPECT_EQ(out[54], 2) << "packet too big";
         EXPECT_EQ(uint32_t{out[60]} << 8 | out[61], 1460u);
       }},
      {"ARP for the port's address: answered with the port's MAC",
       [] { return arpRequest(kPort4, kClient); }, Verdict::kTransmit, nullptr, "arp_nd_replies",
       [](const Bytes& out) {
         EXPECT_EQ(out[21], 2) << "an ARP reply";
         EXPECT_EQ(Bytes(out.begin() + 22, out.begin() + 28),
                   Bytes(kPortMac.bytes.begin(), kPortMac.bytes.end()));
         EXPECT_EQ(Bytes(out.begin() + 28, out.begin() + 32),
                   Bytes(kPort4.bytes.begin(), kPort4.bytes.begin() + 4));
       }},
      {"ARP for a VIP with announce: arp: answered", [] { return arpRequest(kVip, kClient); },
       Verdict::kTransmit, nullptr, "arp_nd_replies",
       [](const Bytes& out) {
         EXPECT_EQ(Bytes(out.begin() + 28, out.begin() + 32),
                   Bytes(kVip.bytes.begin(), kVip.bytes.begin() + 4));
       }},
      {"ARP for a VIP without announce: not answered",
       [] { return arpRequest(kVipUnresolved, kClient); }, Verdict::kDrop, nullptr,
       "drop_arp_nd_not_answered"},
      {"neighbour solicitation for the port's IPv6 address: answered",
       [] { return neighborSolicitationFor(kPort6); }, Verdict::kTransmit, nullptr,
       "arp_nd_replies",
       [](const Bytes& out) { EXPECT_EQ(out[54], 136) << "a neighbour advertisement"; }},
      {"a frame for another host's MAC: not for us",
       [] { return withDestinationMac(tcp4To(kVip, 80), *MacAddress::parse("02:00:00:00:00:99")); },
       Verdict::kDrop, nullptr, "drop_not_for_us"},
      {"no service at the VIP's port", [] { return tcp4To(kVip, 8080); }, Verdict::kDrop, nullptr,
       "drop_no_service"},
      {"an ethertype berth does not handle",
       [] {
         return concat({ethernet(0x88CC), payload(46)});
       },
       Verdict::kDrop, nullptr, "drop_other_ethertype"},
      {"every backend drained: no backend", [] { return tcp4To(kVipDrained, 80); }, Verdict::kDrop,
       nullptr, "drop_no_backend"},
      {"l2dsr backend whose MAC is not known yet: never sent to a wrong address",
       [] { return tcp4To(kVipUnresolved, 80); }, Verdict::kDrop, nullptr,
       "drop_next_hop_unresolved"},
      // Each malformed case the parser names, as the pipeline counts it.
      {"short frame", [] { return Bytes(10, 0); }, Verdict::kDrop, nullptr, "parse_short_frame"},
      {"IHL below 5",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(kClient, kVip, kProtocolTcp, 20, {.header_words = 4}), tcp(1, 80)});
       },
       Verdict::kDrop, nullptr, "parse_ipv4_ihl_below_5"},
      {"IPv4 total length beyond the frame",
       [] {
         return concat({ethernet(kEtherTypeIpv4),
                        ipv4(kClient, kVip, kProtocolTcp, 20, {.total_length = 400}), tcp(1, 80)});
       },
       Verdict::kDrop, nullptr, "parse_ipv4_total_length_beyond_frame"},
      {"IPv6 payload length beyond the frame",
       [] {
         return concat(
             {ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, kProtocolTcp, 400), tcp(1, 80)});
       },
       Verdict::kDrop, nullptr, "parse_ipv6_payload_length_beyond_frame"},
      {"IPv6 extension chain running off the end",
       [] {
         return concat(
             {ethernet(kEtherTypeIpv6), ipv6(kClient6, kVip6, 0, 8), ipv6Extension(60, 3)});
       },
       Verdict::kDrop, nullptr, "parse_ipv6_extension_chain_truncated"},
      {"truncated TCP header",
       [] {
         return concat(
             {ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 10), Bytes(10, 0)});
       },
       Verdict::kDrop, nullptr, "parse_truncated_tcp"},
  };
  return kFixtures;
}

class PipelineFixtureTest : public ::testing::TestWithParam<size_t> {};

TEST_P(PipelineFixtureTest, GivesTheVerdictOutputAndCounter) {
  const Fixture& fixture = fixtures()[GetParam()];
  SCOPED_TRACE(fixture.description);
  static const std::unique_ptr<BuiltSnapshot> built = buildFrom(kConfig);
  const Bytes input = fixture.input();
  ReceivedFrame received(input);
  Counters counters;
  EXPECT_EQ(processFrame(*built->snapshot, 0, received.frame, counters.state), fixture.verdict);
  const Bytes output = received.sent();
  if (fixture.expected_output) {
    EXPECT_EQ(output, fixture.expected_output(input));
  }
  if (fixture.check) fixture.check(output);
  if (!fixture.counter.empty()) {
    EXPECT_EQ(counters.read(fixture.counter), 1u);
    EXPECT_EQ(counters.total(), 1u) << "nothing else counted";
  } else {
    EXPECT_EQ(counters.total(), 0u) << "a forwarded packet counts only its service and backend";
  }
  if (fixture.verdict == Verdict::kDrop) {
    EXPECT_EQ(output, input) << "a dropped frame is left alone";
  }
}

// Every fixture again with a connection table: the first packet of the flow (a miss) and a second
// one (a hit, where the first reached a backend and was not an ICMP error, which creates no
// connection) give the same verdict and bytes as without one.
TEST_P(PipelineFixtureTest, GivesTheSameWithAConnectionTableOnMissAndHit) {
  const Fixture& fixture = fixtures()[GetParam()];
  SCOPED_TRACE(fixture.description);
  static const std::unique_ptr<BuiltSnapshot> built = buildFrom(kConfig);
  Counters counters;
  counters.trackConnections();
  const Bytes input = fixture.input();
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "first packet" : "second packet");
    ReceivedFrame received(input);
    EXPECT_EQ(processFrame(*built->snapshot, 0, received.frame, counters.state), fixture.verdict);
    if (fixture.expected_output) {
      EXPECT_EQ(received.sent(), fixture.expected_output(input));
    }
    if (fixture.check) fixture.check(received.sent());
  }
  if (fixture.expected_output && fixture.verdict == Verdict::kTransmit) {
    const bool icmp_error = fixture.description.rfind("ICMP error", 0) == 0;
    EXPECT_EQ(counters.read("conntrack_misses"), icmp_error ? 2u : 1u);
    EXPECT_EQ(counters.read("conntrack_inserts"), icmp_error ? 0u : 1u);
    EXPECT_EQ(counters.read("conntrack_hits"), icmp_error ? 0u : 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineFixtureTest,
                         ::testing::Range(size_t{0}, fixtures().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return absl::StrCat(info.param, "_",
                                               testNameOf(fixtures()[info.param].description, 48));
                         });

constexpr char kManyBackends[] = R"(
dataplane:
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 65537
    backends:
      - { name: web-3, address: 198.18.3.2 }
      - { name: web-1, address: 198.18.1.2, weight: 2 }
      - { name: web-2, address: 198.18.2.2 }
      - { name: web-4, address: 198.18.4.2 }
)";

IpAddress outerDestination(const Bytes& sent) {
  IpAddress address;
  std::copy(sent.begin() + 30, sent.begin() + 34, address.bytes.begin());
  return address;
}

TEST(PipelineTest, EachFlowGoesToTheBackendTheTablePicksAndIsCountedThere) {
  const std::unique_ptr<BuiltSnapshot> built = buildFrom(kManyBackends);
  const Table& table = built->tables[0];
  Counters counters;
  std::map<std::string, uint64_t> expected_packets;
  for (uint16_t port = 1000; port < 3000; ++port) {
    const Bytes frame =
        concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(port, 80)});
    ReceivedFrame received(frame);
    ASSERT_EQ(processFrame(*built->snapshot, 0, received.frame, counters.state),
              Verdict::kTransmit);
    const std::string& picked = table.backends()[table.lookup(hashOf(frame))].name;
    const BackendConfig* expected = nullptr;
    for (const BackendConfig& backend : built->config.services[0].backends) {
      if (backend.name == picked) expected = &backend;
    }
    ASSERT_NE(expected, nullptr);
    EXPECT_EQ(outerDestination(received.sent()), expected->address) << "source port " << port;
    ++expected_packets[picked];
  }
  for (const auto& [name, packets] : expected_packets) {
    const uint32_t id = *built->ids.backend("web", name);
    EXPECT_EQ(counters.state.traffic.backends[id].packets.read(), packets) << name;
  }
  EXPECT_EQ(counters.state.traffic.services[*built->ids.service("web")].packets.read(), 2000u);
}

TEST(PipelineTest, AnIcmpErrorReachesTheBackendOfTheFlowItIsAbout) {
  const std::unique_ptr<BuiltSnapshot> built = buildFrom(kManyBackends);
  Counters counters;
  for (uint16_t port = 1000; port < 1100; ++port) {
    ReceivedFrame flow(
        concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20), tcp(port, 80)}));
    ASSERT_EQ(processFrame(*built->snapshot, 0, flow.frame, counters.state), Verdict::kTransmit);
    const Bytes embedded = concat({ipv4(kVip, kClient, kProtocolTcp, 20), tcp(80, port)});
    ReceivedFrame error(concat({ethernet(kEtherTypeIpv4),
                                ipv4(IpAddress::v4(198, 18, 9, 9), kVip, kProtocolIcmp, 8 + 40),
                                icmp(11, 0), embedded}));
    ASSERT_EQ(processFrame(*built->snapshot, 0, error.frame, counters.state), Verdict::kTransmit);
    EXPECT_EQ(outerDestination(error.sent()), outerDestination(flow.sent())) << "port " << port;
  }
}

// A flood of oversized DF packets gets dataplane.icmp's burst of replies, then its rate; the rest
// are dropped and counted.
TEST(PipelineTest, TooBigRepliesAreLimitedPerWorker) {
  std::string yaml = kConfig;
  yaml.insert(yaml.find("services:"), "  icmp: { too_big_per_second: 50, too_big_burst: 20 }\n");
  const std::unique_ptr<BuiltSnapshot> built = buildFrom(yaml);
  ASSERT_EQ(built->snapshot->icmp().too_big_burst, 20u);
  Counters counters;
  const auto flood = [&](uint32_t now_ms, int packets) {
    counters.state.now_ms = now_ms;
    int replies = 0;
    for (int i = 0; i < packets; ++i) {
      ReceivedFrame received(tcp4To(kVip, 80, 1500 - 40));
      if (processFrame(*built->snapshot, 0, received.frame, counters.state) == Verdict::kTransmit) {
        ++replies;
      }
    }
    return replies;
  };
  EXPECT_EQ(flood(1000, 1000), 20);
  EXPECT_EQ(flood(2000, 1000), 20) << "50 a second, but no more than the burst at once";
  EXPECT_EQ(flood(2100, 1000), 5);
  EXPECT_EQ(counters.read("icmp_too_big_replies"), 45u);
  EXPECT_EQ(counters.read("drop_too_big_rate_limited"), 2955u);
}

}  // namespace
}  // namespace berth
