#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace berth {

// Health that a fleet agrees on (docs/scale-out.md): each live instance reports its own probes'
// verdicts, and a backend leaves the fleet's tables when a quorum of the live instances sees it
// down. Every instance computes the same result from the same reports, so one instance that
// cannot reach a backend changes no table. Pure.

// One instance's verdicts: per service, per backend, whether its probes see the backend up. A
// backend it has no verdict for (one its config does not have yet, or whose check has not
// settled) counts neither way.
struct InstanceVerdicts {
  std::string instance;
  std::map<std::string, std::map<std::string, bool>> up;
};

struct AgreedHealth {
  // Per service, the backends a quorum sees down.
  std::map<std::string, std::set<std::string>> down;
  // Per (service, backend), the instances whose verdict differs from the fleet's, in name order.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> dissent;
  // Per service, the backends at least one live instance has a verdict for. One that none has
  // (a backend new to the fleet, its checks not yet settled) serves nothing in a generation.
  std::map<std::string, std::set<std::string>> judged;
  uint32_t quorum = 0;  // the number of down verdicts that took a backend out
};

// The majority of `live` instances: floor(live / 2) + 1.
uint32_t majorityOf(size_t live);

// `quorum`: down verdicts needed, or 0 for a majority of the live instances; at most the number
// of live instances, so that a quorum larger than the fleet still lets every instance together
// take a backend out.
AgreedHealth agreeOnHealth(const std::vector<InstanceVerdicts>& live, uint32_t quorum = 0);

}  // namespace berth
