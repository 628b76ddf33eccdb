// berthgen: berth's traffic generator and verifying sink (tools/berthgen/options.cc has the
// usage). One lcore per TX queue sends its share of the flows, another receives on every RX queue
// and checks; without a spare lcore, the first sender also receives. The main lcore prints a
// progress line every second and the summary at the end.

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/config/loader.h"
#include "berth/dataplane/counters.h"
#include "berth/gen/sink.h"
#include "berth/runtime/port.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/command_line.h"
#include "berth/util/heap.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"
#include "options.h"

namespace berth {
namespace {

std::atomic<bool> interrupted{false};
// How long a port may refuse every packet before berthgen gives up on it.
constexpr uint32_t kTxStallSeconds = 1;

// Classic pcap, microsecond stamps: what --pcap-out writes.
class PcapWriter {
 public:
  explicit PcapWriter(const std::string& path) : file_(std::fopen(path.c_str(), "wb")) {
    if (file_ == nullptr) return;
    const uint32_t header[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
    std::fwrite(header, sizeof(header), 1, file_);
  }
  ~PcapWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  void write(const uint8_t* frame, size_t length) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
    const uint32_t record[4] = {static_cast<uint32_t>(micros / 1'000'000),
                                static_cast<uint32_t>(micros % 1'000'000),
                                static_cast<uint32_t>(length), static_cast<uint32_t>(length)};
    std::fwrite(record, sizeof(record), 1, file_);
    std::fwrite(frame, 1, length, file_);
  }

 private:
  std::FILE* file_;
};

// What one sending lcore does; read by the main lcore while it runs (single-writer counters).
struct Sender {
  const GenOptions* options = nullptr;
  const std::vector<GenFlow>* flows = nullptr;
  // The flows RSS puts on this sender's queue, in flow order: packet n is flow
  // mine[n % size]'s number n / size.
  const std::vector<uint32_t>* mine = nullptr;
  uint16_t port = 0;
  uint16_t queue = 0;
  unsigned rcu_id = 0;  // on the unmap guard's QSBR variable: q, and the receiver's is --txq
  double rate = 0;      // this queue's share of --rate, in proportion to its flows
  uint64_t count = 0;   // and of --count
  // --flood: connection attempts a second, each from a new flow (floodFlow), on top of the rest.
  double flood_rate = 0;
  const VipTarget* flood_vip = nullptr;
  const SourceNet* flood_source = nullptr;
  rte_mempool* pool = nullptr;
  MacAddress source_mac;
  uint64_t end_tsc = 0;  // stop here (duration), or after `count` packets
  PcapWriter* pcap = nullptr;
  rte_rcu_qsbr* rcu = nullptr;  // the unmap guard's: a quiescent state between bursts
  std::atomic<bool> done{false};
  bool stalled = false;  // the port took nothing for kTxStallSeconds: the run stopped early
  uint64_t start_tsc = 0;
  uint64_t stop_tsc = 0;
  uint64_t flow_packets = 0;  // packets of flows sent
  Counter packets;
  Counter bytes;
  Counter malformed;
  Counter flood;
};

struct Receiver {
  uint16_t port = 0;
  uint16_t queues = 1;  // polls every RX queue of the port
  Sink* sink = nullptr;
  rte_rcu_qsbr* rcu = nullptr;
  unsigned rcu_id = 0;
  std::atomic<bool> stop{false};
  Counter frames;
  Counter verified;
  uint64_t last_rx_tsc = 0;
};

// Polls one of the receiver's RX queues once: every frame to the sink, then freed.
void receiveOnce(Receiver& receiver, uint16_t queue) {
  rte_mbuf* mbufs[64];
  const uint16_t got = rte_eth_rx_burst(receiver.port, queue, mbufs, 64);
  if (got == 0) return;
  const uint64_t now = rte_rdtsc();
  for (uint16_t i = 0; i < got; ++i) {
    receiver.sink->receive(rte_pktmbuf_mtod(mbufs[i], const uint8_t*),
                           rte_pktmbuf_data_len(mbufs[i]), now);
  }
  rte_pktmbuf_free_bulk(mbufs, got);
  receiver.frames.add(got);
  receiver.verified.set(receiver.sink->totals().verified);
  receiver.last_rx_tsc = now;
}

// Sends until the duration or count is reached. Returns once done.
void sendLoop(Sender& sender, Receiver* also_receive) {
  const GenOptions& options = *sender.options;
  const std::vector<GenFlow>& flows = *sender.flows;
  const std::vector<uint32_t>& mine = *sender.mine;
  const uint64_t hz = rte_get_tsc_hz();
  uint64_t random = 0x9E3779B97F4A7C15ull ^ rte_rdtsc();
  auto next_random = [&random] {
    random ^= random << 13;
    random ^= random >> 7;
    random ^= random << 17;
    return random;
  };
  const auto malformed_threshold =
      static_cast<uint64_t>(options.malformed_ratio * static_cast<double>(UINT64_MAX));
  std::vector<rte_mbuf*> burst(options.burst);
  uint64_t total = 0;  // every packet sent, malformed included
  uint64_t n = 0;      // flow packets
  uint64_t flood_total = 0;
  // Everything built is sent: a full TX ring is waited out, as testpmd's txonly retries, but
  // not for ever: a port that takes nothing for a while has lost its link or its peer.
  auto transmit = [&sender, hz](rte_mbuf** mbufs, uint16_t count) {
    uint16_t sent = 0;
    uint64_t refused_since = 0;
    while (sent < count && !interrupted.load(std::memory_order_relaxed)) {
      const uint16_t taken = rte_eth_tx_burst(sender.port, sender.queue, mbufs + sent,
                                              static_cast<uint16_t>(count - sent));
      sent += taken;
      rte_rcu_qsbr_quiescent(sender.rcu, sender.rcu_id);
      if (taken != 0) {
        refused_since = 0;
      } else if (refused_since == 0) {
        refused_since = rte_rdtsc();
      } else if (rte_rdtsc() - refused_since > kTxStallSeconds * hz) {
        sender.stalled = true;
        break;
      }
    }
    if (sent < count) rte_pktmbuf_free_bulk(mbufs + sent, static_cast<unsigned>(count - sent));
  };
  sender.start_tsc = rte_rdtsc();
  rte_rcu_qsbr_thread_online(sender.rcu, sender.rcu_id);
  while (!interrupted.load(std::memory_order_relaxed)) {
    rte_rcu_qsbr_quiescent(sender.rcu, sender.rcu_id);
    const uint64_t now = rte_rdtsc();
    if (options.count != 0 ? total >= sender.count : now >= sender.end_tsc) break;
    if (also_receive != nullptr) {
      for (uint16_t queue = 0; queue < also_receive->queues; ++queue) {
        receiveOnce(*also_receive, queue);
      }
    }
    if (sender.flood_rate > 0) {
      const auto allowed = static_cast<uint64_t>(static_cast<double>(now - sender.start_tsc) /
                                                 static_cast<double>(hz) * sender.flood_rate);
      const uint64_t flood_want =
          allowed > flood_total ? std::min<uint64_t>(allowed - flood_total, options.burst) : 0;
      if (flood_want > 0 && rte_pktmbuf_alloc_bulk(sender.pool, burst.data(),
                                                   static_cast<unsigned>(flood_want)) == 0) {
        for (uint64_t i = 0; i < flood_want; ++i) {
          const GenFlow flow = floodFlow(*sender.flood_vip, *sender.flood_source, next_random());
          const size_t length =
              buildFrame(flow, 0, 0, now, 0, sender.source_mac, *options.destination_mac,
                         rte_pktmbuf_mtod(burst[i], uint8_t*));
          burst[i]->data_len = static_cast<uint16_t>(length);
          burst[i]->pkt_len = static_cast<uint32_t>(length);
        }
        transmit(burst.data(), static_cast<uint16_t>(flood_want));
        flood_total += flood_want;
        sender.flood.add(flood_want);
        if (sender.stalled) break;
      }
    }
    uint64_t want = options.burst;
    if (options.rate != 0) {
      const auto allowed = static_cast<uint64_t>(static_cast<double>(now - sender.start_tsc) /
                                                 static_cast<double>(hz) * sender.rate);
      want = allowed > total ? std::min<uint64_t>(allowed - total, options.burst) : 0;
    }
    if (options.count != 0) want = std::min(want, sender.count - total);
    if (want == 0) continue;
    if (rte_pktmbuf_alloc_bulk(sender.pool, burst.data(), static_cast<unsigned>(want)) != 0) {
      continue;  // the pool is empty for now: the port still holds the last bursts
    }
    uint64_t bytes = 0;
    uint64_t malformed = 0;
    for (uint64_t i = 0; i < want; ++i) {
      rte_mbuf* mbuf = burst[i];
      auto* data = rte_pktmbuf_mtod(mbuf, uint8_t*);
      size_t length;
      if (malformed_threshold != 0 && next_random() < malformed_threshold) {
        length = buildMalformedFrame(total + i, next_random(), sender.source_mac,
                                     *options.destination_mac, data);
        ++malformed;
      } else {
        const uint32_t f = mine[n % mine.size()];
        const size_t size = options.imix ? kImixPattern[(total + i) % 12] : options.packet_size;
        length = buildFrame(flows[f], f, static_cast<uint32_t>(n / mine.size()), now, size,
                            sender.source_mac, *options.destination_mac, data);
        ++n;
      }
      mbuf->data_len = static_cast<uint16_t>(length);
      mbuf->pkt_len = static_cast<uint32_t>(length);
      bytes += length;
      if (sender.pcap != nullptr) sender.pcap->write(data, length);
    }
    transmit(burst.data(), static_cast<uint16_t>(want));
    total += want;
    sender.packets.add(want);
    sender.bytes.add(bytes);
    sender.malformed.add(malformed);
    if (sender.stalled) break;
  }
  rte_rcu_qsbr_thread_offline(sender.rcu, sender.rcu_id);
  sender.flow_packets = n;
  sender.stop_tsc = rte_rdtsc();
  sender.done.store(true, std::memory_order_release);
}

void receiveLoop(Receiver& receiver) {
  rte_rcu_qsbr_thread_online(receiver.rcu, receiver.rcu_id);
  while (!receiver.stop.load(std::memory_order_acquire)) {
    rte_rcu_qsbr_quiescent(receiver.rcu, receiver.rcu_id);
    for (uint16_t queue = 0; queue < receiver.queues; ++queue) receiveOnce(receiver, queue);
  }
  rte_rcu_qsbr_thread_offline(receiver.rcu, receiver.rcu_id);
}

int senderMain(void* argument) {
  auto* pair = static_cast<std::pair<Sender*, Receiver*>*>(argument);
  sendLoop(*pair->first, pair->second);
  return 0;
}

int receiverMain(void* argument) {
  receiveLoop(*static_cast<Receiver*>(argument));
  return 0;
}

// Packets of the f-th of `flows` flows when n flow packets went out round-robin over them.
uint64_t sentOfFlow(uint64_t n, size_t flows, size_t f) {
  return n / flows + (f < n % flows ? 1 : 0);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "berthgen: %s\n", message.c_str());
  return 1;
}
// What a run is, before the EAL starts: the options, the config the flows are checked against,
// the flows and each TX queue's share of them.
struct Plan {
  GenOptions options;
  std::optional<Config> config;
  std::vector<GenFlow> flows;
  std::vector<std::vector<uint32_t>> queue_flows;  // per TX queue, by RSS hash
};

// Cancelled for --help.
absl::StatusOr<Plan> planRun(std::vector<char*> app_argv) {
  absl::StatusOr<GenOptions> parsed =
      parseGenOptions(static_cast<int>(app_argv.size()), app_argv.data());
  if (!parsed.ok()) return parsed.status();
  Plan plan;
  plan.options = *std::move(parsed);
  GenOptions& options = plan.options;

  if (!options.config_path.empty()) {
    absl::StatusOr<Config> loaded = loadConfigFile(options.config_path);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--config: ", loaded.status().message()));
    }
    plan.config = *std::move(loaded);
    for (const ServiceConfig& service : plan.config->services) {
      if (options.gue_port == 0 && service.forwarding == Forwarding::kGue) {
        options.gue_port = service.gue_port;
      }
    }
  }
  absl::StatusOr<std::vector<GenFlow>> made =
      makeFlows(options.vips, options.source_v4, options.source_v6, options.flows);
  if (!made.ok()) return made.status();
  plan.flows = *std::move(made);
  plan.queue_flows = spreadOverQueues(plan.flows, options.tx_queues);
  if (!options.imix && options.packet_size_given) {
    for (const GenFlow& flow : plan.flows) {
      if (options.packet_size < minimumFrameSize(flow)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--pkt-size ", options.packet_size, " is below the ", minimumFrameSize(flow),
            " bytes a frame of ", flow.key.toString(), " needs with berthgen's stamp"));
      }
    }
  }
  return plan;
}

// The TX port and, when --rx-dev names another, the RX port; closed by the destructor.
struct Ports {
  OpenedPort tx;
  std::optional<OpenedPort> rx;
  const OpenedPort& receiving() const { return rx ? *rx : tx; }
  Ports() = default;
  Ports(const Ports&) = delete;
  Ports& operator=(const Ports&) = delete;
  ~Ports() {
    if (rx) closePort(*rx);
    if (tx.pool != nullptr) closePort(tx);
  }
};

absl::Status openPorts(const GenOptions& options, Ports& ports) {
  std::vector<std::string> warnings;
  PortConfig tx_config;
  tx_config.name = "tx";
  tx_config.device = options.tx_device;
  tx_config.queues = options.tx_queues;
  absl::StatusOr<OpenedPort> tx_port = openPort(tx_config, options.tx_queues, warnings);
  if (!tx_port.ok()) return tx_port.status();
  ports.tx = *std::move(tx_port);
  if (options.rx_device != options.tx_device) {
    PortConfig rx_config;
    rx_config.name = "rx";
    rx_config.device = options.rx_device;
    rx_config.queues = options.tx_queues;
    absl::StatusOr<OpenedPort> opened = openPort(rx_config, options.tx_queues, warnings);
    if (!opened.ok()) return opened.status();
    ports.rx = *std::move(opened);
  }
  for (const std::string& warning : warnings)
    std::fprintf(stderr, "berthgen: %s\n", warning.c_str());
  return absl::OkStatus();
}

// Waits up to 10 s for both links: a memif peer still connecting would drop what is sent.
void waitForLinks(const Ports& ports) {
  for (const OpenedPort* port : {&ports.tx, &ports.receiving()}) {
    rte_eth_link state{};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (rte_eth_link_get_nowait(port->port_id, &state) == 0 &&
           state.link_status != RTE_ETH_LINK_UP && std::chrono::steady_clock::now() < give_up &&
           !interrupted) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (state.link_status != RTE_ETH_LINK_UP) {
      std::fprintf(stderr, "berthgen: port %u (%s): link still down after 10 s; sending anyway\n",
                   port->port_id, port->driver.c_str());
    }
  }
}

absl::Status checkRate(const GenOptions& options, const Ports& ports) {
  // A rate the link cannot carry is refused: wire time is the frame, FCS, preamble and gap.
  rte_eth_link link{};
  if (options.rate != 0 && rte_eth_link_get_nowait(ports.tx.port_id, &link) == 0 &&
      link.link_speed != RTE_ETH_SPEED_NUM_NONE && link.link_speed != RTE_ETH_SPEED_NUM_UNKNOWN) {
    const double frame = options.imix ? 353.8 : static_cast<double>(options.packet_size);
    const double max_pps = link.link_speed * 1e6 / ((frame + 24) * 8);
    if (static_cast<double>(options.rate) > max_pps) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--rate %u is above what the %u Mb/s link carries at this frame size (%.0f pps)",
          options.rate, link.link_speed, max_pps));
    }
  }
  return absl::OkStatus();
}

// The senders, the receiver and what they counted, once the run is over.
struct Run {
  uint64_t hz = 0;
  std::unique_ptr<PcapWriter> pcap;
  std::unique_ptr<Sink> sink;
  std::vector<std::unique_ptr<Sender>> senders;
  Receiver receiver;
};

// The sink, the pcap writer, and a sender per TX queue with its share of the flows, the rate
// and the count; the receiver on every RX queue.
absl::Status prepareLoops(const Plan& plan, const Ports& ports, Run& run) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  if (!options.pcap_out.empty()) {
    run.pcap = std::make_unique<PcapWriter>(options.pcap_out);
    if (!run.pcap->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pcap-out ", options.pcap_out, ": cannot write"));
    }
  }
  const uint64_t hz = run.hz;
  run.sink =
      std::make_unique<Sink>(&flows, options.source_v4, options.source_v6, options.gue_port, hz);
  std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  Receiver& receiver = run.receiver;
  const uint64_t end_tsc =
      rte_rdtsc() + static_cast<uint64_t>(options.duration_s * static_cast<double>(hz));
  // Each queue's share of the rate and the count follows its share of the flows, so every flow
  // is sent at the same rate whatever queue RSS put it on.
  // --count's share of the first `through` flows; cumulative, so the shares add up exactly.
  const auto share = [&](uint64_t through) {
    const uint64_t whole = options.count / flows.size();
    const uint64_t rest = options.count % flows.size();  // rest * through stays below 2^64
    return whole * through + rest * through / flows.size();
  };
  uint64_t flows_before = 0;
  for (uint16_t q = 0; q < options.tx_queues; ++q) {
    auto sender = std::make_unique<Sender>();
    sender->options = &options;
    sender->flows = &flows;
    sender->mine = &queue_flows[q];
    sender->port = ports.tx.port_id;
    sender->queue = q;
    sender->rcu_id = q;
    sender->pool = ports.tx.pool;
    sender->source_mac = ports.tx.mac;
    sender->pcap = run.pcap.get();
    sender->end_tsc = end_tsc;
    const uint64_t flows_through = flows_before + queue_flows[q].size();
    sender->rate = static_cast<double>(options.rate) * static_cast<double>(queue_flows[q].size()) /
                   static_cast<double>(flows.size());
    sender->count = share(flows_through) - share(flows_before);
    flows_before = flows_through;
    senders.push_back(std::move(sender));
  }
  receiver.port = ports.receiving().port_id;
  receiver.queues = ports.receiving().queues;
  receiver.sink = run.sink.get();
  receiver.rcu_id = options.tx_queues;
  return absl::OkStatus();
}

// Sends every queue's flows from its lcore and receives on another (or on the first sender's),
// printing progress each second, until the senders are done and --drain has passed.
absl::Status sendAndReceive(const Plan& plan, const Ports& ports,
                            const std::vector<unsigned>& lcores, Run& run) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  Receiver& receiver = run.receiver;
  // A memif peer that leaves mid-run has its memory unmapped under the loops: the unmap guard
  // (runtime/unmap_guard.h) makes the unmap wait for them, as in berthd.
  const unsigned loops = options.tx_queues + 1u;
  const size_t rcu_size = rte_rcu_qsbr_get_memsize(loops);
  auto* rcu =
      static_cast<rte_rcu_qsbr*>(rte_zmalloc("berthgen_rcu", rcu_size, RTE_CACHE_LINE_SIZE));
  if (rcu == nullptr || rte_rcu_qsbr_init(rcu, loops) != 0) {
    rte_free(rcu);
    return absl::ResourceExhaustedError("no memory for the loops' RCU variable");
  }
  for (unsigned id = 0; id < loops; ++id) {
    if (rte_rcu_qsbr_thread_register(rcu, id) != 0) {
      rte_free(rcu);
      return absl::InternalError("cannot register an RCU reader");
    }
  }
  for (auto& sender : senders) sender->rcu = rcu;
  receiver.rcu = rcu;
  guardInterruptThreadUnmaps(rcu);
  // Without a spare lcore the first sender with flows also receives. A queue RSS gave no flow
  // has nothing to send, and its lcore stays idle.
  const bool shared_lcore = lcores.size() == options.tx_queues;
  std::vector<std::pair<Sender*, Receiver*>> sender_arguments;
  std::vector<unsigned> sending_lcores;
  unsigned receiving_lcore = shared_lcore ? RTE_MAX_LCORE : lcores[options.tx_queues];
  for (uint16_t q = 0; q < options.tx_queues; ++q) {
    const bool receives =
        shared_lcore && receiving_lcore == RTE_MAX_LCORE && !queue_flows[q].empty();
    sender_arguments.emplace_back(senders[q].get(), receives ? &receiver : nullptr);
    if (receives) receiving_lcore = lcores[q];
  }
  // A memif client offers its peer buffers to send into only from its rx_burst, and a new
  // connection starts with none. Until the receiving lcore first runs, which on a shared CPU can
  // be milliseconds after the senders, every frame berthd sent back was refused (tx_ring_full
  // there, lost here: 25 to 44 per run in the two-queue test). So each RX queue is polled once
  // here, before any lcore starts; any other PMD just has nothing yet.
  for (uint16_t queue = 0; queue < receiver.queues; ++queue) receiveOnce(receiver, queue);
  if (!shared_lcore) rte_eal_remote_launch(receiverMain, &receiver, receiving_lcore);
  for (uint16_t q = 0; q < options.tx_queues; ++q) {
    if (queue_flows[q].empty()) {
      senders[q]->done.store(true, std::memory_order_release);
      continue;
    }
    rte_eal_remote_launch(senderMain, &sender_arguments[q], lcores[q]);
    sending_lcores.push_back(lcores[q]);
  }
  // The flood goes out with the first sender that runs.
  if (options.flood != 0) {
    const auto tcp =
        std::find_if(options.vips.begin(), options.vips.end(),
                     [](const VipTarget& vip) { return vip.protocol == kProtocolTcp; });
    for (auto& sender : senders) {
      if (sender->mine->empty()) continue;
      sender->flood_rate = static_cast<double>(options.flood);
      sender->flood_vip = &*tcp;
      sender->flood_source = tcp->address.isV4() ? &options.source_v4 : &options.source_v6;
      break;
    }
  }
  auto all_sent = [&senders] {
    for (const auto& sender : senders) {
      if (!sender->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  auto packets_sent = [&senders] {
    uint64_t packets = 0;
    for (const auto& sender : senders) packets += sender->packets.read();
    return packets;
  };

  std::printf("berthgen: %zu flows to %zu VIP(s), %s frames, %s, from %s to %s", flows.size(),
              options.vips.size(),
              options.imix ? "IMIX" : absl::StrCat(options.packet_size, "-byte").c_str(),
              options.rate == 0 ? "as fast as the port takes them"
                                : absl::StrCat(options.rate, " pps").c_str(),
              ports.tx.mac.toString().c_str(), options.destination_mac->toString().c_str());
  if (options.tx_queues > 1) {
    std::printf(", over %u TX queues (flows per queue by RSS hash:", options.tx_queues);
    for (const std::vector<uint32_t>& mine : queue_flows) std::printf(" %zu", mine.size());
    std::printf(")");
  }
  std::printf("\n");
  uint64_t last_tx = 0;
  uint64_t last_rx = 0;
  auto last = std::chrono::steady_clock::now();
  while (!all_sent()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) continue;
    const double seconds = std::chrono::duration<double>(now - last).count();
    const uint64_t tx = packets_sent();
    const uint64_t rx = receiver.frames.read();
    if (!options.quiet) {
      std::printf("  tx %7.3f Mpps  rx %7.3f Mpps  sent %llu  received %llu\n",
                  static_cast<double>(tx - last_tx) / seconds / 1e6,
                  static_cast<double>(rx - last_rx) / seconds / 1e6,
                  static_cast<unsigned long long>(tx), static_cast<unsigned long long>(rx));
      std::fflush(stdout);
    }
    last_tx = tx;
    last_rx = rx;
    last = now;
  }
  for (const unsigned sending : sending_lcores) rte_eal_wait_lcore(sending);
  // The last packets are still on their way through berthd.
  if (shared_lcore) {
    rte_eal_remote_launch(receiverMain, &receiver, receiving_lcore);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(options.drain_s));
  receiver.stop.store(true, std::memory_order_release);
  rte_eal_mp_wait_lcore();
  guardInterruptThreadUnmaps(nullptr);
  rte_free(rcu);
  return absl::OkStatus();
}

// The books of a run. Each sender went round its own flows, so each flow's packets follow from
// its queue's count and its place on that queue.
struct Books {
  uint64_t sent_packets = 0;
  uint64_t sent_malformed = 0;
  uint64_t sent_flood = 0;
  bool stalled = false;
  uint64_t lost = 0;
  double loss_percent = 0;
  uint64_t flows_moved = 0;
  uint64_t flows_unseen = 0;
  std::vector<uint64_t> backend_flows;  // per backend the sink saw
  uint64_t table_match = 0;
  uint64_t table_differ = 0;
  uint64_t table_unknown = 0;
  double tx_seconds = 0;
  double tx_mpps = 0;
  double rx_mpps = 0;
};

absl::StatusOr<Books> keepBooks(const Plan& plan, const Run& run) {
  const std::vector<GenFlow>& flows = plan.flows;
  const Sink& sink = *run.sink;
  Books books;
  std::vector<uint64_t> flow_sent(flows.size(), 0);
  uint64_t sent_flow_packets = 0;
  uint64_t start_tsc = UINT64_MAX;
  uint64_t stop_tsc = 0;
  for (uint16_t q = 0; q < plan.options.tx_queues; ++q) {
    const Sender& sender = *run.senders[q];
    const std::vector<uint32_t>& mine = plan.queue_flows[q];
    for (size_t i = 0; i < mine.size(); ++i) {
      flow_sent[mine[i]] = sentOfFlow(sender.flow_packets, mine.size(), i);
    }
    sent_flow_packets += sender.flow_packets;
    books.sent_packets += sender.packets.read();
    books.sent_malformed += sender.malformed.read();
    books.sent_flood += sender.flood.read();
    books.stalled = books.stalled || sender.stalled;
    if (mine.empty()) continue;
    start_tsc = std::min(start_tsc, sender.start_tsc);
    stop_tsc = std::max(stop_tsc, sender.stop_tsc);
  }
  for (size_t f = 0; f < flows.size(); ++f) {
    const uint64_t expected = flow_sent[f];
    const uint64_t got = sink.flowReceived(f);
    if (expected > got) books.lost += expected - got;
    if (sink.flowMoved(f)) ++books.flows_moved;
    if (expected > 0 && sink.flowBackend(f) < 0) ++books.flows_unseen;
  }
  books.backend_flows.assign(sink.backends().size(), 0);
  for (size_t f = 0; f < flows.size(); ++f) {
    if (sink.flowBackend(f) >= 0) ++books.backend_flows[static_cast<size_t>(sink.flowBackend(f))];
  }
  if (plan.config) {
    absl::StatusOr<std::vector<BackendKey>> expected = tableBackends(*plan.config, flows);
    if (!expected.ok()) return expected.status();
    for (size_t f = 0; f < flows.size(); ++f) {
      if (sink.flowBackend(f) < 0) continue;
      if ((*expected)[f].kind == BackendKey::kNone) {
        ++books.table_unknown;
      } else if (sink.backends()[static_cast<size_t>(sink.flowBackend(f))] == (*expected)[f]) {
        ++books.table_match;
      } else {
        ++books.table_differ;
      }
    }
  }
  const SinkTotals& totals = sink.totals();
  const double tx_seconds = static_cast<double>(stop_tsc - start_tsc) / static_cast<double>(run.hz);
  books.tx_seconds = tx_seconds;
  books.tx_mpps = tx_seconds > 0 ? static_cast<double>(books.sent_packets) / tx_seconds / 1e6 : 0;
  books.rx_mpps = tx_seconds > 0 ? static_cast<double>(totals.verified) / tx_seconds / 1e6 : 0;
  books.loss_percent = sent_flow_packets > 0 ? 100.0 * static_cast<double>(books.lost) /
                                                   static_cast<double>(sent_flow_packets)
                                             : 0;
  return books;
}

void printReport(const Plan& plan, const Run& run, const Books& books) {
  const GenOptions& options = plan.options;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  const Sink& sink = *run.sink;
  const SinkTotals& totals = sink.totals();
  const std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  const bool config = plan.config.has_value();
  std::printf("\n%-28s %14s\n", "", "result");
  auto row = [](const char* name, const std::string& value) {
    std::printf("%-28s %14s\n", name, value.c_str());
  };
  row("sent", absl::StrCat(books.sent_packets));
  row("  of them malformed", absl::StrCat(books.sent_malformed));
  if (options.tx_queues > 1) {
    for (uint16_t q = 0; q < options.tx_queues; ++q) {
      row(absl::StrCat("  on TX queue ", q).c_str(),
          absl::StrFormat("%u (%u flows)", senders[q]->packets.read(), queue_flows[q].size()));
    }
  }
  row("received", absl::StrCat(totals.frames));
  row("  verified intact", absl::StrCat(totals.verified));
  row("  corrupt", absl::StrCat(totals.corrupt));
  row("  ICMP too-big replies", absl::StrCat(totals.too_big));
  row("  not berthgen's", absl::StrCat(totals.foreign));
  if (options.flood != 0) {
    row("flood SYNs sent", absl::StrCat(books.sent_flood));
    row("  forwarded back", absl::StrCat(totals.flood));
  }
  row("lost", absl::StrFormat("%u (%.4f%%)", books.lost, books.loss_percent));
  row("duplicates", absl::StrCat(totals.duplicates));
  row("reordered", absl::StrCat(totals.reordered));
  row("flows that changed backend", absl::StrCat(books.flows_moved));
  row("flows never seen", absl::StrCat(books.flows_unseen));
  if (config) {
    row("flows on the table's pick", absl::StrCat(books.table_match));
    row("flows elsewhere", absl::StrCat(books.table_differ));
    if (books.table_unknown > 0) row("flows not checkable", absl::StrCat(books.table_unknown));
  }
  row("tx Mpps", absl::StrFormat("%.3f", books.tx_mpps));
  row("rx Mpps (verified)", absl::StrFormat("%.3f", books.rx_mpps));
  row("latency p50 us", absl::StrFormat("%.1f", sink.latency().percentile(0.5) / 1e3));
  row("latency p99 us", absl::StrFormat("%.1f", sink.latency().percentile(0.99) / 1e3));
  row("latency p99.9 us", absl::StrFormat("%.1f", sink.latency().percentile(0.999) / 1e3));
  std::printf("\n%-40s %12s %8s %10s\n", "backend", "packets", "share", "flows");
  for (size_t b = 0; b < sink.backends().size(); ++b) {
    std::printf("%-40s %12llu %7.2f%% %10llu\n", sink.backends()[b].toString().c_str(),
                static_cast<unsigned long long>(sink.backendPackets()[b]),
                totals.verified > 0 ? 100.0 * static_cast<double>(sink.backendPackets()[b]) /
                                          static_cast<double>(totals.verified)
                                    : 0.0,
                static_cast<unsigned long long>(books.backend_flows[b]));
  }
}

absl::Status writeJson(const Plan& plan, const Run& run, const Books& books) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  const Sink& sink = *run.sink;
  const SinkTotals& totals = sink.totals();
  const std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  const bool config = plan.config.has_value();
  JsonWriter json;
  json.beginObject()
      .key("flows")
      .value(static_cast<uint64_t>(flows.size()))
      .key("sent")
      .value(books.sent_packets)
      .key("sent_malformed")
      .value(books.sent_malformed)
      .key("received")
      .value(totals.frames)
      .key("verified")
      .value(totals.verified)
      .key("corrupt")
      .value(totals.corrupt)
      .key("foreign")
      .value(totals.foreign)
      .key("flood_sent")
      .value(books.sent_flood)
      .key("flood_received")
      .value(totals.flood)
      .key("icmp_too_big")
      .value(totals.too_big)
      .key("lost")
      .value(books.lost)
      .key("duplicates")
      .value(totals.duplicates)
      .key("reordered")
      .value(totals.reordered)
      .key("flows_moved")
      .value(books.flows_moved)
      .key("flows_unseen")
      .value(books.flows_unseen)
      .key("tx_mpps")
      .value(books.tx_mpps)
      .key("rx_mpps")
      .value(books.rx_mpps)
      .key("tx_seconds")
      .value(books.tx_seconds)
      .key("latency_ns")
      .beginObject()
      .key("p50")
      .value(sink.latency().percentile(0.5))
      .key("p99")
      .value(sink.latency().percentile(0.99))
      .key("p999")
      .value(sink.latency().percentile(0.999))
      .endObject();
  if (config) {
    json.key("table")
        .beginObject()
        .key("match")
        .value(books.table_match)
        .key("differ")
        .value(books.table_differ);
    json.key("unknown").value(books.table_unknown).endObject();
  }
  json.key("tx_queues").beginArray();
  for (uint16_t q = 0; q < options.tx_queues; ++q) {
    json.beginObject()
        .key("queue")
        .value(static_cast<uint64_t>(q))
        .key("flows")
        .value(static_cast<uint64_t>(queue_flows[q].size()))
        .key("sent")
        .value(senders[q]->packets.read())
        .endObject();
  }
  json.endArray();
  json.key("backends").beginArray();
  for (size_t b = 0; b < sink.backends().size(); ++b) {
    json.beginObject()
        .key("backend")
        .value(sink.backends()[b].toString())
        .key("packets")
        .value(sink.backendPackets()[b])
        .key("flows")
        .value(books.backend_flows[b])
        .endObject();
  }
  json.endArray().endObject();
  std::ofstream out(options.json_path);
  out << json.str() << "\n";
  if (!out)
    return absl::InvalidArgumentError(absl::StrCat("--json ", options.json_path, ": cannot write"));
  return absl::OkStatus();
}

absl::Status writeFlowBackends(const Plan& plan, const Run& run) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const Sink& sink = *run.sink;
  std::ofstream out(options.flow_backends_path);
  for (size_t f = 0; f < flows.size(); ++f) {
    const int32_t backend = sink.flowBackend(f);
    out << (backend < 0 ? std::string("-")
                        : sink.backends()[static_cast<size_t>(backend)].toString())
        << "\n";
  }
  if (!out) {
    return absl::InvalidArgumentError(
        absl::StrCat("--flow-backends ", options.flow_backends_path, ": cannot write"));
  }
  return absl::OkStatus();
}

int run(int argc, char** argv) {
  // EAL options before "--", berthgen's after, as testpmd takes them.
  SplitCommandLine command_line = splitAtDoubleDash(argc, argv, false);
  absl::StatusOr<Plan> planned = planRun(argvOf(command_line.own));
  if (!planned.ok()) {
    if (absl::IsCancelled(planned.status())) {
      std::fputs(kGenUsage, stdout);
      return 0;
    }
    return fail(std::string(planned.status().message()));
  }
  const Plan plan = *std::move(planned);
  const GenOptions& options = plan.options;

  std::vector<char*> eal_argv = argvOf(command_line.eal);
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    return fail(absl::StrCat("EAL: ", rte_strerror(rte_errno)));
  }
  std::signal(SIGINT, [](int) { interrupted = true; });
  std::signal(SIGTERM, [](int) { interrupted = true; });

  std::vector<unsigned> lcores;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { lcores.push_back(lcore); }
  if (lcores.size() < options.tx_queues) {
    rte_eal_cleanup();
    return fail(absl::StrCat("EAL: --txq ", options.tx_queues, " needs ", options.tx_queues,
                             " worker lcore(s), one per sender, and one more for a receiver of "
                             "its own (-l 0-",
                             options.tx_queues + 1, "); EAL gave ", lcores.size()));
  }
  absl::Status status;
  bool stalled = false;
  {
    Ports ports;
    auto go = [&]() -> absl::Status {
      BERTH_RETURN_IF_ERROR(openPorts(options, ports));
      waitForLinks(ports);
      BERTH_RETURN_IF_ERROR(checkRate(options, ports));
      Run traffic;
      traffic.hz = rte_get_tsc_hz();
      BERTH_RETURN_IF_ERROR(prepareLoops(plan, ports, traffic));
      BERTH_RETURN_IF_ERROR(sendAndReceive(plan, ports, lcores, traffic));
      BERTH_ASSIGN_OR_RETURN(const Books books, keepBooks(plan, traffic));
      printReport(plan, traffic, books);
      if (!options.json_path.empty()) BERTH_RETURN_IF_ERROR(writeJson(plan, traffic, books));
      if (!options.flow_backends_path.empty()) {
        BERTH_RETURN_IF_ERROR(writeFlowBackends(plan, traffic));
      }
      stalled = books.stalled;
      return absl::OkStatus();
    };
    status = go();
  }
  rte_eal_cleanup();
  if (!status.ok()) return fail(std::string(status.message()));
  if (stalled) {
    return fail(absl::StrFormat(
        "the TX port took no packet for %u s (its link or its peer is gone); the run stopped "
        "early, and the figures above are of what went out before",
        kTxStallSeconds));
  }
  return 0;
}

}  // namespace
}  // namespace berth

int main(int argc, char** argv) {
  berth::retainFreedHeapMemory();
  return berth::run(argc, argv);
}
