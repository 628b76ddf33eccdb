#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/table.h"
#include "maglev/slot_bitmap.h"

namespace berth {
namespace {

// The most slots a healthy backend may hold while others are down (table.h, withHealth()):
// ideal * (1 + max(slack%, kFailoverSlackSlotsTenths / 10 / base_quota)), rounded down, where
// ideal = M * weight / serving_weight and base_quota = M * weight / total_weight. Multiplied
// out, that is max((100 + slack) * M * weight, 100 * M * weight + 10 * tenths * total_weight)
// / (100 * serving_weight), all in integers so every machine computes the same cap. Never less
// than the backend already owns.
uint32_t failoverCap(uint32_t table_size, int64_t weight, uint64_t serving_weight,
                     uint64_t total_weight, uint32_t owned) {
  const uint64_t share = uint64_t{table_size} * static_cast<uint64_t>(weight);
  const uint64_t by_percent = share * (100 + kFailoverLoadSlackPercent);
  const uint64_t by_slots = share * 100 + total_weight * kFailoverSlackSlotsTenths * 10;
  const auto cap = static_cast<uint32_t>(std::max(by_percent, by_slots) / (serving_weight * 100));
  return std::max(cap, owned);
}

// A healthy backend with room for more slots. Its looks down its own preference list come at
// the rate weight / max_weight per round (as turns do in the build), so heavier backends reach
// further and take a weighted share of the vacated slots.
struct Claimant {
  uint32_t next;
  uint32_t skip;
  uint32_t offset;
  uint32_t owned;
  uint32_t cap;
  int64_t credit;
  int64_t weight;
  uint16_t index;
};

// Vacated slots are handed out in order of the event (round, backend index) at which a backend
// with room looks at them: that order defines the result. Two strategies compute the same thing.
//
// By rounds: run the rounds. Each costs one probe per claimant, and the last vacated slot is
// reached after about (M / H) ln V rounds, so about M ln V probes in all.
void assignByRounds(std::vector<Claimant> claimants, int64_t max_weight, uint32_t table_size,
                    SlotBitmap& vacant, uint32_t vacant_count, std::vector<uint16_t>& entries) {
  // The caps add up to more than M, so a claimant with room always remains, and within
  // M * max_weight rounds it has looked at every slot: every vacated slot is re-owned.
  while (vacant_count > 0 && !claimants.empty()) {
    bool someone_full = false;
    for (Claimant& claimant : claimants) {
      claimant.credit += claimant.weight;
      if (claimant.credit < max_weight) continue;
      claimant.credit -= max_weight;
      const uint32_t slot = claimant.next;
      claimant.next = advance(slot, claimant.skip, table_size);
      if (!vacant.test(slot)) continue;
      vacant.clear(slot);
      entries[slot] = claimant.index;
      someone_full |= ++claimant.owned == claimant.cap;
      if (--vacant_count == 0) break;
    }
    if (someone_full) {
      std::erase_if(claimants,
                    [](const Claimant& claimant) { return claimant.owned == claimant.cap; });
    }
  }
}

// By slots: for each vacated slot, find the earliest event among claimants with room from the
// slot's rank in each list, and process slots in event order with a heap. When the winner of a
// popped slot has filled up meanwhile, the slot's next-earliest event is found and pushed back,
// exactly as the rounds would have passed it on. Costs V * H rank computations.
void assignBySlots(std::vector<Claimant> claimants, int64_t max_weight, uint32_t table_size,
                   const std::vector<uint32_t>& vacated, std::vector<uint16_t>& entries) {
  const PreferenceRank ranks(table_size);
  const size_t claimant_count = claimants.size();
  std::vector<uint32_t> skips(claimant_count);
  for (size_t c = 0; c < claimant_count; ++c) skips[c] = claimants[c].skip;
  const std::vector<uint32_t> inverses = ranks.inverses(skips);
  std::vector<RankedList> lists(claimant_count);
  bool equal_weights = true;
  for (size_t c = 0; c < claimant_count; ++c) {
    lists[c] = ranks.prepare(claimants[c].offset, inverses[c]);
    equal_weights &= claimants[c].weight == max_weight;
  }
  std::vector<uint8_t> full(claimant_count, 0);

  // The round in which claimant c looks at list position `position`: its credit first reaches
  // (position + 1) * max_weight after ceil((position + 1) * max_weight / weight) rounds.
  auto roundOf = [&](size_t c, uint64_t position) -> uint64_t {
    const uint64_t needed = (position + 1) * static_cast<uint64_t>(max_weight);
    const auto weight = static_cast<uint64_t>(claimants[c].weight);
    return (needed + weight - 1) / weight - 1;
  };
  // Events order by (round, claimant), packed into one integer; claimants are in index order,
  // so their position in `claimants` orders them as the rounds do.
  auto earliestEvent = [&](uint32_t slot) -> uint64_t {
    uint64_t best = UINT64_MAX;
    for (size_t c = 0; c < claimant_count; ++c) {
      if (full[c]) continue;
      const uint64_t position = ranks.rank(slot, lists[c]);
      const uint64_t round = equal_weights ? position : roundOf(c, position);
      best = std::min(best, round * claimant_count + c);
    }
    return best;
  };

  using Event = std::pair<uint64_t, uint32_t>;  // (event key, slot)
  std::vector<Event> initial;
  initial.reserve(vacated.size());
  for (uint32_t slot : vacated) initial.emplace_back(earliestEvent(slot), slot);
  std::priority_queue<Event, std::vector<Event>, std::greater<>> pending(std::greater<>(),
                                                                         std::move(initial));
  while (!pending.empty()) {
    const auto [key, slot] = pending.top();
    pending.pop();
    if (key == UINT64_MAX) continue;  // nobody has room; cannot happen while caps exceed M
    const size_t c = key % claimant_count;
    if (full[c]) {
      pending.emplace(earliestEvent(slot), slot);
      continue;
    }
    entries[slot] = claimants[c].index;
    full[c] = ++claimants[c].owned == claimants[c].cap;
  }
}

}  // namespace

absl::StatusOr<Table> withHealth(const Table& table, const std::vector<bool>& healthy,
                                 FailoverStrategy strategy) {
  return withHealth(table, healthy, {}, strategy);
}

absl::StatusOr<Table> withHealth(const Table& table, const std::vector<bool>& healthy,
                                 const std::vector<bool>& drained_or_empty,
                                 FailoverStrategy strategy) {
  const absl::Span<const Backend> backends = table.backends();
  if (healthy.size() != backends.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "health flags for ", healthy.size(), " backends, but the table has ", backends.size()));
  }
  if (!drained_or_empty.empty() && drained_or_empty.size() != backends.size()) {
    return absl::InvalidArgumentError(absl::StrCat("drain flags for ", drained_or_empty.size(),
                                                   " backends, but the table has ",
                                                   backends.size()));
  }
  std::vector<bool> drained =
      drained_or_empty.empty() ? std::vector<bool>(backends.size(), false) : drained_or_empty;
  // Drained backends give up their slots exactly as unhealthy ones do.
  std::vector<bool> serving(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) serving[i] = healthy[i] && !drained[i];
  const uint32_t table_size = table.size();
  if (std::find(serving.begin(), serving.end(), false) == serving.end()) {
    return Table(table.layout_, table.layout_->full_entries, healthy, std::move(drained),
                 table_size);
  }
  if (table.algorithm() == Algorithm::kRing) {
    return Table(table.layout_,
                 std::make_shared<const std::vector<uint16_t>>(
                     table.layout_->ring->slotTable(table_size, serving)),
                 healthy, std::move(drained), table_size);
  }
  if (table.algorithm() == Algorithm::kRendezvous) {
    return Table(table.layout_,
                 std::make_shared<const std::vector<uint16_t>>(
                     table.layout_->rendezvous->slotTable(table.fullEntries(), serving)),
                 healthy, std::move(drained), table_size);
  }
  auto entries_owner = std::make_shared<std::vector<uint16_t>>(table.fullEntries().begin(),
                                                               table.fullEntries().end());
  std::vector<uint16_t>& entries = *entries_owner;

  // Take back every slot a backend that is down owns in the all-healthy table. Serving owners
  // keep theirs, which is what keeps established flows on serving backends in place. A flag per
  // possible entry value keeps the scan over M slots free of unpredictable branches.
  std::vector<uint8_t> down(size_t{kNoBackend} + 1, 0);
  for (size_t i = 0; i < backends.size(); ++i) down[i] = !serving[i];
  SlotBitmap vacant(table_size);
  std::vector<uint32_t> vacated;
  for (uint32_t slot = 0; slot < table_size; ++slot) {
    if (down[entries[slot]]) {
      entries[slot] = kNoBackend;
      vacant.set(slot);
      vacated.push_back(slot);
    }
  }
  const std::vector<uint32_t>& owned = table.layout_->full_slot_counts;

  uint64_t serving_weight = 0;
  uint64_t total_weight = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    total_weight += static_cast<uint64_t>(backends[i].weight);
    if (serving[i]) serving_weight += static_cast<uint64_t>(backends[i].weight);
  }
  std::vector<Claimant> claimants;
  int64_t max_weight = 0;
  if (serving_weight > 0) {
    const absl::Span<const Permutation> permutations = table.permutations();
    for (size_t i = 0; i < backends.size(); ++i) {
      if (!serving[i] || backends[i].weight == 0) continue;
      const uint32_t cap =
          failoverCap(table_size, backends[i].weight, serving_weight, total_weight, owned[i]);
      if (owned[i] == cap) continue;
      claimants.push_back({permutations[i].offset, permutations[i].skip, permutations[i].offset,
                           owned[i], cap, 0, backends[i].weight, static_cast<uint16_t>(i)});
      max_weight = std::max(max_weight, backends[i].weight);
    }
  }
  if (claimants.empty() || vacated.empty()) {
    return Table(table.layout_, std::move(entries_owner), healthy, std::move(drained), table_size);
  }

  if (strategy == FailoverStrategy::kAuto) {
    // A rank computation (two multiplications) costs about as much as a probe.
    const double by_slots = static_cast<double>(vacated.size()) * claimants.size();
    const double by_rounds = table_size * (std::log(static_cast<double>(vacated.size())) + 1);
    strategy = by_slots < by_rounds ? FailoverStrategy::kBySlots : FailoverStrategy::kByRounds;
  }
  if (strategy == FailoverStrategy::kBySlots) {
    assignBySlots(std::move(claimants), max_weight, table_size, vacated, entries);
  } else {
    assignByRounds(std::move(claimants), max_weight, table_size, vacant,
                   static_cast<uint32_t>(vacated.size()), entries);
  }
  return Table(table.layout_, std::move(entries_owner), healthy, std::move(drained), table_size);
}

}  // namespace berth
