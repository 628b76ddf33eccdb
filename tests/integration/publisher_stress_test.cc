// The snapshot publisher under load: a worker thread runs crafted bursts through the pipeline,
// loading the published snapshot once per burst and reporting an RCU quiescent state after each,
// while the management side publishes 1,000 snapshots, each with a different backend unhealthy.
// No packet may go to a backend that the snapshot it was decided on had marked unhealthy, and
// (in the ASan build of this test) no snapshot may be read after it was freed.

#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

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

TEST(PublisherStressTest, NoPacketGoesToABackendItsSnapshotHadMarkedUnhealthy) {
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

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> violations{0};
  std::thread worker([&] {
    WorkerCounters counters;
    std::vector<TrafficCounter> services(CounterIds::kMaxServices);
    std::vector<TrafficCounter> backends(CounterIds::kMaxBackends);
    WorkerState state;
    state.counters = &counters;
    state.traffic = {services.data(), backends.data()};
    rte_rcu_qsbr_thread_online(publisher->rcu(), 0);
    uint16_t next_port = 1;
    while (!stop.load(std::memory_order_relaxed)) {
      std::vector<ReceivedFrame> burst;
      burst.reserve(kMaxFramesPerCall);
      Frame frames[kMaxFramesPerCall];
      Verdict verdicts[kMaxFramesPerCall];
      for (uint16_t i = 0; i < kMaxFramesPerCall; ++i) {
        burst.emplace_back(concat({ethernet(kEtherTypeIpv4), ipv4(kClient, kVip, kProtocolTcp, 20),
                                   tcp(next_port++, 80)}));
        frames[i] = burst.back().frame;
      }
      const Snapshot* snapshot = publisher->current().load(std::memory_order_acquire);
      processFrames(*snapshot, 0, frames, verdicts, kMaxFramesPerCall, state);
      for (uint16_t i = 0; i < kMaxFramesPerCall; ++i) {
        if (verdicts[i] != Verdict::kTransmit) continue;
        IpAddress outer;
        std::copy(frames[i].data + 30, frames[i].data + 34, outer.bytes.begin());
        for (size_t b = 0; b < snapshot->backendCount(); ++b) {
          if (snapshot->backend(b).address == outer && !snapshot->backend(b).healthy) ++violations;
        }
        ++packets;
      }
      rte_rcu_qsbr_quiescent(publisher->rcu(), 0);
    }
    rte_rcu_qsbr_thread_offline(publisher->rcu(), 0);
  });

  // As the management loop does: publish, free what the workers have moved past, carry on.
  uint64_t token = 0;
  for (int generation = 2; generation <= kSnapshots + 1; ++generation) {
    token = publisher->publish(
        snapshotWithout(generation % kBackends, static_cast<uint64_t>(generation)));
    EXPECT_LE(publisher->reclaim(), SnapshotPublisher::kMaxRetired);
  }
  // The worker still runs, so the latest publish comes into force without anyone waiting on it.
  while (!publisher->inForce(token)) std::this_thread::yield();
  stop = true;
  worker.join();
  EXPECT_EQ(violations.load(), 0u);
  EXPECT_GT(packets.load(), 0u);
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
