// Flow sync between two instances' management sides over loopback UDP, as berthd runs them
// (sync/flow_sync.h), under an EAL for the RCU publisher and the workers' rings. Pinned:
// - a worker's news on one instance becomes the other's peer flow, on the same backend, and a
//   withdrawal takes it away again;
// - a peer that restarts (a new epoch), or one added later, is sent every flow still carried,
//   without new news; another IP version's endpoint, or its own, is no peer;
// - a datagram signed with another secret, one under a key id not held, and one sent again are
//   refused and counted, and change nothing;
// - both keys of a rotation are taken.

#include "berth/sync/flow_sync.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rte_ring.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/runtime/publisher.h"
#include "support/eal_environment.h"
#include "support/sync_service.h"

namespace berth {
namespace {

const ConnectionHashKey kHashKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb,
                                  0x2545f4914f6cdd1d, 0xd6e8feb86659fd93, 0xa0761d6478bd642f}};

class FlowSyncTest : public ::testing::Test {
 protected:
  FlowSyncTest() {
    web_ = service_.web;
    web_2_ = service_.web_2;
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("flow-sync-test-", getpid());
    std::filesystem::create_directories(dir_);
    writeKey("one", "0123456789abcdef0123456789abcdef\n");
    writeKey("two", "fedcba9876543210fedcba9876543210");
    writeKey("forged", "not-the-fleets-secret-at-all-000");
    rcu_ = *SnapshotPublisher::create(1);
    // Ports the kernel has free now: held together while they are chosen, so they differ.
    std::vector<int> holders;
    for (uint16_t& port : ports_) {
      const int holder = socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in any{};
      any.sin_family = AF_INET;
      any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t length = sizeof(any);
      EXPECT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&any), sizeof(any)), 0);
      EXPECT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&any), &length), 0);
      port = ntohs(any.sin_port);
      holders.push_back(holder);
    }
    for (int holder : holders) close(holder);
  }
  ~FlowSyncTest() override {
    for (rte_ring* ring : rings_) rte_ring_free(ring);
    std::filesystem::remove_all(dir_);
  }

  void writeKey(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  Endpoint endpoint(int offset) const { return {IpAddress::v4(127, 0, 0, 1), ports_[offset]}; }
  SyncConfig syncConfig(int self, int peer, std::vector<std::pair<int, std::string>> keys) {
    SyncConfig sync;
    sync.listen = endpoint(self);
    sync.peers = {endpoint(peer)};
    for (const auto& [id, file] : keys) {
      sync.keys.push_back({static_cast<uint8_t>(id), (dir_ / file).string(), {}});
    }
    return sync;
  }
  // An instance's management side with a worker's ring of news.
  struct Instance {
    std::unique_ptr<FlowSync> sync;
    rte_ring* ring = nullptr;
  };
  Instance start(const SyncConfig& config) {
    Instance instance;
    absl::StatusOr<std::unique_ptr<FlowSync>> sync =
        FlowSync::create(config, rcu_->rcu(), kHashKey);
    EXPECT_TRUE(sync.ok()) << sync.status();
    if (!sync.ok()) return instance;
    instance.sync = *std::move(sync);
    const std::string name = absl::StrCat("fs", rings_.size());
    instance.ring = rte_ring_create_elem(name.c_str(), sizeof(FlowExport), 4096, SOCKET_ID_ANY,
                                         RING_F_SP_ENQ | RING_F_SC_DEQ);
    rings_.push_back(instance.ring);
    instance.sync->setExportRings({instance.ring});
    instance.sync->setNames(service_.names);
    return instance;
  }
  FlowExport news(uint32_t client, ConnectionState state = ConnectionState::kTcpEstablished) {
    FlowExport e;
    e.source = {198, 18, static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)};
    e.source_port = htons(static_cast<uint16_t>(40000 + client));
    e.service = web_;
    e.backend = web_2_;
    e.state = state;
    e.lifetime_ms = state == ConnectionState::kEmpty ? 0 : 300'000;
    return e;
  }
  void tell(Instance& instance, FlowExport e) {
    ASSERT_EQ(rte_ring_sp_enqueue_elem(instance.ring, &e, sizeof(e)), 0);
  }
  // Turns every instance's loop until `done`, for up to five seconds.
  bool turnUntil(std::vector<Instance*> instances, const std::function<bool()>& done) {
    for (int turn = 0; turn < 500; ++turn) {
      for (Instance* instance : instances) instance->sync->turn(absl::Now());
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  const PeerFlow* peerFlowOf(const Instance& instance, uint32_t client) {
    const PeerFlows* map = instance.sync->peerFlows().load();
    if (map == nullptr) return nullptr;
    const FlowExport e = news(client);
    ConnectionKey key;
    key.source = e.source;
    key.source_port = e.source_port;
    key.service = e.service;
    return map->find(key, map->hash(key.source, key.source_port, key.service), 0);
  }
  size_t peerFlowCount(const Instance& instance) {
    const PeerFlows* map = instance.sync->peerFlows().load();
    return map == nullptr ? 0 : map->size();
  }

  SyncService service_;
  uint16_t web_ = 0;
  uint16_t web_2_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<SnapshotPublisher> rcu_;
  std::array<uint16_t, 8> ports_{};
  std::vector<rte_ring*> rings_;
};

TEST_F(FlowSyncTest, OneInstancesNewsIsTheOthersPeerFlowUntilWithdrawn) {
  Instance a = start(syncConfig(0, 1, {{1, "one"}}));
  Instance b = start(syncConfig(1, 0, {{1, "one"}}));
  ASSERT_TRUE(a.sync && b.sync);
  tell(a, news(7));
  ASSERT_TRUE(turnUntil({&a, &b}, [&] { return peerFlowOf(b, 7) != nullptr; }));
  const PeerFlow* flow = peerFlowOf(b, 7);
  EXPECT_EQ(flow->backend, web_2_);
  EXPECT_EQ(flow->state, ConnectionState::kTcpEstablished);
  EXPECT_EQ(peerFlowOf(a, 7), nullptr) << "its own news is not its peer flow";

  tell(a, news(7, ConnectionState::kEmpty));
  ASSERT_TRUE(turnUntil({&a, &b}, [&] { return peerFlowCount(b) == 0; }));
  const FlowSync::Report report = b.sync->report();
  EXPECT_EQ(report.peer_events[static_cast<size_t>(PeerFlowEvent::kApplied)], 1u);
  EXPECT_EQ(report.peer_events[static_cast<size_t>(PeerFlowEvent::kWithdrawn)], 1u);
  EXPECT_GE(a.sync->report().records_sent, 2u);
  for (uint64_t refused : report.refused) EXPECT_EQ(refused, 0u);
}

TEST_F(FlowSyncTest, ARestartedPeerIsSentEveryFlowAgain) {
  Instance a = start(syncConfig(2, 3, {{1, "one"}}));
  Instance b = start(syncConfig(3, 2, {{1, "one"}}));
  ASSERT_TRUE(a.sync && b.sync);
  for (uint32_t client = 0; client < 100; ++client) tell(a, news(client));
  ASSERT_TRUE(turnUntil({&a, &b}, [&] { return peerFlowCount(b) == 100; }));
  b.sync.reset();
  Instance restarted = start(syncConfig(3, 2, {{1, "one"}}));
  ASSERT_TRUE(restarted.sync);
  ASSERT_TRUE(turnUntil({&a, &restarted}, [&] { return peerFlowCount(restarted) == 100; }));
  EXPECT_GE(a.sync->report().records_resent, 100u);
}

TEST_F(FlowSyncTest, APeerAddedLaterIsSentEveryFlow) {
  SyncConfig alone = syncConfig(6, 7, {{1, "one"}});
  alone.peers.clear();
  Instance a = start(alone);
  ASSERT_TRUE(a.sync);
  for (uint32_t client = 0; client < 10; ++client) tell(a, news(client));
  ASSERT_TRUE(turnUntil({&a}, [&] { return a.sync->report().own_flows == 10; }));
  Instance b = start(syncConfig(7, 6, {{1, "one"}}));
  ASSERT_TRUE(b.sync);
  // A peer of another IP version, and a itself, are not peers.
  a.sync->setPeers({endpoint(7), endpoint(6), {*IpAddress::parse("2001:db8::1"), 7410}});
  EXPECT_EQ(a.sync->peerCount(), 1u);
  ASSERT_TRUE(turnUntil({&a, &b}, [&] { return peerFlowCount(b) == 10; }));
}

TEST_F(FlowSyncTest, ForgedUnknownKeyAndReplayedDatagramsAreRefused) {
  Instance b = start(syncConfig(5, 4, {{1, "one"}, {2, "two"}}));
  ASSERT_TRUE(b.sync);
  const int sender = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(sender, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_port = htons(ports_[4]);
  from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sender, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in to = from;
  to.sin_port = htons(ports_[5]);
  auto send = [&](const std::vector<uint8_t>& datagram) {
    ASSERT_EQ(sendto(sender, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&to),
                     sizeof(to)),
              static_cast<ssize_t>(datagram.size()));
  };
  FlowRecord record;
  record.service = flowRecordName("web");
  record.backend = flowRecordName("web/web-2");
  record.source = {198, 18, 0, 9};
  record.source_port = htons(40009);
  record.state = FlowRecordState::kTcpEstablished;
  record.lifetime_ms = 300'000;
  auto key = [&](uint8_t id, const std::string& secret) {
    return FlowSyncKey{id, std::vector<uint8_t>(secret.begin(), secret.end())};
  };
  const FlowSyncKey forged = key(1, "not-the-fleets-secret-at-all-000");
  const FlowSyncKey unknown = key(9, "0123456789abcdef0123456789abcdef");
  const FlowSyncKey second = key(2, "fedcba9876543210fedcba9876543210");
  FlowDatagramHeader header{0x5eed, 1, 1};
  send(*encodeFlowDatagram(header, {&record, 1}, forged));
  send(*encodeFlowDatagram(header, {&record, 1}, unknown));
  const std::vector<uint8_t> genuine = *encodeFlowDatagram(header, {&record, 1}, second);
  send(genuine);
  send(genuine);
  auto refused = [&](FlowDatagramRefusal why) {
    return b.sync->report().refused[static_cast<size_t>(why)];
  };
  ASSERT_TRUE(turnUntil(
      {&b}, [&] { return b.sync->report().datagrams_received == 4 && peerFlowCount(b) == 1; }));
  EXPECT_EQ(refused(FlowDatagramRefusal::kBadMac), 1u);
  EXPECT_EQ(refused(FlowDatagramRefusal::kUnknownKey), 1u);
  EXPECT_EQ(refused(FlowDatagramRefusal::kReplayed), 1u);
  EXPECT_EQ(b.sync->report().records_received, 1u) << "the second key of a rotation is taken";
  close(sender);
}

TEST_F(FlowSyncTest, AKeyFileTooShortOrMissingIsNamed) {
  writeKey("short", "tiny\n");
  SyncConfig config = syncConfig(0, 1, {{1, "short"}});
  config.keys[0].line.number = 12;
  absl::StatusOr<std::unique_ptr<FlowSync>> sync = FlowSync::create(config, rcu_->rcu(), kHashKey);
  ASSERT_FALSE(sync.ok());
  EXPECT_NE(sync.status().message().find("sync.keys[0].file (line 12)"), std::string::npos)
      << sync.status();
  config.keys[0].file = (dir_ / "absent").string();
  sync = FlowSync::create(config, rcu_->rcu(), kHashKey);
  ASSERT_FALSE(sync.ok());
  EXPECT_NE(sync.status().message().find("cannot read"), std::string::npos) << sync.status();
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::EalEnvironment("flow_sync_test"));
  return RUN_ALL_TESTS();
}
