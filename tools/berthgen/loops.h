#pragma once

// berthgen's lcore loops: one sender per TX queue, and a receiver that polls every RX queue and
// hands what comes back to the verifying sink. Each writes only its own counters; the main
// lcore reads them while they run.

#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "berth/dataplane/counters.h"
#include "berth/gen/sink.h"
#include "berth/gen/traffic.h"
#include "berth/net/mac_address.h"
#include "options.h"

namespace berth {

// Set by SIGINT and SIGTERM: every loop ends soon after.
extern std::atomic<bool> g_interrupted;
// How long a port may refuse every packet before berthgen gives up on it.
inline constexpr uint32_t kTxStallSeconds = 1;
// How long a full --window waits for a reply before its packets count as lost.
inline constexpr uint32_t kWindowPatienceSeconds = 1;

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

struct Receiver;

// --txq's bound, and so the most RX queues the receiver polls.
inline constexpr uint16_t kMaxQueues = 64;
// Each sender's ring of replies to send (--reflect): more than any --window the tests give.
inline constexpr unsigned kReplyRingSize = 16384;

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
  rte_rcu_qsbr* rcu = nullptr;         // the unmap guard's: a quiescent state between bursts
  const Receiver* receiver = nullptr;  // its RX queue's count of what came back (--window)
  // --reflect: the backends' replies the receiver put on this queue, sent between bursts and,
  // once the sender is done, until the receiver stops.
  rte_ring* replies = nullptr;
  Counter replies_sent;
  std::atomic<bool> done{false};
  bool stalled = false;  // the port took nothing for kTxStallSeconds: the run stopped early
  uint64_t start_tsc = 0;
  uint64_t stop_tsc = 0;
  uint64_t flow_packets = 0;  // packets of flows sent
  // The longest a full TX ring held one burst back, and when that wait ended: a sender that
  // also receives polls nothing meanwhile.
  uint64_t longest_wait_tsc = 0;
  uint64_t longest_wait_end_tsc = 0;
  // --window: how often a full window held the sender back, the longest it did, and the
  // packets given up for lost after kWindowPatienceSeconds without a reply.
  uint64_t window_waits = 0;
  uint64_t longest_window_wait_tsc = 0;
  uint64_t window_written_off = 0;
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
  // --reflect: the Full-NAT frames answered as their backends (gen/backend_reply.h), each reply
  // put on the ring of the sender whose TX queue the spread picks for it, as a NIC would (a TX
  // queue has one writer); and those a full ring turned away.
  const std::vector<VipTarget>* vips = nullptr;  // set: reflect
  uint16_t gue_port = 0;
  const QueueSpread* spread = nullptr;
  std::array<rte_ring*, kMaxQueues> replies{};
  Counter reflected;
  Counter reflect_dropped;
  // Frames per RX queue: what came back of what the sender on that queue pair sent (--window).
  std::array<Counter, kMaxQueues> queue_frames;
  uint64_t last_rx_tsc = 0;
  // The longest time between two passes over the RX queues, and when it ended: what the lcore
  // lost to the scheduler (or to a sender's wait on a full TX ring), during which the peer's
  // replies could only queue up.
  uint64_t last_pass_tsc = 0;
  uint64_t longest_gap_tsc = 0;
  uint64_t longest_gap_end_tsc = 0;
};

// Polls each of the receiver's RX queues once: every frame to the sink, then freed.
void receivePass(Receiver& receiver);
// The lcore entry points (rte_eal_remote_launch): a std::pair<Sender*, Receiver*> (the receiver
// when this sender also receives), and a Receiver.
int senderMain(void* argument);
int receiverMain(void* argument);

}  // namespace berth
