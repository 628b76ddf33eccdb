#include "berth/dataplane/peer_flows.h"

#include <algorithm>
#include <bit>

#include "berth/util/heap.h"

namespace berth {

std::unique_ptr<const PeerFlows> PeerFlows::build(absl::Span<const PeerFlow> flows,
                                                  const ConnectionHashKey& key) {
  std::unique_ptr<PeerFlows> map(new PeerFlows());
  // At most half full: runs stay short, and a miss mostly ends in its own bucket.
  const size_t ways = std::max<size_t>(2 * flows.size(), 1);
  const size_t buckets = std::bit_ceil((ways + kWaysPerBucket - 1) / kWaysPerBucket);
  // Zero bytes are empty buckets (an aggregate whose every default is 0) and empty hints.
  map->buckets_.reset(static_cast<PeerFlowBucket*>(
      allocateZeroedTable(buckets * (sizeof(PeerFlowBucket) + sizeof(Hint)))));
  if (map->buckets_ == nullptr) return nullptr;
  map->hints_ = reinterpret_cast<Hint*>(map->buckets_.get() + buckets);
  map->mask_ = buckets - 1;
  map->key_ = key;
  for (const PeerFlow& flow : flows) {
    if (flow.state == ConnectionState::kEmpty) continue;
    ConnectionKey connection;
    connection.source = flow.source;
    connection.source_port = flow.source_port;
    connection.service = flow.service;
    const uint32_t hash = map->hash(flow.source, flow.source_port, flow.service);
    const size_t home = hash & map->mask_;
    map->hints_[home] |= hintBit(hash);
    size_t at = home;
    bool settled = false;  // placed, or a repeat whose first stands
    for (uint32_t run = 0; !settled; ++run) {
      for (PeerFlow& way : map->buckets_[at].ways) {
        if (way.state == ConnectionState::kEmpty) {
          way = flow;
          ++map->size_;
          map->longest_run_ = std::max(map->longest_run_, run);
          // Lookups from its own bucket pass every full one before it.
          for (size_t passed = home; passed != at; passed = (passed + 1) & map->mask_) {
            ++map->buckets_[passed].passed;
          }
          settled = true;
        } else {
          settled = way.matches(connection);
        }
        if (settled) break;
      }
      at = (at + 1) & map->mask_;
    }
  }
  return map;
}

}  // namespace berth
