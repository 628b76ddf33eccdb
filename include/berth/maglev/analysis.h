#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/maglev/table.h"

namespace berth {

// Figures an operator uses to judge a table: how evenly it spreads load, and how many flows a
// backend failure moves compared with the least possible. Control-plane cost; not for workers.

struct BalanceStats {
  uint32_t serving = 0;  // healthy backends with weight > 0
  uint32_t min_slots = 0;
  uint32_t max_slots = 0;
  // Over serving backends, slots / ideal, where ideal = M * weight / (sum of serving weights).
  double min_over_ideal = 0;
  double max_over_ideal = 0;
};
BalanceStats balanceOf(const Table& table);

// Slots whose backend differs between two tables of one size. Backends compare by name, so a
// table rebuilt from a different backend list compares correctly.
uint32_t slotsChanged(const Table& before, const Table& after);
// The same slots, listed in ascending order.
std::vector<uint32_t> movedSlots(const Table& before, const Table& after);

struct FailureImpact {
  std::string backend;
  uint32_t owned_slots = 0;   // in the all-healthy table
  double ideal_share = 0;     // owned_slots / M: the least share any scheme has to move
  double failover_share = 0;  // moved by withHealth() with this backend unhealthy
  double rebuild_share = 0;   // moved by a full build without this backend
  BalanceStats failover_balance;
};

// For each backend with slots, in turn: what its failure moves, by min-disruption failover and by
// a full rebuild without it. `full` must be an all-healthy table. With `max_backends` > 0 and more
// backends than that, only max_backends of them, evenly spaced in name order, are analysed.
// Cost: one failover and one build per analysed backend (about 19 s for all 1,000 backends at
// M = 655373).
absl::StatusOr<std::vector<FailureImpact>> singleFailureImpacts(const Table& full,
                                                                size_t max_backends = 0);

// A 64-bit fingerprint of everything that decides where a flow goes: the algorithm and its
// parameters, M, each backend's name, weight and health, and every entry. Two instances agree on
// every flow's backend exactly when their fingerprints agree (but for a 2^-64 chance), so
// comparing fingerprints across an ECMP group shows whether a flow may land anywhere. Computed
// with MurmurHash3 over a fixed little-endian layout, so it is the same on every machine.
inline constexpr uint32_t kFingerprintSeed = 0x66707274;  // "fprt"
uint64_t fingerprintOf(const Table& table);

// A full build from `full`'s backend list and permutations, leaving out the named backends.
absl::StatusOr<Table> rebuildWithout(const Table& full, const std::vector<bool>& leave_out);

}  // namespace berth
