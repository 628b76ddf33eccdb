// The worker's link gate (WorkerQueue::poll_only_while_link_up). DPDK 22.11's memif PMD reads a
// ring it has not mapped yet when it is polled while connecting, so workers touch a memif
// port only in a loop that began with its link up (OpenedPort::poll_only_while_link_up says
// why). Pinned here, on a net_ring port whose link rte_eth_dev_set_link_down/up set:
// - openPort gates memif ports and no others;
// - a gated queue whose link is down is never received from, and the control frames for it
//   are dropped as port_down, not sent; once its link is up it is served;
// - frames already buffered when the link went down are dropped as port_down, not sent, and
//   taken back from tx_packets.
// The memif race itself, which needs a peer connecting, is in berthgen_memif_test.py.

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/dataplane/snapshot.h"
#include "berth/runtime/port.h"
#include "berth/runtime/worker.h"
#include "support/eal_environment.h"

namespace berth {
namespace {

constexpr uint16_t kFrames = 8;

const char kConfig[] = R"(
dataplane:
  ports: [ { name: p0, device: net_ring0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends: [ { name: web-1, address: 198.18.1.2 } ]
)";

uint64_t dropped(const Worker& worker, DropReason reason) {
  return worker.counters.drops[static_cast<size_t>(reason)].read();
}

// Waits up to five seconds for `done`.
template <typename Condition>
bool eventually(Condition done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One worker on the only queue of a net_ring port, gated as a memif port is. The ring PMD's
// vdev loops its TX ring back into its RX ring, which this test fills and reads directly. The
// port is opened once: the ring PMD keeps its rings when closed, and complains on a new probe.
class WorkerLinkTest : public ::testing::Test {
 protected:
  struct Port {
    Config config;
    std::vector<Table> tables;
    CounterIds ids;
    OpenedPort port;
    std::unique_ptr<const Snapshot> snapshot;
    rte_ring* ring = nullptr;
    rte_mempool* pool = nullptr;
  };
  static inline Port* shared_ = nullptr;

  static void SetUpTestSuite() {
    shared_ = new Port();
    shared_->config = *parseConfig(kConfig, "worker_link_test.yaml");
    shared_->tables = *buildServiceTables(shared_->config);
    std::vector<std::string> warnings;
    absl::StatusOr<OpenedPort> port = openPort(shared_->config.dataplane.ports[0], 1, warnings);
    ASSERT_TRUE(port.ok()) << port.status();
    shared_->port = *port;
    const MacAddress macs[] = {shared_->port.mac};
    shared_->snapshot = *buildSnapshot(shared_->config, shared_->tables, macs, {}, shared_->ids, 1);
    shared_->ring = rte_ring_lookup("ETH_RXTX0_net_ring0");
    shared_->pool = rte_pktmbuf_pool_create("link_test", 256, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                            static_cast<int>(rte_socket_id()));
  }
  static void TearDownTestSuite() {
    closePort(shared_->port);
    rte_mempool_free(shared_->pool);
    delete shared_;
  }

  void SetUp() override {
    ASSERT_NE(shared_->ring, nullptr);
    ASSERT_NE(shared_->pool, nullptr);
    port_ = shared_->port.port_id;
    ring_ = shared_->ring;
    pool_ = shared_->pool;
    ASSERT_EQ(rte_eth_dev_set_link_up(port_), 0);
    current_.store(shared_->snapshot.get());
    rcu_ = static_cast<rte_rcu_qsbr*>(
        rte_zmalloc("link_test_rcu", rte_rcu_qsbr_get_memsize(1), RTE_CACHE_LINE_SIZE));
    ASSERT_EQ(rte_rcu_qsbr_init(rcu_, 1), 0);

    WorkerSetup setup;
    setup.lcore = rte_lcore_id();
    setup.rcu = rcu_;
    setup.rcu_thread_id = 0;
    setup.snapshot = &current_;
    setup.stop = &stop_;
    setup.queues = {{port_, 0, 0, true}};
    absl::StatusOr<WorkerPtr> worker = Worker::create(setup);
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);
    tx_buffer_ = worker_->queue(0).tx_buffer;
  }

  void TearDown() override {
    rte_mbuf* left[64];
    while (unsigned n = rte_ring_dequeue_burst(ring_, reinterpret_cast<void**>(left), 64, nullptr))
      rte_pktmbuf_free_bulk(left, n);
    worker_.reset();
    rte_free(rcu_);
  }

  // A frame for another host's MAC, which the pipeline drops once it reads it.
  rte_mbuf* frameForAnotherHost() {
    rte_mbuf* mbuf = rte_pktmbuf_alloc(pool_);
    if (mbuf == nullptr) return nullptr;
    uint8_t frame[60] = {0x02, 0, 0, 0, 0, 0x99};
    frame[12] = 0x08;  // IPv4
    if (rte_pktmbuf_append(mbuf, sizeof(frame)) == nullptr) {
      rte_pktmbuf_free(mbuf);
      return nullptr;
    }
    std::memcpy(rte_pktmbuf_mtod(mbuf, uint8_t*), frame, sizeof(frame));
    mbuf->port = 0;  // the port's index, as a control frame carries it
    return mbuf;
  }

  void startWorker() {
    stop_.store(false);
    thread_ = std::thread([this] { runWorker(worker_.get()); });
  }
  void stopWorker() {
    stop_.store(true);
    thread_.join();
  }

  uint16_t port_ = 0;
  rte_ring* ring_ = nullptr;
  rte_mempool* pool_ = nullptr;
  std::atomic<const Snapshot*> current_{nullptr};
  rte_rcu_qsbr* rcu_ = nullptr;
  rte_eth_dev_tx_buffer* tx_buffer_ = nullptr;  // the worker's, for frames buffered by hand
  WorkerPtr worker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(WorkerLinkTest, OpenPortGatesMemifPortsAndNoOthers) {
  EXPECT_EQ(shared_->port.driver, "net_ring");
  EXPECT_FALSE(shared_->port.poll_only_while_link_up);

  const std::string directory =
      std::filesystem::temp_directory_path() / absl::StrCat("worker-link-test-", getpid());
  std::filesystem::create_directories(directory);
  PortConfig memif;
  memif.name = "m0";
  memif.device =
      absl::StrCat("net_memif0,role=server,socket=", directory, "/memif.sock,socket-abstract=no");
  std::vector<std::string> warnings;
  absl::StatusOr<OpenedPort> opened = openPort(memif, 1, warnings);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->driver, "net_memif");
  EXPECT_TRUE(opened->poll_only_while_link_up);
  closePort(*opened);
  std::filesystem::remove_all(directory);
}

TEST_F(WorkerLinkTest, AQueueWhoseLinkIsDownIsNeitherPolledNorSentOnUntilItIsUp) {
  ASSERT_EQ(rte_eth_dev_set_link_down(port_), 0);
  for (uint16_t i = 0; i < kFrames; ++i) {
    ASSERT_EQ(rte_ring_enqueue(ring_, frameForAnotherHost()), 0);
  }
  rte_mbuf* request = frameForAnotherHost();
  ASSERT_TRUE(worker_->queueControlFrame(request));

  startWorker();
  // The worker looks at its control frames once every 1024 loops; once it has, it has also been
  // round its loop a thousand times with the link down.
  ASSERT_TRUE(eventually([&] { return worker_->controlFramesWaiting() == 0; }));
  EXPECT_EQ(dropped(*worker_, DropReason::kPortDown), 1u) << "the request is dropped, not sent";
  EXPECT_EQ(rte_ring_count(ring_), kFrames) << "nothing received, and nothing sent";
  EXPECT_EQ(worker_->counters.rx_packets.read(), 0u);
  EXPECT_EQ(worker_->counters.tx_packets.read(), 0u);

  ASSERT_EQ(rte_eth_dev_set_link_up(port_), 0);
  EXPECT_TRUE(eventually([&] { return worker_->counters.rx_packets.read() == kFrames; }));
  stopWorker();
  EXPECT_EQ(rte_ring_count(ring_), 0u) << "all received, none sent back (not for berth)";
  EXPECT_EQ(worker_->counters.tx_packets.read(), 0u);
  EXPECT_EQ(dropped(*worker_, DropReason::kPortDown), 1u);
}

TEST_F(WorkerLinkTest, FramesBufferedWhenTheLinkWentDownAreDroppedNotSent) {
  const unsigned free_before = rte_mempool_avail_count(pool_);
  worker_->refreshLinks();
  ASSERT_TRUE(worker_->queue(0).link_up);
  for (uint16_t i = 0; i < 3; ++i) {
    rte_mbuf* mbuf = frameForAnotherHost();
    // As processBurst does: counted as sent when buffered.
    worker_->counters.tx_packets.add(1);
    worker_->counters.tx_bytes.add(rte_pktmbuf_pkt_len(mbuf));
    rte_eth_tx_buffer(port_, 0, tx_buffer_, mbuf);
  }
  ASSERT_EQ(rte_eth_dev_set_link_down(port_), 0);
  worker_->refreshLinks();
  EXPECT_FALSE(worker_->queue(0).link_up);
  worker_->flush();
  EXPECT_EQ(rte_ring_count(ring_), 0u) << "nothing sent";
  EXPECT_EQ(dropped(*worker_, DropReason::kPortDown), 3u);
  EXPECT_EQ(dropped(*worker_, DropReason::kTxRingFull), 0u);
  EXPECT_EQ(worker_->counters.tx_packets.read(), 0u);
  EXPECT_EQ(worker_->counters.tx_bytes.read(), 0u);
  EXPECT_EQ(tx_buffer_->length, 0u);
  EXPECT_EQ(rte_mempool_avail_count(pool_), free_before) << "every frame freed";

  // Up again, the same path sends.
  ASSERT_EQ(rte_eth_dev_set_link_up(port_), 0);
  worker_->refreshLinks();
  rte_eth_tx_buffer(port_, 0, tx_buffer_, frameForAnotherHost());
  worker_->flush();
  EXPECT_EQ(rte_ring_count(ring_), 1u);
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::EalEnvironment("worker_link_test"));
  return RUN_ALL_TESTS();
}
