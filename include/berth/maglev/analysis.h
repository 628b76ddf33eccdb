#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/maglev/table.h"

namespace berth {

// Figures an operator uses to judge a table: how evenly it spreads load, and how many flows a
// backend failure moves compared with the least possible. Control-plane cost; not for workers.

struct BalanceStats {
  uint32_t serving = 0;  // backends that Table::serves()
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

// How much a change from one table to another moved, against the least that had to move.
// Shares are of the 32-bit flow-hash space, so tables of different M compare: a hash h reads
// slot h % M, and for two different primes the two slots of a hash vary independently over the
// hash space, so the share whose backend changed is 1 - sum over backends of the product of the
// two tables' slot shares. For one M it is moved_slots / M.
struct TableMovement {
  uint32_t size_before = 0;
  uint32_t size_after = 0;
  uint32_t moved_slots = 0;  // slots whose backend changed; 0 when M changed
  double moved_share = 0;
  double minimum_share = 0;  // the least share any table could have moved
  bool sameSize() const { return size_before == size_after; }
  // In slots of the new table: moved_slots for one M, the shares times the new M otherwise.
  double movedSlotsEquivalent() const;
  double minimumSlots() const { return minimum_share * size_after; }
  // moved over minimum: 1.00 is ideal. 0 when nothing moved; infinite when something moved
  // though nothing had to.
  double movedOverMinimum() const;
};
// After health or drains changed: the least is the slots that backends which stopped serving
// held before, plus those that backends which came back hold after.
TableMovement availabilityMovement(const Table& before, const Table& after);
// After a config change (weights, backends added or removed, M): the least is the sum of the
// increases of the backends' weighted shares among the serving backends, compared by name. For
// an added backend that is its new share; for a weight change, the sum of the quota increases.
TableMovement configMovement(const Table& before, const Table& after);

struct FailureImpact {
  std::string backend;
  uint32_t owned_slots = 0;   // in the all-healthy table
  double owned_share = 0;     // owned_slots / M: the least share any scheme has to move
  double ideal_share = 0;     // its weight over the serving backends' weights
  double failover_share = 0;  // moved by withHealth() with this backend unhealthy
  double rebuild_share = 0;   // moved by a full build without this backend
  BalanceStats failover_balance;
};

// For each backend with slots, in turn: what its failure moves, by min-disruption failover and by
// a full rebuild without it. `full` must be an all-healthy table (drains allowed; they stay). With
// `max_backends` > 0 and more backends than that, only max_backends of them, evenly spaced in name
// order, are analysed. Cost: one failover and one build per analysed backend (about 19 s for all
// 1,000 backends at M = 655373). `progress`, if given, hears (done, total) after each one.
absl::StatusOr<std::vector<FailureImpact>> singleFailureImpacts(
    const Table& full, size_t max_backends = 0,
    const std::function<void(size_t done, size_t total)>& progress = nullptr);

// A 64-bit fingerprint of the table: the algorithm and its parameters, M, each backend's name,
// weight, health and drain, and every entry. Computed with MurmurHash3 over a fixed
// little-endian layout, so it is the same on every machine. What else decides a flow's backend
// (the VIP, hash fields, seed, backend addresses) is in the service's fingerprint
// (control/service_state.h serviceFingerprint()), which includes this one.
inline constexpr uint32_t kFingerprintSeed = 0x66707274;  // "fprt"
uint64_t fingerprintOf(const Table& table);

// A full build from `full`'s backend list and permutations, leaving out the named backends;
// drained backends take part with weight 0.
absl::StatusOr<Table> rebuildWithout(const Table& full, const std::vector<bool>& leave_out);

}  // namespace berth
