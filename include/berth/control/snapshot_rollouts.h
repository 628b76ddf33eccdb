#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace berth {

// The snapshots the management loop publishes, numbered from 1, and each publish not yet in force
// on every worker with the event that caused it, so that the loop can log "snapshot N in use by
// every worker T ms after <event>" from a later turn: it never waits for the workers, and the
// figure includes up to a tick of the loop. Pure: the caller says which RCU tokens are in force.
class SnapshotRollouts {
 public:
  // The generation of the snapshot in use, 0 before the first publish.
  uint64_t generation() const { return generation_; }
  // The generation the next publish gets.
  uint64_t next() const { return generation_ + 1; }
  // The snapshot numbered next() was published with RCU token `token`.
  void published(uint64_t token) {
    ++generation_;
    latest_token_ = token;
  }
  // The latest publish, caused by `event` that began at `start`, is to be reported once in force.
  void reportWhenInForce(absl::Time start, std::string event);
  // The lines for the publishes now in force, which are forgotten; the rest wait.
  std::vector<std::string> takeInForce(const std::function<bool(uint64_t token)>& in_force,
                                       absl::Time now);
  size_t waiting() const { return rollouts_.size(); }

 private:
  struct Rollout {
    uint64_t token;
    uint64_t generation;
    absl::Time start;
    std::string event;
  };
  uint64_t generation_ = 0;
  uint64_t latest_token_ = 0;
  std::vector<Rollout> rollouts_;
};

}  // namespace berth
