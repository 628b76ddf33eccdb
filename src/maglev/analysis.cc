#include "berth/maglev/analysis.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/name_hash.h"
#include "berth/util/status_macros.h"

namespace berth {

BalanceStats balanceOf(const Table& table) {
  const absl::Span<const Backend> backends = table.backends();
  const std::vector<uint32_t> counts = table.slotCounts();
  uint64_t serving_weight = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (table.serves(i)) serving_weight += static_cast<uint64_t>(backends[i].weight);
  }
  BalanceStats stats;
  if (serving_weight == 0) return stats;
  stats.min_slots = std::numeric_limits<uint32_t>::max();
  stats.min_over_ideal = std::numeric_limits<double>::max();
  for (size_t i = 0; i < backends.size(); ++i) {
    if (!table.serves(i)) continue;
    ++stats.serving;
    const double ideal = static_cast<double>(table.size()) *
                         static_cast<double>(backends[i].weight) /
                         static_cast<double>(serving_weight);
    const double ratio = counts[i] / ideal;
    stats.min_slots = std::min(stats.min_slots, counts[i]);
    stats.max_slots = std::max(stats.max_slots, counts[i]);
    stats.min_over_ideal = std::min(stats.min_over_ideal, ratio);
    stats.max_over_ideal = std::max(stats.max_over_ideal, ratio);
  }
  return stats;
}

namespace {

// Calls `moved(slot)` for each slot whose backend differs between the two tables, comparing
// backends by name.
template <typename Moved>
void forEachMovedSlot(const Table& before, const Table& after, Moved moved) {
  // Map each of `after`'s backend indices to `before`'s index for the same name.
  absl::flat_hash_map<absl::string_view, uint16_t> before_index;
  for (size_t i = 0; i < before.backends().size(); ++i) {
    before_index.emplace(before.backends()[i].name, static_cast<uint16_t>(i));
  }
  std::vector<uint16_t> translate(after.backends().size(), kNoBackend);
  for (size_t i = 0; i < after.backends().size(); ++i) {
    auto it = before_index.find(after.backends()[i].name);
    // A backend only `after` knows gets an index no `before` entry can hold.
    translate[i] = it == before_index.end() ? static_cast<uint16_t>(kNoBackend - 1) : it->second;
  }
  const size_t slots = std::min(before.entries().size(), after.entries().size());
  for (size_t slot = 0; slot < slots; ++slot) {
    const uint16_t entry = after.entries()[slot];
    const uint16_t translated = entry == kNoBackend ? kNoBackend : translate[entry];
    if (translated != before.entries()[slot]) moved(static_cast<uint32_t>(slot));
  }
}

}  // namespace

uint32_t slotsChanged(const Table& before, const Table& after) {
  uint32_t changed = 0;
  forEachMovedSlot(before, after, [&](uint32_t) { ++changed; });
  return changed;
}

std::vector<uint32_t> movedSlots(const Table& before, const Table& after) {
  std::vector<uint32_t> moved;
  forEachMovedSlot(before, after, [&](uint32_t slot) { moved.push_back(slot); });
  return moved;
}

namespace {

// Share of the hash space whose backend differs, by name (kNoBackend as a name of its own).
void fillMovedShare(const Table& before, const Table& after, TableMovement& movement) {
  movement.size_before = before.size();
  movement.size_after = after.size();
  if (movement.sameSize()) {
    movement.moved_slots = slotsChanged(before, after);
    movement.moved_share = static_cast<double>(movement.moved_slots) / after.size();
    return;
  }
  absl::flat_hash_map<absl::string_view, double> before_share;
  const std::vector<uint32_t> before_counts = before.slotCounts();
  for (size_t b = 0; b < before_counts.size(); ++b) {
    before_share[before.backends()[b].name] = static_cast<double>(before_counts[b]) / before.size();
  }
  const auto unowned = [](const Table& table) {
    return static_cast<double>(
               std::count(table.entries().begin(), table.entries().end(), kNoBackend)) /
           table.size();
  };
  double same = unowned(before) * unowned(after);
  const std::vector<uint32_t> after_counts = after.slotCounts();
  for (size_t b = 0; b < after_counts.size(); ++b) {
    const auto found = before_share.find(after.backends()[b].name);
    if (found == before_share.end()) continue;
    same += found->second * static_cast<double>(after_counts[b]) / after.size();
  }
  movement.moved_share = std::max(0.0, 1.0 - same);
}

// Each backend's weighted share among the backends the table serves, by name.
absl::flat_hash_map<absl::string_view, double> servingShares(const Table& table) {
  double total = 0;
  for (size_t b = 0; b < table.backends().size(); ++b) {
    if (table.serves(b)) total += static_cast<double>(table.backends()[b].weight);
  }
  absl::flat_hash_map<absl::string_view, double> shares;
  for (size_t b = 0; b < table.backends().size(); ++b) {
    if (table.serves(b)) {
      shares[table.backends()[b].name] = static_cast<double>(table.backends()[b].weight) / total;
    }
  }
  return shares;
}

}  // namespace

double TableMovement::movedSlotsEquivalent() const {
  return sameSize() ? static_cast<double>(moved_slots) : moved_share * size_after;
}

double TableMovement::movedOverMinimum() const {
  if (moved_share == 0) return 0;
  if (minimum_share == 0) return std::numeric_limits<double>::infinity();
  return moved_share / minimum_share;
}

TableMovement availabilityMovement(const Table& before, const Table& after) {
  TableMovement movement;
  fillMovedShare(before, after, movement);
  const std::vector<uint32_t> before_counts = before.slotCounts();
  const std::vector<uint32_t> after_counts = after.slotCounts();
  double least = 0;
  for (size_t b = 0; b < after.backends().size(); ++b) {
    const absl::StatusOr<uint16_t> old = before.indexOf(after.backends()[b].name);
    if (!old.ok()) continue;
    const bool served = before.serves(*old);
    const bool serves = after.serves(b);
    if (served && !serves) least += static_cast<double>(before_counts[*old]) / before.size();
    if (!served && serves) least += static_cast<double>(after_counts[b]) / after.size();
  }
  movement.minimum_share = least;
  return movement;
}

TableMovement configMovement(const Table& before, const Table& after) {
  TableMovement movement;
  fillMovedShare(before, after, movement);
  const auto before_shares = servingShares(before);
  double least = 0;
  for (const auto& [name, share] : servingShares(after)) {
    const auto found = before_shares.find(name);
    least += std::max(0.0, share - (found == before_shares.end() ? 0.0 : found->second));
  }
  movement.minimum_share = least;
  return movement;
}

namespace {

void appendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

uint64_t fingerprintOf(const Table& table) {
  std::string layout = "berth-table-v2";
  layout.push_back('\0');
  absl::StrAppend(&layout, toString(table.algorithm()));
  layout.push_back('\0');
  appendLittleEndian(layout, table.size(), 4);
  appendLittleEndian(layout, table.ringReplicas(), 4);
  appendLittleEndian(layout, table.backends().size(), 4);
  for (size_t b = 0; b < table.backends().size(); ++b) {
    layout.append(table.backends()[b].name);
    layout.push_back('\0');
    appendLittleEndian(layout, static_cast<uint64_t>(table.backends()[b].weight), 8);
    layout.push_back(table.healthy()[b] ? 1 : 0);
    layout.push_back(table.drained()[b] ? 1 : 0);
  }
  layout.reserve(layout.size() + 2 * table.size());
  for (uint16_t entry : table.entries()) appendLittleEndian(layout, entry, 2);
  return nameHash64(layout, kFingerprintSeed);
}

absl::StatusOr<Table> rebuildWithout(const Table& full, const std::vector<bool>& leave_out) {
  std::vector<Backend> backends;
  std::vector<Permutation> permutations;
  for (size_t i = 0; i < full.backends().size(); ++i) {
    if (i < leave_out.size() && leave_out[i]) continue;
    backends.push_back(full.backends()[i]);
    // A full rebuild is what a drain did before drains became failovers: weight 0.
    if (full.drained()[i]) backends.back().weight = 0;
    if (full.algorithm() == Algorithm::kMaglev) permutations.push_back(full.permutations()[i]);
  }
  if (full.algorithm() != Algorithm::kMaglev)
    return buildTable(std::move(backends), optionsOf(full));
  return buildWithPermutations(std::move(backends), std::move(permutations), full.size());
}

absl::StatusOr<std::vector<FailureImpact>> singleFailureImpacts(
    const Table& full, size_t max_backends,
    const std::function<void(size_t done, size_t total)>& progress) {
  if (std::find(full.healthy().begin(), full.healthy().end(), false) != full.healthy().end()) {
    return absl::FailedPreconditionError("failure impact needs the all-healthy table");
  }
  const std::vector<uint32_t> counts = full.slotCounts();
  std::vector<size_t> owners;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) owners.push_back(i);
  }
  if (max_backends > 0 && owners.size() > max_backends) {
    std::vector<size_t> sample;
    for (size_t k = 0; k < max_backends; ++k)
      sample.push_back(owners[k * owners.size() / max_backends]);
    owners = std::move(sample);
  }
  const auto table_size = static_cast<double>(full.size());
  const absl::flat_hash_map<absl::string_view, double> shares = servingShares(full);
  std::vector<FailureImpact> impacts;
  for (size_t i : owners) {
    std::vector<bool> flags(full.backends().size(), false);
    flags[i] = true;
    BERTH_ASSIGN_OR_RETURN(const Table rebuilt, rebuildWithout(full, flags));
    flags.flip();
    BERTH_ASSIGN_OR_RETURN(const Table failover, withHealth(full, flags, full.drained()));

    FailureImpact impact;
    impact.backend = full.backends()[i].name;
    impact.owned_slots = counts[i];
    impact.owned_share = counts[i] / table_size;
    const auto weighted = shares.find(impact.backend);
    impact.ideal_share = weighted == shares.end() ? 0.0 : weighted->second;
    impact.failover_share = slotsChanged(full, failover) / table_size;
    impact.rebuild_share = slotsChanged(full, rebuilt) / table_size;
    impact.failover_balance = balanceOf(failover);
    impacts.push_back(std::move(impact));
    if (progress) progress(impacts.size(), owners.size());
  }
  return impacts;
}

}  // namespace berth
