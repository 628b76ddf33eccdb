#include "berth/control/snapshot_rollouts.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace berth {

void SnapshotRollouts::reportWhenInForce(absl::Time start, std::string event) {
  rollouts_.push_back(Rollout{latest_token_, generation_, start, std::move(event)});
}

std::vector<std::string> SnapshotRollouts::takeInForce(
    const std::function<bool(uint64_t token)>& in_force, absl::Time now) {
  std::vector<std::string> lines;
  const auto done = [&](const Rollout& rollout) { return in_force(rollout.token); };
  for (const Rollout& rollout : rollouts_) {
    if (!done(rollout)) continue;
    lines.push_back(
        absl::StrFormat("snapshot %u in use by every worker %.2f ms after %s", rollout.generation,
                        absl::ToDoubleMilliseconds(now - rollout.start), rollout.event));
  }
  rollouts_.erase(std::remove_if(rollouts_.begin(), rollouts_.end(), done), rollouts_.end());
  return lines;
}

}  // namespace berth
