#include "berth/dataplane/peer_flows.h"

#include <algorithm>
#include <bit>

namespace berth {

std::unique_ptr<const PeerFlows> PeerFlows::build(absl::Span<const PeerFlow> flows,
                                                  const ConnectionHashKey& key) {
  std::unique_ptr<PeerFlows> map(new PeerFlows());
  // At most half full: runs stay short, and a miss mostly ends in its own bucket.
  const size_t ways = std::max<size_t>(2 * flows.size(), 1);
  const size_t buckets = std::bit_ceil((ways + 3) / 4);
  map->buckets_ = std::make_unique<PeerFlowBucket[]>(buckets);
  map->mask_ = buckets - 1;
  map->key_ = key;
  for (const PeerFlow& flow : flows) {
    if (flow.state == ConnectionState::kEmpty) continue;
    ConnectionKey connection;
    connection.source = flow.source;
    connection.source_port = flow.source_port;
    connection.service = flow.service;
    size_t at = map->hash(flow.source, flow.source_port, flow.service) & map->mask_;
    bool placed = false;
    for (uint32_t run = 0; !placed; ++run) {
      for (PeerFlow& way : map->buckets_[at].ways) {
        if (way.state != ConnectionState::kEmpty) {
          if (way.matches(connection)) placed = true;  // a repeat: the first stands
          if (placed) break;
          continue;
        }
        way = flow;
        ++map->size_;
        map->longest_run_ = std::max(map->longest_run_, run);
        placed = true;
        break;
      }
      at = (at + 1) & map->mask_;
    }
  }
  return map;
}

}  // namespace berth
