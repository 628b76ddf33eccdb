#include "loops.h"

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
#include "berth/gen/backend_reply.h"
#include "berth/gen/sink.h"
#include "berth/runtime/port.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/command_line.h"
#include "berth/util/heap.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"
#include "options.h"

namespace berth {

std::atomic<bool> g_interrupted{false};

namespace {

// --reflect: whether `mbuf` was a frame to a Full-NAT backend, now answered and on its way.
bool reflected(Receiver& receiver, rte_mbuf* mbuf) {
  if (receiver.vips == nullptr || mbuf->nb_segs != 1) return false;
  FlowKey reply;
  const size_t length = replyAsBackend(rte_pktmbuf_mtod(mbuf, uint8_t*), rte_pktmbuf_data_len(mbuf),
                                       rte_pktmbuf_data_len(mbuf) + rte_pktmbuf_tailroom(mbuf),
                                       *receiver.vips, receiver.gue_port, reply);
  if (length == 0) return false;
  mbuf->data_len = static_cast<uint16_t>(length);
  mbuf->pkt_len = static_cast<uint32_t>(length);
  rte_ring* ring = receiver.replies[receiver.spread->queueOf(reply)];
  if (ring == nullptr || rte_ring_sp_enqueue(ring, mbuf) != 0) {
    rte_pktmbuf_free(mbuf);
    receiver.reflect_dropped.add(1);
  } else {
    receiver.reflected.add(1);
  }
  return true;
}

void receiveOnce(Receiver& receiver, uint16_t queue, uint64_t now) {
  rte_mbuf* mbufs[64];
  const uint16_t got = rte_eth_rx_burst(receiver.port, queue, mbufs, 64);
  if (got == 0) return;
  uint16_t kept = 0;
  for (uint16_t i = 0; i < got; ++i) {
    if (reflected(receiver, mbufs[i])) continue;
    receiver.sink->receive(rte_pktmbuf_mtod(mbufs[i], const uint8_t*),
                           rte_pktmbuf_data_len(mbufs[i]), now);
    mbufs[kept++] = mbufs[i];
  }
  rte_pktmbuf_free_bulk(mbufs, kept);
  receiver.frames.add(got);
  // What came back to the clients: the backends' replies are on their way out again.
  receiver.queue_frames[queue].add(kept);
  receiver.verified.set(receiver.sink->totals().verified);
  receiver.last_rx_tsc = now;
}

}  // namespace

void receivePass(Receiver& receiver) {
  const uint64_t now = rte_rdtsc();
  if (receiver.last_pass_tsc != 0 && now - receiver.last_pass_tsc > receiver.longest_gap_tsc) {
    receiver.longest_gap_tsc = now - receiver.last_pass_tsc;
    receiver.longest_gap_end_tsc = now;
  }
  receiver.last_pass_tsc = now;
  for (uint16_t queue = 0; queue < receiver.queues; ++queue) receiveOnce(receiver, queue, now);
}

namespace {

// One sender's loop: sends until the duration or count is reached, then returns.
class SendLoop {
 public:
  explicit SendLoop(Sender& sender)
      : sender_(sender),
        options_(*sender.options),
        flows_(*sender.flows),
        mine_(*sender.mine),
        hz_(rte_get_tsc_hz()),
        random_(0x9E3779B97F4A7C15ull ^ rte_rdtsc()),
        malformed_threshold_(
            static_cast<uint64_t>(options_.malformed_ratio * static_cast<double>(UINT64_MAX))),
        burst_(options_.burst),
        returned_(sender.receiver->queue_frames[sender.queue]),
        returned_then_(returned_.read()) {}

  void run(Receiver* also_receive) {
    sender_.start_tsc = rte_rdtsc();
    rte_rcu_qsbr_thread_online(sender_.rcu, sender_.rcu_id);
    while (!g_interrupted.load(std::memory_order_relaxed)) {
      rte_rcu_qsbr_quiescent(sender_.rcu, sender_.rcu_id);
      const uint64_t now = rte_rdtsc();
      if (options_.count != 0 ? total_ >= sender_.count : now >= sender_.end_tsc) break;
      if (also_receive != nullptr) receivePass(*also_receive);
      sendReplies();
      if (sender_.flood_rate > 0) sendFlood(now);
      if (sender_.stalled) break;
      sendFlows(now);
      if (sender_.stalled) break;
    }
    rte_rcu_qsbr_thread_offline(sender_.rcu, sender_.rcu_id);
    sender_.flow_packets = n_;
    sender_.stop_tsc = rte_rdtsc();
    sender_.done.store(true, std::memory_order_release);
  }

  // --reflect: what the receiver left on this queue's ring, sent.
  void sendReplies() {
    if (sender_.replies == nullptr) return;
    const unsigned taken = rte_ring_sc_dequeue_burst(
        sender_.replies, reinterpret_cast<void**>(burst_.data()), burst_.size(), nullptr);
    if (taken == 0) return;
    transmit(burst_.data(), static_cast<uint16_t>(taken));
    sender_.replies_sent.add(taken);
  }

  // After the run: replies and, for a sender that also receives, receiving, until the main
  // lcore says stop.
  void serveUntilStopped(Receiver* also_receive) {
    rte_rcu_qsbr_thread_online(sender_.rcu, sender_.rcu_id);
    while (!sender_.receiver->stop.load(std::memory_order_acquire)) {
      rte_rcu_qsbr_quiescent(sender_.rcu, sender_.rcu_id);
      if (also_receive != nullptr) receivePass(*also_receive);
      sendReplies();
    }
    rte_rcu_qsbr_thread_offline(sender_.rcu, sender_.rcu_id);
  }

 private:
  uint64_t nextRandom() {
    random_ ^= random_ << 13;
    random_ ^= random_ >> 7;
    random_ ^= random_ << 17;
    return random_;
  }

  // Everything built is sent: a full TX ring is waited out, as testpmd's txonly retries, but
  // not for ever: a port that takes nothing for a while has lost its link or its peer.
  void transmit(rte_mbuf** mbufs, uint16_t count) {
    uint16_t sent = 0;
    uint64_t refused_since = 0;  // since the ring last took nothing
    uint64_t waiting_since = 0;  // since it first refused part of this burst
    while (sent < count && !g_interrupted.load(std::memory_order_relaxed)) {
      const uint16_t taken = rte_eth_tx_burst(sender_.port, sender_.queue, mbufs + sent,
                                              static_cast<uint16_t>(count - sent));
      sent += taken;
      rte_rcu_qsbr_quiescent(sender_.rcu, sender_.rcu_id);
      if (sent < count && waiting_since == 0) waiting_since = rte_rdtsc();
      if (taken != 0) {
        refused_since = 0;
      } else if (refused_since == 0) {
        refused_since = rte_rdtsc();
      } else if (rte_rdtsc() - refused_since > kTxStallSeconds * hz_) {
        sender_.stalled = true;
        break;
      }
    }
    if (waiting_since != 0) {
      const uint64_t now = rte_rdtsc();
      if (now - waiting_since > sender_.longest_wait_tsc) {
        sender_.longest_wait_tsc = now - waiting_since;
        sender_.longest_wait_end_tsc = now;
      }
    }
    if (sent < count) rte_pktmbuf_free_bulk(mbufs + sent, static_cast<unsigned>(count - sent));
  }

  // Whether the window (--window) has room for `want` more; counts and ends waits, and after
  // kWindowPatienceSeconds without a reply takes what is out as lost.
  bool windowAllows(uint64_t want, uint64_t now) {
    if (options_.window == 0) return true;
    const uint64_t back = returned_.read() + sender_.window_written_off;
    const uint64_t in_flight = expected_back_ > back ? expected_back_ - back : 0;
    if (in_flight + want <= options_.window) {
      if (window_full_since_ != 0) {
        sender_.longest_window_wait_tsc =
            std::max(sender_.longest_window_wait_tsc, now - window_full_since_);
        window_full_since_ = 0;
      }
      return true;
    }
    if (window_full_since_ == 0) {
      window_full_since_ = now;
      ++sender_.window_waits;
      returned_then_ = returned_.read();
    } else if (returned_.read() != returned_then_) {
      window_full_since_ = now;  // replies still come: patience starts again
      returned_then_ = returned_.read();
    } else if (now - window_full_since_ > kWindowPatienceSeconds * hz_) {
      sender_.window_written_off += in_flight;
      window_full_since_ = 0;
    }
    return false;
  }

  // The flood's share of this pass, at its rate.
  void sendFlood(uint64_t now) {
    const auto allowed = static_cast<uint64_t>(static_cast<double>(now - sender_.start_tsc) /
                                               static_cast<double>(hz_) * sender_.flood_rate);
    const uint64_t flood_want =
        allowed > flood_total_ ? std::min<uint64_t>(allowed - flood_total_, options_.burst) : 0;
    if (flood_want == 0 || !windowAllows(flood_want, now) ||
        rte_pktmbuf_alloc_bulk(sender_.pool, burst_.data(), static_cast<unsigned>(flood_want)) !=
            0) {
      return;
    }
    for (uint64_t i = 0; i < flood_want; ++i) {
      const GenFlow flow = floodFlow(*sender_.flood_vip, *sender_.flood_source, nextRandom());
      const size_t length =
          buildFrame(flow, 0, 0, now, 0, sender_.source_mac, *options_.destination_mac,
                     rte_pktmbuf_mtod(burst_[i], uint8_t*));
      burst_[i]->data_len = static_cast<uint16_t>(length);
      burst_[i]->pkt_len = static_cast<uint32_t>(length);
    }
    transmit(burst_.data(), static_cast<uint16_t>(flood_want));
    expected_back_ += flood_want;
    flood_total_ += flood_want;
    sender_.flood.add(flood_want);
  }

  // A burst of the flows' packets (and the malformed share), at the rate and within the count.
  void sendFlows(uint64_t now) {
    if (mine_.empty()) return;  // a queue RSS gave no flow, running for --reflect's replies
    uint64_t want = options_.burst;
    if (options_.rate != 0) {
      const auto allowed = static_cast<uint64_t>(static_cast<double>(now - sender_.start_tsc) /
                                                 static_cast<double>(hz_) * sender_.rate);
      want = allowed > total_ ? std::min<uint64_t>(allowed - total_, options_.burst) : 0;
    }
    if (options_.count != 0) want = std::min(want, sender_.count - total_);
    if (want == 0 || !windowAllows(want, now)) return;
    if (rte_pktmbuf_alloc_bulk(sender_.pool, burst_.data(), static_cast<unsigned>(want)) != 0) {
      return;  // the pool is empty for now: the port still holds the last bursts
    }
    uint64_t bytes = 0;
    uint64_t malformed = 0;
    for (uint64_t i = 0; i < want; ++i) {
      rte_mbuf* mbuf = burst_[i];
      auto* data = rte_pktmbuf_mtod(mbuf, uint8_t*);
      size_t length;
      if (malformed_threshold_ != 0 && nextRandom() < malformed_threshold_) {
        length = buildMalformedFrame(total_ + i, nextRandom(), sender_.source_mac,
                                     *options_.destination_mac, data);
        ++malformed;
      } else {
        const uint32_t f = mine_[n_ % mine_.size()];
        const size_t size = options_.imix ? kImixPattern[(total_ + i) % 12] : options_.packet_size;
        length = buildFrame(flows_[f], f, static_cast<uint32_t>(n_ / mine_.size()), now, size,
                            sender_.source_mac, *options_.destination_mac, data);
        ++n_;
      }
      mbuf->data_len = static_cast<uint16_t>(length);
      mbuf->pkt_len = static_cast<uint32_t>(length);
      bytes += length;
      if (sender_.pcap != nullptr) sender_.pcap->write(data, length);
    }
    transmit(burst_.data(), static_cast<uint16_t>(want));
    expected_back_ += want - malformed;
    total_ += want;
    sender_.packets.add(want);
    sender_.bytes.add(bytes);
    sender_.malformed.add(malformed);
  }

  Sender& sender_;
  const GenOptions& options_;
  const std::vector<GenFlow>& flows_;
  const std::vector<uint32_t>& mine_;
  const uint64_t hz_;
  uint64_t random_;
  const uint64_t malformed_threshold_;
  std::vector<rte_mbuf*> burst_;
  uint64_t total_ = 0;  // every packet sent, malformed included
  uint64_t n_ = 0;      // flow packets
  uint64_t flood_total_ = 0;
  // --window: packets of the flows and the flood sent on this queue pair, less what came back on
  // its RX queue and what was given up for lost. Malformed packets are not expected back.
  const Counter& returned_;
  uint64_t expected_back_ = 0;
  uint64_t returned_then_;
  uint64_t window_full_since_ = 0;
};

void receiveLoop(Receiver& receiver) {
  rte_rcu_qsbr_thread_online(receiver.rcu, receiver.rcu_id);
  while (!receiver.stop.load(std::memory_order_acquire)) {
    rte_rcu_qsbr_quiescent(receiver.rcu, receiver.rcu_id);
    receivePass(receiver);
  }
  rte_rcu_qsbr_thread_offline(receiver.rcu, receiver.rcu_id);
}

}  // namespace

int senderMain(void* argument) {
  auto* pair = static_cast<std::pair<Sender*, Receiver*>*>(argument);
  SendLoop loop(*pair->first);
  loop.run(pair->second);
  // The replies to the last packets are still on their way: receiving, and answering as the
  // backends, go on from this lcore without a pause until the main lcore says stop.
  if (pair->second != nullptr || pair->first->replies != nullptr) {
    loop.serveUntilStopped(pair->second);
  }
  return 0;
}

int receiverMain(void* argument) {
  receiveLoop(*static_cast<Receiver*>(argument));
  return 0;
}

}  // namespace berth
