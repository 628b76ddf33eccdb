// The pipeline with flow sync (docs/scale-out.md, "Flows that survive an instance"). Pinned:
// - a confirmed connection off its table's pick (kept across a table change, on a drained
//   backend, or placed by bounded load) is news once, again when its state changes and once per
//   refresh period, and withdrawn when it goes back to the pick; a connection on its pick, or
//   not yet confirmed, is never news;
// - a connection-table miss that a peer's flow answers goes to the peer's backend and is tracked
//   as adopted, which is never news; an expired peer flow, or one whose backend this snapshot
//   does not keep connections on, leaves the table's pick in charge, and so does a SYN, which
//   opens a connection no peer can have had;
// - news that finds no room is counted.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "berth/dataplane/peer_flows.h"
#include "support/conntrack_harness.h"

namespace berth {
namespace {

constexpr uint16_t kFirstPort = 20000;
constexpr uint16_t kFlows = 1000;

class PipelineSyncTest : public ::testing::Test {
 protected:
  PipelineSyncTest() { harness_.state.exports = &exports_; }

  // Sends one packet, and takes its news as the worker takes each burst's.
  std::string send(uint16_t port, uint8_t flags = kTcpAck) {
    const std::string backend = harness_.send(port, flags);
    made_.insert(made_.end(), exports_.records.begin(), exports_.records.begin() + exports_.count);
    exports_.count = 0;
    return backend;
  }
  // The news this worker made since the last call.
  std::vector<FlowExport> news() { return std::exchange(made_, {}); }
  uint16_t backendId(const std::string& name) const {
    return static_cast<uint16_t>(*harness_.ids().findBackend("web", name));
  }
  uint16_t serviceId() const { return static_cast<uint16_t>(*harness_.ids().findService("web")); }
  uint16_t networkPort(uint16_t port) const {
    return static_cast<uint16_t>(port >> 8 | (port & 0xff) << 8);
  }
  // Opens kFlows connections (SYN, then ACK), and returns where each went.
  std::map<uint16_t, std::string> openAll() {
    std::map<uint16_t, std::string> backends;
    for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
      backends[port] = send(port, kTcpSyn);
      send(port, kTcpAck);
    }
    return backends;
  }

  ConntrackHarness harness_;
  FlowExports exports_;
  std::vector<FlowExport> made_;
};

TEST_F(PipelineSyncTest, ConnectionsOnTheirPickAreNeverNews) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  openAll();
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  EXPECT_TRUE(news().empty());
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncExport), 0u);
}

TEST_F(PipelineSyncTest, AConnectionKeptOffItsNewPickIsNewsOnceThenRefreshed) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> before = openAll();
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  std::map<uint16_t, std::string> off_pick;
  for (const auto& [port, backend] : before) {
    if (harness_.tablePick(port) != backend) off_pick[port] = backend;
  }
  ASSERT_GT(off_pick.size(), kFlows / 10);
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  const std::vector<FlowExport> first = news();
  ASSERT_EQ(first.size(), off_pick.size());
  for (const FlowExport& record : first) {
    const uint16_t port = networkPort(record.source_port);
    ASSERT_TRUE(off_pick.contains(port)) << port;
    EXPECT_EQ(record.source, kClient.bytes);
    EXPECT_EQ(record.service, serviceId());
    EXPECT_EQ(record.backend, backendId("web-" + off_pick[port].substr(7, 1)));
    EXPECT_EQ(record.state, ConnectionState::kTcpEstablished);
    EXPECT_EQ(record.lifetime_ms, ConntrackTimeouts{}.tcp_established_ms);
  }
  // More packets in the same refresh period are not news.
  for (const auto& [port, backend] : off_pick) EXPECT_EQ(send(port), backend);
  EXPECT_TRUE(news().empty());
  // The next period's first packet refreshes each, once.
  harness_.state.now_ms += 8'192;
  for (const auto& [port, backend] : off_pick) send(port);
  for (const auto& [port, backend] : off_pick) send(port);
  EXPECT_EQ(news().size(), off_pick.size());
}

TEST_F(PipelineSyncTest, UnconfirmedConnectionsAreNotNewsUntilConfirmed) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    send(port, kTcpSyn);
  }
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  // A SYN sent again leaves them opening: not news.
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    send(port, kTcpSyn);
  }
  EXPECT_TRUE(news().empty());
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  EXPECT_GT(news().size(), kFlows / 10u);
}

TEST_F(PipelineSyncTest, ADrainedBackendsConnectionsAreNewsAndTheirCloseToo) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}, "keep_established"));
  const std::map<uint16_t, std::string> before = openAll();
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 0}, {4, 1}}, "keep_established"));
  size_t on_web_3 = 0;
  for (const auto& [port, backend] : before) {
    if (backend != "198.18.3.2") continue;
    ++on_web_3;
    EXPECT_EQ(send(port), backend);
  }
  const std::vector<FlowExport> kept = news();
  ASSERT_EQ(kept.size(), on_web_3);
  for (const FlowExport& record : kept) EXPECT_EQ(record.backend, backendId("web-3"));
  for (const auto& [port, backend] : before) {
    if (backend == "198.18.3.2") send(port, kTcpFin | kTcpAck);
  }
  const std::vector<FlowExport> closing = news();
  ASSERT_EQ(closing.size(), on_web_3);
  for (const FlowExport& record : closing) {
    EXPECT_EQ(record.state, ConnectionState::kTcpClosing);
    EXPECT_EQ(record.lifetime_ms, ConntrackTimeouts{}.tcp_closing_ms);
  }
}

TEST_F(PipelineSyncTest, AConnectionBackOnItsPickIsWithdrawn) {
  const std::string four = configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}});
  harness_.use(four);
  openAll();
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  const size_t exported = news().size();
  ASSERT_GT(exported, 0u);
  // web-5 leaves again: the old table, under which every connection is on its pick.
  harness_.use(four);
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  const std::vector<FlowExport> withdrawn = news();
  ASSERT_EQ(withdrawn.size(), exported);
  for (const FlowExport& record : withdrawn) EXPECT_EQ(record.state, ConnectionState::kEmpty);
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  EXPECT_TRUE(news().empty());
}

TEST_F(PipelineSyncTest, ABoundedLoadFallbackIsNewsOnceConfirmed) {
  std::string yaml = configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}});
  yaml.insert(yaml.find("    backends:\n"), "    bounded_load: 1.25\n");
  harness_.use(yaml);
  harness_.publishLoads({{"web-1", 3000}, {"web-2", 100}, {"web-3", 100}, {"web-4", 100}});
  size_t fallbacks = 0;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    fallbacks += send(port, kTcpSyn) != harness_.tablePick(port);
  }
  ASSERT_GT(fallbacks, 0u);
  EXPECT_TRUE(news().empty()) << "a SYN alone is not confirmed";
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) send(port);
  EXPECT_EQ(news().size(), fallbacks);
}

class PipelineAdoptionTest : public PipelineSyncTest {
 protected:
  // A peer's record of port `port`'s flow on backend `backend`, live until `expires_ms`.
  PeerFlow peerFlow(uint16_t port, const std::string& backend, uint32_t expires_ms) const {
    PeerFlow flow;
    flow.source = kClient.bytes;
    flow.source_port = networkPort(port);
    flow.service = serviceId();
    flow.backend = backendId(backend);
    flow.state = ConnectionState::kTcpEstablished;
    flow.expires_ms = expires_ms;
    return flow;
  }
  void publish(const std::vector<PeerFlow>& flows) {
    peers_ = PeerFlows::build(flows, kTestWorkerHashKey);
    harness_.state.peer_flows = peers_.get();
  }

  std::unique_ptr<const PeerFlows> peers_;
};

TEST_F(PipelineAdoptionTest, AMissAPeerTracksGoesToThePeersBackendAndStaysThere) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  // For each flow, a backend other than its pick.
  std::vector<PeerFlow> flows;
  std::map<uint16_t, std::string> peer_backend;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    const std::string pick = harness_.tablePick(port);
    const std::string other = pick == "198.18.1.2" ? "web-2" : "web-1";
    peer_backend[port] = other == "web-1" ? "198.18.1.2" : "198.18.2.2";
    flows.push_back(peerFlow(port, other, harness_.state.now_ms + 60'000));
  }
  publish(flows);
  for (const auto& [port, backend] : peer_backend) EXPECT_EQ(send(port), backend);
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncAdoption), kFlows);
  // Tracked now: the peers' flows are not asked again, and adopted connections are never news.
  publish({});
  harness_.state.now_ms += 10'000;
  for (const auto& [port, backend] : peer_backend) EXPECT_EQ(send(port), backend);
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncAdoption), kFlows);
  EXPECT_TRUE(news().empty());
  // A flow no peer tracks takes its pick.
  EXPECT_EQ(send(kFirstPort + kFlows, kTcpSyn), harness_.tablePick(kFirstPort + kFlows));
}

TEST_F(PipelineAdoptionTest, ExpiredOrUnservableRecordsLeaveThePickInCharge) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}), {"web-2"});
  std::vector<PeerFlow> flows;
  for (uint16_t port = kFirstPort; port < kFirstPort + 100; ++port) {
    flows.push_back(peerFlow(port, "web-1", harness_.state.now_ms));  // expired now
  }
  for (uint16_t port = kFirstPort + 100; port < kFirstPort + 200; ++port) {
    flows.push_back(peerFlow(port, "web-2", harness_.state.now_ms + 60'000));  // unhealthy
  }
  publish(flows);
  for (uint16_t port = kFirstPort; port < kFirstPort + 200; ++port) {
    EXPECT_EQ(send(port), harness_.tablePick(port)) << port;
  }
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncAdoption), 0u);
}

TEST_F(PipelineAdoptionTest, ASynTakesThePickWhateverThePeersSay) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  std::vector<PeerFlow> flows;
  std::map<uint16_t, std::string> pick;
  for (uint16_t port = kFirstPort; port < kFirstPort + 100; ++port) {
    pick[port] = harness_.tablePick(port);
    const std::string other = pick[port] == "198.18.1.2" ? "web-2" : "web-1";
    flows.push_back(peerFlow(port, other, harness_.state.now_ms + 60'000));
  }
  publish(flows);
  for (const auto& [port, backend] : pick) EXPECT_EQ(send(port, kTcpSyn), backend);
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncAdoption), 0u);
}

TEST_F(PipelineSyncTest, NewsWithoutRoomIsCounted) {
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> before = openAll();
  harness_.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  // Never drained: past FlowExports::kCapacity, news is counted instead of kept.
  size_t off_pick = 0;
  for (const auto& [port, backend] : before) {
    harness_.send(port);
    off_pick += harness_.tablePick(port) != backend;
  }
  ASSERT_GT(off_pick, FlowExports::kCapacity);
  EXPECT_EQ(exports_.count, FlowExports::kCapacity);
  EXPECT_EQ(harness_.count(ConntrackEvent::kSyncRingFull), off_pick - FlowExports::kCapacity);
}

}  // namespace
}  // namespace berth
