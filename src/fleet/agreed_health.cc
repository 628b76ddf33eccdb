#include "berth/fleet/agreed_health.h"

#include <algorithm>

namespace berth {

uint32_t majorityOf(size_t live) { return static_cast<uint32_t>(live / 2 + 1); }

AgreedHealth agreeOnHealth(const std::vector<InstanceVerdicts>& live, uint32_t quorum) {
  AgreedHealth agreed;
  if (live.empty()) return agreed;
  agreed.quorum = quorum == 0 ? majorityOf(live.size())
                              : std::min<uint32_t>(quorum, static_cast<uint32_t>(live.size()));
  // Per (service, backend): who sees it up, who sees it down.
  struct Votes {
    std::vector<std::string> up;
    std::vector<std::string> down;
  };
  std::map<std::pair<std::string, std::string>, Votes> votes;
  for (const InstanceVerdicts& instance : live) {
    for (const auto& [service, backends] : instance.up) {
      for (const auto& [backend, up] : backends) {
        Votes& vote = votes[{service, backend}];
        (up ? vote.up : vote.down).push_back(instance.instance);
      }
    }
  }
  for (auto& [key, vote] : votes) {
    agreed.judged[key.first].insert(key.second);
    const bool down = vote.down.size() >= agreed.quorum;
    if (down) agreed.down[key.first].insert(key.second);
    std::vector<std::string>& dissenters = down ? vote.up : vote.down;
    if (dissenters.empty()) continue;
    std::sort(dissenters.begin(), dissenters.end());
    agreed.dissent[key] = std::move(dissenters);
  }
  return agreed;
}

}  // namespace berth
