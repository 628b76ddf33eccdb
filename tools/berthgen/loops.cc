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

void receiveOnce(Receiver& receiver, uint16_t queue, uint64_t now) {
  rte_mbuf* mbufs[64];
  const uint16_t got = rte_eth_rx_burst(receiver.port, queue, mbufs, 64);
  if (got == 0) return;
  for (uint16_t i = 0; i < got; ++i) {
    receiver.sink->receive(rte_pktmbuf_mtod(mbufs[i], const uint8_t*),
                           rte_pktmbuf_data_len(mbufs[i]), now);
  }
  rte_pktmbuf_free_bulk(mbufs, got);
  receiver.frames.add(got);
  receiver.queue_frames[queue].add(got);
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
    uint64_t refused_since = 0;  // since the ring last took nothing
    uint64_t waiting_since = 0;  // since it first refused part of this burst
    while (sent < count && !g_interrupted.load(std::memory_order_relaxed)) {
      const uint16_t taken = rte_eth_tx_burst(sender.port, sender.queue, mbufs + sent,
                                              static_cast<uint16_t>(count - sent));
      sent += taken;
      rte_rcu_qsbr_quiescent(sender.rcu, sender.rcu_id);
      if (sent < count && waiting_since == 0) waiting_since = rte_rdtsc();
      if (taken != 0) {
        refused_since = 0;
      } else if (refused_since == 0) {
        refused_since = rte_rdtsc();
      } else if (rte_rdtsc() - refused_since > kTxStallSeconds * hz) {
        sender.stalled = true;
        break;
      }
    }
    if (waiting_since != 0) {
      const uint64_t now = rte_rdtsc();
      if (now - waiting_since > sender.longest_wait_tsc) {
        sender.longest_wait_tsc = now - waiting_since;
        sender.longest_wait_end_tsc = now;
      }
    }
    if (sent < count) rte_pktmbuf_free_bulk(mbufs + sent, static_cast<unsigned>(count - sent));
  };
  // --window: packets of the flows and the flood sent on this queue pair, less what came back on
  // its RX queue and what was given up for lost. Malformed packets are not expected back.
  const Counter& returned = sender.receiver->queue_frames[sender.queue];
  uint64_t expected_back = 0;
  uint64_t returned_then = returned.read();
  uint64_t window_full_since = 0;
  // Whether the window has room for `want` more; counts and ends waits, and after
  // kWindowPatienceSeconds without a reply takes what is out as lost.
  auto windowAllows = [&](uint64_t want, uint64_t now) {
    if (options.window == 0) return true;
    const uint64_t back = returned.read() + sender.window_written_off;
    const uint64_t in_flight = expected_back > back ? expected_back - back : 0;
    if (in_flight + want <= options.window) {
      if (window_full_since != 0) {
        sender.longest_window_wait_tsc =
            std::max(sender.longest_window_wait_tsc, now - window_full_since);
        window_full_since = 0;
      }
      return true;
    }
    if (window_full_since == 0) {
      window_full_since = now;
      ++sender.window_waits;
      returned_then = returned.read();
    } else if (returned.read() != returned_then) {
      window_full_since = now;  // replies still come: patience starts again
      returned_then = returned.read();
    } else if (now - window_full_since > kWindowPatienceSeconds * hz) {
      sender.window_written_off += in_flight;
      window_full_since = 0;
    }
    return false;
  };
  sender.start_tsc = rte_rdtsc();
  rte_rcu_qsbr_thread_online(sender.rcu, sender.rcu_id);
  while (!g_interrupted.load(std::memory_order_relaxed)) {
    rte_rcu_qsbr_quiescent(sender.rcu, sender.rcu_id);
    const uint64_t now = rte_rdtsc();
    if (options.count != 0 ? total >= sender.count : now >= sender.end_tsc) break;
    if (also_receive != nullptr) receivePass(*also_receive);
    if (sender.flood_rate > 0) {
      const auto allowed = static_cast<uint64_t>(static_cast<double>(now - sender.start_tsc) /
                                                 static_cast<double>(hz) * sender.flood_rate);
      const uint64_t flood_want =
          allowed > flood_total ? std::min<uint64_t>(allowed - flood_total, options.burst) : 0;
      if (flood_want > 0 && windowAllows(flood_want, now) &&
          rte_pktmbuf_alloc_bulk(sender.pool, burst.data(), static_cast<unsigned>(flood_want)) ==
              0) {
        for (uint64_t i = 0; i < flood_want; ++i) {
          const GenFlow flow = floodFlow(*sender.flood_vip, *sender.flood_source, next_random());
          const size_t length =
              buildFrame(flow, 0, 0, now, 0, sender.source_mac, *options.destination_mac,
                         rte_pktmbuf_mtod(burst[i], uint8_t*));
          burst[i]->data_len = static_cast<uint16_t>(length);
          burst[i]->pkt_len = static_cast<uint32_t>(length);
        }
        transmit(burst.data(), static_cast<uint16_t>(flood_want));
        expected_back += flood_want;
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
    if (want == 0 || !windowAllows(want, now)) continue;
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
    expected_back += want - malformed;
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
    receivePass(receiver);
  }
  rte_rcu_qsbr_thread_offline(receiver.rcu, receiver.rcu_id);
}

}  // namespace

int senderMain(void* argument) {
  auto* pair = static_cast<std::pair<Sender*, Receiver*>*>(argument);
  sendLoop(*pair->first, pair->second);
  // The replies to the last packets are still on their way: receiving goes on from this lcore
  // without a pause until the main lcore says stop.
  if (pair->second != nullptr) receiveLoop(*pair->second);
  return 0;
}

int receiverMain(void* argument) {
  receiveLoop(*static_cast<Receiver*>(argument));
  return 0;
}

}  // namespace berth
