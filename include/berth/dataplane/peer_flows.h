#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
// Layout: open addressing over one-cache-line buckets of two flows, at most half full, keyed by
// the workers' connection-table secret (keyedConnectionHash), so that no sender can aim flows at
// one bucket and the worker reuses the bucket hash it has already computed. A flow sits in the
// first bucket with room from its own, and each bucket counts the flows that went past it, so a
// lookup stops at a bucket with an empty way or none gone past.
//
// Beside the buckets, one 16-bit hint per bucket: a bit for each flow whose own bucket it is,
// chosen by other bits of the flow's hash. The hints are 1/32 of the buckets' size (256 KiB at
// 100,000 flows) and stay in L2, so a lookup that its hint rules out, nearly every miss, never
// touches a bucket; the datapath reads the hint when it prefetches and fetches the bucket only
// for a likely hit, along with the connection table's bucket. On the pipeline's miss path
// (docs/scale-out.md) a lookup that misses costs 6% more cycles than no map, against 19% without
// hints; one that hits costs 21%, most of it the bucket's line. (A 16-bit tag per flow apart
// from the flows made a hit a second, dependent fetch: 66 to 85%.)

// One flow as workers read it: the key and backend in this instance's stable ids (CounterIds).
struct PeerFlow {
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;  // network byte order; 0 where the service hashes no ports
  uint16_t service = 0;
  uint16_t backend = 0;
  ConnectionState state = ConnectionState::kEmpty;  // kEmpty: not a flow (build() skips it)
  uint8_t reserved = 0;
  uint32_t expires_ms = 0;  // on the workers' millisecond clock

  bool matches(const ConnectionKey& key) const { return key.matches(source, source_port, service); }
  // Whether it still lives at `now_ms` (a wrap-aware comparison, as the connection table's).
  bool liveAt(uint32_t now_ms) const { return static_cast<int32_t>(expires_ms - now_ms) > 0; }
};
static_assert(sizeof(PeerFlow) == 28, "two flows and a bucket's overflow count a cache line");

struct alignas(64) PeerFlowBucket {
  std::array<PeerFlow, 2> ways;  // filled in order; state kEmpty: an unused way
  uint32_t passed = 0;           // flows placed past this bucket that a lookup here must follow
  uint32_t reserved = 0;
};
static_assert(sizeof(PeerFlowBucket) == 64, "a bucket is a cache line");

class PeerFlows {
 public:
  static constexpr size_t kWaysPerBucket = 2;

  // The map of `flows`, whose keys are distinct (a later one of the same key is dropped), hashed
  // under `key`; null when there is no memory for it. Allocates about 87 bytes per flow (at
  // least half the ways free, and the hints), on huge pages from 2 MiB up; builds in time linear
  // in their number.
  static std::unique_ptr<const PeerFlows> build(absl::Span<const PeerFlow> flows,
                                                const ConnectionHashKey& key);

  uint32_t hash(const std::array<uint8_t, 16>& source, uint16_t source_port,
                uint16_t service) const {
    return keyedConnectionHash(key_, source, source_port, service);
  }
  // Starts fetching `hash`'s bucket unless its hint rules a flow there out: the datapath does it
  // with the connection table's, one burst at a time, so that a miss in both costs no second
  // wait on memory.
  void prefetch(uint32_t hash) const {
    if (mayHold(hash)) __builtin_prefetch(&buckets_[hash & mask_]);
  }

  // Whether a flow of `hash` may be here, from its bucket's hint alone: true for every flow in
  // the map, false for all but about one in twenty others at half load.
  bool mayHold(uint32_t hash) const { return (hints_[hash & mask_] & hintBit(hash)) != 0; }

  // The live flow for `key` (whose hash() is `hash`), or nullptr.
  const PeerFlow* find(const ConnectionKey& key, uint32_t hash, uint32_t now_ms) const {
    if (!mayHold(hash)) return nullptr;
    size_t at = hash & mask_;
    for (uint32_t probe = 0; probe <= longest_run_; ++probe) {
      const PeerFlowBucket& bucket = buckets_[at];
      for (const PeerFlow& way : bucket.ways) {
        if (way.state == ConnectionState::kEmpty) return nullptr;
        if (way.matches(key)) return way.liveAt(now_ms) ? &way : nullptr;
      }
      if (bucket.passed == 0) return nullptr;
      at = (at + 1) & mask_;
    }
    return nullptr;
  }

  size_t size() const { return size_; }
  size_t bucketCount() const { return mask_ + 1; }
  // Buckets past its own that the furthest flow sits.
  uint32_t longestRun() const { return longest_run_; }

 private:
  using Hint = uint16_t;

  PeerFlows() = default;

  // The bit a flow of `hash` sets in its own bucket's hint: from the hash's top bits, which the
  // bucket index does not use below 2^28 buckets.
  static Hint hintBit(uint32_t hash) {
    constexpr int kIndexBits = std::countr_zero(sizeof(Hint) * 8);
    return static_cast<Hint>(Hint{1} << (hash >> (32 - kIndexBits)));
  }

  // allocateZeroedTable()'s memory: lookups land anywhere in megabytes.
  struct FreeBuckets {
    void operator()(PeerFlowBucket* buckets) const { std::free(buckets); }
  };

  // One allocation: the buckets, then their hints.
  std::unique_ptr<PeerFlowBucket[], FreeBuckets> buckets_;
  Hint* hints_ = nullptr;
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
