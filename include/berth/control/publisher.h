#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// Publishes snapshots to the workers (DESIGN.md, snapshot and RCU; STYLE.md, item 6): one
// release store of the new pointer, then the old snapshot is freed only once every registered
// worker has reported an rte_rcu_qsbr quiescent state after the store, so no worker can still be
// reading it. Used by the management thread only.
class SnapshotPublisher {
 public:
  // An RCU variable for up to `max_workers` readers, registered later by thread id 0..n-1.
  static absl::StatusOr<std::unique_ptr<SnapshotPublisher>> create(uint32_t max_workers);
  ~SnapshotPublisher();
  SnapshotPublisher(const SnapshotPublisher&) = delete;
  SnapshotPublisher& operator=(const SnapshotPublisher&) = delete;

  rte_rcu_qsbr* rcu() const { return rcu_; }
  // The pointer workers load once per burst.
  const std::atomic<const Snapshot*>& current() const { return current_; }
  const Snapshot* snapshot() const { return current_.load(std::memory_order_relaxed); }

  // Makes `next` current and frees the previous snapshot after the grace period. Blocks until
  // every online worker has finished the loop iteration it was in: microseconds while workers
  // run. Workers that are offline (not started, or stopped) are not waited for.
  void publish(std::unique_ptr<const Snapshot> next);

 private:
  explicit SnapshotPublisher(rte_rcu_qsbr* rcu) : rcu_(rcu) {}

  rte_rcu_qsbr* rcu_;
  std::atomic<const Snapshot*> current_{nullptr};
};

}  // namespace berth
