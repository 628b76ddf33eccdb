#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/control/line_limiter.h"
#include "berth/control/neighbor_cache.h"

namespace berth {

// The neighbour cache's part of the management loop: each turn it sends the requests due, logs
// what the cache learned, at most kLogLinesPerSecond lines so that a flood of hostile replies
// cannot flood the log, and says whether a MAC in use changed, for the loop to republish. Pure:
// the caller sends the frames.
class NeighborResolver {
 public:
  using Log = std::function<void(const std::string&)>;
  static constexpr uint32_t kLogLinesPerSecond = 10;

  NeighborResolver(NeighborSettings settings, uint64_t jitter_seed, Log log)
      : cache_(settings, jitter_seed), log_(std::move(log)) {}

  // One turn at `now`; `ports` names the hops' ports. True when a MAC in use changed.
  bool turn(absl::Time now, NeighborCache::SendRequest send, const std::vector<PortConfig>& ports);

  NeighborCache& cache() { return cache_; }
  const NeighborCache& cache() const { return cache_; }
  // The cache's counters, and the log lines held back.
  std::vector<std::pair<std::string, uint64_t>> sums() const;

 private:
  NeighborCache cache_;
  std::vector<NeighborNews> news_;  // one turn's, reused
  LineLimiter log_limit_{kLogLinesPerSecond};
  Log log_;
};

}  // namespace berth
