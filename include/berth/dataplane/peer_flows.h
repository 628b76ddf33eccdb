#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/types/span.h"
#include "berth/dataplane/conntrack.h"

namespace berth {

// The flows peer instances track off their tables' picks, as this instance's workers read them
// (docs/scale-out.md, "Flows that survive an instance"). When ECMP moves such a flow here, its
// first packet misses the connection table; the worker then looks here before taking the table's
// pick, and a hit is tracked from then on like any connection, on the peer's backend.
//
// Immutable once built: the management thread builds a new one from the records it holds,
// publishes it by RCU, and frees the old one after the grace period. Read-only for workers, so
// no lock. Pure memory and arithmetic, with the clock passed in.
//
// Layout: open addressing over buckets of four 32-byte flows (two cache lines), at most half
// full, keyed by its own secret (keyedConnectionHash) so that no sender can aim flows at one
// bucket. A flow is in the first bucket with room from its own; a lookup stops at the first
// bucket with an empty way, and never goes further than the longest run the build made.

// One flow as workers read it: the key and backend in this instance's stable ids (CounterIds).
struct PeerFlow {
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;  // network byte order; 0 where the service hashes no ports
  uint16_t service = 0;
  uint16_t backend = 0;
  ConnectionState state = ConnectionState::kEmpty;  // kEmpty: an unused way
  uint8_t reserved = 0;
  uint32_t expires_ms = 0;  // on the workers' millisecond clock
  uint32_t reserved_tail = 0;

  bool matches(const ConnectionKey& key) const {
    uint64_t mine[2];
    uint64_t theirs[2];
    std::memcpy(mine, source.data(), 16);
    std::memcpy(theirs, key.source.data(), 16);
    return ((mine[0] ^ theirs[0]) | (mine[1] ^ theirs[1])) == 0 && source_port == key.source_port &&
           service == key.service;
  }
  // Whether it still lives at `now_ms` (a wrap-aware comparison, as the connection table's).
  bool liveAt(uint32_t now_ms) const { return static_cast<int32_t>(expires_ms - now_ms) > 0; }
};
static_assert(sizeof(PeerFlow) == 32, "four flows fill a two-cache-line bucket");

struct alignas(128) PeerFlowBucket {
  std::array<PeerFlow, 4> ways;
};
static_assert(sizeof(PeerFlowBucket) == 128, "a bucket is two cache lines");

class PeerFlows {
 public:
  // The map of `flows`, whose keys are distinct (a later one of the same key is dropped), hashed
  // under `key`. Allocates about 64 bytes per flow; builds in time linear in their number.
  static std::unique_ptr<const PeerFlows> build(absl::Span<const PeerFlow> flows,
                                                const ConnectionHashKey& key);

  uint32_t hash(const std::array<uint8_t, 16>& source, uint16_t source_port,
                uint16_t service) const {
    return keyedConnectionHash(key_, source, source_port, service);
  }
  // Starts fetching the bucket of `hash`: the datapath does it with the connection table's, one
  // burst at a time, so that a miss in both costs no second wait on memory.
  void prefetch(uint32_t hash) const {
    const char* bucket = reinterpret_cast<const char*>(&buckets_[hash & mask_]);
    __builtin_prefetch(bucket);
    __builtin_prefetch(bucket + 64);
  }

  // The live flow for `key` (whose hash() is `hash`), or nullptr.
  const PeerFlow* find(const ConnectionKey& key, uint32_t hash, uint32_t now_ms) const {
    size_t at = hash & mask_;
    for (uint32_t probe = 0; probe <= longest_run_; ++probe) {
      const PeerFlowBucket& bucket = buckets_[at];
      for (const PeerFlow& way : bucket.ways) {
        if (way.state == ConnectionState::kEmpty) return nullptr;
        if (way.matches(key)) return way.liveAt(now_ms) ? &way : nullptr;
      }
      at = (at + 1) & mask_;
    }
    return nullptr;
  }

  size_t size() const { return size_; }
  size_t bucketCount() const { return mask_ + 1; }
  // Buckets past its own that the furthest flow sits.
  uint32_t longestRun() const { return longest_run_; }

 private:
  PeerFlows() = default;

  std::unique_ptr<PeerFlowBucket[]> buckets_;
  size_t mask_ = 0;
  size_t size_ = 0;
  uint32_t longest_run_ = 0;
  ConnectionHashKey key_;
};

// A worker's news for the peers about one of its connections: it is tracked off its table's
// pick (confirmed, and not itself adopted from a peer), still so (a refresh, once per
// ConnectionTable::refreshDue() period while it sends), in a new state, or no longer (state
// kEmpty: it ended early or went back to the pick). In this instance's stable ids; the
// management thread names them for the wire (fleet/flow_records.h).
struct FlowExport {
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;  // network byte order
  uint16_t service = 0;
  uint16_t backend = 0;
  ConnectionState state = ConnectionState::kEmpty;
  uint8_t reserved = 0;
  uint32_t lifetime_ms = 0;  // the state's timeout: how long it lives without another packet
  uint32_t reserved_tail = 0;
};
static_assert(sizeof(FlowExport) == 32, "a ring element of 8 words");

// One call's FlowExports: at most one per frame, so a burst never fills it. The worker moves
// them to its ring to the management thread after each burst (runtime/worker.h).
struct FlowExports {
  static constexpr size_t kCapacity = 32;
  std::array<FlowExport, kCapacity> records;
  uint16_t count = 0;
};

}  // namespace berth
