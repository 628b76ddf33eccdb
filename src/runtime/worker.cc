#include "berth/runtime/worker.h"

#include <rte_cycles.h>
#include <rte_prefetch.h>

#include "berth/runtime/mbuf_frame.h"

namespace berth {
namespace {

// Control frames (ARP/ND requests) and connection-table questions are rare; look for them once
// every this many loops.
constexpr uint32_t kControlCheckMask = 1023;

// Frames counted as sent when buffered that never left: takes them back, counts them as dropped
// for `reason`, and frees them.
void takeBack(WorkerCounters& counters, rte_mbuf** mbufs, uint16_t unsent, DropReason reason) {
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < unsent; ++i) bytes += rte_pktmbuf_pkt_len(mbufs[i]);
  counters.tx_packets.subtract(unsent);
  counters.tx_bytes.subtract(bytes);
  counters.drops[static_cast<size_t>(reason)].add(unsent);
  rte_pktmbuf_free_bulk(mbufs, unsent);
}

// Called by rte_eth_tx_buffer when the NIC's TX ring refuses part of a burst.
void countRefused(rte_mbuf** mbufs, uint16_t unsent, void* userdata) {
  takeBack(*static_cast<WorkerCounters*>(userdata), mbufs, unsent, DropReason::kTxRingFull);
}

}  // namespace

void Worker::attach(TrafficCounters traffic) {
  state.counters = &counters;
  state.traffic = traffic;
  state.neighbors = this;
  state.conntrack = connections ? &*connections : nullptr;
  if (connections) connections->countConnectionsIn(traffic);
  for (WorkerQueue& queue : queues) {
    rte_eth_tx_buffer_set_err_callback(queue.tx_buffer, countRefused, &counters);
  }
}

void Worker::processBurst(const Snapshot& snapshot, WorkerQueue& queue, rte_mbuf** mbufs,
                          uint16_t count) {
  Frame frames[kBurstSize];
  Verdict verdicts[kBurstSize];
  rte_mbuf* single[kBurstSize];  // the mbufs that hold a whole frame
  rte_mbuf* dropped[kBurstSize];
  uint16_t singles = 0;
  uint16_t drop_count = 0;
  uint64_t rx_bytes = 0;
  for (uint16_t i = 0; i < count; ++i) {
    rte_mbuf* mbuf = mbufs[i];
    // Headers first: the pipeline's first stage reads every frame's first cache line.
    rte_prefetch0(rte_pktmbuf_mtod(mbuf, void*));
    rx_bytes += rte_pktmbuf_pkt_len(mbuf);
    // berth's mempools hold a whole frame per mbuf; a chain can only come from a PMD set up
    // otherwise, and the rewrites work on one contiguous buffer.
    if (mbuf->nb_segs != 1) {
      counters.count(DropReason::kMultiSegment);
      dropped[drop_count++] = mbuf;
      continue;
    }
    frames[singles] = frameOf(mbuf);
    single[singles++] = mbuf;
  }
  processFrames(snapshot, queue.port_index, frames, verdicts, singles, state);
  for (uint16_t i = 0; i < singles; ++i) {
    rte_mbuf* mbuf = single[i];
    if (verdicts[i] == Verdict::kTransmit) {
      applyFrame(mbuf, frames[i]);
      counters.tx_packets.add(1);
      counters.tx_bytes.add(frames[i].length);
      rte_eth_tx_buffer(queue.port_id, queue.queue, queue.tx_buffer, mbuf);
    } else {
      dropped[drop_count++] = mbuf;
    }
  }
  counters.rx_packets.add(count);
  counters.rx_bytes.add(rx_bytes);
  if (drop_count > 0) rte_pktmbuf_free_bulk(dropped, drop_count);
}

void Worker::refreshLinks() {
  for (WorkerQueue& queue : queues) {
    if (!queue.poll_only_while_link_up) continue;
    rte_eth_link link;
    queue.link_up =
        rte_eth_link_get_nowait(queue.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
  }
}

void Worker::flush() {
  for (WorkerQueue& queue : queues) {
    if (queue.link_up) {
      rte_eth_tx_buffer_flush(queue.port_id, queue.queue, queue.tx_buffer);
    } else if (queue.tx_buffer->length > 0) {
      takeBack(counters, queue.tx_buffer->pkts, queue.tx_buffer->length, DropReason::kPortDown);
      queue.tx_buffer->length = 0;
    }
  }
}

void Worker::report(const NeighborObservation& observation) {
  // A full ring loses this report; the management thread asks again on its next round, and a
  // reply to that is news again.
  NeighborMessage message{observation};
  rte_ring_mp_enqueue_elem(neighbor_news, &message, sizeof(message));
}

void Worker::sendControlFrames() {
  rte_mbuf* frames[kBurstSize];
  const unsigned count = rte_ring_sc_dequeue_burst(control_frames, reinterpret_cast<void**>(frames),
                                                   kBurstSize, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    WorkerQueue* out = nullptr;
    for (WorkerQueue& queue : queues) {
      if (queue.port_index == frames[i]->port) out = &queue;
    }
    if (out == nullptr || !out->link_up) {
      if (out != nullptr) counters.count(DropReason::kPortDown);
      rte_pktmbuf_free(frames[i]);
      continue;
    }
    counters.tx_packets.add(1);
    counters.tx_bytes.add(rte_pktmbuf_pkt_len(frames[i]));
    rte_eth_tx_buffer(out->port_id, out->queue, out->tx_buffer, frames[i]);
  }
}

void Worker::answerConntrackQuery() {
  const uint32_t asked = conntrack_query.asked.load(std::memory_order_acquire);
  if (asked == conntrack_query.answered.load(std::memory_order_relaxed)) return;
  const Connection* found =
      connections ? connections->peek(conntrack_query.key, conntrack_query.hash) : nullptr;
  conntrack_query.found = found != nullptr;
  if (found != nullptr) conntrack_query.connection = *found;
  conntrack_query.now_ms = state.now_ms;
  conntrack_query.answered.store(asked, std::memory_order_release);
}

int runWorker(void* argument) {
  Worker& worker = *static_cast<Worker*>(argument);
  rte_rcu_qsbr_thread_online(worker.rcu, worker.rcu_thread_id);
  uint64_t last_drain = rte_rdtsc();
  uint64_t loop_start = last_drain;
  uint32_t iteration = 0;
  rte_mbuf* mbufs[kBurstSize];
  while (!worker.stop->load(std::memory_order_relaxed)) {
    // The connection table's clock: milliseconds, wrapping after 49 days, which its
    // wrap-aware ageing allows.
    worker.state.now_ms = static_cast<uint32_t>(loop_start / worker.tsc_per_ms);
    // A memif port is touched only in a loop that began with its link up: until then its PMD
    // may read a ring it has not mapped yet (OpenedPort::poll_only_while_link_up).
    worker.refreshLinks();
    bool received = false;
    for (WorkerQueue& queue : worker.queues) {
      if (!queue.link_up) continue;
      const uint16_t count = rte_eth_rx_burst(queue.port_id, queue.queue, mbufs, kBurstSize);
      if (count == 0) continue;
      received = true;
      // One load per burst: every frame of the burst sees the same snapshot, and the RCU
      // quiescent state below is only reported after the last of them.
      const Snapshot* snapshot = worker.snapshot->load(std::memory_order_acquire);
      worker.processBurst(*snapshot, queue, mbufs, count);
    }
    const uint64_t now = rte_rdtsc();
    if (received) {
      if (worker.first_rx_tsc.read() == 0) worker.first_rx_tsc.set(loop_start);
      worker.last_rx_tsc.set(now);
    }
    loop_start = now;
    if (now - last_drain >= worker.tx_drain_cycles) {
      worker.flush();
      last_drain = now;
    }
    if ((++iteration & kControlCheckMask) == 0) {
      if (worker.control_frames != nullptr) worker.sendControlFrames();
      worker.answerConntrackQuery();
    }
    if (worker.connections) worker.connections->sweep(worker.state.now_ms);
    rte_rcu_qsbr_quiescent(worker.rcu, worker.rcu_thread_id);
  }
  // This flush comes after the loop's last quiescent state, so it reads the links afresh.
  worker.refreshLinks();
  worker.flush();
  rte_rcu_qsbr_thread_offline(worker.rcu, worker.rcu_thread_id);
  return 0;
}

}  // namespace berth
