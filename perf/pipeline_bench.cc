// The whole per-packet pipeline on one core, on real mbufs under an EAL: parse, service lookup,
// Maglev pick and the ipip rewrite, through the worker's own burst step (Worker::processBurst)
// into a TX buffer on a net_null port, in bursts of 32.
//
// 64-byte frames of 1,048,576 distinct flows. The mbufs come from a pool of 4096, small enough
// to stay in cache as received frames do (a NIC writes them into L3), and each burst refills 32
// of them with the next flows' frames, as a NIC's RX would, so every packet is parsed and
// rewritten from its original bytes. BM_RefillAndTransmitOnly is that refill and the TX alone:
// the pipeline's own cost is the difference.
//
// Reports Mpps (items_per_second), cycles per packet and ns per packet. Run it through
// perf/run-benchmarks.sh, or perf/scaling.sh for one copy per core side by side. Arguments that
// Google Benchmark does not take go to the EAL.

#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/config/loader.h"
#include "berth/dataplane/port.h"
#include "berth/dataplane/snapshot.h"
#include "berth/dataplane/worker.h"
#include "berth/util/heap.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

constexpr uint32_t kFlows = 1u << 20;
constexpr unsigned kPoolMbufs = 4096;
constexpr size_t kFrameLength = 60;  // a 64-byte frame without its FCS

// One service of 100 equal backends at the default M = 65537, sent on in IP-in-IP.
std::string benchConfig() {
  std::string yaml = R"(
dataplane:
  ports: [ { name: bench, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" } ]
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: ipip
    backends:
)";
  for (int i = 1; i <= 100; ++i) {
    absl::StrAppend(&yaml, "      - { name: web-", i, ", address: 198.18.", 1 + i / 250, ".",
                    1 + i % 250, " }\n");
  }
  return yaml;
}

struct Bench {
  Config config;
  std::vector<Table> tables;
  CounterIds ids;
  std::unique_ptr<const Snapshot> snapshot;
  OpenedPort port;
  rte_mempool* pool = nullptr;
  Worker* worker = nullptr;
  std::vector<TrafficCounter> service_traffic{CounterIds::kMaxServices};
  std::vector<TrafficCounter> backend_traffic{CounterIds::kMaxBackends};
  std::array<uint8_t, kFrameLength> frame{};
  uint32_t next_flow = 0;
};

Bench* g_bench = nullptr;

// The frame of flow i: 198.18.0.0/15 sources (131,072 of them) times 8 source ports.
inline void refill(rte_mbuf* mbuf, uint32_t flow) {
  auto* data = static_cast<uint8_t*>(mbuf->buf_addr) + RTE_PKTMBUF_HEADROOM;
  mbuf->data_off = RTE_PKTMBUF_HEADROOM;
  mbuf->data_len = kFrameLength;
  mbuf->pkt_len = kFrameLength;
  std::memcpy(data, g_bench->frame.data(), kFrameLength);
  const uint32_t source = 0xC6120000u + (flow & 0x1FFFF);
  const uint16_t source_port = static_cast<uint16_t>(1024 + (flow >> 17));
  data[26] = static_cast<uint8_t>(source >> 24);
  data[27] = static_cast<uint8_t>(source >> 16);
  data[28] = static_cast<uint8_t>(source >> 8);
  data[29] = static_cast<uint8_t>(source);
  data[34] = static_cast<uint8_t>(source_port >> 8);
  data[35] = static_cast<uint8_t>(source_port);
}

template <bool kRunPipeline>
void runBursts(benchmark::State& state) {
  Bench& bench = *g_bench;
  WorkerQueue& queue = bench.worker->queues[0];
  rte_mbuf* mbufs[kBurstSize];
  const uint64_t start = rte_rdtsc();
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(bench.pool, mbufs, kBurstSize) != 0) {
      state.SkipWithError("mbuf pool empty");
      break;
    }
    for (uint16_t i = 0; i < kBurstSize; ++i) {
      refill(mbufs[i], bench.next_flow);
      bench.next_flow = (bench.next_flow + 1) & (kFlows - 1);
    }
    if constexpr (kRunPipeline) {
      bench.worker->processBurst(*bench.snapshot, queue, mbufs, kBurstSize);
    } else {
      for (rte_mbuf* mbuf : mbufs)
        rte_eth_tx_buffer(queue.port_id, queue.queue, queue.tx_buffer, mbuf);
    }
  }
  const uint64_t cycles = rte_rdtsc() - start;
  rte_eth_tx_buffer_flush(queue.port_id, queue.queue, queue.tx_buffer);
  const double packets = static_cast<double>(state.iterations()) * kBurstSize;
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["cycles_per_packet"] = static_cast<double>(cycles) / packets;
  state.counters["ns_per_packet"] =
      static_cast<double>(cycles) * 1e9 / static_cast<double>(rte_get_tsc_hz()) / packets;
}

void BM_Pipeline(benchmark::State& state) {
  runBursts<true>(state);
  const uint64_t forwarded = g_bench->worker->counters.tx_packets.read();
  state.counters["forwarded_share"] =
      forwarded / std::max(1.0, static_cast<double>(g_bench->worker->counters.rx_packets.read()));
}
BENCHMARK(BM_Pipeline)->MinTime(1.0);

void BM_RefillAndTransmitOnly(benchmark::State& state) { runBursts<false>(state); }
BENCHMARK(BM_RefillAndTransmitOnly)->MinTime(1.0);

int setUp(int argc, char** argv) {
  const std::string prefix = absl::StrCat("berth-bench-", getpid());
  std::vector<std::string> args = {argv[0],       "--no-huge",     "-m",   "256",    "--no-pci",
                                   "--no-shconf", "--file-prefix", prefix, "--vdev", "net_null0",
                                   "--log-level", "lib.eal:error"};
  // Arguments Google Benchmark left are the EAL's: scaling runs pin each process to its own core
  // with --lcores 0@CPU, and a machine without DPDK installed loads its drivers with -d DIR.
  bool core_given = false;
  for (int i = 1; i < argc; ++i) {
    args.emplace_back(argv[i]);
    core_given |= args.back() == "-l" || args.back() == "--lcores";
  }
  if (!core_given) {
    args.emplace_back("-l");
    args.emplace_back("0");
  }
  std::vector<char*> eal_argv;
  for (std::string& arg : args) eal_argv.push_back(arg.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "EAL: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  std::filesystem::remove_all(rte_eal_get_runtime_dir());
  retainFreedHeapMemory();

  g_bench = new Bench();
  Bench& bench = *g_bench;
  absl::StatusOr<Config> config = parseConfig(benchConfig(), "pipeline_bench");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 1;
  }
  bench.config = *std::move(config);
  bench.tables = *buildServiceTables(bench.config);
  std::vector<std::string> warnings;
  absl::StatusOr<OpenedPort> port = openPort(bench.config.dataplane.ports[0], 1, warnings);
  if (!port.ok()) {
    std::fprintf(stderr, "%s\n", std::string(port.status().message()).c_str());
    return 1;
  }
  bench.port = *port;
  const MacAddress macs[] = {bench.port.mac};
  bench.snapshot = *buildSnapshot(bench.config, bench.tables, macs, {}, bench.ids, 1);
  bench.pool = rte_pktmbuf_pool_create("bench_rx", kPoolMbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       static_cast<int>(rte_socket_id()));
  if (bench.pool == nullptr) {
    std::fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  bench.worker = new Worker();
  auto* buffer = static_cast<rte_eth_dev_tx_buffer*>(
      rte_zmalloc("bench_tx", RTE_ETH_TX_BUFFER_SIZE(kBurstSize), 0));
  rte_eth_tx_buffer_init(buffer, kBurstSize);
  bench.worker->queues.push_back(WorkerQueue{bench.port.port_id, 0, 0, buffer});
  bench.worker->attach({bench.service_traffic.data(), bench.backend_traffic.data()});

  // TCP SYN to the VIP's port 80 from the port's own L2 peer; source address and port vary.
  Bytes frame =
      concat({ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 0, 0), IpAddress::v4(198, 18, 100, 1), kProtocolTcp, 20),
              tcp(0, 80), payload(6)});
  std::copy(bench.port.mac.bytes.begin(), bench.port.mac.bytes.end(), frame.begin());
  std::copy(frame.begin(), frame.begin() + kFrameLength, bench.frame.begin());
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (berth::setUp(argc, argv) != 0) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  rte_eal_cleanup();
  return 0;
}
