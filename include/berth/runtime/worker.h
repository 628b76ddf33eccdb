#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "berth/dataplane/counters.h"
#include "berth/dataplane/pipeline.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// The per-lcore worker (DESIGN.md, data flow; STYLE.md, one worker loop shape): RX burst with
// prefetch, the pipeline per frame, buffered TX drained on a TSC timer, and an RCU quiescent
// state once per loop. Each worker owns its queues, TX buffers and counters; nothing in here is
// shared with another worker, so nothing is locked.

inline constexpr uint16_t kBurstSize = 32;
static_assert(kBurstSize <= kMaxFramesPerCall, "a burst goes through the pipeline in one call");
// How long a partly filled TX buffer may wait, as l3fwd's BURST_TX_DRAIN_US.
inline constexpr uint64_t kTxDrainMicroseconds = 100;

// One RX queue and the TX queue of the same number on a port, both this worker's alone.
struct WorkerQueue {
  uint16_t port_id = 0;     // DPDK's port id
  uint16_t queue = 0;       // RX and TX queue number
  uint32_t port_index = 0;  // the port's index in the config and the snapshot
  rte_eth_dev_tx_buffer* tx_buffer = nullptr;
  // Set for a port whose PMD must not be polled while its link is down
  // (OpenedPort::poll_only_while_link_up says which, and why). The worker then reads the link
  // once at the top of every loop, into link_up, and only in a loop that found it up does it
  // call rx_burst or tx_burst on the queue; frames meant for it in a loop that found it down are
  // dropped as port_down. Other ports are never asked, and link_up stays true.
  bool poll_only_while_link_up = false;
  bool link_up = true;
};

// What a worker reports to the management thread: news about a next hop's MAC.
struct alignas(4) NeighborMessage {
  NeighborObservation observation;
};
static_assert(sizeof(NeighborMessage) % 4 == 0, "rte_ring elements are multiples of 4 bytes");

// A question from the management thread to one worker about its connection table (berthctl
// explain): the worker alone may read its table, so it answers. The management thread writes
// key and hash, then bumps `asked` (release); the worker, between bursts, looks the key up,
// writes the answer, then sets `answered` to `asked` (release). The management thread asks again
// only once the previous question is answered.
struct alignas(64) ConntrackQuery {
  std::atomic<uint32_t> asked{0};
  std::atomic<uint32_t> answered{0};
  ConnectionKey key;
  uint32_t hash = 0;
  bool found = false;
  Connection connection{};
  uint32_t now_ms = 0;  // the worker's clock when it looked
};

class alignas(64) Worker final : public NeighborSink {
 public:
  // Inputs, set before launch and only read after.
  unsigned lcore = 0;
  unsigned rcu_thread_id = 0;
  rte_rcu_qsbr* rcu = nullptr;
  const std::atomic<const Snapshot*>* snapshot = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::vector<WorkerQueue> queues;
  rte_ring* neighbor_news = nullptr;   // to the management thread; many producers, one consumer
  rte_ring* control_frames = nullptr;  // from the management thread: ARP/ND requests to send,
                                       // each mbuf's `port` the port index to send it from
  uint64_t tx_drain_cycles = 0;
  uint64_t tsc_per_ms = 1;  // for the connection table's millisecond clock
  // This worker's connection table (its buckets allocated on the worker's socket), if any.
  std::optional<ConnectionTable> connections;

  // Results: written by this worker only, read relaxed by the management thread.
  WorkerCounters counters;
  // TSC at the start of the loop that first received a frame, and at the end of the latest loop
  // that did: the window a capture replay took, for a packets-per-second figure.
  Counter first_rx_tsc;
  Counter last_rx_tsc;
  WorkerState state;  // counters, traffic arrays and this worker as the neighbour sink

  // Points `state` at this worker's counters, the given traffic arrays (CounterIds-sized,
  // zeroed, on the worker's socket) and its connection table, and hooks the TX-refused callback
  // to each TX buffer.
  void attach(TrafficCounters traffic);

  // The per-burst step of the loop: every frame through the pipeline, transmitted ones into the
  // queue's TX buffer, dropped ones freed in bulk. Public for the pipeline benchmark.
  void processBurst(const Snapshot& snapshot, WorkerQueue& queue, rte_mbuf** mbufs, uint16_t count);

  // Reads the link of each queue that is polled only while up (WorkerQueue), once per loop:
  // one rte_eth_link_get_nowait per such queue, about 20 cycles for memif
  // (perf/pipeline_bench.cc, BM_MemifLinkCheckPerLoop).
  void refreshLinks();

  // Flushes every TX buffer now; a queue whose link this loop found down has its buffered frames
  // dropped as port_down instead.
  void flush();

  // Sends what the management thread queued on control_frames (port_down where the port's link
  // this loop found down).
  void sendControlFrames();

  // Answers the management thread's connection-table question, if there is a new one.
  void answerConntrackQuery();

  ConntrackQuery conntrack_query;

  void report(const NeighborObservation& observation) override;
};

// The lcore entry point (rte_eal_remote_launch): runs the loop until *stop, then flushes TX and
// goes RCU-offline. `worker` is a Worker*.
int runWorker(void* worker);

}  // namespace berth
