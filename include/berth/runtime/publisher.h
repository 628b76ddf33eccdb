#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "berth/dataplane/peer_flows.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// Publishes snapshots to the workers (docs/architecture.md, snapshot and RCU): one
// release store of the new pointer, then the old snapshot goes on an rte_rcu_qsbr defer queue and
// is freed only once every registered worker has reported a quiescent state after the store, so
// no worker can still be reading it. Nothing here waits for the workers: the management thread
// calls reclaim() between its other work, and asks inForce() when it wants to know that every
// worker has moved on. Used by the management thread only. The same goes for the peers' flows
// (dataplane/peer_flows.h), published over the snapshots' RCU variable: T is Snapshot or
// PeerFlows.
template <typename T>
class RcuPublisher {
 public:
  // An RCU variable for up to `max_workers` readers, registered later by thread id 0..n-1.
  static absl::StatusOr<std::unique_ptr<RcuPublisher>> create(uint32_t max_workers);
  // A publisher over `rcu`, another publisher's RCU variable, which must outlive this one: the
  // same workers' quiescent states end its grace periods.
  static absl::StatusOr<std::unique_ptr<RcuPublisher>> createSharing(rte_rcu_qsbr* rcu);
  ~RcuPublisher();
  RcuPublisher(const RcuPublisher&) = delete;
  RcuPublisher& operator=(const RcuPublisher&) = delete;

  rte_rcu_qsbr* rcu() const { return rcu_; }
  // The pointer workers load once per burst.
  const std::atomic<const T*>& current() const { return current_; }
  const T* snapshot() const { return current_.load(std::memory_order_relaxed); }

  // Makes `next` (null allowed) current and defers freeing the previous one to its grace period.
  // Returns the grace period's token, for inForce(). Does not block while the defer queue has room;
  // a full queue (a worker stalled through kMaxRetired publishes) waits for the oldest grace
  // periods rather than let memory grow.
  uint64_t publish(std::unique_ptr<const T> next);

  // Whether every online worker has passed a quiescent state since the publish that returned
  // `token`: from then on none reads an older snapshot. Never blocks.
  bool inForce(uint64_t token) const;

  // Frees the retired snapshots whose grace period is over. Never blocks. Returns how many are
  // still waiting.
  unsigned reclaim();

  // Snapshots retired and not yet freed.
  unsigned pending() const { return pending_; }

  static constexpr uint32_t kDeferQueueSize = 64;
  // DPDK rounds the defer queue's ring up to a power of two: the most snapshots ever retired
  // and not yet freed.
  static constexpr uint32_t kMaxRetired = 2 * kDeferQueueSize;

 private:
  RcuPublisher(rte_rcu_qsbr* rcu, bool owns_rcu) : rcu_(rcu), owns_rcu_(owns_rcu) {}
  // The defer queue's free callback: its element is a retired snapshot's pointer.
  static void freeRetired(void* publisher, void* element, unsigned count);
  // The defer queue over rcu_.
  absl::Status createDeferQueue();

  rte_rcu_qsbr* rcu_;
  bool owns_rcu_;
  rte_rcu_qsbr_dq* retired_ = nullptr;
  std::atomic<const T*> current_{nullptr};
  unsigned pending_ = 0;
};

using SnapshotPublisher = RcuPublisher<Snapshot>;
using PeerFlowsPublisher = RcuPublisher<PeerFlows>;

}  // namespace berth
