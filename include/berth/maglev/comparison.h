#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/table.h"

namespace berth {

// The analyzer behind `berthctl analyze --algorithms`: every hashing algorithm on one
// service's backends, side by side, in the terms an operator chooses by. Control-plane cost
// (seconds for 1,000 backends); never for workers.
//
// Every algorithm is judged on the same M-slot table: slot s stands for the flows whose hash is
// s modulo M. maglev, ring and rendezvous are the datapath's own tables and their own failover
// (withHealth()). jump and modulo are offered for comparison only: jump is Lamping and Veach's
// jump consistent hash of key mix64(s) over the backends in name order, and modulo is backend
// s mod N. Neither takes weights, and both number their backends, so removing any backend but the
// last renumbers the ones after it.

enum class ComparedAlgorithm : uint8_t { kMaglev, kRing, kRendezvous, kJump, kModulo };
absl::string_view toString(ComparedAlgorithm algorithm);
// A comma-separated list such as "maglev,ring,jump"; InvalidArgument names an unknown one.
absl::StatusOr<std::vector<ComparedAlgorithm>> parseComparedAlgorithms(absl::string_view list);

// Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm" (2014): the bucket in
// [0, buckets) of a 64-bit key. Growing buckets by one moves only keys into the new last bucket.
int32_t jumpHash(uint64_t key, int32_t buckets);

// Slots moved over the least any scheme could move, so 1.0 is ideal.
struct MovementStats {
  double mean = 0;
  double worst = 0;
  uint32_t cases = 0;
};

// One point of the movement curve: `removed` backends down (a fixed, nested choice: see
// compareAlgorithms()), the fraction of the M slots that changed backend, and the ideal fraction,
// the removed backends' share of the weight.
struct MovementPoint {
  uint32_t removed = 0;
  double moved = 0;
  double ideal = 0;
};

struct AlgorithmComparison {
  ComparedAlgorithm algorithm = ComparedAlgorithm::kMaglev;
  bool in_datapath = false;  // a service may choose it
  // Timings, each the median of 3; 0 when not measured.
  double build_ms = 0;         // the all-healthy table, from the backend list
  double lookup_ns = 0;        // the algorithm's own lookup of a key, without the table
  double table_lookup_ns = 0;  // entries[hash % M]: what the datapath pays, whatever the algorithm
  uint64_t table_bytes = 0;    // the M-slot table
  // Kept beside the table for failover and rebuilds: Maglev's permutations and all-healthy
  // table, the ring's points, rendezvous' seeds. jump and modulo keep nothing.
  uint64_t state_bytes = 0;
  // Slots over each backend's ideal, M * weight / total weight, for backends with weight > 0.
  double max_over_ideal = 0;
  double min_over_ideal = 0;
  double coefficient_of_variation = 0;  // of slots / ideal, over those backends
  // Half the sum over backends of |slot share - weight share|: the fraction of flows that sit on
  // a backend beyond its weight's share.
  double weighted_error = 0;
  // A backend of the mean weight joins (as the last bucket, for jump and modulo): slots moved
  // over the slots its weight's share needs.
  double add_one = 0;
  // One backend down, each in turn (up to max_removals, evenly spaced by name): slots moved over
  // the slots it owned.
  MovementStats remove_one;
  // A tenth of the backends down at once (at least one): slots moved over the slots they owned.
  uint32_t tenth_removed = 0;
  double remove_tenth = 0;
  std::vector<double> slots_over_ideal;  // per backend, in name order, for the plot
  std::vector<MovementPoint> movement;
  std::vector<std::string> notes;  // where an algorithm's result needs a word of explanation
};

struct ComparisonOptions {
  size_t max_removals = 100;  // remove_one cases at most; 0 for every backend
  bool measure_time = true;   // false leaves the timings at 0, for tests
};

// The comparison for one service's backends (weight 0 ones are left out, as they own nothing).
// The removal sets of `movement` and the tenth are nested: backends leave in the order of
// nameHash64(name, kRemovalOrderSeed), so every algorithm loses the same backends.
inline constexpr uint32_t kRemovalOrderSeed = 0x72656d76;  // "remv"
absl::StatusOr<std::vector<AlgorithmComparison>> compareAlgorithms(
    const std::vector<Backend>& backends, const TableOptions& options,
    const std::vector<ComparedAlgorithm>& algorithms, const ComparisonOptions& comparison = {});

}  // namespace berth
