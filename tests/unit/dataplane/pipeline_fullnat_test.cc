// The pipeline in fullnat mode (docs/fullnat.md): a client's packet leaves from a local address
// and port to the backend, the backend's reply comes back from the VIP to the client, through
// the worker's own session table; ICMP errors are translated both ways; what cannot be NAT'd
// (a stray ACK, a reply without a session, a fragment, an exhausted pool) is dropped under its
// own counter and hurts no session that exists.

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "berth/config/loader.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/pipeline.h"
#include "berth/dataplane/proxy_stream.h"
#include "berth/net/toeplitz.h"
#include "support/checksums.h"
#include "support/counters.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_worker.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's
const MacAddress kGatewayMac = *MacAddress::parse("02:00:00:00:00:fe");
const MacAddress kBackendMac = *MacAddress::parse("02:00:00:00:01:02");
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);
const IpAddress kBackend6 = *IpAddress::parse("2001:db8:1::2");
const IpAddress kLocal6 = *IpAddress::parse("2001:db8:1::20");
const IpAddress kRouter = IpAddress::v4(198, 18, 0, 254);
constexpr uint32_t kUplink = 0;
constexpr uint32_t kDownlink = 1;

// Two-arm: clients come in on `up`, whose gateway the replies go back to; backends sit on
// `down`'s segment with its local addresses, two IPv4 ones of `ports` ports each and one IPv6.
std::string configWith(const std::string& ports = "20000-20099",
                       const std::string& backends = "a") {
  std::string yaml = absl::StrCat(R"(
dataplane:
  ports:
    - { name: up, device: net_null0, ipv4: 198.18.0.10, ipv6: "2001:db8::10",
        gateway_mac: "02:00:00:00:00:fe", egress: down }
    - { name: down, device: net_null1, ipv4: 198.18.1.10, ipv6: "2001:db8:1::10",
        snat_addresses: [198.18.1.20, 198.18.1.21, "2001:db8:1::20"], snat_ports: )",
                                  ports, R"( }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: fullnat
    backends:
)");
  for (const char name : backends) {
    const int host = 2 + (name - 'a');
    absl::StrAppend(&yaml, "      - { name: ", std::string(1, name), ", address: 198.18.1.", host,
                    ", mac: \"02:00:00:00:01:0", host, "\" }\n");
  }
  absl::StrAppend(&yaml, R"(
  - { name: dns, vip: 198.18.100.1, port: 53, protocol: udp, forwarding: fullnat,
      backends: [ { name: a, address: 198.18.1.2, mac: "02:00:00:00:01:02" } ] }
  - { name: web6, vip: "2001:db8:100::1", port: 80, protocol: tcp, forwarding: fullnat,
      backends: [ { name: a, address: "2001:db8:1::2", mac: "02:00:00:00:01:02" } ] }
)");
  return yaml;
}

Bytes udpFrame(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
               uint16_t destination_port, size_t length = 40) {
  const Bytes l4 = concat({udp(source_port, destination_port, length), payload(length)});
  return withChecksums(
      concat({ethernet(kEtherTypeIpv4), ipv4(source, destination, kProtocolUdp, l4.size()), l4}));
}

// What a frame says about itself after the pipeline: its MACs, addresses and ports.
struct Seen {
  MacAddress destination_mac;
  MacAddress source_mac;
  IpAddress source;
  IpAddress destination;
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
  uint32_t out_port = 0;
};

Seen seen(const Bytes& sent, uint32_t out_port) {
  Seen what;
  std::copy(sent.begin(), sent.begin() + 6, what.destination_mac.bytes.begin());
  std::copy(sent.begin() + 6, sent.begin() + 12, what.source_mac.bytes.begin());
  ParsedPacket packet;
  EXPECT_EQ(parsePacket(sent.data(), sent.size(), packet), ParseError::kNone);
  what.source = IpAddress{packet.flow.family, packet.flow.source};
  what.destination = IpAddress{packet.flow.family, packet.flow.destination};
  what.source_port =
      static_cast<uint16_t>(packet.flow.source_port >> 8 | packet.flow.source_port << 8);
  what.destination_port =
      static_cast<uint16_t>(packet.flow.destination_port >> 8 | packet.flow.destination_port << 8);
  what.out_port = out_port;
  return what;
}

// One worker with a session table, and the snapshot of a config. Each worker has queue
// `queue`: where the replies of the sessions it opens must come in.
class FullNatHarness {
 public:
  explicit FullNatHarness(const std::string& yaml = configWith(), uint32_t sessions = 4096,
                          uint16_t queue = 0)
      : session_buckets_(NatSessionTable::sessionBucketsFor(sessions)),
        client_buckets_(NatSessionTable::clientBucketsFor(sessions)),
        spaces_(NatSessionTable::spacesFor(sessions)),
        nat_(memory(), sessions, ConntrackTimeouts{}, &worker_.counters.nat, kTestWorkerHashKey) {
    nat_.countConnectionsIn(worker_.state.traffic);
    worker_.state.nat = &nat_;
    worker_.state.queue = queue;
    use(yaml);
  }

  void use(const std::string& yaml, const std::vector<std::string>& unhealthy = {},
           absl::Span<const std::shared_ptr<const ReplySteering>> steering = {}) {
    absl::StatusOr<Config> config = parseConfig(yaml, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    tables_ = *buildServiceTables(config_);
    if (!unhealthy.empty()) {
      std::vector<bool> healthy(tables_[0].backends().size(), true);
      for (const std::string& name : unhealthy) healthy[*tables_[0].indexOf(name)] = false;
      tables_[0] = *withHealth(tables_[0], healthy);
    }
    std::vector<ServiceInput> inputs;
    for (size_t s = 0; s < tables_.size(); ++s) inputs.push_back({config_.services[s], tables_[s]});
    const std::vector<MacAddress> macs(config_.dataplane.ports.size(), kPortMac);
    absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
        buildSnapshot(config_.dataplane, inputs, macs, {}, ids_, ++generation_, {}, steering);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_ = *std::move(snapshot);
  }

  // The frame through the pipeline as received on port `port`: what it left as, or nullopt
  // for a drop.
  std::optional<Seen> deliver(const Bytes& frame, uint32_t port, Bytes* sent = nullptr) {
    ReceivedFrame received(frame);
    if (processFrame(*snapshot_, port, received.frame, worker_.state) != Verdict::kTransmit) {
      return std::nullopt;
    }
    if (sent != nullptr) *sent = received.sent();
    EXPECT_TRUE(checksumsVerify(received.sent()));
    return seen(received.sent(), received.frame.port);
  }

  // The pipeline's verdict on the frame as received on port `port`, and the queue it names as
  // the owner of the frame's session where it hands the frame off.
  Verdict verdictOf(const Bytes& frame, uint32_t port, uint8_t* owner_queue = nullptr) {
    ReceivedFrame received(frame);
    const Verdict verdict = processFrame(*snapshot_, port, received.frame, worker_.state);
    if (owner_queue != nullptr) *owner_queue = received.frame.owner_queue;
    return verdict;
  }

  uint64_t count(NatEvent event) const { return worker_.counters.nat.read(event); }
  uint64_t count(DropReason reason) const {
    return worker_.counters.drops[static_cast<size_t>(reason)].read();
  }
  NatSessionTable& sessions() { return nat_; }
  void advance(uint32_t ms) { worker_.state.now_ms += ms; }
  // One sweep over the whole session table at the worker's time.
  void sweepAll() {
    nat_.sweep(worker_.state.now_ms, static_cast<uint32_t>(session_buckets_.size()));
  }
  const Snapshot& snapshot() const { return *snapshot_; }
  uint64_t serviceConnections(const std::string& name) const {
    return worker_.services[*ids_.findService(name)].connections.read();
  }

 private:
  NatSessionMemory memory() {
    NatSessionMemory memory;
    memory.sessions = session_buckets_.data();
    memory.session_buckets = session_buckets_.size();
    memory.clients = client_buckets_.data();
    memory.client_buckets = client_buckets_.size();
    memory.spaces = spaces_.data();
    memory.space_count = spaces_.size();
    return memory;
  }

  TestWorker worker_;
  std::vector<NatSessionBucket> session_buckets_;
  std::vector<NatClientBucket> client_buckets_;
  std::vector<NatPortSpace> spaces_;
  NatSessionTable nat_;
  Config config_;
  std::vector<Table> tables_;
  CounterIds ids_;
  uint64_t generation_ = 0;
  std::unique_ptr<const Snapshot> snapshot_;
};

TEST(PipelineFullNatTest, AClientsSynLeavesFromALocalAddressAndTheReplyComesBackFromTheVip) {
  FullNatHarness harness;
  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->out_port, kDownlink);
  EXPECT_EQ(out->destination_mac, kBackendMac);
  EXPECT_EQ(out->source_mac, kPortMac);
  EXPECT_EQ(out->destination, kBackend);
  EXPECT_EQ(out->destination_port, 80);
  EXPECT_THAT(out->source.toString(), testing::AnyOf("198.18.1.20", "198.18.1.21"));
  EXPECT_GE(out->source_port, 20000);
  EXPECT_LE(out->source_port, 20099);
  EXPECT_EQ(harness.count(NatEvent::kOpened), 1u);
  EXPECT_EQ(harness.serviceConnections("web"), 1u);

  // The backend answers the local address and port; the client sees the VIP answer.
  const std::optional<Seen> back = harness.deliver(
      tcpFrame(kBackend, out->source, 80, out->source_port, kTcpSyn | kTcpAck), kDownlink);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->out_port, kUplink);
  EXPECT_EQ(back->destination_mac, kGatewayMac);
  EXPECT_EQ(back->source, kVip);
  EXPECT_EQ(back->source_port, 80);
  EXPECT_EQ(back->destination, kClient);
  EXPECT_EQ(back->destination_port, 40000);

  // The client's next packets take the same local port, to the same backend.
  for (int i = 0; i < 3; ++i) {
    const std::optional<Seen> again =
        harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpAck), kUplink);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->source, out->source);
    EXPECT_EQ(again->source_port, out->source_port);
    EXPECT_EQ(again->destination, kBackend);
  }
  EXPECT_EQ(harness.count(NatEvent::kOpened), 1u);
  EXPECT_EQ(harness.sessions().live(), 1u);
}

TEST(PipelineFullNatTest, IpV6ClientsReachIpV6BackendsThroughTheIpV6LocalAddress) {
  FullNatHarness harness;
  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient6, kVip6, 40000, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->source, kLocal6);
  EXPECT_EQ(out->destination, kBackend6);
  const std::optional<Seen> back = harness.deliver(
      tcpFrame(kBackend6, kLocal6, 80, out->source_port, kTcpSyn | kTcpAck), kDownlink);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->source, kVip6);
  EXPECT_EQ(back->destination, kClient6);
  EXPECT_EQ(back->destination_port, 40000);
}

TEST(PipelineFullNatTest, UdpDatagramsOpenASessionAndTheAnswerComesBack) {
  FullNatHarness harness;
  const std::optional<Seen> out = harness.deliver(udpFrame(kClient, kVip, 5353, 53), kUplink);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->destination, kBackend);
  EXPECT_EQ(out->destination_port, 53);
  const std::optional<Seen> back =
      harness.deliver(udpFrame(kBackend, out->source, 53, out->source_port, 300), kDownlink);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->source, kVip);
  EXPECT_EQ(back->source_port, 53);
  EXPECT_EQ(back->destination, kClient);
  EXPECT_EQ(back->destination_port, 5353);
}

// Only a SYN or a datagram takes a local port: a flood of ACKs of no session cannot drain the
// pool, and a reply that matches no session goes nowhere.
TEST(PipelineFullNatTest, StrayAcksAndUnmatchedRepliesAreDroppedAndCounted) {
  FullNatHarness harness;
  for (uint16_t port = 1000; port < 1100; ++port) {
    EXPECT_FALSE(harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpAck), kUplink));
  }
  EXPECT_EQ(harness.count(NatEvent::kClientNoSession), 100u);
  EXPECT_EQ(harness.count(NatEvent::kOpened), 0u);
  EXPECT_FALSE(harness.deliver(
      tcpFrame(kBackend, IpAddress::v4(198, 18, 1, 20), 80, 20000, kTcpSyn | kTcpAck), kDownlink));
  EXPECT_EQ(harness.count(NatEvent::kReplyNoSession), 1u);
  // From another port of the backend, or another backend, to a live session's local port: not
  // its reply.
  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(
      harness.deliver(tcpFrame(kBackend, out->source, 81, out->source_port, kTcpAck), kDownlink));
  EXPECT_FALSE(harness.deliver(
      tcpFrame(IpAddress::v4(198, 18, 1, 9), out->source, 80, out->source_port, kTcpAck),
      kDownlink));
  EXPECT_EQ(harness.count(NatEvent::kReplyNoSession), 3u);
}

// The health probes come from a local address on ports below the pool (docs/fullnat.md): with
// a kernel interface on the port, TCP and UDP to a local address outside the pool are the
// kernel's, in the health class when they come from a probed backend; the pool's ports stay the
// sessions'. Without one, they are replies that match no session.
TEST(PipelineFullNatTest, AProbesAnswerToALocalAddressBelowThePoolGoesToTheKernel) {
  std::string yaml = configWith();
  yaml.replace(yaml.find("snat_ports: 20000-20099"), 23,
               "snat_ports: 20000-20099, exception: { name: down0 }");
  yaml.replace(yaml.find("forwarding: fullnat\n"), 20,
               "forwarding: fullnat\n    health: { type: tcp }\n");
  FullNatHarness harness(yaml);
  const IpAddress local = IpAddress::v4(198, 18, 1, 20);
  EXPECT_EQ(harness.verdictOf(tcpFrame(kBackend, local, 80, 19936, kTcpSyn | kTcpAck), kDownlink),
            toKernel(ExceptionClass::kHealth));
  EXPECT_EQ(harness.verdictOf(tcpFrame(kBackend, local, 80, 19999, kTcpAck), kDownlink),
            toKernel(ExceptionClass::kHealth));
  EXPECT_EQ(
      harness.verdictOf(tcpFrame(kBackend6, kLocal6, 80, 19936, kTcpSyn | kTcpAck), kDownlink),
      toKernel(ExceptionClass::kOther))
      << "the IPv6 backend is not probed: another class, rate-limited on its own";
  EXPECT_EQ(harness.verdictOf(udpFrame(kBackend, local, 53, 100), kDownlink),
            toKernel(ExceptionClass::kOther));
  EXPECT_EQ(harness.verdictOf(tcpFrame(kBackend, local, 80, 20000, kTcpSyn | kTcpAck), kDownlink),
            Verdict::kDrop)
      << "the pool's first port is a session's";
  EXPECT_EQ(harness.count(NatEvent::kReplyNoSession), 1u);

  FullNatHarness bare;
  EXPECT_EQ(bare.verdictOf(tcpFrame(kBackend, local, 80, 19936, kTcpSyn | kTcpAck), kDownlink),
            Verdict::kDrop);
  EXPECT_EQ(bare.count(NatEvent::kReplyNoSession), 1u);
}

// berth does not reassemble: a fragment of a NAT'd datagram, either way, is dropped and
// counted (docs/fullnat.md).
TEST(PipelineFullNatTest, FragmentsAreDroppedAndCounted) {
  FullNatHarness harness;
  Ipv4Options first_fragment;
  first_fragment.flags_and_offset = 0x2000;  // more fragments, offset 0
  const Bytes l4 = concat({udp(5353, 53, 1000), payload(1000)});
  EXPECT_FALSE(
      harness.deliver(concat({ethernet(kEtherTypeIpv4),
                              ipv4(kClient, kVip, kProtocolUdp, l4.size(), first_fragment), l4}),
                      kUplink));
  Ipv4Options later_fragment;
  later_fragment.flags_and_offset = 100;
  EXPECT_FALSE(harness.deliver(
      concat({ethernet(kEtherTypeIpv4),
              ipv4(kBackend, IpAddress::v4(198, 18, 1, 20), kProtocolUdp, 100, later_fragment),
              payload(100)}),
      kDownlink));
  EXPECT_EQ(harness.count(DropReason::kNatFragment), 2u);
  EXPECT_EQ(harness.count(NatEvent::kOpened), 0u);
}

// ICMP errors about a session are translated for the other side: a router on the client's
// side that cannot pass the VIP's answer tells the backend about its own packet, and a router
// on the backend's side tells the client about the packet it sent to the VIP.
TEST(PipelineFullNatTest, IcmpErrorsAreTranslatedBothWays) {
  FullNatHarness harness;
  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(out.has_value());
  auto error = [](const IpAddress& router, const IpAddress& to, const Bytes& about) {
    const Bytes embedded(about.begin() + 14, about.begin() + 14 + 20 + 8);
    const Bytes message = concat({Bytes{3, 4, 0, 0, 0, 0, 0x05, 0x00}, embedded});
    return withChecksums(concat(
        {ethernet(kEtherTypeIpv4), ipv4(router, to, kProtocolIcmp, message.size()), message}));
  };
  // The VIP's answer, too big for the client's path.
  Bytes sent;
  ASSERT_TRUE(harness.deliver(error(kRouter, kVip, tcpFrame(kVip, kClient, 80, 40000, kTcpAck)),
                              kUplink, &sent));
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(sent.data(), sent.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.icmp_error);
  EXPECT_EQ(seen(sent, 0).destination_mac, kBackendMac);
  IpAddress outer_destination = IpAddress::v4(sent[30], sent[31], sent[32], sent[33]);
  EXPECT_EQ(outer_destination, kBackend);
  // The embedded packet is now the backend's to the local address and port (the parse states
  // an error's flow from the other side: local address to backend).
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.source), out->source);
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.destination), kBackend);

  // The client's packet, too big for the backend's path.
  ASSERT_TRUE(harness.deliver(error(IpAddress::v4(198, 18, 1, 254), out->source,
                                    tcpFrame(out->source, kBackend, out->source_port, 80, kTcpAck)),
                              kDownlink, &sent));
  ASSERT_EQ(parsePacket(sent.data(), sent.size(), packet), ParseError::kNone);
  EXPECT_EQ(seen(sent, 0).destination_mac, kGatewayMac);
  outer_destination = IpAddress::v4(sent[30], sent[31], sent[32], sent[33]);
  EXPECT_EQ(outer_destination, kClient);
  // Embedded: the client's packet to the VIP (stated from the other side: VIP to client).
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.source), kVip);
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.destination), kClient);

  // An error about no session is dropped.
  EXPECT_FALSE(
      harness.deliver(error(kRouter, kVip, tcpFrame(kVip, kClient, 80, 40001, kTcpAck)), kUplink));
  EXPECT_EQ(harness.count(NatEvent::kIcmpNoSession), 1u);
}

// NAT64: an IPv6 client's connection to an IPv6 VIP reaches an IPv4 backend from an IPv4 local
// address, and the backend's answer reaches the client as IPv6 from the VIP; an answer that
// would no longer fit the clients' port as IPv6 has the backend told the MTU; ICMP errors are
// translated between the versions both ways, with the MTUs adjusted.
TEST(PipelineFullNatTest, Nat64TranslatesAnIpv6ClientsConnectionToAnIpv4Backend) {
  FullNatHarness harness(configWith() + R"(
  - { name: web64, vip: "2001:db8:100::1", port: 8080, protocol: tcp, forwarding: fullnat,
      backends: [ { name: a, address: 198.18.1.2, mac: "02:00:00:00:01:02" } ] }
)");
  Bytes sent;
  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient6, kVip6, 40000, 8080, kTcpSyn, 0), kUplink, &sent);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->out_port, kDownlink);
  EXPECT_EQ(out->destination, kBackend);
  EXPECT_EQ(out->destination_port, 8080);
  EXPECT_THAT(out->source.toString(), testing::AnyOf("198.18.1.20", "198.18.1.21"));
  EXPECT_EQ(sent.size(), 14u + 20 + 20);

  // The backend's SYN-ACK reaches the client as IPv6, from the VIP.
  const std::optional<Seen> back =
      harness.deliver(tcpFrame(kBackend, out->source, 8080, out->source_port, kTcpSyn | kTcpAck, 0),
                      kDownlink, &sent);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->out_port, kUplink);
  EXPECT_EQ(back->source, kVip6);
  EXPECT_EQ(back->source_port, 8080);
  EXPECT_EQ(back->destination, kClient6);
  EXPECT_EQ(back->destination_port, 40000);
  EXPECT_EQ(sent.size(), 14u + 40 + 20);

  // A full 1500-byte IPv4 answer would be 1520 bytes as IPv6: the backend is told 1480.
  ASSERT_TRUE(harness.deliver(
      tcpFrame(kBackend, out->source, 8080, out->source_port, kTcpAck, 1460), kDownlink, &sent));
  EXPECT_EQ(IpAddress::v4(sent[30], sent[31], sent[32], sent[33]), kBackend);
  EXPECT_EQ(sent[23], kProtocolIcmp);
  EXPECT_EQ((std::vector<uint8_t>{sent[34], sent[35], sent[40], sent[41]}),
            (std::vector<uint8_t>{3, 4, 1480 >> 8, 1480 & 0xFF}));

  // A router on the clients' side: packet too big (1280) about the VIP's answer, for the
  // backend as fragmentation needed (1260) about its own packet to the local address.
  const Bytes answer = tcpFrame(kVip6, kClient6, 8080, 40000, kTcpAck, 40);
  const Bytes too_big =
      concat({Bytes{2, 0, 0, 0, 0, 0, 0x05, 0x00}, Bytes(answer.begin() + 14, answer.end())});
  const IpAddress router6 = *IpAddress::parse("2001:db8::fe");
  ASSERT_TRUE(harness.deliver(
      withChecksums(concat({ethernet(kEtherTypeIpv6),
                            ipv6(router6, kVip6, kProtocolIcmpv6, too_big.size()), too_big})),
      kUplink, &sent));
  EXPECT_EQ(seen(sent, 0).destination_mac, kBackendMac);
  EXPECT_EQ(IpAddress::v4(sent[30], sent[31], sent[32], sent[33]), kBackend);
  EXPECT_EQ((std::vector<uint8_t>{sent[34], sent[35], sent[40], sent[41]}),
            (std::vector<uint8_t>{3, 4, 1260 >> 8, 1260 & 0xFF}));
  ParsedPacket packet;
  ASSERT_EQ(parsePacket(sent.data(), sent.size(), packet), ParseError::kNone);
  EXPECT_TRUE(packet.icmp_error);
  // The embedded packet: the backend's to the local address (stated from the other side).
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.source), out->source);
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.destination), kBackend);

  // A router on the backends' side: fragmentation needed (1400) about the client's packet,
  // for the client as packet too big (1420) about its own packet to the VIP.
  const Bytes segment = tcpFrame(out->source, kBackend, out->source_port, 8080, kTcpAck);
  const Bytes needed = concat({Bytes{3, 4, 0, 0, 0, 0, 1400 >> 8, 1400 & 0xFF},
                               Bytes(segment.begin() + 14, segment.begin() + 14 + 28)});
  ASSERT_TRUE(harness.deliver(withChecksums(concat({ethernet(kEtherTypeIpv4),
                                                    ipv4(IpAddress::v4(198, 18, 1, 254),
                                                         out->source, kProtocolIcmp, needed.size()),
                                                    needed})),
                              kDownlink, &sent));
  EXPECT_EQ(seen(sent, 0).destination_mac, kGatewayMac);
  ASSERT_EQ(parsePacket(sent.data(), sent.size(), packet), ParseError::kNone);
  EXPECT_EQ(packet.flow.family, IpFamily::kIpv6);
  EXPECT_EQ(sent[14 + 40], 2);  // packet too big
  EXPECT_EQ((std::vector<uint8_t>{sent[58], sent[59], sent[60], sent[61]}),
            (std::vector<uint8_t>{0, 0, 1420 >> 8, 1420 & 0xFF}));
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.source), kVip6);
  EXPECT_EQ(IpAddress(packet.flow.family, packet.flow.destination), kClient6);

  const FlowKey flow = FlowKey::make(kClient6, kVip6, 40000, 8080, kProtocolTcp);
  const uint32_t service = *harness.snapshot().findService(flow);
  const NatSession* session =
      harness.sessions().peekClient(natQuestionOf(harness.snapshot(), service, flow).client);
  ASSERT_NE(session, nullptr);
  EXPECT_THAT(describeSession(harness.snapshot(), *session),
              testing::StartsWith(absl::StrCat("[2001:db8::1]:40000 -> [2001:db8:100::1]:8080 | ",
                                               out->source.toString())));
  EXPECT_THAT(describeSession(harness.snapshot(), *session), testing::HasSubstr("NAT64"));
  EXPECT_EQ(harness.count(NatEvent::kNat64ToIpv4), 1u);
  EXPECT_EQ(harness.count(NatEvent::kNat64ToIpv6), 1u);
  EXPECT_EQ(harness.count(NatEvent::kNat64Icmp), 2u);
}

// A pool of 2 addresses x 100 ports holds 200 connections to one backend on one worker: the
// 201st is refused and counted, and the first 200 keep working, both ways.
TEST(PipelineFullNatTest, AnExhaustedPoolRefusesTheNextConnectionAndKeepsTheOthers) {
  FullNatHarness harness;
  std::map<uint16_t, Seen> opened;
  for (uint16_t port = 30000; port < 30200; ++port) {
    const std::optional<Seen> out =
        harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpSyn), kUplink);
    ASSERT_TRUE(out.has_value()) << port;
    opened[port] = *out;
  }
  std::set<std::pair<std::string, uint16_t>> tuples;
  for (const auto& [port, out] : opened) tuples.insert({out.source.toString(), out.source_port});
  EXPECT_EQ(tuples.size(), 200u) << "every connection its own local address and port";
  EXPECT_FALSE(harness.deliver(tcpFrame(kClient, kVip, 30200, 80, kTcpSyn), kUplink));
  EXPECT_EQ(harness.count(NatEvent::kPortsExhausted), 1u);
  for (const auto& [port, out] : opened) {
    const std::optional<Seen> again =
        harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpAck), kUplink);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->source_port, out.source_port);
    const std::optional<Seen> back =
        harness.deliver(tcpFrame(kBackend, out.source, 80, out.source_port, kTcpAck), kDownlink);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->destination_port, port);
  }
  EXPECT_EQ(harness.sessions().live(), 200u);
}

// A closed connection's local port is not taken again within the reuse hold (the backend's
// TIME_WAIT), and is free after it.
TEST(PipelineFullNatTest, AClosedConnectionsPortWaitsOutTheHoldBeforeReuse) {
  FullNatHarness harness(configWith("20000-20000"));
  // One port per address: two connections fill the pool. The second is answered, so it lives
  // on while the first closes.
  const std::optional<Seen> first =
      harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpSyn), kUplink);
  const std::optional<Seen> second =
      harness.deliver(tcpFrame(kClient, kVip, 40001, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(harness.deliver(
      tcpFrame(kBackend, second->source, 80, second->source_port, kTcpSyn | kTcpAck), kDownlink));
  ASSERT_TRUE(harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpRst | kTcpAck), kUplink));
  harness.advance(ConntrackTimeouts{}.tcp_closing_ms + 1);
  harness.sweepAll();
  EXPECT_EQ(harness.sessions().live(), 1u);
  EXPECT_EQ(harness.sessions().held(), 1u);
  EXPECT_FALSE(harness.deliver(tcpFrame(kClient, kVip, 40002, 80, kTcpSyn), kUplink))
      << "the closed connection's tuple is held";
  EXPECT_EQ(harness.count(NatEvent::kPortsExhausted), 1u);
  harness.advance(NatSessionTable::kDefaultReuseHoldMs + 1);
  harness.sweepAll();
  EXPECT_EQ(harness.count(NatEvent::kReleased), 1u);
  const std::optional<Seen> third =
      harness.deliver(tcpFrame(kClient, kVip, 40002, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->source, first->source);
  EXPECT_EQ(third->source_port, first->source_port);
}

// A backend that fails takes its sessions with it: the next packet of one ends it, counted,
// and the client's next SYN opens a session on the table's new pick. Other backends' sessions
// stay where they are.
TEST(PipelineFullNatTest, AFailedBackendsSessionsEndAndTheClientsNextSynGoesElsewhere) {
  FullNatHarness harness(configWith("20000-20099", "ab"));
  std::map<uint16_t, IpAddress> backend_of;
  for (uint16_t port = 41000; port < 41040; ++port) {
    const std::optional<Seen> out =
        harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpSyn), kUplink);
    ASSERT_TRUE(out.has_value());
    backend_of[port] = out->destination;
  }
  harness.use(configWith("20000-20099", "ab"), {"a"});
  for (const auto& [port, backend] : backend_of) {
    const std::optional<Seen> again =
        harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpAck), kUplink);
    if (backend == kBackend) {
      EXPECT_FALSE(again.has_value()) << "its backend is gone";
      const std::optional<Seen> reopened =
          harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpSyn), kUplink);
      ASSERT_TRUE(reopened.has_value());
      EXPECT_NE(reopened->destination, kBackend);
    } else {
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->destination, backend) << "untouched";
    }
  }
  EXPECT_GT(harness.count(NatEvent::kBackendGone), 0u);
}

// explain states a fullnat flow from its session: both tuples, and the backend its next packet
// goes to; without a session, that only a SYN opens one.
TEST(PipelineFullNatTest, ExplainShowsTheSessionsTwoTuples) {
  FullNatHarness harness;
  const FlowKey flow = FlowKey::make(kClient, kVip, 40000, 80, kProtocolTcp);
  const uint32_t service = *harness.snapshot().findService(flow);
  FlowExplanation before = explainFlow(harness.snapshot(), flow, std::nullopt, true);
  EXPECT_THAT(before.reason, testing::HasSubstr("no worker holds a Full-NAT session"));
  EXPECT_THAT(before.reason, testing::HasSubstr("nat_client_no_session"));

  const std::optional<Seen> out =
      harness.deliver(tcpFrame(kClient, kVip, 40000, 80, kTcpSyn), kUplink);
  ASSERT_TRUE(out.has_value());
  const NatQuestion question = natQuestionOf(harness.snapshot(), service, flow);
  const NatSession* session = harness.sessions().peekClient(question.client);
  ASSERT_NE(session, nullptr);
  TrackedConnection tracked{0, Connection{}, false, 5, *session};
  const FlowExplanation explained = explainFlow(harness.snapshot(), flow, tracked, true);
  EXPECT_TRUE(explained.tracked);
  EXPECT_EQ(harness.snapshot().backend(explained.next_backend).address, kBackend);
  EXPECT_EQ(describeSession(harness.snapshot(), *session),
            absl::StrCat("198.18.0.1:40000 -> 198.18.100.1:80 | ", out->source.toString(), ":",
                         out->source_port, " -> 198.18.1.2:80 (a), tcp_opening"));

  // The reply's side finds the same session.
  const FlowKey reply = FlowKey::make(kBackend, out->source, 80, out->source_port, kProtocolTcp);
  const std::optional<uint16_t> local = natLocalAddressOf(harness.snapshot(), reply);
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(harness.sessions().peekReply(natReplyQuestionOf(reply, *local).reply), session);
  EXPECT_FALSE(natLocalAddressOf(harness.snapshot(), flow).has_value()) << "the VIP is not one";
}

// A TCP segment with sequence and acknowledgement numbers, `length` bytes of data.
Bytes numberedSegment(const IpAddress& source, const IpAddress& destination, uint16_t source_port,
                      uint16_t destination_port, uint8_t flags, uint32_t sequence,
                      uint32_t acknowledgement, size_t length = 0) {
  Bytes frame = tcpFrame(source, destination, source_port, destination_port, flags, length);
  const size_t tcp = 14 + (source.isV4() ? 20 : 40);
  putBigEndian16(frame, tcp + 4, static_cast<uint16_t>(sequence >> 16));
  putBigEndian16(frame, tcp + 6, static_cast<uint16_t>(sequence));
  putBigEndian16(frame, tcp + 8, static_cast<uint16_t>(acknowledgement >> 16));
  putBigEndian16(frame, tcp + 10, static_cast<uint16_t>(acknowledgement));
  putBigEndian16(frame, tcp + 14, 1000);
  return withChecksums(frame);
}

uint32_t numberAt(const Bytes& frame, size_t at) {
  return uint32_t{frame[at]} << 24 | uint32_t{frame[at + 1]} << 16 | uint32_t{frame[at + 2]} << 8 |
         frame[at + 3];
}

// `proxy_protocol: v2`: the ACK that ends the client's handshake reaches the backend with the
// header naming the client and the VIP; the client's later bytes are shifted by its length, the
// backend's acknowledgements come back into the client's numbering, and explain says so. A
// session opened before the service turned it on goes on without one.
TEST(PipelineFullNatTest, AProxyProtocolServicePutsTheHeaderInFrontOfTheClientsBytes) {
  const std::string plain = configWith();
  const std::string proxied =
      absl::StrReplaceAll(plain, {{"forwarding: fullnat\n    backends:",
                                   "forwarding: fullnat\n    proxy_protocol: v2\n    backends:"}});
  ASSERT_NE(proxied, plain);
  FullNatHarness harness(proxied);
  constexpr size_t kTcp = 14 + 20;
  Bytes sent;
  const std::optional<Seen> out =
      harness.deliver(numberedSegment(kClient, kVip, 40000, 80, kTcpSyn, 1000, 0), kUplink, &sent);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(numberAt(sent, kTcp + 4), 1000u) << "the SYN passes as it came";
  // The backend's SYN-ACK: its acknowledgement passes (the stream starts there).
  ASSERT_TRUE(harness.deliver(
      numberedSegment(kBackend, out->source, 80, out->source_port, kTcpSyn | kTcpAck, 7000, 1001),
      kDownlink, &sent));
  EXPECT_EQ(numberAt(sent, kTcp + 8), 1001u);
  // The client's ACK: the header alone, at the stream's start.
  ASSERT_TRUE(harness.deliver(numberedSegment(kClient, kVip, 40000, 80, kTcpAck, 1001, 7001),
                              kUplink, &sent));
  ProxyEndpoints endpoints;
  endpoints.source = kClient.bytes;
  endpoints.destination = kVip.bytes;
  endpoints.source_port = htons(40000);
  endpoints.destination_port = htons(80);
  Bytes header(kProxyHeaderMaxLength);
  header.resize(encodeProxyHeader(endpoints, header.data()));
  EXPECT_EQ(Bytes(sent.begin() + kTcp + 20, sent.end()), header);
  EXPECT_EQ(numberAt(sent, kTcp + 4), 1001u);
  EXPECT_EQ(harness.count(NatEvent::kProxyHeaderSent), 1u);
  // The backend acknowledges it; the client sees its own start acknowledged.
  ASSERT_TRUE(harness.deliver(
      numberedSegment(kBackend, out->source, 80, out->source_port, kTcpAck, 7001, 1001 + 28),
      kDownlink, &sent));
  EXPECT_EQ(numberAt(sent, kTcp + 8), 1001u);
  // The request: shifted past the header.
  ASSERT_TRUE(harness.deliver(numberedSegment(kClient, kVip, 40000, 80, kTcpAck, 1001, 7001, 100),
                              kUplink, &sent));
  EXPECT_EQ(numberAt(sent, kTcp + 4), 1001u + 28);
  EXPECT_EQ(sent.size(), kTcp + 20 + 100);
  EXPECT_EQ(harness.count(NatEvent::kProxyHeaderSent), 1u);

  const FlowKey flow = FlowKey::make(kClient, kVip, 40000, 80, kProtocolTcp);
  const uint32_t service = *harness.snapshot().findService(flow);
  const NatSession* session =
      harness.sessions().peekClient(natQuestionOf(harness.snapshot(), service, flow).client);
  ASSERT_NE(session, nullptr);
  EXPECT_THAT(describeSession(harness.snapshot(), *session),
              testing::EndsWith("tcp_established, PROXY header acknowledged (the client's bytes "
                                "+28 toward the backend)"));

  // The service without the header again: a new session sends none, the open one keeps its.
  harness.use(plain);
  ASSERT_TRUE(harness.deliver(numberedSegment(kClient, kVip, 40000, 80, kTcpAck, 1101, 7001, 10),
                              kUplink, &sent));
  EXPECT_EQ(numberAt(sent, kTcp + 4), 1101u + 28);
  ASSERT_TRUE(
      harness.deliver(numberedSegment(kClient, kVip, 40001, 80, kTcpSyn, 5000, 0), kUplink));
  ASSERT_TRUE(
      harness.deliver(numberedSegment(kClient, kVip, 40001, 80, kTcpAck, 5001, 1), kUplink, &sent));
  EXPECT_EQ(sent.size(), kTcp + 20) << "no header";
  EXPECT_EQ(numberAt(sent, kTcp + 4), 5001u);
}

// With RSS, each worker takes only local ports whose replies the NIC brings back to its own
// queue: a random key and a symmetric one, four queues, a 128-entry table.
TEST(PipelineFullNatTest, EachWorkersRepliesComeBackToItsOwnQueue) {
  for (const bool symmetric : {false, true}) {
    RssSpread spread;
    spread.key.resize(40);
    for (size_t i = 0; i < spread.key.size(); ++i) {
      spread.key[i] = symmetric ? (i % 2 == 0 ? 0x6d : 0x5a) : static_cast<uint8_t>(i * 37 + 11);
    }
    for (uint16_t i = 0; i < 128; ++i) spread.reta.push_back(i % 4);
    const std::string yaml = configWith("1024-65535");
    const Config config = *parseConfig(yaml, "test.yaml");
    const std::vector<std::shared_ptr<const ReplySteering>> steering =
        *portReplySteering(config.dataplane, {RssSpread{}, spread});
    for (uint16_t queue = 0; queue < 4; ++queue) {
      FullNatHarness harness(yaml, 4096, queue);
      harness.use(yaml, {}, steering);
      for (uint16_t port = 42000; port < 42050; ++port) {
        const std::optional<Seen> out =
            harness.deliver(tcpFrame(kClient, kVip, port, 80, kTcpSyn), kUplink);
        ASSERT_TRUE(out.has_value());
        // The reply's 5-tuple as the NIC hashes it: backend to local address, ports included.
        std::vector<uint8_t> input;
        input.insert(input.end(), kBackend.bytes.begin(), kBackend.bytes.begin() + 4);
        input.insert(input.end(), out->source.bytes.begin(), out->source.bytes.begin() + 4);
        input.insert(input.end(), {0, 80, static_cast<uint8_t>(out->source_port >> 8),
                                   static_cast<uint8_t>(out->source_port)});
        EXPECT_EQ(spread.reta[toeplitzHash(spread.key, input) & 127], queue)
            << (symmetric ? "symmetric" : "random") << " key, queue " << queue;
      }
    }
  }
}

// An ICMP error is hashed by the NIC on its own addresses, so it may come to any worker. The
// worker that holds its session is the one whose queue the session's own packets come to: any
// other hands the error to it, from the client's side and from the backend's, and it translates
// the error as the one-worker case does.
TEST(PipelineFullNatTest, AnIcmpErrorAboutAnotherWorkersSessionIsHandedToThatWorker) {
  RssSpread spread;
  for (size_t i = 0; i < 40; ++i) spread.key.push_back(static_cast<uint8_t>(i * 53 + 7));
  for (uint16_t i = 0; i < 128; ++i) spread.reta.push_back(i % 4);
  const std::string yaml = configWith("1024-65535");
  const Config config = *parseConfig(yaml, "test.yaml");
  const std::vector<std::shared_ptr<const ReplySteering>> steering =
      *portReplySteering(config.dataplane, {spread, spread});
  ASSERT_NE(steering[kUplink], nullptr) << "the clients' port has RSS, if no local address";
  std::vector<std::unique_ptr<FullNatHarness>> workers;
  for (uint16_t queue = 0; queue < 4; ++queue) {
    workers.push_back(std::make_unique<FullNatHarness>(yaml, 4096, queue));
    workers.back()->use(yaml, {}, steering);
  }
  auto error = [](const IpAddress& router, const IpAddress& to, const Bytes& about) {
    const Bytes embedded(about.begin() + 14, about.begin() + 14 + 20 + 8);
    const Bytes message = concat({Bytes{3, 4, 0, 0, 0, 0, 0x05, 0x00}, embedded});
    return withChecksums(concat(
        {ethernet(kEtherTypeIpv4), ipv4(router, to, kProtocolIcmp, message.size()), message}));
  };
  std::set<uint16_t> owners;
  for (uint16_t client_port = 43000; client_port < 43040; ++client_port) {
    // The client's SYN comes to the queue RSS gives its tuple, computed here on its own.
    const std::vector<uint8_t> input = {198,
                                        18,
                                        0,
                                        1,
                                        198,
                                        18,
                                        100,
                                        1,
                                        static_cast<uint8_t>(client_port >> 8),
                                        static_cast<uint8_t>(client_port),
                                        0,
                                        80};
    const uint16_t owner = spread.reta[toeplitzHash(spread.key, input) & 127];
    owners.insert(owner);
    FullNatHarness& holder = *workers[owner];
    const std::optional<Seen> out =
        holder.deliver(tcpFrame(kClient, kVip, client_port, 80, kTcpSyn), kUplink);
    ASSERT_TRUE(out.has_value());
    const Bytes from_client_side =
        error(kRouter, kVip, tcpFrame(kVip, kClient, 80, client_port, kTcpAck));
    const Bytes from_backend_side =
        error(IpAddress::v4(198, 18, 1, 254), out->source,
              tcpFrame(out->source, kBackend, out->source_port, 80, kTcpAck));
    for (uint16_t queue = 0; queue < 4; ++queue) {
      if (queue == owner) continue;
      uint8_t named = UINT8_MAX;
      EXPECT_EQ(workers[queue]->verdictOf(from_client_side, kUplink, &named), Verdict::kHandOff);
      EXPECT_EQ(named, owner) << "client port " << client_port;
      EXPECT_EQ(workers[queue]->verdictOf(from_backend_side, kDownlink, &named), Verdict::kHandOff);
      EXPECT_EQ(named, owner) << "client port " << client_port;
    }
    // The owner translates both: the first for the backend, the second for the client.
    Bytes sent;
    ASSERT_TRUE(holder.deliver(from_client_side, kUplink, &sent));
    EXPECT_EQ(IpAddress::v4(sent[30], sent[31], sent[32], sent[33]), kBackend);
    ASSERT_TRUE(holder.deliver(from_backend_side, kDownlink, &sent));
    EXPECT_EQ(IpAddress::v4(sent[30], sent[31], sent[32], sent[33]), kClient);
  }
  EXPECT_EQ(owners.size(), 4u) << "the clients' connections spread over every worker";
  for (const auto& worker : workers) {
    EXPECT_EQ(worker->count(NatEvent::kIcmpNoSession), 0u);
    EXPECT_EQ(worker->count(NatEvent::kReplyNoSession), 0u);
  }
}

}  // namespace
}  // namespace berth
