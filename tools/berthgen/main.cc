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
#include <rte_ring.h>

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
#include "berth/util/program_info.h"
#include "berth/util/status_macros.h"
#include "loops.h"
#include "options.h"
#include "report.h"
#include "run.h"

namespace berth {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "berthgen: %s\n", message.c_str());
  return 1;
}

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
  plan.queue_flows = spreadOverQueues(plan.flows, options.spread, options.tx_queues);
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
           !g_interrupted) {
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
    sender->receiver = &receiver;
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
  if (options.reflect) {
    receiver.vips = &options.vips;
    receiver.gue_port = options.gue_port;
    receiver.spread = &options.spread;
    for (uint16_t q = 0; q < options.tx_queues; ++q) {
      rte_ring* ring =
          rte_ring_create(absl::StrCat("berthgen_replies", q).c_str(), kReplyRingSize,
                          static_cast<int>(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (ring == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("--reflect: no ring for queue ", q,
                                                         "'s replies: ", rte_strerror(rte_errno)));
      }
      run.reply_rings.push_back(ring);
      receiver.replies[q] = ring;
      senders[q]->replies = ring;
    }
  }
  return absl::OkStatus();
}

// An RCU variable for every sending loop and the receiving one, each registered.
absl::StatusOr<rte_rcu_qsbr*> createLoopsRcu(unsigned loops) {
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
  return rcu;
}

// The flood goes out with the first sender that has flows.
void startFlood(const GenOptions& options, std::vector<std::unique_ptr<Sender>>& senders) {
  if (options.flood == 0) return;
  const auto tcp = std::find_if(options.vips.begin(), options.vips.end(),
                                [](const VipTarget& vip) { return vip.protocol == kProtocolTcp; });
  for (auto& sender : senders) {
    if (sender->mine->empty()) continue;
    sender->flood_rate = static_cast<double>(options.flood);
    sender->flood_vip = &*tcp;
    sender->flood_source = tcp->address.isV4() ? &options.source_v4 : &options.source_v6;
    break;
  }
}

// What the run sends, and where.
void printStart(const Plan& plan, const Ports& ports) {
  const GenOptions& options = plan.options;
  const std::vector<GenFlow>& flows = plan.flows;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
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
  if (options.reflect) std::printf(", answering Full-NAT's frames as the backends");
  std::printf("\n");
}

// Until every sender is done: the rates each second, unless --quiet.
void showProgress(const GenOptions& options, const std::vector<std::unique_ptr<Sender>>& senders,
                  const Receiver& receiver) {
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
}

// Sends every queue's flows from its lcore and receives on another (or on the first sender's),
// printing progress each second, until the senders are done and --drain has passed.
absl::Status sendAndReceive(const Plan& plan, const Ports& ports,
                            const std::vector<unsigned>& lcores, Run& run) {
  const GenOptions& options = plan.options;
  const std::vector<std::vector<uint32_t>>& queue_flows = plan.queue_flows;
  std::vector<std::unique_ptr<Sender>>& senders = run.senders;
  Receiver& receiver = run.receiver;
  // A memif peer that leaves mid-run has its memory unmapped under the loops: the unmap guard
  // (runtime/unmap_guard.h) makes the unmap wait for them, as in berthd.
  const unsigned loops = options.tx_queues + 1u;
  BERTH_ASSIGN_OR_RETURN(rte_rcu_qsbr* const rcu, createLoopsRcu(loops));
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
  receivePass(receiver);
  if (!shared_lcore) rte_eal_remote_launch(receiverMain, &receiver, receiving_lcore);
  for (uint16_t q = 0; q < options.tx_queues; ++q) {
    // With --reflect every queue may carry replies, flows or none.
    if (queue_flows[q].empty() && !options.reflect) {
      senders[q]->done.store(true, std::memory_order_release);
      continue;
    }
    rte_eal_remote_launch(senderMain, &sender_arguments[q], lcores[q]);
    sending_lcores.push_back(lcores[q]);
  }
  startFlood(options, senders);
  printStart(plan, ports);
  showProgress(options, senders, receiver);
  // With --reflect the senders go on answering until the receiver stops, below.
  for (const unsigned sending : sending_lcores) {
    if (sending != receiving_lcore && !options.reflect) rte_eal_wait_lcore(sending);
  }
  // The last packets are still on their way through berthd.
  std::this_thread::sleep_for(std::chrono::duration<double>(options.drain_s));
  receiver.stop.store(true, std::memory_order_release);
  rte_eal_mp_wait_lcore();
  guardInterruptThreadUnmaps(nullptr);
  rte_free(rcu);
  return absl::OkStatus();
}

int run(int argc, char** argv) {
  if (answerHelpOrVersion(argc, argv, "berthgen", kGenUsage, false)) return 0;
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
  std::signal(SIGINT, [](int) { g_interrupted = true; });
  std::signal(SIGTERM, [](int) { g_interrupted = true; });

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
