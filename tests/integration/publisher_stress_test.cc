// The snapshot publisher under load: a worker thread runs crafted bursts through the pipeline,
// loading the published snapshot once per burst and reporting an RCU quiescent state after each,
// while the management side publishes 1,000 snapshots, each with a different backend unhealthy.
// No packet may be lost or go to a backend that the newest snapshot in force marks unhealthy,
// and (in the ASan build of this test) no snapshot may be read after it was freed.

#include <gtest/gtest.h>
#include <pthread.h>
#include <rte_rcu_qsbr.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/dataplane/pipeline.h"
#include "berth/runtime/publisher.h"
#include "support/eal_environment.h"
#include "support/frames.h"
#include "support/packet_builder.h"
#include "support/test_worker.h"

namespace berth {
namespace {

constexpr int kBackends = 8;
constexpr int kSnapshots = 1000;

std::string configText() {
  std::string yaml = R"(
dataplane:
  ports: [ { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 4093
    backends:
)";
  for (int i = 1; i <= kBackends; ++i) {
    absl::StrAppend(&yaml, "      - { name: web-", i, ", address: 198.18.", i, ".2 }\n");
  }
  return yaml;
}

TEST(PublisherStressTest, ARetiredSnapshotIsFreedOnlyAfterEveryWorkerMovedOnAndPublishNeverWaits) {
  const Config config = *parseConfig(configText(), "stress.yaml");
  const std::vector<Table> tables = *buildServiceTables(config);
  const MacAddress macs[] = {*MacAddress::parse("02:00:00:00:00:01")};
  CounterIds ids;
  std::unique_ptr<SnapshotPublisher> publisher = *SnapshotPublisher::create(1);
  ASSERT_EQ(rte_rcu_qsbr_thread_register(publisher->rcu(), 0), 0);
  publisher->publish(*buildSnapshot(config, tables, macs, {}, ids, 1));
  // A worker that is online and has not reported since: it may be reading snapshot 1.
  rte_rcu_qsbr_thread_online(publisher->rcu(), 0);
  const uint64_t token = publisher->publish(*buildSnapshot(config, tables, macs, {}, ids, 2));
  EXPECT_FALSE(publisher->inForce(token));
  EXPECT_EQ(publisher->reclaim(), 1u);
  rte_rcu_qsbr_quiescent(publisher->rcu(), 0);
  EXPECT_TRUE(publisher->inForce(token));
  EXPECT_EQ(publisher->reclaim(), 0u);
  rte_rcu_qsbr_thread_offline(publisher->rcu(), 0);
}

// The management side publishes 1,000 snapshots, each with a different backend unhealthy, as
// berthd does: publish, then wait for nothing. Once a snapshot is in force (every worker has
// passed a quiescent state since), it declares that backend forbidden. The worker runs a fixed
// set of 512 tracked TCP flows through the pipeline with connection tracking on, and reads the
// forbidden backend after each burst. A packet sent to a backend that
// was forbidden then is a violation: the management side's own knowledge, not the snapshot the
// worker happened to use, is the judge. Without the grace period (forbidding at publish) the
// check fails, since a worker may still be on the snapshot before. Every packet must go out: a
// flow whose backend turned unhealthy is re-picked, never dropped.
TEST(PublisherStressTest, NoPacketIsLostOrSentToABackendTheNewestSnapshotInForceMarksUnhealthy) {
  const Config config = *parseConfig(configText(), "stress.yaml");
  const std::vector<Table> full = *buildServiceTables(config);
  const MacAddress macs[] = {*MacAddress::parse("02:00:00:00:00:01")};
  CounterIds ids;
  std::unique_ptr<SnapshotPublisher> publisher = *SnapshotPublisher::create(1);
  ASSERT_EQ(rte_rcu_qsbr_thread_register(publisher->rcu(), 0), 0);

  auto snapshotWithout = [&](int unhealthy, uint64_t generation) {
    std::vector<bool> healthy(kBackends, true);
    healthy[unhealthy] = false;
    const std::vector<Table> tables = {*withHealth(full[0], healthy)};
    return *buildSnapshot(config, tables, macs, {}, ids, generation);
  };
  publisher->publish(snapshotWithout(0, 1));
  const std::vector<IpAddress> addresses = [&] {
    std::vector<IpAddress> list;
    for (const BackendConfig& backend : config.services[0].backends)
      list.push_back(backend.address);
    return list;
  }();

  constexpr int kNone = -1;
  constexpr uint16_t kFlowCount = 512;
  constexpr int kBurstsPerLoop = 8;
  std::atomic<int> forbidden{kNone};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> violations{0};
  std::atomic<uint64_t> repicks{0};
  std::thread worker([&] {
    // The EAL pinned this process's first thread to CPU 0 (-l 0), and threads inherit that. A
    // worker on its own CPU runs its bursts while the management side publishes, as in berthd;
    // sharing one CPU, a publish would rarely fall within a burst.
    cpu_set_t every_cpu;
    CPU_ZERO(&every_cpu);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &every_cpu);
    pthread_setaffinity_np(pthread_self(), sizeof(every_cpu), &every_cpu);
    TestWorker worker_state;
    WorkerState& state = worker_state.state;
    rte_rcu_qsbr_thread_online(publisher->rcu(), 0);
    uint16_t next_flow = 0;
    std::vector<bool> opened(kFlowCount, false);
    while (!stop.load(std::memory_order_relaxed)) {
      // A loop of kBurstsPerLoop bursts on one snapshot, as a worker serves several queues
      // between quiescent states; the frames are made first, so that the loop is mostly pipeline.
      std::vector<ReceivedFrame> received;
      received.reserve(kBurstsPerLoop * kMaxFramesPerCall);
      Frame frames[kBurstsPerLoop][kMaxFramesPerCall];
      Verdict verdicts[kBurstsPerLoop][kMaxFramesPerCall];
      for (int b = 0; b < kBurstsPerLoop; ++b) {
        for (uint16_t i = 0; i < kMaxFramesPerCall; ++i) {
          const uint16_t flow = next_flow;
          next_flow = static_cast<uint16_t>((next_flow + 1) % kFlowCount);
          Bytes frame = concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20),
                                tcp(static_cast<uint16_t>(10000 + flow), 80)});
          frame[14 + 20 + 13] = opened[flow] ? kTcpAck : kTcpSyn;
          opened[flow] = true;
          received.emplace_back(frame);
          frames[b][i] = received.back().frame;
        }
      }
      const Snapshot* snapshot = publisher->current().load(std::memory_order_acquire);
      for (int b = 0; b < kBurstsPerLoop; ++b) {
        processFrames(*snapshot, 0, frames[b], verdicts[b], kMaxFramesPerCall, state);
      }
      // Read after the bursts and before their quiescent state. A backend forbidden now was
      // forbidden only once the snapshot without it was in force, which needs this worker's
      // quiescent state after that snapshot's publication: so the bursts ran on that snapshot,
      // and the next one, which allows the backend again, was not yet published.
      const int forbidden_now = forbidden.load(std::memory_order_acquire);
      for (int b = 0; b < kBurstsPerLoop; ++b) {
        for (uint16_t i = 0; i < kMaxFramesPerCall; ++i) {
          ++packets;
          if (verdicts[b][i] != Verdict::kTransmit) {
            ++lost;
            continue;
          }
          IpAddress outer;
          std::copy(frames[b][i].data + 30, frames[b][i].data + 34, outer.bytes.begin());
          if (forbidden_now != kNone && outer == addresses[forbidden_now]) ++violations;
        }
      }
      rte_rcu_qsbr_quiescent(publisher->rcu(), 0);
    }
    repicks =
        worker_state.counters.conntrack.values[static_cast<size_t>(ConntrackEvent::kRepick)].read();
    rte_rcu_qsbr_thread_offline(publisher->rcu(), 0);
  });

  for (int generation = 2; generation <= kSnapshots + 1; ++generation) {
    const int unhealthy = generation % kBackends;
    std::unique_ptr<const Snapshot> next =
        snapshotWithout(unhealthy, static_cast<uint64_t>(generation));
    // The backend the last snapshot forbade may serve again once the next one is out.
    forbidden.store(kNone, std::memory_order_release);
    const uint64_t token = publisher->publish(std::move(next));
    EXPECT_LE(publisher->reclaim(), SnapshotPublisher::kMaxRetired);
    // The grace period: only once every worker has moved past the older snapshots is the
    // backend out of service everywhere.
    while (!publisher->inForce(token)) std::this_thread::yield();
    forbidden.store(unhealthy, std::memory_order_release);
  }
  stop = true;
  worker.join();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_EQ(lost.load(), 0u);
  EXPECT_GT(packets.load(), 0u);
  EXPECT_GT(repicks.load(), 0u) << "tracked flows moved off their unhealthy backends";
  EXPECT_EQ(publisher->snapshot()->generation(), static_cast<uint64_t>(kSnapshots + 1));
  // Every retired snapshot is freed once its grace period is over (ASan reports any leak).
  EXPECT_EQ(publisher->reclaim(), 0u);
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new berth::EalEnvironment("berth-stress"));
  return RUN_ALL_TESTS();
}
