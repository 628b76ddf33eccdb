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
// Throughout, the port's statistics are read once a second on a thread of their own, as berthd's
// management loop has them read (metrics/port_stats.h), so their cost shows in every figure.
//
// BM_PipelineFullNatClientHits and BM_PipelineFullNatReplies are the fullnat service's two
// directions (docs/fullnat.md) over the same 1M flows, each holding a session already: a
// client's ACK rewritten to go from the local address to its backend, and a backend's ACK to
// the local address rewritten to go from the VIP to the client. Compare them with
// BM_PipelineConntrackHits, the ipip path with its connection table, in the same run.
//
// BM_PipelineMissesPeerFlows is the connection table's miss path alone, without flow sync's peer
// flows and with 100,000 of them, for lookups that hit and that miss there, compared pass by
// pass.
//
// Reports Mpps (items_per_second), cycles per packet and ns per packet. Run it through
// perf/run-benchmarks.sh, or perf/scaling.sh for one copy per core side by side. Arguments that
// Google Benchmark does not take go to the EAL.
//
// With --count_bursts=N it runs no benchmark: N bursts of the pipeline, then N of the
// connection table's all-hits case, each handed to the worker from a function of its own
// (countedPipelineBurst, countedConntrackHitBurst), for `valgrind --tool=callgrind` to count the
// instructions of the worker's burst step per packet, which a neighbour's load does not change
// as it changes cycles (perf/instructions.sh).

#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/config/loader.h"
#include "berth/dataplane/peer_flows.h"
#include "berth/dataplane/snapshot.h"
#include "berth/metrics/port_stats.h"
#include "berth/net/packet_parser.h"
#include "berth/net/proxy_protocol.h"
#include "berth/runtime/port.h"
#include "berth/runtime/worker.h"
#include "berth/util/heap.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

constexpr uint32_t kFlows = 1u << 20;
constexpr unsigned kPoolMbufs = 4096;
constexpr size_t kFrameLength = 60;     // a 64-byte frame without its FCS
constexpr size_t kTcpFlagsOffset = 47;  // Ethernet, a 20-byte IPv4 header, then TCP's 13th byte
// The connection table's secret, fixed so that peer flows can be built under it as berthd builds
// them under its workers' (WorkerSetup::connection_hash_key).
constexpr ConnectionHashKey kBenchHashKey{{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9,
                                           0x94d049bb133111eb, 0x2545f4914f6cdd1d,
                                           0xd6e8feb86659fd93, 0xa0761d6478bd642f}};
// The miss-path benchmarks' flows, and the size of the peers' flows map they run against.
constexpr uint32_t kMissFlows = 100'000;

// One service of 100 equal backends at the default M = 65537, sent on in IP-in-IP, on a port with
// a kernel interface configured (idle: every frame is a VIP's), as an appliance with one NIC runs.
// The same backends behind a fullnat service on port 81, from one local address of the port, and
// behind one with the PROXY protocol on port 82.
std::string benchConfig() {
  std::string yaml = R"(
dataplane:
  ports: [ { name: bench, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe",
              exception: { name: berth-bench }, snat_addresses: [198.18.0.20] } ]
services:
)";
  for (const auto& [name, port, mode] : {std::tuple("web", 80, "ipip"),
                                         {"nat", 81, "fullnat"},
                                         {"proxied", 82, "fullnat\n    proxy_protocol: v2"}}) {
    absl::StrAppend(&yaml, "  - name: ", name, "\n    vip: 198.18.100.1\n    port: ", port,
                    "\n    protocol: tcp\n    forwarding: ", mode, "\n    backends:\n");
    for (int i = 1; i <= 100; ++i) {
      absl::StrAppend(&yaml, "      - { name: web-", i, ", address: 198.18.", 1 + i / 250, ".",
                      1 + i % 250, " }\n");
    }
  }
  return yaml;
}

constexpr uint16_t kNatServicePort = 81;
constexpr uint16_t kProxiedServicePort = 82;
// The client's sequence number and the backend's acknowledgement in every Full-NAT frame the
// benchmarks time: past a PROXY session's header (its stream starts at 1, after a SYN of 0), so
// that a proxied session shifts both as it does for all but a connection's first segments.
constexpr uint32_t kSteadySequence = 1000;
constexpr uint32_t kSteadyAcknowledgement = 2000;
const IpAddress kNatLocalAddress = IpAddress::v4(198, 18, 0, 20);

// A Full-NAT service's 1M flows on a worker of their own, each holding a session: the service's
// port, and each flow's reply tuple, its backend's address and its local port.
struct NatFlows {
  uint16_t service_port = 0;
  WorkerPtr worker;
  std::vector<uint32_t> reply_backends;     // IPv4, host order
  std::vector<uint16_t> reply_local_ports;  // host order
};

struct Bench {
  Config config;
  std::vector<Table> tables;
  CounterIds ids;
  std::unique_ptr<const Snapshot> snapshot;
  // The same service under each algorithm, in Algorithm order, for BM_PipelineByAlgorithm.
  std::vector<std::unique_ptr<const Snapshot>> algorithm_snapshots;
  OpenedPort port;
  rte_mempool* pool = nullptr;
  WorkerPtr worker;
  WorkerPtr conntrack_worker;
  // With a Full-NAT session table holding a session for each of the 1M flows to port 81; the
  // PROXY protocol service's on port 82, made by the first benchmark that needs them.
  NatFlows nat;
  NatFlows proxied;
  // The same, for the miss-path benchmarks, whose clock jumps.
  WorkerPtr miss_worker;
  // A memif server port with no peer, whose link the worker reads before it touches the port.
  OpenedPort memif_port;
  std::string memif_socket;
  WorkerPtr link_worker;
  std::array<uint8_t, kFrameLength> frame{};
  uint32_t next_flow = 0;
  // The port's statistics, read every second; the turner stands in for berthd's management loop.
  std::unique_ptr<PortStatsSampler> port_stats;
  std::thread port_stats_turner;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> port_stats_reads{0};
  // Peer records of the miss flows themselves (every lookup a hit), and of as many others
  // (every lookup a miss); their expiry is set when a run builds its map.
  std::vector<PeerFlow> peer_records_of_miss_flows;
  std::vector<PeerFlow> peer_records_of_other_flows;
};

Bench* g_bench = nullptr;
// How the Full-NAT workers are made, for the PROXY protocol service's, made on first use.
WorkerSetup g_nat_setup;

// The frame of flow i: 198.18.0.0/15 sources (131,072 of them) times 8 source ports.
inline void writeFrame(uint8_t* data, uint32_t flow) {
  std::memcpy(data, g_bench->frame.data(), kFrameLength);
  const uint32_t source = 0xC6120000u + (flow & 0x1FFFF);
  const uint16_t source_port = static_cast<uint16_t>(1024 + ((flow >> 17) & 0x7FFF));
  data[26] = static_cast<uint8_t>(source >> 24);
  data[27] = static_cast<uint8_t>(source >> 16);
  data[28] = static_cast<uint8_t>(source >> 8);
  data[29] = static_cast<uint8_t>(source);
  data[34] = static_cast<uint8_t>(source_port >> 8);
  data[35] = static_cast<uint8_t>(source_port);
}

inline void refill(rte_mbuf* mbuf, uint32_t flow) {
  auto* data = static_cast<uint8_t*>(mbuf->buf_addr) + RTE_PKTMBUF_HEADROOM;
  mbuf->data_off = RTE_PKTMBUF_HEADROOM;
  mbuf->data_len = kFrameLength;
  mbuf->pkt_len = kFrameLength;
  writeFrame(data, flow);
}

// A peer's record of flow i, on the backend of index i % 100.
PeerFlow peerFlowOf(uint32_t flow) {
  std::array<uint8_t, kFrameLength> data;
  writeFrame(data.data(), flow);
  ParsedPacket packet;
  parsePacket(data.data(), data.size(), packet);
  const Snapshot& snapshot = *g_bench->snapshot;
  const SnapshotService& service = snapshot.service(0);
  const ConnectionKey key = ConnectionKey::of(packet.flow, service.hash_fields,
                                              static_cast<uint16_t>(service.counter_id));
  PeerFlow peer;
  peer.source = key.source;
  peer.source_port = key.source_port;
  peer.service = key.service;
  peer.backend =
      static_cast<uint16_t>(snapshot.backend(service.first_backend + flow % 100).counter_id);
  peer.state = ConnectionState::kTcpEstablished;
  return peer;
}

// Flow i's packet to a fullnat service with `flags` (and a sequence number), or its backend's
// reply (with an acknowledgement).
inline void writeNumbers(uint8_t* data, uint32_t sequence, uint32_t acknowledgement) {
  for (int byte = 0; byte < 4; ++byte) {
    data[38 + byte] = static_cast<uint8_t>(sequence >> (24 - 8 * byte));
    data[42 + byte] = static_cast<uint8_t>(acknowledgement >> (24 - 8 * byte));
  }
}

inline void writeNatClientFrame(uint8_t* data, const NatFlows& service, uint32_t flow,
                                uint8_t flags, uint32_t sequence = kSteadySequence) {
  writeFrame(data, flow);
  data[36] = static_cast<uint8_t>(service.service_port >> 8);
  data[37] = static_cast<uint8_t>(service.service_port);
  data[kTcpFlagsOffset] = flags;
  writeNumbers(data, sequence, 0);
}

inline void writeNatReplyFrame(uint8_t* data, const NatFlows& service, uint32_t flow,
                               uint32_t acknowledgement = kSteadyAcknowledgement) {
  writeNatClientFrame(data, service, flow, kTcpAck);
  const uint32_t backend = service.reply_backends[flow];
  const uint16_t local_port = service.reply_local_ports[flow];
  const uint8_t from[4] = {static_cast<uint8_t>(backend >> 24), static_cast<uint8_t>(backend >> 16),
                           static_cast<uint8_t>(backend >> 8), static_cast<uint8_t>(backend)};
  std::memcpy(data + 26, from, 4);
  std::memcpy(data + 30, kNatLocalAddress.bytes.data(), 4);
  data[34] = static_cast<uint8_t>(service.service_port >> 8);
  data[35] = static_cast<uint8_t>(service.service_port);
  data[36] = static_cast<uint8_t>(local_port >> 8);
  data[37] = static_cast<uint8_t>(local_port);
  writeNumbers(data, 5000, acknowledgement);
}

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// One pass of `count` packets of `flows`' service from flow `first` on (wrapping over the 1M
// flows) through its worker: clients' segments with `flags` and sequence number `number`, or the
// backends' ACKs acknowledging `number`. The TSC cycles it took, 0 when the pool ran dry.
uint64_t natPass(NatFlows& flows, bool replies, uint32_t first, uint32_t count, uint8_t flags,
                 uint32_t number) {
  Worker& worker = *flows.worker;
  rte_mbuf* mbufs[kBurstSize];
  const uint64_t start = rte_rdtsc();
  for (uint32_t sent = 0; sent < count; sent += kBurstSize) {
    if (rte_pktmbuf_alloc_bulk(g_bench->pool, mbufs, kBurstSize) != 0) return 0;
    for (uint16_t i = 0; i < kBurstSize; ++i) {
      const uint32_t flow = (first + sent + i) & (kFlows - 1);
      refill(mbufs[i], flow);
      auto* data = rte_pktmbuf_mtod(mbufs[i], uint8_t*);
      if (replies) {
        writeNatReplyFrame(data, flows, flow, number);
      } else {
        writeNatClientFrame(data, flows, flow, flags, number);
      }
    }
    worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
  }
  const uint64_t cycles = rte_rdtsc() - start;
  worker.flush();
  return cycles;
}

// A SYN (sequence number 0) of each of the 1M flows opens its session on the service's worker;
// each flow's reply tuple is read back from it.
int openNatSessions(NatFlows& flows, size_t service_index) {
  if (natPass(flows, false, 0, kFlows, kTcpSyn, 0) == 0) return 1;
  const SnapshotService& service = g_bench->snapshot->service(service_index);
  const Worker& worker = *flows.worker;
  for (uint32_t flow = 0; flow < kFlows; ++flow) {
    std::array<uint8_t, kFrameLength> data;
    writeNatClientFrame(data.data(), flows, flow, kTcpAck);
    ParsedPacket packet;
    parsePacket(data.data(), data.size(), packet);
    NatClientKey key;
    key.client = packet.flow.source;
    key.client_port = packet.flow.source_port;
    key.service = static_cast<uint16_t>(service.counter_id);
    const NatSession* session = worker.natSessions()->peekClient(key);
    if (session == nullptr) {
      std::fprintf(stderr, "flow %u has no Full-NAT session:", flow);
      for (size_t event = 0; event < kNatEventCount; ++event) {
        std::fprintf(stderr, " %s %llu",
                     std::string(toString(static_cast<NatEvent>(event))).c_str(),
                     static_cast<unsigned long long>(worker.counters.nat.values[event].read()));
      }
      std::fprintf(stderr, "\n");
      return 1;
    }
    flows.reply_backends.push_back(uint32_t{session->backend[0]} << 24 |
                                   uint32_t{session->backend[1]} << 16 |
                                   uint32_t{session->backend[2]} << 8 | session->backend[3]);
    flows.reply_local_ports.push_back(
        static_cast<uint16_t>(session->local_port >> 8 | session->local_port << 8));
  }
  return 0;
}

// The PROXY protocol service's sessions on a worker of their own (another 272 MiB, so made only
// for the benchmark that times them), each brought to where all but a connection's first
// segments find it: the SYN, the client's ACK at the stream's start (1) that carries the header,
// the backend's acknowledgement of it, and a client's segment, which marks its entry.
absl::Status openProxiedSessions() {
  NatFlows& flows = g_bench->proxied;
  if (flows.worker) return absl::OkStatus();
  absl::StatusOr<WorkerPtr> worker = Worker::create(g_nat_setup);
  if (!worker.ok()) return worker.status();
  flows.worker = *std::move(worker);
  flows.worker->state.now_ms = 1000;
  flows.service_port = kProxiedServicePort;
  if (openNatSessions(flows, 2) != 0 || natPass(flows, false, 0, kFlows, kTcpAck, 1) == 0 ||
      natPass(flows, true, 0, kFlows, kTcpAck, 1 + kProxyHeaderIpv4Length) == 0 ||
      natPass(flows, false, 0, kFlows, kTcpAck, kSteadySequence) == 0) {
    return absl::ResourceExhaustedError("the PROXY protocol sessions could not be made");
  }
  const uint64_t headers = flows.worker->counters.nat.read(NatEvent::kProxyHeaderSent);
  if (headers != kFlows) {
    return absl::InternalError(absl::StrCat(headers, " headers sent for ", kFlows, " sessions"));
  }
  return absl::OkStatus();
}

enum class Mode {
  kPipeline,
  kRefillAndTransmit,
  kConntrackHits,
  kConntrackHalfNew,
  kFullNatClientHits,
  kFullNatReplies
};

// Times bursts of kBurstSize fresh mbufs that `fill` writes, each handed to `worker`'s burst step
// on `snapshot` (or, without one, straight to its TX buffer), and reports Mpps, cycles and ns a
// packet.
template <typename Fill>
void timeBursts(benchmark::State& state, Worker& worker, const Snapshot* snapshot, Fill fill) {
  WorkerQueue& queue = worker.queue(0);
  rte_mbuf* mbufs[kBurstSize];
  const uint64_t start = rte_rdtsc();
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(g_bench->pool, mbufs, kBurstSize) != 0) {
      state.SkipWithError("mbuf pool empty");
      break;
    }
    fill(mbufs);
    if (snapshot == nullptr) {
      for (rte_mbuf* mbuf : mbufs) {
        rte_eth_tx_buffer(queue.port_id, queue.queue, queue.tx_buffer, mbuf);
      }
    } else {
      worker.processBurst(*snapshot, queue, mbufs, kBurstSize);
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

template <Mode kMode>
void runBursts(benchmark::State& state, const Snapshot* snapshot = nullptr) {
  Bench& bench = *g_bench;
  if (snapshot == nullptr) snapshot = bench.snapshot.get();
  constexpr bool kConntrack = kMode == Mode::kConntrackHits || kMode == Mode::kConntrackHalfNew;
  constexpr bool kFullNat = kMode == Mode::kFullNatClientHits || kMode == Mode::kFullNatReplies;
  Worker& worker =
      kFullNat ? *bench.nat.worker : (kConntrack ? *bench.conntrack_worker : *bench.worker);
  uint32_t fresh_flow = kFlows;
  timeBursts(state, worker, kMode == Mode::kRefillAndTransmit ? nullptr : snapshot,
             [&](rte_mbuf** mbufs) {
               for (uint16_t i = 0; i < kBurstSize; ++i) {
                 if constexpr (kFullNat) {
                   rte_mbuf* mbuf = mbufs[i];
                   mbuf->data_off = RTE_PKTMBUF_HEADROOM;
                   mbuf->data_len = kFrameLength;
                   mbuf->pkt_len = kFrameLength;
                   auto* data = rte_pktmbuf_mtod(mbuf, uint8_t*);
                   if (kMode == Mode::kFullNatClientHits) {
                     writeNatClientFrame(data, bench.nat, bench.next_flow, kTcpAck);
                   } else {
                     writeNatReplyFrame(data, bench.nat, bench.next_flow);
                   }
                   bench.next_flow = (bench.next_flow + 1) & (kFlows - 1);
                   continue;
                 }
                 // Half new: every other packet is a flow never seen before (past the first 1M).
                 if (kMode == Mode::kConntrackHalfNew && (i & 1) != 0) {
                   refill(mbufs[i], fresh_flow++);
                   continue;
                 }
                 refill(mbufs[i], bench.next_flow);
                 bench.next_flow = (bench.next_flow + 1) & (kFlows - 1);
               }
             });
}

// The instruction-count run (--count_bursts): refill and mbuf allocation, the simulated NIC, stay
// outside the two counted functions; the worker's burst step, TX buffering included, is inside.
[[gnu::noinline]] void countedPipelineBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}
[[gnu::noinline]] void countedConntrackHitBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}

template <typename Counted>
int countBursts(Worker& worker, uint64_t bursts, Counted counted) {
  rte_mbuf* mbufs[kBurstSize];
  for (uint64_t burst = 0; burst < bursts; ++burst) {
    if (rte_pktmbuf_alloc_bulk(g_bench->pool, mbufs, kBurstSize) != 0) return 1;
    for (rte_mbuf* mbuf : mbufs) {
      refill(mbuf, g_bench->next_flow);
      g_bench->next_flow = (g_bench->next_flow + 1) & (kFlows - 1);
    }
    counted(worker, mbufs);
  }
  return 0;
}

// Full-NAT's four kinds, as BM_PipelineFullNatProxyShift times them: the plain and the PROXY
// protocol service, clients' segments and backends' ACKs.
[[gnu::noinline]] void countedNatClientBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}
[[gnu::noinline]] void countedProxiedClientBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}
[[gnu::noinline]] void countedNatReplyBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}
[[gnu::noinline]] void countedProxiedReplyBurst(Worker& worker, rte_mbuf** mbufs) {
  worker.processBurst(*g_bench->snapshot, worker.queue(0), mbufs, kBurstSize);
}

template <typename Counted>
int countNatBursts(NatFlows& flows, bool replies, uint64_t bursts, Counted counted) {
  rte_mbuf* mbufs[kBurstSize];
  uint32_t flow = 0;
  for (uint64_t burst = 0; burst < bursts; ++burst) {
    if (rte_pktmbuf_alloc_bulk(g_bench->pool, mbufs, kBurstSize) != 0) return 1;
    for (rte_mbuf* mbuf : mbufs) {
      refill(mbuf, flow);
      auto* data = rte_pktmbuf_mtod(mbuf, uint8_t*);
      if (replies) {
        writeNatReplyFrame(data, flows, flow);
      } else {
        writeNatClientFrame(data, flows, flow, kTcpAck);
      }
      flow = (flow + 1) & (kFlows - 1);
    }
    counted(*flows.worker, mbufs);
  }
  flows.worker->flush();
  return 0;
}

int runCountedBursts(uint64_t bursts) {
  g_bench->next_flow = 0;
  if (countBursts(*g_bench->worker, bursts, countedPipelineBurst) != 0) return 1;
  g_bench->next_flow = 0;
  if (countBursts(*g_bench->conntrack_worker, bursts, countedConntrackHitBurst) != 0) return 1;
  if (const absl::Status made = openProxiedSessions(); !made.ok()) {
    std::fprintf(stderr, "%s\n", std::string(made.message()).c_str());
    return 1;
  }
  if (countNatBursts(g_bench->nat, false, bursts, countedNatClientBurst) != 0 ||
      countNatBursts(g_bench->proxied, false, bursts, countedProxiedClientBurst) != 0 ||
      countNatBursts(g_bench->nat, true, bursts, countedNatReplyBurst) != 0 ||
      countNatBursts(g_bench->proxied, true, bursts, countedProxiedReplyBurst) != 0) {
    return 1;
  }
  const uint64_t hits = g_bench->conntrack_worker->counters.conntrack
                            .values[static_cast<size_t>(ConntrackEvent::kHit)]
                            .read();
  std::printf("{\"bursts\": %llu, \"packets_per_burst\": %u, \"conntrack_hits\": %llu}\n",
              static_cast<unsigned long long>(bursts), unsigned{kBurstSize},
              static_cast<unsigned long long>(hits));
  return 0;
}

void BM_Pipeline(benchmark::State& state) {
  runBursts<Mode::kPipeline>(state);
  const uint64_t forwarded = g_bench->worker->counters.tx_packets.read();
  state.counters["forwarded_share"] =
      forwarded / std::max(1.0, static_cast<double>(g_bench->worker->counters.rx_packets.read()));
}
BENCHMARK(BM_Pipeline)->MinTime(1.0);

// The pipeline with the service's table built by each algorithm (0 maglev, 1 ring,
// 2 rendezvous): every one is the same M-slot array, so the cost per packet must not differ.
void BM_PipelineByAlgorithm(benchmark::State& state) {
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  state.SetLabel(std::string(toString(algorithm)));
  runBursts<Mode::kPipeline>(state, g_bench->algorithm_snapshots[state.range(0)].get());
}
BENCHMARK(BM_PipelineByAlgorithm)->DenseRange(0, 2)->MinTime(1.0);

void BM_RefillAndTransmitOnly(benchmark::State& state) {
  runBursts<Mode::kRefillAndTransmit>(state);
}
BENCHMARK(BM_RefillAndTransmitOnly)->MinTime(1.0);

// What a worker pays per loop for a memif port, whose link it reads before touching the port
// (WorkerQueue::poll_only_while_link_up): one rte_eth_link_get_nowait. Per loop, not per
// packet: a full burst spreads it over 32 packets.
void BM_MemifLinkCheckPerLoop(benchmark::State& state) {
  Worker& worker = *g_bench->link_worker;
  const uint64_t start = rte_rdtsc();
  for (auto _ : state) {
    worker.refreshLinks();
    benchmark::DoNotOptimize(worker.queue(0).link_up);
  }
  const auto loops = static_cast<double>(state.iterations());
  const auto cycles = static_cast<double>(rte_rdtsc() - start);
  state.counters["cycles_per_loop"] = cycles / loops;
  state.counters["ns_per_loop"] = cycles * 1e9 / static_cast<double>(rte_get_tsc_hz()) / loops;
}
BENCHMARK(BM_MemifLinkCheckPerLoop)->MinTime(1.0);

// The pipeline with a connection table of 8M entries (256 MiB, larger than L3) that already holds
// the 1M flows, so every packet is a hit. At an eighth of its capacity: a bucket hash that spreads
// keys as random ones do leaves 14% of 1M flows in 4-way buckets holding more than 4 at half
// load, and cycling through them, LRU then misses each of those on every pass.
void BM_PipelineConntrackHits(benchmark::State& state) {
  const ConntrackCounters& counters = g_bench->conntrack_worker->counters.conntrack;
  const uint64_t hits_before = counters.values[static_cast<size_t>(ConntrackEvent::kHit)].read();
  const uint64_t misses_before = counters.values[static_cast<size_t>(ConntrackEvent::kMiss)].read();
  runBursts<Mode::kConntrackHits>(state);
  const auto hits = static_cast<double>(
      counters.values[static_cast<size_t>(ConntrackEvent::kHit)].read() - hits_before);
  const auto misses = static_cast<double>(
      counters.values[static_cast<size_t>(ConntrackEvent::kMiss)].read() - misses_before);
  state.counters["hit_share"] = hits / std::max(1.0, hits + misses);
}
BENCHMARK(BM_PipelineConntrackHits)->MinTime(1.0);

// The fullnat service's 1M flows, each with its session (a 1M-session table, 272 MiB): a
// client's ACK, looked up in the session table's client index and rewritten from the local
// address to its backend; and a backend's ACK to the local address, looked up by its reply
// tuple and rewritten from the VIP to the client.
void BM_PipelineFullNatClientHits(benchmark::State& state) {
  const NatCounters& counters = g_bench->nat.worker->counters.nat;
  const uint64_t refused_before = counters.read(NatEvent::kClientNoSession);
  runBursts<Mode::kFullNatClientHits>(state);
  if (counters.read(NatEvent::kClientNoSession) != refused_before) {
    state.SkipWithError("a client's packet found no session");
  }
}
BENCHMARK(BM_PipelineFullNatClientHits)->MinTime(1.0);

void BM_PipelineFullNatReplies(benchmark::State& state) {
  const NatCounters& counters = g_bench->nat.worker->counters.nat;
  const uint64_t unmatched_before = counters.read(NatEvent::kReplyNoSession);
  runBursts<Mode::kFullNatReplies>(state);
  if (counters.read(NatEvent::kReplyNoSession) != unmatched_before) {
    state.SkipWithError("a reply found no session");
  }
}
BENCHMARK(BM_PipelineFullNatReplies)->MinTime(1.0);

// The PROXY protocol's cost per packet once a session's header is acknowledged: the client's
// sequence number shifted (without reading the session) and the backend's acknowledgement
// shifted back, against the same service without it. Passes of 65,536 packets of each of four
// kinds (the plain and the proxied service, clients' segments and backends' ACKs, each over its
// own 1M sessions) run in turn, each round in another order, and each round's proxied passes are
// compared with its plain ones, as BM_PipelineMissesPeerFlows compares its passes: a neighbour's
// load weighs on both alike. Reports the medians of cycles a packet and of the per-round costs
// (client_shift_cost, reply_shift_cost: 0.05 is 5% more cycles).
void BM_PipelineFullNatProxyShift(benchmark::State& state) {
  if (const absl::Status made = openProxiedSessions(); !made.ok()) {
    state.SkipWithError(std::string(made.message()).c_str());
    return;
  }
  constexpr uint32_t kPass = 65'536;
  struct Kind {
    const char* name;
    NatFlows* flows;
    bool replies;
    uint32_t next = 0;
    std::vector<double> cycles;
  };
  std::array<Kind, 4> kinds{Kind{"client", &g_bench->nat, false, 0, {}},
                            Kind{"proxied_client", &g_bench->proxied, false, 0, {}},
                            Kind{"reply", &g_bench->nat, true, 0, {}},
                            Kind{"proxied_reply", &g_bench->proxied, true, 0, {}}};
  std::array<size_t, 4> order{0, 1, 2, 3};
  std::vector<double> client_costs;
  std::vector<double> reply_costs;
  const uint64_t headers_before =
      g_bench->proxied.worker->counters.nat.read(NatEvent::kProxyHeaderSent);
  uint64_t rounds = 0;
  for (auto _ : state) {
    std::array<double, 4> round{};
    for (size_t k : order) {
      Kind& kind = kinds[k];
      const uint64_t cycles = natPass(*kind.flows, kind.replies, kind.next, kPass, kTcpAck,
                                      kind.replies ? kSteadyAcknowledgement : kSteadySequence);
      if (cycles == 0) {
        state.SkipWithError("mbuf pool empty");
        return;
      }
      kind.next = (kind.next + kPass) & (kFlows - 1);
      round[k] = static_cast<double>(cycles) / kPass;
      kind.cycles.push_back(round[k]);
    }
    client_costs.push_back(round[1] / round[0] - 1);
    reply_costs.push_back(round[3] / round[2] - 1);
    std::rotate(order.begin(), order.begin() + 1, order.end());
    if (++rounds % 4 == 0) std::swap(order[0], order[2]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 4 * kPass);
  const double tsc_hz = static_cast<double>(rte_get_tsc_hz());
  for (const Kind& kind : kinds) {
    const double cycles = median(kind.cycles);
    state.counters[absl::StrCat(kind.name, "_cycles_per_packet")] = cycles;
    state.counters[absl::StrCat(kind.name, "_mpps")] = tsc_hz / cycles / 1e6;
  }
  state.counters["client_shift_cost"] = median(client_costs);
  state.counters["reply_shift_cost"] = median(reply_costs);
  // Every proxied session past its header: none sent again while timed.
  if (g_bench->proxied.worker->counters.nat.read(NatEvent::kProxyHeaderSent) != headers_before) {
    state.SkipWithError("a header was sent while timed");
  }
}
// 40 rounds: 160 passes of 65,536 packets, about 2 s.
BENCHMARK(BM_PipelineFullNatProxyShift)->Iterations(40);

// Half the packets are hits; half are flows never seen, each looked up, picked and inserted
// (evicting the least recently seen once its bucket is full).
void BM_PipelineConntrackHalfNew(benchmark::State& state) {
  runBursts<Mode::kConntrackHalfNew>(state);
}
BENCHMARK(BM_PipelineConntrackHalfNew)->MinTime(1.0);

// The connection table's miss path, with flow sync's peer flows and without: passes over
// 100,000 flows of ACKs (a SYN never asks the peers), each one's connection expired since the
// last pass (the worker clock moves past every timeout before each), so every packet is looked
// up, found missing, picked and inserted over its expired entry. With a map, each miss also
// reads the peers' flows: for a map of other flows the lookup misses there, the cost every new
// flow pays with sync on; for a map of these flows it hits, as for a flow moved here from a peer
// that died, and takes the peer's backend instead of the pick.
//
// The three run pass by pass, in turn (each round in a new order), and each round's passes are
// compared with each other: a neighbour's load on a shared machine lasts longer than a round
// (about 25 ms), so it weighs on the three alike, where three benchmarks run one after the other
// differed by 20% between runs. Reports the medians over rounds of each one's cycles a packet
// and of the two maps' cost against none (map_miss_cost, map_hit_cost: 0.05 is 5% more cycles).
enum class PeerMap { kNone, kMiss, kHit };

// One pass of the miss flows through `worker` with `peers`: the TSC cycles it took.
uint64_t missPass(Worker& worker, const PeerFlows* peers, uint32_t pass_advance_ms) {
  WorkerQueue& queue = worker.queue(0);
  worker.state.now_ms += pass_advance_ms;
  worker.state.peer_flows = peers;
  rte_mbuf* mbufs[kBurstSize];
  uint32_t flow = 0;
  const uint64_t start = rte_rdtsc();
  while (flow < kMissFlows) {
    if (rte_pktmbuf_alloc_bulk(g_bench->pool, mbufs, kBurstSize) != 0) return 0;
    for (uint16_t i = 0; i < kBurstSize; ++i) {
      refill(mbufs[i], flow++);
      rte_pktmbuf_mtod(mbufs[i], uint8_t*)[kTcpFlagsOffset] = kTcpAck;
    }
    worker.processBurst(*g_bench->snapshot, queue, mbufs, kBurstSize);
  }
  const uint64_t cycles = rte_rdtsc() - start;
  worker.state.peer_flows = nullptr;
  return cycles;
}

void BM_PipelineMissesPeerFlows(benchmark::State& state) {
  Bench& bench = *g_bench;
  Worker& worker = *bench.miss_worker;
  // Past every connection's timeout at each pass.
  const ConntrackConfig timeouts;
  const uint32_t pass_advance_ms = (std::max({timeouts.tcp_established_s, timeouts.tcp_opening_s,
                                              timeouts.tcp_closing_s, timeouts.udp_s}) +
                                    1) *
                                   1000;
  // The maps' flows live for about 7,000 passes from now: more than any run makes.
  std::unique_ptr<const PeerFlows> maps[3];
  for (PeerMap map : {PeerMap::kMiss, PeerMap::kHit}) {
    std::vector<PeerFlow>& records =
        map == PeerMap::kHit ? bench.peer_records_of_miss_flows : bench.peer_records_of_other_flows;
    for (PeerFlow& record : records) record.expires_ms = worker.state.now_ms + INT32_MAX;
    maps[static_cast<size_t>(map)] = PeerFlows::build(records, kBenchHashKey);
    if (maps[static_cast<size_t>(map)] == nullptr) {
      state.SkipWithError("no memory for the peer flows");
      return;
    }
  }
  const ConntrackCounters& counters = worker.counters.conntrack;
  auto count = [&counters](ConntrackEvent event) {
    return counters.values[static_cast<size_t>(event)].read();
  };
  const uint64_t hits_before = count(ConntrackEvent::kHit);
  const uint64_t adopted_before = count(ConntrackEvent::kSyncAdoption);
  std::array<std::vector<double>, 3> cycles_per_packet;
  std::vector<double> miss_costs;
  std::vector<double> hit_costs;
  // Each of the six orders in turn, so that none of the three always follows the same one.
  std::array<PeerMap, 3> order{PeerMap::kNone, PeerMap::kMiss, PeerMap::kHit};
  uint64_t rounds = 0;
  for (auto _ : state) {
    std::array<double, 3> round{};
    for (PeerMap map : order) {
      const uint64_t cycles =
          missPass(worker, maps[static_cast<size_t>(map)].get(), pass_advance_ms);
      if (cycles == 0) {
        state.SkipWithError("mbuf pool empty");
        return;
      }
      round[static_cast<size_t>(map)] = static_cast<double>(cycles) / kMissFlows;
      cycles_per_packet[static_cast<size_t>(map)].push_back(round[static_cast<size_t>(map)]);
    }
    miss_costs.push_back(round[1] / round[0] - 1);
    hit_costs.push_back(round[2] / round[0] - 1);
    if (++rounds % 3 == 0) {
      std::swap(order[0], order[1]);
    } else {
      std::rotate(order.begin(), order.begin() + 1, order.end());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 3 * kMissFlows);
  const double tsc_hz = static_cast<double>(rte_get_tsc_hz());
  const char* names[3] = {"none", "miss", "hit"};
  for (size_t map = 0; map < 3; ++map) {
    const double cycles = median(cycles_per_packet[map]);
    state.counters[absl::StrCat(names[map], "_cycles_per_packet")] = cycles;
    state.counters[absl::StrCat(names[map], "_mpps")] = tsc_hz / cycles / 1e6;
  }
  state.counters["map_miss_cost"] = median(miss_costs);
  state.counters["map_hit_cost"] = median(hit_costs);
  // Every packet of the hit passes adopted, none of any pass a connection-table hit.
  state.counters["adopted_share"] =
      static_cast<double>(count(ConntrackEvent::kSyncAdoption) - adopted_before) /
      (static_cast<double>(rounds) * kMissFlows);
  state.counters["conntrack_hits"] = static_cast<double>(count(ConntrackEvent::kHit) - hits_before);
}
// 40 rounds: 120 passes of 100,000 packets, about 3 s.
BENCHMARK(BM_PipelineMissesPeerFlows)->Iterations(40);

int setUp(int argc, char** argv) {
  const std::string prefix = absl::StrCat("berth-bench-", getpid());
  std::vector<std::string> args = {argv[0],  "--no-pci",  "--no-shconf", "--file-prefix", prefix,
                                   "--vdev", "net_null0", "--log-level", "lib.eal:error"};
  // Arguments Google Benchmark left are the EAL's: scaling runs pin each process to its own core
  // with --lcores 0@CPU, a machine without DPDK installed loads its drivers with -d DIR, and a
  // run on reserved hugepages passes --in-memory. Without that, memory is plain pages
  // (--no-huge), which every machine has.
  bool core_given = false;
  bool hugepages = false;
  for (int i = 1; i < argc; ++i) {
    args.emplace_back(argv[i]);
    core_given |= args.back() == "-l" || args.back() == "--lcores";
    hugepages |= args.back() == "--in-memory";
  }
  if (!core_given) {
    args.emplace_back("-l");
    args.emplace_back("0");
  }
  if (!hugepages) {
    for (const char* arg : {"--no-huge", "-m", "768"}) args.emplace_back(arg);
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
  for (Algorithm algorithm : {Algorithm::kMaglev, Algorithm::kRing, Algorithm::kRendezvous}) {
    Config variant = bench.config;
    variant.services[0].algorithm = algorithm;
    const std::vector<Table> tables = *buildServiceTables(variant);
    bench.algorithm_snapshots.push_back(*buildSnapshot(variant, tables, macs, {}, bench.ids, 1));
  }
  bench.pool = rte_pktmbuf_pool_create("bench_rx", kPoolMbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       static_cast<int>(rte_socket_id()));
  if (bench.pool == nullptr) {
    std::fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  // The workers as berthd makes them (Worker::create), serving queue 0 of the port. Without
  // hugepages (--no-huge) the connection table asks for transparent huge pages, as berthd's does.
  WorkerSetup setup;
  setup.lcore = rte_lcore_id();
  setup.queues = {{bench.port.port_id, 0, 0, false}};
  setup.exception_path = true;
  absl::StatusOr<WorkerPtr> worker = Worker::create(setup);
  setup.conntrack = ConntrackConfig{.entries_per_core = 8 * kFlows};
  setup.connection_hash_key = kBenchHashKey;
  absl::StatusOr<WorkerPtr> conntrack_worker = Worker::create(setup);
  absl::StatusOr<WorkerPtr> miss_worker = Worker::create(setup);
  WorkerSetup nat_setup = setup;
  nat_setup.conntrack = ConntrackConfig{.entries_per_core = 1024};
  nat_setup.nat_sessions = kFlows;
  absl::StatusOr<WorkerPtr> nat_worker = Worker::create(nat_setup);
  g_nat_setup = nat_setup;

  PortConfig memif;
  memif.name = "memif";
  bench.memif_socket = absl::StrCat("/tmp/berth-bench-", getpid(), ".sock");
  memif.device =
      absl::StrCat("net_memif0,role=server,socket=", bench.memif_socket, ",socket-abstract=no");
  absl::StatusOr<OpenedPort> memif_port = openPort(memif, 1, warnings);
  if (!memif_port.ok()) {
    std::fprintf(stderr, "%s\n", std::string(memif_port.status().message()).c_str());
    return 1;
  }
  bench.memif_port = *memif_port;
  WorkerSetup link_setup;
  link_setup.lcore = rte_lcore_id();
  link_setup.queues = {{bench.memif_port.port_id, 0, 1, bench.memif_port.poll_only_while_link_up}};
  absl::StatusOr<WorkerPtr> link_worker = Worker::create(link_setup);
  for (const absl::StatusOr<WorkerPtr>* made :
       {&worker, &conntrack_worker, &miss_worker, &link_worker, &nat_worker}) {
    if (!made->ok()) {
      std::fprintf(stderr, "%s\n", std::string(made->status().message()).c_str());
      return 1;
    }
  }
  bench.worker = *std::move(worker);
  bench.conntrack_worker = *std::move(conntrack_worker);
  bench.conntrack_worker->state.now_ms = 1000;
  bench.miss_worker = *std::move(miss_worker);
  bench.miss_worker->state.now_ms = 1000;
  bench.nat.worker = *std::move(nat_worker);
  bench.nat.worker->state.now_ms = 1000;
  bench.link_worker = *std::move(link_worker);

  // TCP SYN to the VIP's port 80 from the port's own L2 peer; source address and port vary.
  Bytes frame =
      concat({ethernet(kEtherTypeIpv4),
              ipv4(IpAddress::v4(198, 18, 0, 0), IpAddress::v4(198, 18, 100, 1), kProtocolTcp, 20),
              tcp(0, 80), payload(6)});
  std::copy(bench.port.mac.bytes.begin(), bench.port.mac.bytes.end(), frame.begin());
  std::copy(frame.begin(), frame.begin() + kFrameLength, bench.frame.begin());

  // Every one of the 1M flows once through the conntrack worker, so that they are tracked.
  rte_mbuf* mbufs[kBurstSize];
  for (uint32_t flow = 0; flow < kFlows; flow += kBurstSize) {
    if (rte_pktmbuf_alloc_bulk(bench.pool, mbufs, kBurstSize) != 0) return 1;
    for (uint16_t i = 0; i < kBurstSize; ++i) refill(mbufs[i], flow + i);
    bench.conntrack_worker->processBurst(*bench.snapshot, bench.conntrack_worker->queue(0), mbufs,
                                         kBurstSize);
  }
  bench.conntrack_worker->flush();
  bench.nat.service_port = kNatServicePort;
  if (openNatSessions(bench.nat, 1) != 0) return 1;
  for (uint32_t flow = 0; flow < kMissFlows; ++flow) {
    bench.peer_records_of_miss_flows.push_back(peerFlowOf(flow));
    bench.peer_records_of_other_flows.push_back(peerFlowOf(2 * kMissFlows + flow));
  }

  bench.port_stats = std::make_unique<PortStatsSampler>(
      [&bench] {
        PortStatsReading reading;
        reading.ports.push_back(readPortStats(bench.port));
        bench.port_stats_reads.fetch_add(1, std::memory_order_relaxed);
        return reading;
      },
      absl::Seconds(1));
  bench.port_stats_turner = std::thread([&bench] {
    while (!bench.stopping.load(std::memory_order_relaxed)) {
      bench.port_stats->turn(absl::Now());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  // --count_bursts=N is this program's own; the rest is Google Benchmark's, then the EAL's.
  uint64_t count_bursts = 0;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    constexpr std::string_view kFlag = "--count_bursts=";
    if (std::string_view(argv[i]).starts_with(kFlag)) {
      count_bursts = std::strtoull(argv[i] + kFlag.size(), nullptr, 10);
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (berth::setUp(argc, argv) != 0) return 1;
  int status = 0;
  if (count_bursts > 0) {
    status = berth::runCountedBursts(count_bursts);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  berth::g_bench->stopping = true;
  berth::g_bench->port_stats_turner.join();
  std::fprintf(stderr, "pipeline_bench: port statistics read %llu times, %llu of them late\n",
               static_cast<unsigned long long>(berth::g_bench->port_stats_reads.load()),
               static_cast<unsigned long long>(berth::g_bench->port_stats->late()));
  berth::g_bench->port_stats.reset();
  berth::g_bench->worker.reset();
  berth::g_bench->conntrack_worker.reset();
  berth::g_bench->nat.worker.reset();
  berth::g_bench->proxied.worker.reset();
  berth::g_bench->miss_worker.reset();
  berth::g_bench->link_worker.reset();
  berth::closePort(berth::g_bench->memif_port);
  std::filesystem::remove(berth::g_bench->memif_socket);
  rte_eal_cleanup();
  return status;
}
