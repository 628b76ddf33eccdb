#include "berth/runtime/publisher.h"

#include <rte_errno.h>
#include <rte_malloc.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {

namespace {

uint32_t nextDeferQueueNumber() {
  static std::atomic<uint32_t> sequence{0};
  return sequence.fetch_add(1);
}

}  // namespace

template <typename T>
void RcuPublisher<T>::freeRetired(void* publisher, void* element, unsigned count) {
  auto* const* retired = static_cast<const T* const*>(element);
  for (unsigned i = 0; i < count; ++i) delete retired[i];
  static_cast<RcuPublisher*>(publisher)->pending_ -= count;
}

template <typename T>
absl::StatusOr<std::unique_ptr<RcuPublisher<T>>> RcuPublisher<T>::create(uint32_t max_workers) {
  const size_t size = rte_rcu_qsbr_get_memsize(max_workers);
  auto* rcu = static_cast<rte_rcu_qsbr*>(rte_zmalloc("berth_rcu", size, RTE_CACHE_LINE_SIZE));
  if (rcu == nullptr) return absl::ResourceExhaustedError("no memory for the RCU variable");
  if (rte_rcu_qsbr_init(rcu, max_workers) != 0) {
    rte_free(rcu);
    return absl::InternalError(absl::StrCat("rte_rcu_qsbr_init: ", rte_strerror(rte_errno)));
  }
  std::unique_ptr<RcuPublisher> publisher(new RcuPublisher(rcu, true));
  if (absl::Status status = publisher->createDeferQueue(); !status.ok()) return status;
  return publisher;
}

template <typename T>
absl::StatusOr<std::unique_ptr<RcuPublisher<T>>> RcuPublisher<T>::createSharing(rte_rcu_qsbr* rcu) {
  std::unique_ptr<RcuPublisher> publisher(new RcuPublisher(rcu, false));
  if (absl::Status status = publisher->createDeferQueue(); !status.ok()) return status;
  return publisher;
}

template <typename T>
absl::Status RcuPublisher<T>::createDeferQueue() {
  // The queue is a named rte_ring: one process-wide sequence, shared by every T, keeps names
  // apart.
  const std::string name = absl::StrCat("berth_rcu_dq_", nextDeferQueueNumber());
  rte_rcu_qsbr_dq_parameters parameters{};
  parameters.name = name.c_str();
  parameters.flags = RTE_RCU_QSBR_DQ_MT_UNSAFE;  // the management thread alone uses it
  parameters.size = kDeferQueueSize;
  parameters.esize = sizeof(const T*);
  // Reclaim on enqueue only once the queue is half full; the management loop's reclaim() frees
  // them sooner in the normal case.
  parameters.trigger_reclaim_limit = kDeferQueueSize / 2;
  parameters.max_reclaim_size = kDeferQueueSize;
  parameters.free_fn = freeRetired;
  parameters.v = rcu_;
  parameters.p = this;
  retired_ = rte_rcu_qsbr_dq_create(&parameters);
  if (retired_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("rte_rcu_qsbr_dq_create: ", rte_strerror(rte_errno)));
  }
  return absl::OkStatus();
}

template <typename T>
RcuPublisher<T>::~RcuPublisher() {
  // Workers are offline by now (stopped, or never started), so every grace period is over.
  if (retired_ != nullptr) {
    rte_rcu_qsbr_synchronize(rcu_, RTE_QSBR_THRID_INVALID);
    rte_rcu_qsbr_dq_delete(retired_);
  }
  delete current_.exchange(nullptr);
  if (owns_rcu_) rte_free(rcu_);
}

template <typename T>
uint64_t RcuPublisher<T>::publish(std::unique_ptr<const T> next) {
  const T* previous = current_.exchange(next.release(), std::memory_order_acq_rel);
  // The token of a grace period that starts after the store: once every online worker has
  // passed a quiescent state beyond it, none can still hold `previous`.
  const uint64_t token = rte_rcu_qsbr_start(rcu_);
  if (previous == nullptr) return token;
  ++pending_;  // before the enqueue, which may free it at once
  if (rte_rcu_qsbr_dq_enqueue(retired_, &previous) != 0) {
    --pending_;
    // Full even after reclaiming: a worker has not passed a quiescent state in kMaxRetired
    // publishes. Wait for it rather than hold an unbounded number of them.
    rte_rcu_qsbr_synchronize(rcu_, RTE_QSBR_THRID_INVALID);
    reclaim();
    delete previous;
  }
  return token;
}

template <typename T>
bool RcuPublisher<T>::inForce(uint64_t token) const {
  return rte_rcu_qsbr_check(rcu_, token, false) == 1;
}

template <typename T>
unsigned RcuPublisher<T>::reclaim() {
  unsigned freed = 0;
  unsigned pending = 0;
  unsigned available = 0;
  rte_rcu_qsbr_dq_reclaim(retired_, kMaxRetired, &freed, &pending, &available);
  return pending_;
}

template class RcuPublisher<Snapshot>;
template class RcuPublisher<PeerFlows>;

}  // namespace berth
