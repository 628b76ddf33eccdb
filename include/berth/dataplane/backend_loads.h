#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "berth/dataplane/snapshot.h"

namespace berth {

// Active-flow counts for bounded-load services (maglev/bounded_load.h). The management thread
// sums the workers' per-backend connection gauges every kLoadPublishIntervalMs and stores them
// here; workers read them with relaxed loads when a new flow of such a service arrives. Indexed
// by the stable ids of CounterIds, so they outlive snapshot swaps.
//
// Staleness: a worker sees the others' new flows up to one interval (plus one of its loops)
// late, so a backend can pass its bound by what the other workers send it in that time. Its own
// new flows it counts at once (WorkerLoads), so a single worker never passes a bound.
inline constexpr uint32_t kLoadPublishIntervalMs = 100;

struct BackendLoads {
  // Bumped after each publication: workers drop their own counts from before it, which the
  // published gauges now include.
  std::atomic<uint32_t> generation{0};
  std::array<std::atomic<uint32_t>, CounterIds::kMaxBackends> active{};
  // Per service: the active flows of its serving backends (healthy, weight above 0) together.
  std::array<std::atomic<uint32_t>, CounterIds::kMaxServices> serving_total{};
};

// One worker's view: the published counts plus the new flows it has placed since the last
// publication it saw. Written and read by its worker only.
class WorkerLoads {
 public:
  explicit WorkerLoads(const BackendLoads* shared)
      : shared_(shared), backends_(CounterIds::kMaxBackends), services_(CounterIds::kMaxServices) {}

  // Reads the publication generation once per choice, so that one choice sees one generation.
  uint32_t generation() const { return shared_->generation.load(std::memory_order_acquire); }
  uint32_t backend(uint32_t id, uint32_t generation) const {
    return shared_->active[id].load(std::memory_order_relaxed) + own(backends_[id], generation);
  }
  uint32_t servingTotal(uint32_t service, uint32_t generation) const {
    return shared_->serving_total[service].load(std::memory_order_relaxed) +
           own(services_[service], generation);
  }
  // A new flow placed on `backend` of `service`.
  void add(uint32_t service, uint32_t backend, uint32_t generation) {
    bump(services_[service], generation);
    bump(backends_[backend], generation);
  }

 private:
  struct Own {
    uint32_t generation = 0;
    uint32_t added = 0;
  };
  static uint32_t own(const Own& own, uint32_t generation) {
    return own.generation == generation ? own.added : 0;
  }
  static void bump(Own& own, uint32_t generation) {
    if (own.generation != generation) own = {generation, 0};
    ++own.added;
  }

  const BackendLoads* shared_;
  std::vector<Own> backends_;
  std::vector<Own> services_;
};

}  // namespace berth
