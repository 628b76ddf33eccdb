#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "berth/maglev/table.h"

namespace berth {

// The classic alternatives to Maglev, each precomputed into the same M-slot lookup
// table the datapath reads, so that a packet costs one array read whatever the algorithm. Pure:
// no DPDK, no clock, no randomness but the stable name hash (name_hash.h), so every instance
// builds the same table from the same backends. Backends are sorted by name, as in build(), and
// entries index that order; weight 0 (drained) owns nothing.

// The seed of the ring's and rendezvous' per-backend hashes: like the Maglev seeds, part of the
// contract between instances.
inline constexpr uint32_t kRingHashSeed = 0x72696e67;        // "ring"
inline constexpr uint32_t kRendezvousHashSeed = 0x68727721;  // "hrw!"

// Ring hashing with virtual nodes (Karger et al. 1997; Ketama). Backend b puts
// replicas * weight(b) points on a 64-bit ring, point i at nameHash64("name#i", kRingHashSeed);
// a key belongs to the first point at or after it, wrapping. Weight scales the point count
// directly, never relative to the other backends, so adding or removing one backend leaves every
// other backend's points, and so its keys, where they were.
inline constexpr uint32_t kDefaultRingReplicas = 160;
inline constexpr uint32_t kMaxRingReplicas = 10'000;
// Points on one ring at most (16 bytes each): 16 Mi points, 256 MiB.
inline constexpr uint64_t kMaxRingPoints = uint64_t{1} << 24;

class HashRing {
 public:
  struct Point {
    uint64_t position;
    uint16_t backend;  // index into backends()
  };

  // Errors: as validateBackends() with M = kMaxTableSize, a replica count of 0 or above
  // kMaxRingReplicas, and more than kMaxRingPoints points in all.
  static absl::StatusOr<HashRing> build(std::vector<Backend> backends,
                                        uint32_t replicas = kDefaultRingReplicas);

  const std::vector<Backend>& backends() const { return backends_; }
  const std::vector<Point>& points() const { return points_; }

  // The backend of a 64-bit key: the owner of the first point at or after it. Binary search,
  // O(log points). kNoBackend on an empty ring.
  uint16_t lookup(uint64_t key) const;

  // Each backend's exact share of the ring: the arcs that end at its points, over 2^64. What a
  // uniform key lands on, with no sampling.
  std::vector<double> shares() const;

  // The M-slot table: slot s belongs to the owner of the first point at or after
  // s * 2^64 / M. One merge pass over the sorted points: O(M + points).
  std::vector<uint16_t> slotTable(uint32_t table_size) const;
  // The same for the ring of only the backends flagged in `serving` (one flag per backend):
  // every slot whose owner is serving keeps it, and the others go to the next serving point.
  std::vector<uint16_t> slotTable(uint32_t table_size, const std::vector<bool>& serving) const;

 private:
  std::vector<Backend> backends_;
  std::vector<Point> points_;  // sorted by position
};

// Rendezvous, or highest random weight, hashing (Thaler and Ravishankar 1998), weighted by the
// logarithmic method (Schindelhauer and Schomaker 2005): for key k, each backend b draws
// u = h(b, k) in (0, 1) and scores weight(b) / -ln(u); the highest score wins. A key's backend
// changes only when its own winner goes, and each backend wins its weight's share of keys.
// With equal weights the winner is simply the largest h(b, k), and no logarithm is taken.
class Rendezvous {
 public:
  // Errors: as validateBackends() with M = kMaxTableSize.
  static absl::StatusOr<Rendezvous> build(std::vector<Backend> backends);

  const std::vector<Backend>& backends() const { return backends_; }

  // The winner for a 64-bit key, O(N). kNoBackend when no backend has a positive weight.
  uint16_t lookup(uint64_t key) const;

  // The M-slot table: slot s's backend is lookup(s). O(M * N): about 65 million draws for
  // N = 1,000 and M = 65,537.
  std::vector<uint16_t> slotTable(uint32_t table_size) const;
  // The slot table of only the backends flagged in `serving`, from the all-backends table
  // `full`: a slot whose winner is serving keeps it, since it still has the highest score, and
  // only the others are drawn again. O(V * N) for V vacated slots: one failure among N costs
  // about M draws, whatever N is.
  std::vector<uint16_t> slotTable(absl::Span<const uint16_t> full,
                                  const std::vector<bool>& serving) const;

 private:
  // The winner among backends whose `serving` flag is set; all of them when it is null.
  uint16_t winner(uint64_t key, const uint8_t* serving) const;

  std::vector<Backend> backends_;
  std::vector<uint64_t> seeds_;  // per backend, from its name
  bool equal_weights_ = true;
};

// A service's choice of algorithm and its parameters.
struct TableOptions {
  Algorithm algorithm = Algorithm::kMaglev;
  uint32_t table_size = kDefaultTableSize;
  uint32_t ring_replicas = kDefaultRingReplicas;  // kRing only
};

// The options `table` was built with.
TableOptions optionsOf(const Table& table);

// Checks the inputs as buildTable() does, without building: validateBackends() at the table
// size, and for a ring the replica count (1 to 10,000) and the total number of points.
absl::Status validateTable(absl::Span<const Backend> backends, const TableOptions& options);

// The all-healthy table of any algorithm, with the backends sorted by name as in build(). For
// kMaglev it is build(). A ring or rendezvous table keeps its ring or scoring state, so that
// withHealth() recomputes only the slots of unhealthy backends.
absl::StatusOr<Table> buildTable(std::vector<Backend> backends, const TableOptions& options);

// Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, SODA 2018) over any
// M-slot table: the choice for a *new* flow when its service sets `bounded_load: C`. Connections
// already tracked never move because of load; only where a new one starts changes.
//
// The bound: a backend b with weight w_b, among serving backends of total weight W that hold
// `total` active flows between them, takes a new flow only while
//     load(b) < C * (total + 1) * w_b / W.
// Loads are whole numbers, so after taking it load(b) <= ceil(C * (total + 1) * w_b / W): never
// more than C times its weighted mean plus one. Some serving backend is always below its bound,
// since the loads add up to total < total + 1 and C >= 1.
//
// The fallback order is the table's own: the flow's slot s, then s + 1, s + 2, ... wrapping at M.
// The first backend under its bound takes the flow. For a ring table this is the paper's walk
// clockwise to the next point; for Maglev and rendezvous tables the slots after s belong to
// backends in the table's pseudo-random order, each as often as its share, so an overloaded
// backend's new flows spread over the others in proportion to their weights. The order depends
// on nothing but the table, so every instance that sees the same loads makes the same choice.
//
// Cost: one probe per slot walked. At most a fraction 1/C of the backends can be at their bound,
// so with C = 1.25 one slot in five or more is free and the walk averages under 1.25 probes past
// the first; it stops after M probes (every slot) and then keeps the table's pick, which can only
// happen when the only backends under their bound own no slot.
//
// `accepts(entry)` says whether the backend at table index `entry` is under its bound.
template <typename Accepts>
inline uint16_t boundedLoadChoice(const uint16_t* entries, uint32_t table_size, uint32_t slot,
                                  Accepts&& accepts) {
  uint32_t at = slot;
  for (uint32_t probes = 0; probes < table_size; ++probes) {
    const uint16_t candidate = entries[at];
    if (candidate != kNoBackend && accepts(candidate)) return candidate;
    if (++at == table_size) at = 0;
  }
  return entries[slot];
}

// C must be above 1, where no backend could take a flow beyond its exact share; a bound above
// 100 times the mean is no bound at all.
inline constexpr double kMinBoundedLoad = 1.0;
inline constexpr double kMaxBoundedLoad = 100.0;

}  // namespace berth
