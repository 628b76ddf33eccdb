#include "berth/runtime/worker.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "berth/runtime/mbuf_frame.h"
#include "berth/util/heap.h"
#include "berth/util/random_bytes.h"
#include "berth/util/scratch_array.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// Control frames (ARP/ND requests) and connection-table questions are rare; look for them once
// every this many loops. The kernel's frames (a BGP session, SSH) want less delay: an empty
// ring costs one read of its producer's index.
constexpr uint32_t kControlCheckMask = 1023;
constexpr uint32_t kKernelCheckMask = 63;
constexpr unsigned kControlRingSize = 256;

template <typename T>
T* allocateOnSocket(const char* what, size_t count, int socket) {
  void* memory = rte_zmalloc_socket(what, sizeof(T) * count, RTE_CACHE_LINE_SIZE, socket);
  if (memory == nullptr) return nullptr;
  std::uninitialized_default_construct_n(static_cast<T*>(memory), count);
  return static_cast<T*>(memory);
}

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

ConntrackTimeouts conntrackTimeouts(const ConntrackConfig& conntrack) {
  return {conntrack.tcp_established_s * 1000, conntrack.tcp_opening_s * 1000,
          conntrack.tcp_closing_s * 1000, conntrack.udp_s * 1000};
}

// Called by rte_eth_tx_buffer when the NIC's TX ring refuses part of a burst.
void countRefused(rte_mbuf** mbufs, uint16_t unsent, void* userdata) {
  takeBack(*static_cast<WorkerCounters*>(userdata), mbufs, unsent, DropReason::kTxRingFull);
}

}  // namespace

absl::StatusOr<ConnectionHashKey> drawConnectionHashKey() {
  ConnectionHashKey key;
  if (absl::Status status = fillRandom(key.multipliers.data(), sizeof(key.multipliers));
      !status.ok()) {
    return absl::InternalError(
        absl::StrCat("workers: no secret for the connection table (", status.message(), ")"));
  }
  return key;
}

void WorkerDeleter::operator()(Worker* worker) const {
  if (worker == nullptr) return;
  worker->release();
  worker->~Worker();
  rte_free(worker);
}

absl::StatusOr<WorkerPtr> Worker::create(const WorkerSetup& setup) {
  const int socket = static_cast<int>(rte_lcore_to_socket_id(setup.lcore));
  void* memory = rte_zmalloc_socket("berth_worker", sizeof(Worker), RTE_CACHE_LINE_SIZE, socket);
  if (memory == nullptr) return absl::ResourceExhaustedError("workers: no memory for a worker");
  WorkerPtr worker(new (memory) Worker());
  Worker& w = *worker;
  w.lcore_ = setup.lcore;
  w.rcu_ = setup.rcu;
  w.rcu_thread_id_ = setup.rcu_thread_id;
  w.snapshot_ = setup.snapshot;
  w.stop_ = setup.stop;
  w.tx_drain_cycles_ = rte_get_tsc_hz() / 1'000'000 * setup.tx_drain_us;
  w.tsc_per_ms_ = std::max<uint64_t>(1, rte_get_tsc_hz() / 1000);
  w.idle_ = setup.idle;
  w.device_of_port_ = setup.device_of_port;
  BERTH_RETURN_IF_ERROR(w.createRings(setup, socket));
  BERTH_RETURN_IF_ERROR(w.createTxBuffers(setup, socket));
  BERTH_RETURN_IF_ERROR(w.createConnectionTable(setup, socket));
  BERTH_RETURN_IF_ERROR(w.createNatSessionTable(setup, socket));
  BERTH_RETURN_IF_ERROR(w.createTrafficCounters(socket));
  w.state.counters = &w.counters;
  w.state.conntrack = w.connections_ ? &*w.connections_ : nullptr;
  w.state.nat = w.nat_sessions_ ? &*w.nat_sessions_ : nullptr;
  w.state.queue = setup.queue;
  if (w.connections_) w.connections_->countConnectionsIn(w.state.traffic);
  if (w.nat_sessions_) w.nat_sessions_->countConnectionsIn(w.state.traffic);
  if (setup.backend_loads != nullptr) {
    w.loads_ = std::make_unique<WorkerLoads>(setup.backend_loads);
    w.state.loads = w.loads_.get();
  }
  if (w.rcu_ != nullptr && rte_rcu_qsbr_thread_register(w.rcu_, w.rcu_thread_id_) != 0) {
    return absl::InternalError("workers: rte_rcu_qsbr_thread_register failed");
  }
  return worker;
}

absl::Status Worker::createRings(const WorkerSetup& setup, int socket) {
  // Ring names are global to the process: a sequence number keeps every worker's apart.
  static std::atomic<uint32_t> rings_made{0};
  const std::string ring_name = absl::StrCat("berth_control_", rings_made.fetch_add(1));
  control_frames_ =
      rte_ring_create(ring_name.c_str(), kControlRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (control_frames_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("workers: control ring: ", rte_strerror(rte_errno)));
  }
  if (setup.exception_path) {
    auto kernelQueue = [&](rte_ring*& ring, absl::string_view suffix) -> absl::Status {
      const std::string name = absl::StrCat(ring_name, suffix);
      ring = rte_ring_create(name.c_str(), kKernelQueueSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (ring != nullptr) return absl::OkStatus();
      return absl::ResourceExhaustedError(
          absl::StrCat("workers: kernel queue: ", rte_strerror(rte_errno)));
    };
    for (size_t c = 0; c < kExceptionClassCount; ++c) {
      if (absl::Status status = kernelQueue(to_kernel_[c], absl::StrCat("_to_kernel_", c));
          !status.ok()) {
        return status;
      }
    }
    if (absl::Status status = kernelQueue(from_kernel_, "_from_kernel"); !status.ok()) {
      return status;
    }
  }
  if (setup.nat_sessions) {
    // Any worker enqueues (multi-producer, lock-free); this one alone dequeues.
    const std::string name = absl::StrCat(ring_name, "_hand_off");
    hand_off_ = rte_ring_create(name.c_str(), kHandOffQueueSize, socket, RING_F_SC_DEQ);
    if (hand_off_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("workers: hand-off ring: ", rte_strerror(rte_errno)));
    }
  }
  if (setup.peer_flows != nullptr && setup.conntrack) {
    const std::string name = absl::StrCat(ring_name, "_flows");
    flow_exports_ = rte_ring_create_elem(name.c_str(), sizeof(FlowExport), kFlowExportRingSize,
                                         socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (flow_exports_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("workers: flow sync ring: ", rte_strerror(rte_errno)));
    }
    peer_flows_ = setup.peer_flows;
    state.exports = &exports_;
  }
  return absl::OkStatus();
}

absl::Status Worker::createTxBuffers(const WorkerSetup& setup, int socket) {
  for (const WorkerSetup::Queue& queue : setup.queues) {
    auto* buffer = static_cast<rte_eth_dev_tx_buffer*>(
        rte_zmalloc_socket("berth_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(kBurstSize), 0, socket));
    if (buffer == nullptr) return absl::ResourceExhaustedError("workers: no memory for TX buffers");
    rte_eth_tx_buffer_init(buffer, kBurstSize);
    rte_eth_tx_buffer_set_err_callback(buffer, countRefused, &counters);
    queues_.push_back(WorkerQueue{queue.port_id, queue.queue, queue.port_index, buffer,
                                  queue.poll_only_while_link_up});
  }
  return absl::OkStatus();
}

void* Worker::allocateTable(TableMemory& table, const char* name, size_t bytes, int socket) {
  // Without huge pages every bucket is a TLB miss as well as a cache miss.
  table.bytes = bytes;
  table.in_eal_memory = rte_eal_has_hugepages() != 0;
  table.memory = table.in_eal_memory ? rte_zmalloc_socket(name, bytes, 128, socket)
                                     : allocateZeroedTable(bytes);
  return table.memory;
}

void Worker::freeTable(TableMemory& table) {
  if (table.in_eal_memory) {
    rte_free(table.memory);
  } else {
    std::free(table.memory);
  }
  table = TableMemory{};
}

absl::Status Worker::createConnectionTable(const WorkerSetup& setup, int socket) {
  if (!setup.conntrack) return absl::OkStatus();
  const ConntrackConfig& conntrack = *setup.conntrack;
  const size_t buckets = ConnectionTable::bucketsFor(conntrack.entries_per_core);
  auto* memory = static_cast<ConnectionBucket*>(allocateTable(
      conntrack_memory_, "berth_conntrack", buckets * sizeof(ConnectionBucket), socket));
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("workers: no memory for %u connections (%u MiB) on socket %d; lower "
                        "dataplane.conntrack.entries_per_core or give the EAL more memory",
                        conntrack.entries_per_core, conntrack_memory_.bytes >> 20, socket));
  }
  // A secret drawn at start (here, or by whoever gave it): nobody can compute which flows
  // share a bucket.
  absl::StatusOr<ConnectionHashKey> hash_key =
      setup.connection_hash_key ? *setup.connection_hash_key : drawConnectionHashKey();
  if (!hash_key.ok()) return hash_key.status();
  connections_.emplace(memory, buckets, conntrackTimeouts(conntrack), conntrack.max_inserts_per_sec,
                       &counters.conntrack, *hash_key);
  return absl::OkStatus();
}

absl::Status Worker::createNatSessionTable(const WorkerSetup& setup, int socket) {
  if (!setup.nat_sessions) return absl::OkStatus();
  const uint32_t sessions = *setup.nat_sessions;
  NatSessionMemory layout;
  layout.session_buckets = NatSessionTable::sessionBucketsFor(sessions);
  layout.client_buckets = NatSessionTable::clientBucketsFor(sessions);
  // Each session adds at most one (local address, backend) pair: the room never fills.
  layout.space_count = NatSessionTable::spacesFor(sessions);
  const size_t session_bytes = layout.session_buckets * sizeof(NatSessionBucket);
  const size_t client_bytes = layout.client_buckets * sizeof(NatClientBucket);
  const size_t bytes = session_bytes + client_bytes + layout.space_count * sizeof(NatPortSpace);
  auto* memory = static_cast<uint8_t*>(allocateTable(nat_memory_, "berth_nat", bytes, socket));
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("workers: no memory for %u Full-NAT sessions (%u MiB) on socket %d; lower "
                        "dataplane.conntrack.nat_sessions_per_core or give the EAL more memory",
                        sessions, bytes >> 20, socket));
  }
  layout.sessions = reinterpret_cast<NatSessionBucket*>(memory);
  layout.clients = reinterpret_cast<NatClientBucket*>(memory + session_bytes);
  layout.spaces = reinterpret_cast<NatPortSpace*>(memory + session_bytes + client_bytes);
  // Its own secret: which clients share a bucket is nobody's to compute.
  BERTH_ASSIGN_OR_RETURN(const ConnectionHashKey hash_key, drawConnectionHashKey());
  nat_sessions_.emplace(layout, sessions,
                        setup.conntrack ? conntrackTimeouts(*setup.conntrack) : ConntrackTimeouts{},
                        &counters.nat, hash_key);
  return absl::OkStatus();
}

absl::Status Worker::createTrafficCounters(int socket) {
  TrafficCounters traffic;
  traffic.services =
      allocateOnSocket<TrafficCounter>("berth_service_counters", CounterIds::kMaxServices, socket);
  traffic.backends =
      allocateOnSocket<TrafficCounter>("berth_backend_counters", CounterIds::kMaxBackends, socket);
  state.traffic = traffic;
  if (traffic.services == nullptr || traffic.backends == nullptr) {
    return absl::ResourceExhaustedError("workers: no memory for traffic counters");
  }
  return absl::OkStatus();
}

void Worker::release() {
  // Frames the worker never sent, or the exception path never took, are mbufs of the ports'
  // pools: freed with their rings.
  auto freeRing = [](rte_ring*& ring) {
    rte_mbuf* mbuf;
    while (ring != nullptr && rte_ring_sc_dequeue(ring, reinterpret_cast<void**>(&mbuf)) == 0) {
      rte_pktmbuf_free(mbuf);
    }
    rte_ring_free(ring);
    ring = nullptr;
  };
  freeRing(control_frames_);
  for (rte_ring*& ring : to_kernel_) freeRing(ring);
  freeRing(from_kernel_);
  freeRing(hand_off_);
  rte_ring_free(flow_exports_);  // FlowExport values, nothing to free in them
  flow_exports_ = nullptr;
  for (WorkerQueue& queue : queues_) rte_free(queue.tx_buffer);
  queues_.clear();
  connections_.reset();
  nat_sessions_.reset();
  freeTable(conntrack_memory_);
  freeTable(nat_memory_);
  rte_free(state.traffic.services);
  rte_free(state.traffic.backends);
  state = WorkerState{};
  loads_.reset();
}

bool Worker::queueControlFrame(rte_mbuf* mbuf) {
  return rte_ring_sp_enqueue(control_frames_, mbuf) == 0;
}

unsigned Worker::controlFramesWaiting() const { return rte_ring_count(control_frames_); }

void Worker::processBurst(const Snapshot& snapshot, WorkerQueue& queue, rte_mbuf** mbufs,
                          uint16_t count, bool handed_over) {
  ScratchArray<Frame, kBurstSize> frames;  // each written whole by frameOf() before use
  Verdict verdicts[kBurstSize];
  rte_mbuf* single[kBurstSize];  // the mbufs that hold a whole frame
  rte_mbuf* dropped[kBurstSize];
  uint16_t singles = 0;
  uint16_t drop_count = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
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
  processFrames(snapshot, queue.port_index, frames.data(), verdicts, singles, state);
  if (exports_.count > 0) {
    // Never waits: what the ring has no room for is counted, and its peers' records age out.
    const unsigned queued = rte_ring_sp_enqueue_burst_elem(
        flow_exports_, exports_.records.data(), sizeof(FlowExport), exports_.count, nullptr);
    if (queued < exports_.count) {
      counters.conntrack.values[static_cast<size_t>(ConntrackEvent::kSyncRingFull)].add(
          exports_.count - queued);
    }
    exports_.count = 0;
  }
  for (uint16_t i = 0; i < singles; ++i) {
    rte_mbuf* mbuf = single[i];
    if (verdicts[i] == Verdict::kTransmit) {
      applyFrame(mbuf, frames[i]);
      // Another device only for a two-arm egress: the same port, or a VLAN port of the same
      // device, is this queue's.
      WorkerQueue* out =
          frames[i].port == queue.port_index ? &queue : transmitQueueFor(frames[i].port, &queue);
      if (out == nullptr || !out->link_up) {
        counters.count(out == nullptr ? DropReason::kNoEgressQueue : DropReason::kPortDown);
        dropped[drop_count++] = mbuf;
        continue;
      }
      ++tx_packets;
      tx_bytes += frames[i].length;
      rte_eth_tx_buffer(out->port_id, out->queue, out->tx_buffer, mbuf);
    } else if (goesToKernel(verdicts[i])) {
      queueForKernel(mbuf, exceptionClassOf(verdicts[i]), frames[i].port, dropped, drop_count);
    } else if (verdicts[i] == Verdict::kHandOff) {
      handOff(mbuf, frames[i].owner_queue, queue.port_index, dropped, drop_count);
    } else {
      dropped[drop_count++] = mbuf;
    }
  }
  // Added once per burst: a counter's add is a load and a store, which each packet's would
  // chain through memory.
  counters.tx_packets.add(tx_packets);
  counters.tx_bytes.add(tx_bytes);
  if (!handed_over) {
    counters.rx_packets.add(count);
    counters.rx_bytes.add(rx_bytes);
  }
  if (drop_count > 0) rte_pktmbuf_free_bulk(dropped, drop_count);
}

void Worker::handOff(rte_mbuf* mbuf, uint8_t owner_queue, uint32_t device, rte_mbuf** dropped,
                     uint16_t& drop_count) {
  rte_ring* ring = owner_queue < hand_off_to_.size() ? hand_off_to_[owner_queue] : nullptr;
  // The owner runs it through the pipeline as received on this device.
  mbuf->port = static_cast<uint16_t>(device);
  if (ring != nullptr && rte_ring_mp_enqueue(ring, mbuf) == 0) {
    counters.nat.count(NatEvent::kIcmpHandedOff);
  } else {
    counters.nat.count(NatEvent::kIcmpHandOffFull);
    dropped[drop_count++] = mbuf;
  }
}

void Worker::takeHandOffs(const Snapshot& snapshot) {
  rte_mbuf* frames[kBurstSize];
  const unsigned count =
      rte_ring_sc_dequeue_burst(hand_off_, reinterpret_cast<void**>(frames), kBurstSize, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    WorkerQueue* queue = transmitQueueFor(frames[i]->port, nullptr);
    if (queue == nullptr) {  // a device this worker does not poll: no session of its can be there
      counters.nat.count(NatEvent::kIcmpNoSession);
      rte_pktmbuf_free(frames[i]);
      continue;
    }
    processBurst(snapshot, *queue, &frames[i], 1, true);
  }
}

WorkerQueue* Worker::transmitQueueFor(uint32_t port, WorkerQueue* received_on) {
  const uint32_t device = port < device_of_port_.size() ? device_of_port_[port] : port;
  if (received_on != nullptr && device == received_on->port_index) return received_on;
  for (WorkerQueue& queue : queues_) {
    if (queue.port_index == device) return &queue;
  }
  return nullptr;
}

void Worker::queueForKernel(rte_mbuf* mbuf, ExceptionClass exception_class, uint32_t port_index,
                            rte_mbuf** dropped, uint16_t& drop_count) {
  rte_ring* ring = to_kernel_[static_cast<size_t>(exception_class)];
  // The exception path knows ports by their index, as the snapshot does.
  mbuf->port = static_cast<uint16_t>(port_index);
  if (ring != nullptr && rte_ring_sp_enqueue(ring, mbuf) == 0) {
    counters.to_kernel[static_cast<size_t>(exception_class)].add(1);
  } else {
    counters.count(DropReason::kKernelQueueFull);
    dropped[drop_count++] = mbuf;
  }
}

void Worker::refreshLinks() {
  for (WorkerQueue& queue : queues_) {
    if (!queue.poll_only_while_link_up) continue;
    rte_eth_link link;
    queue.link_up =
        rte_eth_link_get_nowait(queue.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
  }
}

void Worker::flush() {
  for (WorkerQueue& queue : queues_) {
    if (queue.link_up) {
      rte_eth_tx_buffer_flush(queue.port_id, queue.queue, queue.tx_buffer);
    } else if (queue.tx_buffer->length > 0) {
      takeBack(counters, queue.tx_buffer->pkts, queue.tx_buffer->length, DropReason::kPortDown);
      queue.tx_buffer->length = 0;
    }
  }
}

void Worker::sendQueuedFrames(rte_ring* ring) {
  rte_mbuf* frames[kBurstSize];
  const unsigned count =
      rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(frames), kBurstSize, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    WorkerQueue* out = transmitQueueFor(frames[i]->port, nullptr);
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
  const std::optional<NatQuestion>& nat = conntrack_query.nat;
  const Connection* found =
      connections_ && !nat ? connections_->peek(conntrack_query.key) : nullptr;
  conntrack_query.found = found != nullptr;
  if (found != nullptr) conntrack_query.connection = *found;
  const NatSession* session = nullptr;
  if (nat && nat_sessions_) {
    session = nat->by_reply ? nat_sessions_->peekReply(nat->reply)
                            : nat_sessions_->peekClient(nat->client);
  }
  conntrack_query.session_found = session != nullptr;
  if (session != nullptr) conntrack_query.session = *session;
  conntrack_query.now_ms = state.now_ms;
  conntrack_query.answered.store(asked, std::memory_order_release);
}

void Worker::finishBeforeSleep() {
  flush();
  if (from_kernel_ != nullptr) sendQueuedFrames(from_kernel_);
  if (control_frames_ != nullptr) sendQueuedFrames(control_frames_);
  if (hand_off_ != nullptr && rte_ring_count(hand_off_) != 0) {
    takeHandOffs(*snapshot_->load(std::memory_order_acquire));
    flush();
  }
  answerConntrackQuery();
}

void Worker::sleepOffline(uint32_t us) {
  rte_rcu_qsbr_thread_offline(rcu_, rcu_thread_id_);
  const uint64_t before = rte_rdtsc();
  rte_delay_us_sleep(us);
  const uint64_t slept = rte_rdtsc() - before;
  rte_rcu_qsbr_thread_online(rcu_, rcu_thread_id_);
  counters.idle_sleeps.add(1);
  counters.idle_sleep_us.add(slept * 1000 / tsc_per_ms_);
}

void Worker::run() {
  rte_rcu_qsbr_thread_online(rcu_, rcu_thread_id_);
  running_.store(true, std::memory_order_release);
  // The kernel's default timer slack (50 us) would stretch every idle sleep past its bound.
  if (idle_) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  uint64_t last_drain = rte_rdtsc();
  uint64_t loop_start = last_drain;
  uint32_t iteration = 0;
  uint32_t empty_polls = 0;
  uint32_t sleep_us = 1;
  rte_mbuf* mbufs[kBurstSize];
  while (!stop_->load(std::memory_order_relaxed)) {
    // The connection table's clock: milliseconds, wrapping after 49 days, which its
    // wrap-aware ageing allows.
    state.now_ms = static_cast<uint32_t>(loop_start / tsc_per_ms_);
    // A memif port is touched only in a loop that began with its link up: until then its PMD
    // may read a ring it has not mapped yet (OpenedPort::poll_only_while_link_up).
    refreshLinks();
    bool received = false;
    for (WorkerQueue& queue : queues_) {
      if (!queue.link_up) continue;
      const uint16_t count = rte_eth_rx_burst(queue.port_id, queue.queue, mbufs, kBurstSize);
      if (count == 0) continue;
      received = true;
      // One load per burst: every frame of the burst sees the same snapshot, and the RCU
      // quiescent state below is only reported after the last of them.
      const Snapshot* snapshot = snapshot_->load(std::memory_order_acquire);
      if (peer_flows_ != nullptr) state.peer_flows = peer_flows_->load(std::memory_order_acquire);
      processBurst(*snapshot, queue, mbufs, count);
    }
    const uint64_t now = rte_rdtsc();
    if (received) {
      if (first_rx_tsc.read() == 0) first_rx_tsc.set(loop_start);
      last_rx_tsc.set(now);
    }
    loop_start = now;
    if (now - last_drain >= tx_drain_cycles_) {
      flush();
      last_drain = now;
    }
    ++iteration;
    if ((iteration & kKernelCheckMask) == 0 && from_kernel_ != nullptr) {
      sendQueuedFrames(from_kernel_);
    }
    if ((iteration & kKernelCheckMask) == 0 && hand_off_ != nullptr &&
        rte_ring_count(hand_off_) != 0) {
      takeHandOffs(*snapshot_->load(std::memory_order_acquire));
    }
    if ((iteration & kControlCheckMask) == 0) {
      if (control_frames_ != nullptr) sendQueuedFrames(control_frames_);
      answerConntrackQuery();
    }
    // Idle: after enough empty loops, sleep, twice as long each empty loop up to the bound. The
    // ports are touched only before the quiescent state, so a port's memory may be unmapped
    // while the worker sleeps (runtime/unmap_guard.h).
    bool sleep = false;
    if (received) {
      empty_polls = 0;
      sleep_us = 1;
    } else if (idle_ && ++empty_polls >= idle_->after_empty_polls) {
      sleep = true;
      empty_polls = idle_->after_empty_polls;
      finishBeforeSleep();
    }
    if (connections_) connections_->sweep(state.now_ms);
    if (nat_sessions_) nat_sessions_->sweep(state.now_ms);
    rte_rcu_qsbr_quiescent(rcu_, rcu_thread_id_);
    if (sleep) {
      sleepOffline(sleep_us);
      sleep_us = std::min(2 * sleep_us, idle_->max_sleep_us);
      loop_start = rte_rdtsc();
      last_drain = loop_start;
    }
  }
  // This flush comes after the loop's last quiescent state, so it reads the links afresh.
  refreshLinks();
  flush();
  rte_rcu_qsbr_thread_offline(rcu_, rcu_thread_id_);
  running_.store(false, std::memory_order_release);
}

int runWorker(void* worker) {
  static_cast<Worker*>(worker)->run();
  return 0;
}

}  // namespace berth
