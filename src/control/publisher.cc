#include "berth/control/publisher.h"

#include <rte_errno.h>
#include <rte_malloc.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {

absl::StatusOr<std::unique_ptr<SnapshotPublisher>> SnapshotPublisher::create(uint32_t max_workers) {
  const size_t size = rte_rcu_qsbr_get_memsize(max_workers);
  auto* rcu = static_cast<rte_rcu_qsbr*>(rte_zmalloc("berth_rcu", size, RTE_CACHE_LINE_SIZE));
  if (rcu == nullptr) return absl::ResourceExhaustedError("no memory for the RCU variable");
  if (rte_rcu_qsbr_init(rcu, max_workers) != 0) {
    rte_free(rcu);
    return absl::InternalError(absl::StrCat("rte_rcu_qsbr_init: ", rte_strerror(rte_errno)));
  }
  return std::unique_ptr<SnapshotPublisher>(new SnapshotPublisher(rcu));
}

SnapshotPublisher::~SnapshotPublisher() {
  delete current_.exchange(nullptr);
  rte_free(rcu_);
}

void SnapshotPublisher::publish(std::unique_ptr<const Snapshot> next) {
  const Snapshot* previous = current_.exchange(next.release(), std::memory_order_acq_rel);
  if (previous == nullptr) return;
  // Every worker online now either already loaded the new pointer or will at its next burst;
  // once each has passed a quiescent state, none holds the previous one.
  rte_rcu_qsbr_synchronize(rcu_, RTE_QSBR_THRID_INVALID);
  delete previous;
}

}  // namespace berth
