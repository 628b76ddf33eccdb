// Full-NAT's ICMP errors between workers (runtime/worker.h, Worker::handOffQueue): an error about
// a session another worker holds is passed to that worker on its ring, lock-free, and run
// through its pipeline there, as if it had come in on its own queue; a ring that is full drops
// and counts what does not fit. Two workers on a two-queue net_null port, driven burst by burst.
// net_null does not report its redirection table, so the port steers as one without RSS: every
// session is queue 0's, and worker 1 passes every error to worker 0.

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "berth/config/loader.h"
#include "berth/maglev/table.h"
#include "berth/runtime/port.h"
#include "berth/runtime/worker.h"
#include "support/checksums.h"
#include "support/eal_environment.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

const MacAddress kPortMac = *MacAddress::parse("02:00:00:00:00:01");  // packet_builder's
const IpAddress kLocal = IpAddress::v4(198, 18, 0, 20);
const IpAddress kBackend = IpAddress::v4(198, 18, 1, 2);

const char kConfig[] = R"(
dataplane:
  conntrack: { nat_sessions_per_core: 256 }
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
        queues: 2, snat_addresses: [198.18.0.20], snat_ports: 20000-20099 }
services:
  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,
      backends: [ { name: web-1, address: 198.18.1.2 } ] }
)";

// "Fragmentation needed" from a router on the clients' side, about the VIP's answer to `port`.
Bytes tooBigForClient(uint16_t client_port) {
  const Bytes about = tcpFrame(kVip, kClient, 80, client_port, kTcpAck);
  const Bytes embedded(about.begin() + 14, about.begin() + 14 + 20 + 8);
  const Bytes message = concat({Bytes{3, 4, 0, 0, 0, 0, 0x05, 0x00}, embedded});
  return withChecksums(
      concat({ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 0, 254), kVip, kProtocolIcmp, message.size()), message}));
}

class WorkerHandOffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = *parseConfig(kConfig, "worker_hand_off_test.yaml");
    tables_ = *buildServiceTables(config_);
    std::vector<std::string> warnings;
    absl::StatusOr<OpenedPort> port = openPort(config_.dataplane.ports[0], 2, warnings);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    ASSERT_EQ(port_.queues, 2);
    std::vector<ServiceInput> inputs = {{config_.services[0], tables_[0]}};
    const MacAddress macs[] = {kPortMac};
    snapshot_ = *buildSnapshot(config_.dataplane, inputs, macs, {}, ids_, 1, {},
                               *portReplySteering(config_.dataplane, {port_.spread}));
    current_.store(snapshot_.get());
    rcu_ = static_cast<rte_rcu_qsbr*>(
        rte_zmalloc("hand_off_rcu", rte_rcu_qsbr_get_memsize(2), RTE_CACHE_LINE_SIZE));
    ASSERT_EQ(rte_rcu_qsbr_init(rcu_, 2), 0);
    std::vector<rte_ring*> rings;
    for (uint16_t w = 0; w < 2; ++w) {
      WorkerSetup setup;
      setup.lcore = rte_lcore_id();
      setup.rcu = rcu_;
      setup.rcu_thread_id = w;
      setup.snapshot = &current_;
      setup.stop = &stop_;
      setup.nat_sessions = config_.dataplane.conntrack.nat_sessions_per_core;
      setup.conntrack = config_.dataplane.conntrack;
      setup.queue = w;
      setup.queues = {{port_.port_id, w, 0, false}};
      absl::StatusOr<WorkerPtr> worker = Worker::create(setup);
      ASSERT_TRUE(worker.ok()) << worker.status();
      rings.push_back((*worker)->handOffQueue());
      workers_.push_back(*std::move(worker));
    }
    for (const WorkerPtr& worker : workers_) worker->connectHandOffs(rings);
  }

  void TearDown() override {
    workers_.clear();
    closePort(port_);
    rte_free(rcu_);
  }

  // `frame` received by worker `w` on its queue.
  void receive(uint16_t w, const Bytes& frame) {
    rte_mbuf* mbuf = rte_pktmbuf_alloc(port_.pool);
    ASSERT_NE(mbuf, nullptr);
    std::memcpy(rte_pktmbuf_append(mbuf, static_cast<uint16_t>(frame.size())), frame.data(),
                frame.size());
    workers_[w]->processBurst(*snapshot_, workers_[w]->queue(0), &mbuf, 1);
  }

  uint64_t nat(uint16_t w, NatEvent event) const { return workers_[w]->counters.nat.read(event); }

  Config config_;
  std::vector<Table> tables_;
  CounterIds ids_;
  OpenedPort port_;
  std::unique_ptr<const Snapshot> snapshot_;
  std::atomic<const Snapshot*> current_{nullptr};
  std::atomic<bool> stop_{false};
  rte_rcu_qsbr* rcu_ = nullptr;
  std::vector<WorkerPtr> workers_;
};

TEST_F(WorkerHandOffTest, AnErrorAboutAnotherWorkersSessionIsTranslatedByThatWorker) {
  receive(0, tcpFrame(kClient, kVip, 43000, 80, kTcpSyn));
  ASSERT_EQ(nat(0, NatEvent::kOpened), 1u);
  const uint64_t sent_before = workers_[0]->counters.tx_packets.read();
  const uint64_t received_before = workers_[0]->counters.rx_packets.read();

  receive(1, tooBigForClient(43000));
  EXPECT_EQ(nat(1, NatEvent::kIcmpHandedOff), 1u);
  EXPECT_EQ(workers_[1]->counters.tx_packets.read(), 0u) << "not translated where it came in";
  EXPECT_EQ(rte_ring_count(workers_[0]->handOffQueue()), 1u);

  workers_[0]->takeHandOffs(*snapshot_);
  EXPECT_EQ(rte_ring_count(workers_[0]->handOffQueue()), 0u);
  EXPECT_EQ(workers_[0]->counters.tx_packets.read(), sent_before + 1) << "sent to the backend";
  EXPECT_EQ(workers_[0]->counters.rx_packets.read(), received_before)
      << "received once, by worker 1";
  EXPECT_EQ(nat(0, NatEvent::kIcmpNoSession) + nat(1, NatEvent::kIcmpNoSession), 0u);

  // An error about no session at all: passed to the owner the spread names, dropped there.
  receive(1, tooBigForClient(43001));
  workers_[0]->takeHandOffs(*snapshot_);
  EXPECT_EQ(nat(0, NatEvent::kIcmpNoSession), 1u);
  EXPECT_EQ(workers_[0]->counters.tx_packets.read(), sent_before + 1);
}

TEST_F(WorkerHandOffTest, AFloodOfErrorsBeyondTheOwnersRingIsDroppedAndCounted) {
  receive(0, tcpFrame(kClient, kVip, 43000, 80, kTcpSyn));
  const unsigned room = kHandOffQueueSize - 1;  // an rte_ring holds one less than its size
  for (unsigned i = 0; i < room + 10; ++i) receive(1, tooBigForClient(43000));
  EXPECT_EQ(nat(1, NatEvent::kIcmpHandedOff), room);
  EXPECT_EQ(nat(1, NatEvent::kIcmpHandOffFull), 10u);
  while (rte_ring_count(workers_[0]->handOffQueue()) != 0) {
    workers_[0]->takeHandOffs(*snapshot_);
    workers_[0]->flush();
  }
  EXPECT_EQ(workers_[0]->counters.tx_packets.read(), 1u + room)
      << "the SYN, and every error the ring held, translated";
  EXPECT_EQ(nat(0, NatEvent::kIcmpNoSession), 0u);
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::EalEnvironment("worker_hand_off_test"));
  return RUN_ALL_TESTS();
}
