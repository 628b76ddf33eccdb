#include "berth/maglev/table.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "berth/maglev/name_hash.h"
#include "maglev/probe.h"
#include "maglev/slot_bitmap.h"

namespace berth {

absl::string_view toString(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kMaglev:
      return "maglev";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRendezvous:
      return "rendezvous";
  }
  return "unknown";
}

absl::StatusOr<Algorithm> parseAlgorithm(absl::string_view text) {
  for (Algorithm algorithm : {Algorithm::kMaglev, Algorithm::kRing, Algorithm::kRendezvous}) {
    if (text == toString(algorithm)) return algorithm;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown algorithm '", text, "'; expected maglev, ring or rendezvous"));
}

Permutation permutationFor(absl::string_view name, uint32_t table_size) {
  const uint64_t h1 = nameHash64(name, kOffsetHashSeed);
  const uint64_t h2 = nameHash64(name, kSkipHashSeed);
  return {static_cast<uint32_t>(h1 % table_size), static_cast<uint32_t>(h2 % (table_size - 1) + 1)};
}

bool isPrime(uint64_t n) {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint64_t d = 3; d * d <= n; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

namespace {

// Every check of validateBackends() except duplicate names, which build() finds more cheaply
// once the backends are sorted.
absl::Status validateAllButDuplicates(absl::Span<const Backend> backends, uint32_t table_size) {
  if (table_size > kMaxTableSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("table size ", table_size, " is above the maximum ", kMaxTableSize));
  }
  if (!isPrime(table_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table size ", table_size,
                     " is not prime; Maglev needs a prime so that every preference "
                     "list visits every slot (65537 and 655373 are common choices)"));
  }
  if (backends.size() > kMaxBackends) {
    return absl::InvalidArgumentError(absl::StrCat(backends.size(), " backends is more than the ",
                                                   kMaxBackends, " a table can index"));
  }
  if (table_size <= backends.size()) {
    return absl::InvalidArgumentError(absl::StrCat("table size ", table_size,
                                                   " must be larger than the number of backends (",
                                                   backends.size(), ")"));
  }
  int64_t total_weight = 0;
  for (const Backend& backend : backends) {
    if (backend.name.empty()) return absl::InvalidArgumentError("a backend has an empty name");
    if (backend.weight < 0 || backend.weight > kMaxWeight) {
      return absl::InvalidArgumentError(absl::StrCat("backend '", backend.name, "' has weight ",
                                                     backend.weight, "; weights run from 0 to ",
                                                     kMaxWeight));
    }
    total_weight += backend.weight;
  }
  for (const Backend& backend : backends) {
    if (backend.weight > 0 && static_cast<int64_t>(table_size) * backend.weight < total_weight) {
      return absl::InvalidArgumentError(absl::StrCat("backend '", backend.name, "' has weight ",
                                                     backend.weight, " of a total ", total_weight,
                                                     ", which earns less than one of ", table_size,
                                                     " slots; raise its weight or the table size"));
    }
  }
  return absl::OkStatus();
}

absl::Status duplicateNameError(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat("duplicate backend name '", name, "'"));
}

}  // namespace

absl::Status validateBackends(absl::Span<const Backend> backends, uint32_t table_size) {
  if (absl::Status status = validateAllButDuplicates(backends, table_size); !status.ok()) {
    return status;
  }
  absl::flat_hash_set<absl::string_view> names;
  for (const Backend& backend : backends) {
    if (!names.insert(backend.name).second) return duplicateNameError(backend.name);
  }
  return absl::OkStatus();
}

namespace {

// Slots per backend in proportion to weight, by largest remainder with ties to the lower index,
// so that the quotas sum to exactly table_size whenever any weight is positive.
std::vector<uint32_t> slotQuotas(absl::Span<const Backend> backends, uint32_t table_size) {
  std::vector<uint32_t> quotas(backends.size(), 0);
  uint64_t total_weight = 0;
  for (const Backend& backend : backends) total_weight += static_cast<uint64_t>(backend.weight);
  if (total_weight == 0) return quotas;

  std::vector<std::pair<uint64_t, size_t>> remainders;  // (remainder, index)
  uint64_t assigned = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    const uint64_t scaled = uint64_t{table_size} * static_cast<uint64_t>(backends[i].weight);
    quotas[i] = static_cast<uint32_t>(scaled / total_weight);
    assigned += quotas[i];
    if (backends[i].weight > 0) remainders.emplace_back(scaled % total_weight, i);
  }
  // Only the largest (table_size - assigned) remainders matter, and fewer than one per backend.
  const auto extra = static_cast<std::ptrdiff_t>(table_size - assigned);
  std::partial_sort(remainders.begin(), remainders.begin() + extra, remainders.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  for (std::ptrdiff_t k = 0; k < extra; ++k) ++quotas[remainders[k].second];
  return quotas;
}

// Fills `entries` by Maglev turns. Each backend's turns come at the rate weight / max_weight
// per round (a credit counter), and it takes no turn once it holds its quota. With equal weights
// every backend takes one turn per round, which is the paper's algorithm exactly.
//
// Walking a preference list to its next free slot costs M / free probes, so the last few hundred
// claims cost more than all the others together. Once no more than about sqrt(M) / 2 slots are
// free, a turn instead takes the free slot of lowest rank in the backend's list: every slot the
// backend walked past was taken and stays taken, so that is the very slot the walk would reach, at
// a cost of one rank computation per free slot.
//
// `entries` may come partly filled (a generation step, nextGeneration()): its taken slots stay,
// and `quotas` are then the slots each backend still has to claim.
class TurnFiller {
 public:
  TurnFiller(absl::Span<const Backend> backends, absl::Span<const Permutation> permutations,
             absl::Span<const uint32_t> quotas, std::vector<uint16_t>& entries, bool partly_filled)
      : permutations_(permutations),
        entries_(entries),
        table_size_(static_cast<uint32_t>(entries.size())),
        strides_(backends.size()),
        ranked_(backends.size()),
        ranks_(table_size_),
        use_avx2_(cpuHasAvx2()),
        avx2_from_(table_size_ - table_size_ / 10),
        taken_(table_size_) {
    for (const Backend& backend : backends) {
      max_weight_ = std::max(max_weight_, static_cast<int32_t>(backend.weight));
    }
    for (size_t i = 0; i < backends.size(); ++i) {
      if (quotas[i] == 0) continue;
      turns_.push_back({permutations[i].offset, permutations[i].skip, 0, quotas[i], 0,
                        static_cast<int32_t>(backends[i].weight), static_cast<uint16_t>(i)});
      strides_[i] = probeStrides(permutations[i].skip, table_size_);
    }
    for (const Turn& turn : turns_) equal_weights_ &= turn.weight == max_weight_;
    if (!partly_filled) return;
    for (uint32_t slot = 0; slot < table_size_; ++slot) {
      if (entries_[slot] == kNoBackend) continue;
      taken_.set(slot);
      ++filled_;
    }
  }

  void fill() {
    if (max_weight_ == 0) return;
    // A late walk probes about M / free slots and ranking costs about as much per free slot as a
    // probe does, so the two meet near sqrt(M) free; timings from sqrt(M) / 4 to sqrt(M) are
    // within noise of each other here, and the middle is kept (128 slots at M = 65537).
    const auto end_phase_free = static_cast<uint32_t>(std::sqrt(table_size_ / 4.0));
    runRounds<&TurnFiller::claimByWalking>(end_phase_free);
    startEndPhase();
    runRounds<&TurnFiller::claimByRank>(0);
  }

 private:
  // A turn's state, in 28 bytes: every round walks all of them, and a thousand backends' turns
  // must share L1 with the slot bitmap (at 96 bytes each they did not, and every probe missed).
  // What only a probe or the end phase needs is kept by backend index beside it.
  struct Turn {
    uint32_t next;
    uint32_t skip;
    uint32_t owned;
    uint32_t quota;
    int32_t credit;  // below 2 * kMaxWeight
    int32_t weight;
    uint16_t index;
  };
  static_assert(kMaxWeight < INT32_MAX / 2, "a turn's credit fits 32 bits");

  void claimByWalking(Turn& turn) {
    // Once 90% of the table is taken, a claim probes ten or more slots on average, and eight
    // per gather beat the scalar probes (5-10% off the whole build, N=1000, both M).
    // Most claims of the first half of a build find their next slot free: they make no call.
    uint32_t slot = turn.next;
    if (taken_.test(slot)) {
      slot = use_avx2_ && filled_ >= avx2_from_
                 ? firstFreeSlotAvx2(taken_, slot, strides_[turn.index], table_size_)
                 : firstFreeSlot(taken_, slot, strides_[turn.index], table_size_);
    }
    taken_.set(slot);
    entries_[slot] = turn.index;
    turn.next = advance(slot, turn.skip, table_size_);
  }

  void claimByRank(Turn& turn) {
    // Only the few backends that claim in the end phase need their list prepared.
    RankedList& list = ranked_[turn.index];
    if (list.scale == 0) {
      list = ranks_.prepare(permutations_[turn.index].offset, ranks_.inverse(turn.skip));
    }
    size_t best = 0;
    uint32_t best_rank = UINT32_MAX;
    for (size_t i = 0; i < free_slots_.size(); ++i) {
      const uint32_t rank = ranks_.rank(free_slots_[i], list);
      if (rank < best_rank) {
        best_rank = rank;
        best = i;
      }
    }
    entries_[free_slots_[best]] = turn.index;
    free_slots_[best] = free_slots_.back();
    free_slots_.pop_back();
  }

  void startEndPhase() {
    // A word of the bitmap at a time: a few hundred free slots among M.
    for (size_t word = 0; word < taken_.wordCount(); ++word) {
      for (uint64_t free = ~taken_.word(word); free != 0; free &= free - 1) {
        const auto slot = static_cast<uint32_t>(word * 64 + std::countr_zero(free));
        if (slot < table_size_) free_slots_.push_back(slot);
      }
    }
  }

  // Rounds: every backend with quota left takes the turns its credit allows, in name order.
  // Stops once no more than `stop_at_free` slots are free, possibly mid-round; the next call
  // resumes at the same backend, so the switch of claim method leaves the turn order intact.
  // With equal weights (the usual case) every turn is taken, and the credit is not kept.
  template <void (TurnFiller::*Claim)(Turn&)>
  void runRounds(uint32_t stop_at_free) {
    while (table_size_ - filled_ > stop_at_free) {
      for (; cursor_ < turns_.size(); ++cursor_) {
        Turn& turn = turns_[cursor_];
        if (!equal_weights_) {
          turn.credit += turn.weight;
          if (turn.credit < max_weight_) continue;
          turn.credit -= max_weight_;
        }
        (this->*Claim)(turn);
        ++filled_;
        someone_done_ |= ++turn.owned == turn.quota;
        if (table_size_ - filled_ <= stop_at_free) {
          ++cursor_;
          return;
        }
      }
      cursor_ = 0;
      if (someone_done_) {
        std::erase_if(turns_, [](const Turn& turn) { return turn.owned == turn.quota; });
        someone_done_ = false;
      }
    }
  }

  absl::Span<const Permutation> permutations_;
  std::vector<uint16_t>& entries_;
  const uint32_t table_size_;
  int32_t max_weight_ = 0;
  std::vector<Turn> turns_;
  std::vector<ProbeStrides> strides_;
  std::vector<RankedList> ranked_;  // prepared by a backend's first end-phase claim
  const PreferenceRank ranks_;
  const bool use_avx2_;
  const uint32_t avx2_from_;
  SlotBitmap taken_;
  std::vector<uint32_t> free_slots_;  // filled when the end phase starts
  uint32_t filled_ = 0;
  size_t cursor_ = 0;
  bool someone_done_ = false;
  bool equal_weights_ = true;
};

void fillByTurns(absl::Span<const Backend> backends, absl::Span<const Permutation> permutations,
                 absl::Span<const uint32_t> quotas, std::vector<uint16_t>& entries,
                 bool partly_filled = false) {
  TurnFiller(backends, permutations, quotas, entries, partly_filled).fill();
}

}  // namespace

absl::StatusOr<Table> buildWithPermutations(std::vector<Backend> backends,
                                            std::vector<Permutation> permutations,
                                            uint32_t table_size) {
  if (permutations.size() != backends.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(permutations.size(), " permutations for ", backends.size(), " backends"));
  }
  if (absl::Status status = validateAllButDuplicates(backends, table_size); !status.ok()) {
    return status;
  }
  for (const Permutation& permutation : permutations) {
    if (permutation.offset >= table_size || permutation.skip == 0 ||
        permutation.skip >= table_size) {
      return absl::InvalidArgumentError(absl::StrCat("permutation (offset ", permutation.offset,
                                                     ", skip ", permutation.skip,
                                                     ") is outside table size ", table_size));
    }
  }

  // Sorting by name makes the table independent of input order: two instances given the same
  // backends in any order build byte-identical tables.
  std::vector<size_t> order(backends.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto by_name = [&](size_t a, size_t b) { return backends[a].name < backends[b].name; };
  // Configs usually list backends in name order already; checking costs N compares.
  if (!std::is_sorted(order.begin(), order.end(), by_name)) {
    std::sort(order.begin(), order.end(), by_name);
  }
  for (size_t i = 1; i < order.size(); ++i) {
    if (backends[order[i]].name == backends[order[i - 1]].name) {
      return duplicateNameError(backends[order[i]].name);
    }
  }
  auto layout = std::make_shared<Table::Layout>();
  layout->backends.reserve(backends.size());
  layout->permutations.reserve(backends.size());
  for (size_t i : order) {
    layout->backends.push_back(std::move(backends[i]));
    layout->permutations.push_back(permutations[i]);
  }

  auto entries = std::make_shared<std::vector<uint16_t>>(table_size, kNoBackend);
  // Every backend ends the build holding exactly its quota.
  layout->full_slot_counts = slotQuotas(layout->backends, table_size);
  fillByTurns(layout->backends, layout->permutations, layout->full_slot_counts, *entries);
  layout->full_entries = entries;
  std::vector<bool> healthy(layout->backends.size(), true);
  std::vector<bool> drained(layout->backends.size(), false);
  return Table(std::move(layout), std::move(entries), std::move(healthy), std::move(drained),
               table_size);
}

absl::StatusOr<Table> build(std::vector<Backend> backends, uint32_t table_size) {
  if (table_size < 2) return validateBackends(backends, table_size);
  std::vector<Permutation> permutations;
  permutations.reserve(backends.size());
  for (const Backend& backend : backends) {
    permutations.push_back(permutationFor(backend.name, table_size));
  }
  return buildWithPermutations(std::move(backends), std::move(permutations), table_size);
}

absl::StatusOr<Table::GenerationStart> Table::startGeneration(
    std::vector<Backend> backends, uint32_t table_size, const std::vector<std::string>& failed,
    const std::vector<std::string>& drained) {
  if (absl::Status status = validateBackends(backends, table_size); !status.ok()) return status;
  std::sort(backends.begin(), backends.end(),
            [](const Backend& a, const Backend& b) { return a.name < b.name; });
  const absl::flat_hash_set<absl::string_view> failed_names(failed.begin(), failed.end());
  const absl::flat_hash_set<absl::string_view> drained_names(drained.begin(), drained.end());
  GenerationStart start;
  start.layout = std::make_shared<Layout>();
  start.layout->permutations.reserve(backends.size());
  for (const Backend& backend : backends) {
    start.layout->permutations.push_back(permutationFor(backend.name, table_size));
    start.healthy.push_back(!failed_names.contains(backend.name));
    start.drained.push_back(drained_names.contains(backend.name));
  }
  start.layout->backends = std::move(backends);
  return start;
}

absl::StatusOr<Table> nextGeneration(const Table& previous, std::vector<Backend> backends,
                                     const std::vector<std::string>& failed,
                                     const std::vector<std::string>& drained) {
  if (previous.algorithm() != Algorithm::kMaglev) {
    return absl::InvalidArgumentError("table generations are for Maglev tables");
  }
  const uint32_t table_size = previous.size();
  absl::StatusOr<Table::GenerationStart> start =
      Table::startGeneration(std::move(backends), table_size, failed, drained);
  if (!start.ok()) return start.status();
  Table::Layout& layout = *start->layout;
  const std::vector<bool>& healthy = start->healthy;
  const size_t count = layout.backends.size();

  // Quotas among the serving backends: a failed or drained one is owed nothing.
  std::vector<Backend> serving = layout.backends;
  absl::flat_hash_map<absl::string_view, uint16_t> index_of;
  for (size_t b = 0; b < count; ++b) {
    if (!healthy[b] || start->drained[b]) serving[b].weight = 0;
    index_of.emplace(layout.backends[b].name, static_cast<uint16_t>(b));
  }
  const std::vector<uint32_t> quotas = slotQuotas(serving, table_size);

  // Every slot stays with its owner while the owner is within its quota. An owner over its quota
  // keeps the slots it ranks earliest and lets the rest go; a removed or non-serving owner lets
  // all go. Those are the only slots that move, and they are the least that must move for every
  // backend to hold exactly its quota.
  std::vector<uint16_t> renumbered(previous.backends().size(), kNoBackend);
  for (size_t p = 0; p < renumbered.size(); ++p) {
    if (const auto it = index_of.find(previous.backends()[p].name); it != index_of.end()) {
      renumbered[p] = it->second;
    }
  }
  std::vector<std::vector<uint32_t>> held(count);
  const absl::Span<const uint16_t> before = previous.entries();
  for (uint32_t slot = 0; slot < table_size; ++slot) {
    if (before[slot] == kNoBackend) continue;
    const uint16_t owner = renumbered[before[slot]];
    if (owner != kNoBackend && quotas[owner] > 0) held[owner].push_back(slot);
  }
  auto entries = std::make_shared<std::vector<uint16_t>>(table_size, kNoBackend);
  std::vector<uint32_t> deficits(count, 0);
  const PreferenceRank ranks(table_size);
  for (size_t b = 0; b < count; ++b) {
    std::vector<uint32_t>& slots = held[b];
    if (slots.size() > quotas[b]) {
      const Permutation& permutation = layout.permutations[b];
      const RankedList list = ranks.prepare(permutation.offset, ranks.inverse(permutation.skip));
      std::nth_element(
          slots.begin(), slots.begin() + quotas[b], slots.end(),
          [&](uint32_t x, uint32_t y) { return ranks.rank(x, list) < ranks.rank(y, list); });
      slots.resize(quotas[b]);
    }
    deficits[b] = quotas[b] - static_cast<uint32_t>(slots.size());
    for (uint32_t slot : slots) (*entries)[slot] = static_cast<uint16_t>(b);
  }
  // The freed slots go to the backends under their quota by Maglev's turns, as in a build.
  fillByTurns(serving, layout.permutations, deficits, *entries, /*partly_filled=*/true);
  layout.full_slot_counts = quotas;
  layout.full_entries = entries;
  return Table(std::move(start->layout), std::move(entries), std::move(start->healthy),
               std::move(start->drained), table_size);
}

absl::StatusOr<Table> restoreGeneration(std::vector<Backend> backends,
                                        std::vector<uint16_t> entries,
                                        const std::vector<std::string>& failed,
                                        const std::vector<std::string>& drained) {
  const auto table_size = static_cast<uint32_t>(entries.size());
  if (entries.size() > kMaxTableSize) {
    return absl::InvalidArgumentError(absl::StrCat(entries.size(), " entries: more than M allows"));
  }
  absl::StatusOr<Table::GenerationStart> start =
      Table::startGeneration(std::move(backends), table_size, failed, drained);
  if (!start.ok()) return start.status();
  const size_t count = start->layout->backends.size();
  std::vector<uint32_t> counts(count, 0);
  for (uint16_t entry : entries) {
    if (entry == kNoBackend) continue;
    if (entry >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("an entry names backend ", entry, " of ", count));
    }
    ++counts[entry];
  }
  for (size_t b = 0; b < count; ++b) {
    if (counts[b] > 0 && (!start->healthy[b] || start->drained[b])) {
      return absl::InvalidArgumentError(absl::StrCat("backend '", start->layout->backends[b].name,
                                                     "' is failed or drained but owns ", counts[b],
                                                     " slots"));
    }
  }
  auto shared_entries = std::make_shared<std::vector<uint16_t>>(std::move(entries));
  start->layout->full_slot_counts = std::move(counts);
  start->layout->full_entries = shared_entries;
  return Table(std::move(start->layout), std::move(shared_entries), std::move(start->healthy),
               std::move(start->drained), table_size);
}

Table::Table(std::shared_ptr<const Layout> layout,
             std::shared_ptr<const std::vector<uint16_t>> entries, std::vector<bool> healthy,
             std::vector<bool> drained, uint32_t size)
    : entries_data_(entries->data()),
      modulo_multiplier_(UINT64_MAX / size + 1),
      size_(size),
      layout_(std::move(layout)),
      entries_(std::move(entries)),
      healthy_(std::move(healthy)),
      drained_(std::move(drained)) {}

absl::StatusOr<uint16_t> Table::indexOf(absl::string_view name) const {
  const auto& list = layout_->backends;
  auto it = std::lower_bound(
      list.begin(), list.end(), name,
      [](const Backend& backend, absl::string_view key) { return backend.name < key; });
  if (it == list.end() || it->name != name) {
    return absl::NotFoundError(absl::StrCat("no backend named '", name, "'"));
  }
  return static_cast<uint16_t>(it - list.begin());
}

std::vector<uint32_t> Table::slotCounts() const {
  std::vector<uint32_t> counts(layout_->backends.size(), 0);
  for (uint16_t entry : *entries_) {
    if (entry != kNoBackend) ++counts[entry];
  }
  return counts;
}

}  // namespace berth
