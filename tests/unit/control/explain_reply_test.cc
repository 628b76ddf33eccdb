#include "berth/control/explain_reply.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "berth/api/request.h"
#include "berth/config/loader.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] = R"(dataplane:
  ports:
    - name: p0
      device: net_null0
      ipv4: 198.18.0.1
      gateway_mac: "02:00:00:00:00:fe"
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
)";

ControlRequest request(std::initializer_list<std::pair<std::string, std::string>> fields) {
  ControlRequest made;
  made.command = "explain";
  for (const auto& [key, value] : fields) made.fields[key] = value;
  return made;
}

class ExplainReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Config> config = parseConfig(kConfig, "explain.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    const std::vector<Table> tables = *buildServiceTables(config_);
    const MacAddress macs[] = {MacAddress::parse("02:00:00:00:00:01").value()};
    absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
        buildSnapshot(config_, tables, macs, {}, ids_, 4);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    snapshot_ = *std::move(snapshot);
  }

  FlowKey flow(const std::string& dst = "198.18.100.1:80") const {
    return *explainedFlow(request({{"src", "198.18.0.7:40000"}, {"dst", dst}}));
  }

  Config config_;
  CounterIds ids_;
  std::unique_ptr<const Snapshot> snapshot_;
};

TEST_F(ExplainReplyTest, TheFlowComesFromSrcDstAndProto) {
  absl::StatusOr<FlowKey> tcp =
      explainedFlow(request({{"src", "198.18.0.7:1"}, {"dst", "198.18.100.1:80"}}));
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(tcp->protocol, kProtocolTcp);
  EXPECT_EQ(explainedFlow(
                request({{"src", "198.18.0.7:1"}, {"dst", "198.18.100.1:80"}, {"proto", "udp"}}))
                ->protocol,
            kProtocolUdp);
  EXPECT_THAT(std::string(explainedFlow(request({{"src", "198.18.0.7:1"},
                                                 {"dst", "198.18.100.1:80"},
                                                 {"proto", "sctp"}}))
                              .status()
                              .message()),
              HasSubstr("--proto must be tcp or udp, not 'sctp'"));
  EXPECT_THAT(
      std::string(explainedFlow(request({{"src", "198.18.0.7"}, {"dst", "198.18.100.1:80"}}))
                      .status()
                      .message()),
      HasSubstr("--src: "));
  EXPECT_THAT(
      std::string(explainedFlow(request({{"src", "198.18.0.7:1"}, {"dst", "[2001:db8::1]:80"}}))
                      .status()
                      .message()),
      HasSubstr("must both be IPv4 or both IPv6"));
}

TEST_F(ExplainReplyTest, AFlowToNoServiceIsDropped) {
  const FlowKey to_nowhere = flow("198.18.100.9:80");
  const FlowExplanation explanation = explainFlow(*snapshot_, to_nowhere, std::nullopt, true);
  const std::string reply =
      explainReplyJson(*snapshot_, to_nowhere, explanation, true, std::nullopt, "", "");
  EXPECT_THAT(reply, HasSubstr(R"("service":null)"));
  EXPECT_THAT(reply, HasSubstr("no_service"));
  EXPECT_THAT(reply, HasSubstr("service:       none"));
}

// Untracked: the table's pick decides, and the reply names the slot, the pick and the listener.
TEST_F(ExplainReplyTest, AnUntrackedFlowGoesToTheTablesPick) {
  const FlowKey key = flow();
  const FlowExplanation explanation = explainFlow(*snapshot_, key, std::nullopt, true);
  ASSERT_TRUE(explanation.service.has_value());
  const std::string pick = snapshot_->backend(explanation.table_backend).name;
  const std::string reply =
      explainReplyJson(*snapshot_, key, explanation, true, std::nullopt, "", "tcp 198.18.100.1:80");
  EXPECT_THAT(reply, HasSubstr(R"("service":"web")"));
  EXPECT_THAT(reply, HasSubstr(R"("snapshot_generation":4)"));
  EXPECT_THAT(reply, HasSubstr(R"("conntrack":null)"));
  EXPECT_THAT(reply, HasSubstr(absl::StrCat(R"("next_backend":")", pick, "\"")));
  EXPECT_THAT(reply, HasSubstr(R"("dropped":false)"));
  EXPECT_THAT(reply, HasSubstr("web (tcp 198.18.100.1:80), hashing 5-tuple"));
  EXPECT_THAT(reply, HasSubstr("no worker tracks this flow"));

  const std::string off =
      explainReplyJson(*snapshot_, key, explainFlow(*snapshot_, key, std::nullopt, false), false,
                       std::nullopt, "worker(s) 1 did not answer in time", "");
  EXPECT_THAT(off, HasSubstr(R"("conntrack":"off")"));
  EXPECT_THAT(off, HasSubstr(R"("note":"worker(s) 1 did not answer in time")"));
}

// A next hop whose MAC is not known yet drops the packet, and the reply says so.
TEST_F(ExplainReplyTest, AnUnresolvedNextHopDropsThePacket) {
  config_.dataplane.ports[0].gateway_mac.reset();
  config_.dataplane.ports[0].gateway = IpAddress::v4(198, 18, 0, 254);
  const std::vector<Table> tables = *buildServiceTables(config_);
  const MacAddress macs[] = {MacAddress::parse("02:00:00:00:00:01").value()};
  const std::unique_ptr<const Snapshot> unresolved =
      *buildSnapshot(config_, tables, macs, {}, ids_, 5);
  const FlowKey key = flow();
  const std::string reply =
      explainReplyJson(*unresolved, key, explainFlow(*unresolved, key, std::nullopt, true), true,
                       std::nullopt, "", "tcp 198.18.100.1:80");
  EXPECT_THAT(reply, HasSubstr(R"("dropped":true)"));
  EXPECT_THAT(reply, HasSubstr("next_hop_unresolved"));
}

// A worker's entry for another backend keeps the flow there while that backend is healthy.
TEST_F(ExplainReplyTest, ATrackedFlowStaysOnItsBackend) {
  const FlowKey key = flow();
  const FlowExplanation untracked = explainFlow(*snapshot_, key, std::nullopt, true);
  const uint32_t other = untracked.table_backend == 0 ? 1 : 0;
  TrackedConnection tracked;
  tracked.worker = 1;
  tracked.connection.backend = static_cast<uint16_t>(snapshot_->backend(other).counter_id);
  tracked.connection.state = ConnectionState::kTcpEstablished;
  tracked.idle_ms = 250;
  const FlowExplanation explanation = explainFlow(*snapshot_, key, tracked, true);
  EXPECT_TRUE(explanation.tracked);
  EXPECT_EQ(explanation.next_backend, other);
  const std::string reply =
      explainReplyJson(*snapshot_, key, explanation, true, tracked, "", "tcp 198.18.100.1:80");
  EXPECT_THAT(reply, HasSubstr(absl::StrCat(R"("conntrack":{"worker":1,"state":")")));
  EXPECT_THAT(reply, HasSubstr(absl::StrCat(R"("backend":")", snapshot_->backend(other).name)));
  EXPECT_THAT(reply, HasSubstr(R"("tracked":true)"));
  EXPECT_THAT(reply, HasSubstr("idle 250 ms"));
  EXPECT_THAT(reply, HasSubstr(R"("from_peer":false,"shared_with_peers":false)"));

  // Flow sync: a connection adopted from a peer's record says so.
  tracked.connection.sync = kSyncAdopted;
  const std::string adopted =
      explainReplyJson(*snapshot_, key, explainFlow(*snapshot_, key, tracked, true), true, tracked,
                       "", "tcp 198.18.100.1:80");
  EXPECT_THAT(adopted, HasSubstr(R"("from_peer":true)"));
  EXPECT_THAT(adopted, HasSubstr("its backend from a peer's record"));
  tracked.connection.sync = kSyncExported;
  const std::string exported = explainReplyJson(
      *snapshot_, key, explainFlow(*snapshot_, key, tracked, true), true, tracked, "", "");
  EXPECT_THAT(exported, HasSubstr(R"("shared_with_peers":true)"));
}

// A backend's reply to a Full-NAT local address: the session it belongs to with both tuples,
// and where it goes; without a session, dropped as nat_reply_no_session.
TEST(ExplainNatReplyTest, AReplyShowsItsSessionAndWhereItGoes) {
  const Config config = *parseConfig(R"(dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.1, gateway_mac: "02:00:00:00:00:fe",
        snat_addresses: [198.18.0.20] }
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,
      backends: [ { name: web-1, address: 198.18.1.2 } ] }
)",
                                     "explain.yaml");
  const std::vector<Table> tables = *buildServiceTables(config);
  const MacAddress macs[] = {MacAddress::parse("02:00:00:00:00:01").value()};
  CounterIds ids;
  const std::unique_ptr<const Snapshot> snapshot = *buildSnapshot(config, tables, macs, {}, ids, 1);
  const FlowKey reply = FlowKey::make(IpAddress::v4(198, 18, 1, 2), IpAddress::v4(198, 18, 0, 20),
                                      80, 20001, kProtocolTcp);
  const std::optional<uint16_t> local = natLocalAddressOf(*snapshot, reply);
  ASSERT_TRUE(local.has_value());
  EXPECT_THAT(explainNatReplyJson(*snapshot, reply, *local, std::nullopt, ""),
              HasSubstr("dropped as nat_reply_no_session"));

  NatSession session{};
  session.client = IpAddress::v4(198, 18, 0, 7).bytes;
  session.client_port = htons(40000);
  session.backend = IpAddress::v4(198, 18, 1, 2).bytes;
  session.backend_port = htons(80);
  session.local_port = htons(20001);
  session.local_address = *local;
  session.backend_id = static_cast<uint16_t>(*ids.findBackend("web", "web-1"));
  session.service = static_cast<uint16_t>(*ids.findService("web"));
  session.state = ConnectionState::kTcpEstablished;
  session.client_family = session.backend_family = IpFamily::kIpv4;
  const std::string json = explainNatReplyJson(*snapshot, reply, *local,
                                               TrackedConnection{1, {}, false, 7, session}, "");
  EXPECT_THAT(json, HasSubstr("198.18.0.7:40000 -> 198.18.100.1:80 | 198.18.0.20:20001 -> "
                              "198.18.1.2:80 (web-1), tcp_established"));
  EXPECT_THAT(json, HasSubstr("to the client from the VIP 198.18.100.1 (service web)"));
  EXPECT_THAT(json, HasSubstr("\"local_port\":20001"));
}

}  // namespace
}  // namespace berth
