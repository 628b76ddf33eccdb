#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/pipeline.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// The per-lcore worker (docs/architecture.md, the worker): RX burst with
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

// A question from the management thread to one worker about its connection table (berthctl
// explain): the worker alone may read its table, so it answers. The management thread writes
// key and hash, then bumps `asked` (release); the worker, between bursts, looks the key up,
// writes the answer, then sets `answered` to `asked` (release). The management thread asks again
// only once the previous question is answered.
struct alignas(64) ConntrackQuery {
  std::atomic<uint32_t> asked{0};
  std::atomic<uint32_t> answered{0};
  ConnectionKey key;
  bool found = false;
  Connection connection{};
  uint32_t now_ms = 0;  // the worker's clock when it looked
  // A Full-NAT session instead (docs/fullnat.md), where `nat` is set: by its client's key or
  // its reply's (NatQuestion).
  std::optional<NatQuestion> nat;
  bool session_found = false;
  NatSession session{};
};

// What a worker is made from: where it runs, what it reads, and the queues it serves.
struct WorkerSetup {
  unsigned lcore = 0;  // the worker's memory is allocated on this lcore's NUMA socket
  // The RCU variable it reports quiescent states to, and its thread id there; create()
  // registers it.
  rte_rcu_qsbr* rcu = nullptr;
  unsigned rcu_thread_id = 0;
  const std::atomic<const Snapshot*>* snapshot = nullptr;
  const std::atomic<bool>* stop = nullptr;
  struct Queue {
    uint16_t port_id = 0;                  // DPDK's port id
    uint16_t queue = 0;                    // the RX and TX queue number
    uint32_t port_index = 0;               // the port's index in the config and the snapshot
    bool poll_only_while_link_up = false;  // OpenedPort::poll_only_while_link_up
  };
  std::vector<Queue> queues;
  // For each port (snapshot index), the first port on its device, whose queues carry the
  // frames of the device's VLAN ports; empty: every port is its own device.
  std::vector<uint32_t> device_of_port;
  // The per-core connection table; none: every packet takes the table's pick.
  std::optional<ConntrackConfig> conntrack;
  // Full-NAT sessions the worker holds at most (docs/fullnat.md), with the connection table's
  // timeouts; none: no session table (no port has snat_addresses).
  std::optional<uint32_t> nat_sessions;
  // The receive queue the worker polls on every device it serves: the queue its Full-NAT
  // sessions' replies must come in on.
  uint16_t queue = 0;
  // The secret its buckets are hashed under (ConnectionHashKey). Flow sync gives every worker the
  // one its peers' flows are built under, so a miss finds its bucket there from the bucket hash
  // it already has; none: the worker draws its own.
  std::optional<ConnectionHashKey> connection_hash_key;
  // The published bounded-load counts the worker reads; null: bounded-load services take the
  // table's pick.
  const BackendLoads* backend_loads = nullptr;
  uint64_t tx_drain_us = kTxDrainMicroseconds;
  // Whether a port it serves has a kernel interface: the worker then has a queue per
  // ExceptionClass towards the exception path and one back from it (runtime/exception_path.h).
  bool exception_path = false;
  // Sleep when the queues stay empty (DataplaneConfig::idle); none: busy-poll.
  std::optional<IdleConfig> idle;
  // Flow sync (docs/scale-out.md, "Flows that survive an instance"), with a connection table:
  // the peers' flows, loaded with the snapshot once per burst, and a ring of the worker's news
  // about its off-pick connections for the management thread. Null: no sync.
  const std::atomic<const PeerFlows*>* peer_flows = nullptr;
};

// A fresh secret for connection tables (ConnectionHashKey), from the kernel's random source.
absl::StatusOr<ConnectionHashKey> drawConnectionHashKey();

// News about off-pick connections a worker may hold for the management thread, which empties
// every worker's ring each loop turn: at 10 ms a turn, room for 400,000 a second.
inline constexpr unsigned kFlowExportRingSize = 4096;

// Frames one worker may hold for the exception path, per class; and frames from the kernel
// waiting for a worker to send them. Each port's mempool has room for them
// (runtime/port.h, openPort).
inline constexpr unsigned kKernelQueueSize = 256;
// ICMP errors about its Full-NAT sessions other workers may hold for a worker: errors are rare,
// and a flood of them beyond this is counted (icmp_hand_off_full) and dropped.
inline constexpr unsigned kHandOffQueueSize = 256;

class Worker;
// Frees a worker made by Worker::create() and everything it allocated, the mbufs still waiting
// on its control ring included: destroy workers before the ports whose pools those are.
struct WorkerDeleter {
  void operator()(Worker* worker) const;
};
using WorkerPtr = std::unique_ptr<Worker, WorkerDeleter>;

class alignas(64) Worker final {
 public:
  // A worker for `setup`, with everything it owns allocated on its lcore's socket: the worker
  // itself, a TX buffer per queue, its control ring, its connection table and its traffic
  // counters. ResourceExhausted naming what could not be had; nothing leaks on failure.
  static absl::StatusOr<WorkerPtr> create(const WorkerSetup& setup);

  unsigned lcore() const { return lcore_; }
  // The queues it serves, for the pipeline benchmark's direct calls of processBurst().
  WorkerQueue& queue(size_t index) { return queues_[index]; }
  // This worker's connection table, or null; read by the management thread only for its size
  // and capacity (an explain asks the worker through conntrack_query).
  const ConnectionTable* connections() const { return connections_ ? &*connections_ : nullptr; }
  // This worker's Full-NAT sessions, or null; read by the management thread only for their
  // counts and limit.
  const NatSessionTable* natSessions() const { return nat_sessions_ ? &*nat_sessions_ : nullptr; }
  // Hands the worker a frame to send from the port whose index is mbuf->port (an ARP or ND
  // request, tagged with the port's VLAN), on the queue of the port's device. False when its ring
  // is full; the caller keeps the mbuf.
  bool queueControlFrame(rte_mbuf* mbuf);
  // Frames queued by queueControlFrame() that the worker has not taken yet.
  unsigned controlFramesWaiting() const;
  // The exception path's side of the worker's queues (runtime/exception_path.h), null without
  // one: the frames for the kernel in one class (the exception path's thread alone dequeues),
  // and the kernel's frames for the worker to send from the port whose index is mbuf->port (that
  // thread alone enqueues).
  rte_ring* toKernelQueue(ExceptionClass exception_class) const {
    return to_kernel_[static_cast<size_t>(exception_class)];
  }
  rte_ring* fromKernelQueue() const { return from_kernel_; }
  // The worker's news about its off-pick connections (FlowExport elements; the worker alone
  // enqueues, the management thread alone dequeues), null without flow sync.
  rte_ring* flowExports() const { return flow_exports_; }
  // ICMP errors other workers pass this one about its Full-NAT sessions (Verdict::kHandOff):
  // any worker enqueues, lock-free, this one alone dequeues; null without a session table.
  rte_ring* handOffQueue() const { return hand_off_; }
  // Every worker's handOffQueue(), by the receive queue it polls (worker w, queue w): where
  // this one passes the ICMP errors of another's sessions. Set once, before the workers run.
  void connectHandOffs(std::vector<rte_ring*> by_queue) { hand_off_to_ = std::move(by_queue); }
  // Runs the frames other workers passed this one through the pipeline, as received on their
  // ports, without counting them received again. Public for tests; run() calls it.
  void takeHandOffs(const Snapshot& snapshot);

  // Results: written by this worker only, read relaxed by the management thread.
  WorkerCounters counters;
  // TSC at the start of the loop that first received a frame, and at the end of the latest loop
  // that did: the window a capture replay took, for a packets-per-second figure.
  Counter first_rx_tsc;
  Counter last_rx_tsc;
  WorkerState state;  // counters, traffic arrays and the connection table
  // The management thread's question about a connection (berthctl explain).
  ConntrackQuery conntrack_query;

  // The per-burst step of the loop: every frame through the pipeline, transmitted ones into the
  // queue's TX buffer, dropped ones freed in bulk. Public for the pipeline benchmark.
  // `handed_over`: frames another worker received (takeHandOffs), not counted as received here.
  void processBurst(const Snapshot& snapshot, WorkerQueue& queue, rte_mbuf** mbufs, uint16_t count,
                    bool handed_over = false);

  // Reads the link of each queue that is polled only while up (WorkerQueue), once per loop:
  // one rte_eth_link_get_nowait per such queue, about 20 cycles for memif
  // (perf/pipeline_bench.cc, BM_MemifLinkCheckPerLoop).
  void refreshLinks();

  // Flushes every TX buffer now; a queue whose link this loop found down has its buffered frames
  // dropped as port_down instead.
  void flush();

  // The loop: until *stop, then flushes TX and goes RCU-offline.
  void run();
  // Whether run() has begun its loop (and not yet returned): set by the worker itself, so that
  // berthd reports itself ready only once every worker polls.
  bool running() const { return running_.load(std::memory_order_acquire); }

 private:
  friend struct WorkerDeleter;
  Worker() = default;

  // Sends what the management thread queued on control_frames_, or what the exception path
  // queued on from_kernel_ (port_down where the port's link this loop found down).
  void sendQueuedFrames(rte_ring* ring);
  // This worker's queue on the device of `port` (a snapshot index): `received_on` when that is
  // the device, else the one it has there; null when it has none.
  WorkerQueue* transmitQueueFor(uint32_t port, WorkerQueue* received_on);
  // Queues a frame of `port_index` for the exception path in its class's queue, or, when that is
  // full (or there is none), counts it as kernel_queue_full and adds it to `dropped`.
  void queueForKernel(rte_mbuf* mbuf, ExceptionClass exception_class, uint32_t port_index,
                      rte_mbuf** dropped, uint16_t& drop_count);
  // Passes a frame received on `device` (a snapshot index) to the worker of `owner_queue`, or,
  // when its ring is full (or there is none), counts it and adds it to `dropped`.
  void handOff(rte_mbuf* mbuf, uint8_t owner_queue, uint32_t device, rte_mbuf** dropped,
               uint16_t& drop_count);
  // Answers the management thread's connection-table question, if there is a new one.
  void answerConntrackQuery();
  // Before an idle sleep: sends what would otherwise wait through it (buffered TX, the kernel's
  // and the management thread's frames) and answers a waiting question.
  void finishBeforeSleep();
  // RCU-offline for `us` microseconds, so that no reclaim waits on a sleeping worker; counted.
  void sleepOffline(uint32_t us);
  // create()'s parts, on the lcore's socket: the control, kernel and flow-export rings; the TX
  // buffers; the connection table; the traffic counters.
  absl::Status createRings(const WorkerSetup& setup, int socket);
  absl::Status createTxBuffers(const WorkerSetup& setup, int socket);
  absl::Status createConnectionTable(const WorkerSetup& setup, int socket);
  absl::Status createNatSessionTable(const WorkerSetup& setup, int socket);
  absl::Status createTrafficCounters(int socket);
  // Frees what create() allocated; safe on a partly made worker.
  void release();

  // Inputs, set by create() and only read after.
  unsigned lcore_ = 0;
  unsigned rcu_thread_id_ = 0;
  rte_rcu_qsbr* rcu_ = nullptr;
  const std::atomic<const Snapshot*>* snapshot_ = nullptr;
  const std::atomic<bool>* stop_ = nullptr;
  std::atomic<bool> running_{false};
  std::vector<WorkerQueue> queues_;
  std::vector<uint32_t> device_of_port_;  // WorkerSetup::device_of_port
  rte_ring* control_frames_ = nullptr;    // from the management thread: ARP/ND requests to send
  std::array<rte_ring*, kExceptionClassCount> to_kernel_{};  // to the exception path
  rte_ring* from_kernel_ = nullptr;                          // from it: the kernel's frames
  rte_ring* flow_exports_ = nullptr;    // to the management thread: FlowExport elements
  rte_ring* hand_off_ = nullptr;        // from other workers: ICMP errors of this one's sessions
  std::vector<rte_ring*> hand_off_to_;  // every worker's hand_off_, by queue
  const std::atomic<const PeerFlows*>* peer_flows_ = nullptr;
  FlowExports exports_;  // one burst's news, moved to flow_exports_ after it
  uint64_t tx_drain_cycles_ = 0;
  uint64_t tsc_per_ms_ = 1;  // for the connection table's millisecond clock
  std::optional<IdleConfig> idle_;
  std::optional<ConnectionTable> connections_;
  std::optional<NatSessionTable> nat_sessions_;
  // Owned allocations, freed by release(): hugepage memory from the EAL where it has some, else
  // zeroed memory on transparent huge pages.
  struct TableMemory {
    void* memory = nullptr;
    size_t bytes = 0;
    bool in_eal_memory = false;  // rte_zmalloc'd, else aligned_alloc'd
  };
  static void* allocateTable(TableMemory& table, const char* name, size_t bytes, int socket);
  static void freeTable(TableMemory& table);
  TableMemory conntrack_memory_;
  TableMemory nat_memory_;
  std::unique_ptr<WorkerLoads> loads_;
};

// The lcore entry point (rte_eal_remote_launch): Worker::run(). `worker` is a Worker*.
int runWorker(void* worker);

}  // namespace berth
