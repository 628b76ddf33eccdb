#include "berth/maglev/comparison.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "berth/maglev/name_hash.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

constexpr ComparedAlgorithm kAllCompared[] = {ComparedAlgorithm::kMaglev, ComparedAlgorithm::kRing,
                                              ComparedAlgorithm::kRendezvous,
                                              ComparedAlgorithm::kJump, ComparedAlgorithm::kModulo};

std::optional<Algorithm> datapathAlgorithm(ComparedAlgorithm algorithm) {
  switch (algorithm) {
    case ComparedAlgorithm::kMaglev:
      return Algorithm::kMaglev;
    case ComparedAlgorithm::kRing:
      return Algorithm::kRing;
    case ComparedAlgorithm::kRendezvous:
      return Algorithm::kRendezvous;
    case ComparedAlgorithm::kJump:
    case ComparedAlgorithm::kModulo:
      break;
  }
  return std::nullopt;
}

// Slot tables whose entries index one backend list: the service's, in name order, with a joining
// backend (add_one) at index N.
using Entries = std::vector<uint16_t>;

uint32_t slotsChanged(const Entries& before, const Entries& after) {
  uint32_t changed = 0;
  for (size_t slot = 0; slot < before.size(); ++slot) changed += before[slot] != after[slot];
  return changed;
}

// The algorithm on one backend list: its all-healthy table and its tables after changes.
class Scheme {
 public:
  static absl::StatusOr<Scheme> make(ComparedAlgorithm algorithm,
                                     const std::vector<Backend>& backends,
                                     const TableOptions& options) {
    Scheme scheme(algorithm, backends, options);
    if (const std::optional<Algorithm> datapath = datapathAlgorithm(algorithm)) {
      scheme.options_.algorithm = *datapath;
      BERTH_ASSIGN_OR_RETURN(Table table, buildTable(backends, scheme.options_));
      scheme.table_ = std::move(table);
      scheme.full_.assign(scheme.table_->entries().begin(), scheme.table_->entries().end());
    } else {
      std::vector<uint16_t> everyone(backends.size());
      std::iota(everyone.begin(), everyone.end(), 0);
      scheme.full_ = scheme.numbered(everyone);
    }
    return scheme;
  }

  const Entries& full() const { return full_; }
  const std::optional<Table>& table() const { return table_; }

  // The table with only the backends flagged in `serving` (in the backends' order).
  absl::StatusOr<Entries> withServing(const std::vector<bool>& serving) const {
    if (table_) {
      BERTH_ASSIGN_OR_RETURN(const Table table, withHealth(*table_, serving));
      return Entries(table.entries().begin(), table.entries().end());
    }
    std::vector<uint16_t> list;
    for (size_t b = 0; b < serving.size(); ++b) {
      if (serving[b]) list.push_back(static_cast<uint16_t>(b));
    }
    return numbered(list);
  }

  // The table after `joining` joins, its slots at index backends.size().
  absl::StatusOr<Entries> withJoining(const Backend& joining) const {
    const auto joining_index = static_cast<uint16_t>(backends_.size());
    if (table_) {
      std::vector<Backend> grown = backends_;
      grown.push_back(joining);
      BERTH_ASSIGN_OR_RETURN(const Table table, buildTable(std::move(grown), options_));
      absl::flat_hash_map<absl::string_view, uint16_t> index_of;
      for (size_t b = 0; b < backends_.size(); ++b) {
        index_of.emplace(backends_[b].name, static_cast<uint16_t>(b));
      }
      index_of.emplace(joining.name, joining_index);
      std::vector<uint16_t> translate;
      for (const Backend& backend : table.backends()) translate.push_back(index_of[backend.name]);
      Entries entries;
      entries.reserve(table.size());
      for (uint16_t entry : table.entries()) {
        entries.push_back(entry == kNoBackend ? kNoBackend : translate[entry]);
      }
      return entries;
    }
    std::vector<uint16_t> list(backends_.size());
    std::iota(list.begin(), list.end(), 0);
    list.push_back(joining_index);  // the last bucket: the only place jump can add one
    return numbered(list);
  }

 private:
  Scheme(ComparedAlgorithm algorithm, const std::vector<Backend>& backends,
         const TableOptions& options)
      : algorithm_(algorithm), backends_(backends), options_(options) {}

  // jump or modulo over the backends in `list`: bucket i is list[i].
  Entries numbered(const std::vector<uint16_t>& list) const {
    Entries entries(options_.table_size, kNoBackend);
    if (list.empty()) return entries;
    const auto buckets = static_cast<int32_t>(list.size());
    for (uint32_t slot = 0; slot < options_.table_size; ++slot) {
      entries[slot] = algorithm_ == ComparedAlgorithm::kJump
                          ? list[static_cast<size_t>(jumpHash(mix64(slot), buckets))]
                          : list[slot % list.size()];
    }
    return entries;
  }

  ComparedAlgorithm algorithm_;
  std::vector<Backend> backends_;
  TableOptions options_;
  std::optional<Table> table_;
  Entries full_;
};

double medianOf3(const std::function<double()>& measure) {
  double runs[3] = {measure(), measure(), measure()};
  std::sort(runs, runs + 3);
  return runs[1];
}

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Nanoseconds per call of `lookup`, over a fixed set of keys, run for at least 2 ms.
double nanosecondsPerLookup(const std::function<uint32_t(uint64_t)>& lookup) {
  constexpr size_t kKeys = 4096;
  std::vector<uint64_t> keys(kKeys);
  for (size_t i = 0; i < kKeys; ++i) keys[i] = mix64(i + 1);
  return medianOf3([&] {
    uint64_t calls = 0;
    uint32_t sink = 0;
    const Clock::time_point start = Clock::now();
    do {
      for (uint64_t key : keys) sink ^= lookup(key);
      calls += kKeys;
    } while (millisecondsSince(start) < 2.0);
    const double elapsed_ns = millisecondsSince(start) * 1e6;
    volatile uint32_t keep = sink;  // the lookups must not be optimised away
    (void)keep;
    return elapsed_ns / static_cast<double>(calls);
  });
}

std::string uniqueJoiningName(const std::vector<Backend>& backends) {
  std::string name = "joining-backend";
  for (int suffix = 2;; ++suffix) {
    const bool taken = std::any_of(backends.begin(), backends.end(),
                                   [&](const Backend& backend) { return backend.name == name; });
    if (!taken) return name;
    name = absl::StrCat("joining-backend-", suffix);
  }
}

void measureTimes(ComparedAlgorithm algorithm, const std::vector<Backend>& backends,
                  const TableOptions& options, const Scheme& scheme, AlgorithmComparison& result) {
  result.build_ms = medianOf3([&] {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<Scheme> again = Scheme::make(algorithm, backends, options);
    const double elapsed = millisecondsSince(start);
    return again.ok() ? elapsed : 0.0;
  });
  const auto buckets = static_cast<int32_t>(backends.size());
  switch (algorithm) {
    case ComparedAlgorithm::kMaglev:
      result.lookup_ns = nanosecondsPerLookup(
          [&](uint64_t key) { return scheme.table()->lookup(static_cast<uint32_t>(key)); });
      break;
    case ComparedAlgorithm::kRing: {
      const absl::StatusOr<HashRing> ring = HashRing::build(backends, options.ring_replicas);
      if (ring.ok()) {
        result.lookup_ns = nanosecondsPerLookup([&](uint64_t key) { return ring->lookup(key); });
      }
      break;
    }
    case ComparedAlgorithm::kRendezvous: {
      const absl::StatusOr<Rendezvous> rendezvous = Rendezvous::build(backends);
      if (rendezvous.ok()) {
        result.lookup_ns =
            nanosecondsPerLookup([&](uint64_t key) { return rendezvous->lookup(key); });
      }
      break;
    }
    case ComparedAlgorithm::kJump:
      result.lookup_ns = nanosecondsPerLookup(
          [&](uint64_t key) { return static_cast<uint32_t>(jumpHash(key, buckets)); });
      break;
    case ComparedAlgorithm::kModulo:
      result.lookup_ns = nanosecondsPerLookup(
          [&](uint64_t key) { return static_cast<uint32_t>(key % backends.size()); });
      break;
  }
  if (scheme.table()) {
    result.table_lookup_ns = nanosecondsPerLookup(
        [&](uint64_t key) { return scheme.table()->lookup(static_cast<uint32_t>(key)); });
  }
}

}  // namespace

absl::string_view toString(ComparedAlgorithm algorithm) {
  // The datapath's algorithms keep the names the config spells them by.
  if (const std::optional<Algorithm> datapath = datapathAlgorithm(algorithm)) {
    return toString(*datapath);
  }
  return algorithm == ComparedAlgorithm::kJump ? "jump" : "modulo";
}

absl::StatusOr<std::vector<ComparedAlgorithm>> parseComparedAlgorithms(absl::string_view list) {
  std::vector<ComparedAlgorithm> algorithms;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const absl::string_view name = absl::StripAsciiWhitespace(part);
    const auto* found = std::find_if(std::begin(kAllCompared), std::end(kAllCompared),
                                     [&](ComparedAlgorithm a) { return toString(a) == name; });
    if (found == std::end(kAllCompared)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown algorithm '", name,
                       "'; expected some of maglev, ring, rendezvous, jump, modulo"));
    }
    if (std::find(algorithms.begin(), algorithms.end(), *found) == algorithms.end()) {
      algorithms.push_back(*found);
    }
  }
  if (algorithms.empty()) return absl::InvalidArgumentError("no algorithm named");
  return algorithms;
}

int32_t jumpHash(uint64_t key, int32_t buckets) {
  int64_t bucket = -1;
  int64_t next = 0;
  while (next < buckets) {
    bucket = next;
    key = key * 2862933555777941757ull + 1;
    next = static_cast<int64_t>(
        static_cast<double>(bucket + 1) *
        (static_cast<double>(int64_t{1} << 31) / static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int32_t>(bucket);
}

namespace {

// Slots per backend against its weighted share: max/ideal, min/ideal, their coefficient of
// variation and the weighted error.
void fillBalance(const std::vector<uint32_t>& owned, const std::vector<Backend>& backends,
                 double total_weight, double slots, AlgorithmComparison& result) {
  const size_t count = backends.size();
  double ratio_sum = 0;
  result.min_over_ideal = std::numeric_limits<double>::max();
  for (size_t b = 0; b < count; ++b) {
    const double weight_share = static_cast<double>(backends[b].weight) / total_weight;
    const double ratio = owned[b] / (slots * weight_share);
    result.slots_over_ideal.push_back(ratio);
    result.max_over_ideal = std::max(result.max_over_ideal, ratio);
    result.min_over_ideal = std::min(result.min_over_ideal, ratio);
    result.weighted_error += std::abs(owned[b] / slots - weight_share) / 2;
    ratio_sum += ratio;
  }
  const double mean_ratio = ratio_sum / count;
  double squares = 0;
  for (double ratio : result.slots_over_ideal)
    squares += (ratio - mean_ratio) * (ratio - mean_ratio);
  result.coefficient_of_variation = std::sqrt(squares / count) / mean_ratio;
}

// What an algorithm keeps: its M-slot table (`table_bytes`) and what failover and rebuilds
// need beside it; 0 for the analyzer-only algorithms, which no datapath table holds.
uint64_t stateBytes(ComparedAlgorithm algorithm, const std::vector<Backend>& backends,
                    const TableOptions& options, uint64_t table_bytes) {
  const size_t count = backends.size();
  switch (algorithm) {
    case ComparedAlgorithm::kMaglev:
      return table_bytes + count * (sizeof(Permutation) + sizeof(uint32_t));
    case ComparedAlgorithm::kRing: {
      uint64_t points = 0;
      for (const Backend& backend : backends) {
        points += uint64_t{options.ring_replicas} * static_cast<uint64_t>(backend.weight);
      }
      return table_bytes + points * sizeof(HashRing::Point);
    }
    case ComparedAlgorithm::kRendezvous:
      return table_bytes + count * sizeof(uint64_t);
    case ComparedAlgorithm::kJump:
    case ComparedAlgorithm::kModulo:
      return 0;
  }
  return 0;
}

// What a reader of the comparison should know about each algorithm's figures.
std::vector<std::string> notesFor(ComparedAlgorithm algorithm, const AlgorithmComparison& result,
                                  const TableOptions& options, bool equal_weights) {
  std::vector<std::string> notes;
  switch (algorithm) {
    case ComparedAlgorithm::kMaglev:
      if (result.remove_one.worst > 1.0) {
        notes.push_back(
            "failover caps each survivor near its share (3%, or 9.5 slots where that is more), "
            "so a failure may move a few slots beyond the failed backend's own (table.h)");
      }
      break;
    case ComparedAlgorithm::kRing:
      notes.push_back(absl::StrCat(
          options.ring_replicas,
          " points per unit of weight; balance improves with more, at the cost of build time "
          "and memory"));
      break;
    case ComparedAlgorithm::kRendezvous:
      notes.push_back("the build costs M x N draws; failover redraws only vacated slots");
      break;
    case ComparedAlgorithm::kJump:
      notes.push_back(
          "analyzer only: only the last bucket can leave without renumbering, so removing any "
          "other backend moves the slots of every backend after it; a joining backend is the "
          "last bucket");
      if (!equal_weights) notes.push_back("ignores weights");
      break;
    case ComparedAlgorithm::kModulo:
      notes.push_back(
          "analyzer only: any change in the number of backends moves about (N-1)/N of all "
          "slots");
      if (!equal_weights) notes.push_back("ignores weights");
      break;
  }
  return notes;
}

// What every algorithm is compared on: the backends with a weight, in name order, the order
// they leave in, and which removals are measured.
struct ComparisonPlan {
  std::vector<Backend> backends;
  double slots = 0;
  double total_weight = 0;
  bool equal_weights = true;
  // Backends leave in one fixed order, the same for every algorithm, so the curve's sets nest.
  std::vector<size_t> removal_order;
  std::vector<uint32_t> curve_counts = {0};
  uint32_t tenth = 1;
  std::vector<size_t> single_removals;
  Backend joining;
};

absl::StatusOr<ComparisonPlan> planComparison(const std::vector<Backend>& configured,
                                              const TableOptions& options,
                                              const ComparisonOptions& comparison) {
  ComparisonPlan plan;
  for (const Backend& backend : configured) {
    if (backend.weight > 0) plan.backends.push_back(backend);
  }
  std::vector<Backend>& backends = plan.backends;
  if (backends.empty()) return absl::InvalidArgumentError("no backend with a weight to compare");
  std::sort(backends.begin(), backends.end(),
            [](const Backend& a, const Backend& b) { return a.name < b.name; });
  const size_t count = backends.size();
  plan.slots = options.table_size;
  for (const Backend& backend : backends) plan.total_weight += static_cast<double>(backend.weight);
  plan.equal_weights = std::all_of(backends.begin(), backends.end(), [&](const Backend& backend) {
    return backend.weight == backends[0].weight;
  });
  plan.removal_order.resize(count);
  std::iota(plan.removal_order.begin(), plan.removal_order.end(), 0);
  std::sort(plan.removal_order.begin(), plan.removal_order.end(), [&](size_t a, size_t b) {
    return nameHash64(backends[a].name, kRemovalOrderSeed) <
           nameHash64(backends[b].name, kRemovalOrderSeed);
  });
  for (int step = 1; step <= 10; ++step) {
    const auto removed = static_cast<uint32_t>(std::max<long>(1, std::lround(count * step / 20.0)));
    if (removed < count && removed != plan.curve_counts.back())
      plan.curve_counts.push_back(removed);
  }
  plan.tenth = static_cast<uint32_t>(std::max<size_t>(1, count / 10));
  plan.single_removals.resize(count);
  std::iota(plan.single_removals.begin(), plan.single_removals.end(), 0);
  if (comparison.max_removals > 0 && count > comparison.max_removals) {
    std::vector<size_t> sample;
    for (size_t k = 0; k < comparison.max_removals; ++k) {
      sample.push_back(k * count / comparison.max_removals);
    }
    plan.single_removals = std::move(sample);
  }
  plan.joining = {uniqueJoiningName(backends),
                  std::max<int64_t>(1, std::llround(plan.total_weight / count))};
  return plan;
}

// Each single removal's movement over the slots the backend owned.
absl::Status measureSingleRemovals(const Scheme& scheme, const ComparisonPlan& plan,
                                   const std::vector<uint32_t>& owned,
                                   AlgorithmComparison& result) {
  const Entries& full = scheme.full();
  for (size_t b : plan.single_removals) {
    if (owned[b] == 0) continue;
    std::vector<bool> serving(plan.backends.size(), true);
    serving[b] = false;
    BERTH_ASSIGN_OR_RETURN(const Entries shrunk, scheme.withServing(serving));
    const double ratio = static_cast<double>(slotsChanged(full, shrunk)) / owned[b];
    result.remove_one.mean += ratio;
    result.remove_one.worst = std::max(result.remove_one.worst, ratio);
    ++result.remove_one.cases;
  }
  if (result.remove_one.cases > 0) result.remove_one.mean /= result.remove_one.cases;
  return absl::OkStatus();
}

// The movement curve as backends leave in the plan's order, and a tenth of them leaving at once.
absl::Status measureRemovalCurve(const Scheme& scheme, const ComparisonPlan& plan,
                                 const std::vector<uint32_t>& owned, AlgorithmComparison& result) {
  const Entries& full = scheme.full();
  std::vector<bool> serving(plan.backends.size(), true);
  uint32_t removed = 0;
  uint64_t removed_owned = 0;
  double removed_weight = 0;
  auto removeUpTo = [&](uint32_t target) {
    for (; removed < target; ++removed) {
      const size_t b = plan.removal_order[removed];
      serving[b] = false;
      removed_owned += owned[b];
      removed_weight += static_cast<double>(plan.backends[b].weight);
    }
  };
  for (uint32_t target : plan.curve_counts) {
    removeUpTo(target);
    BERTH_ASSIGN_OR_RETURN(const Entries shrunk, scheme.withServing(serving));
    result.movement.push_back(
        {target, slotsChanged(full, shrunk) / plan.slots, removed_weight / plan.total_weight});
  }
  serving.assign(plan.backends.size(), true);
  removed = 0;
  removed_owned = 0;
  removed_weight = 0;
  removeUpTo(plan.tenth);
  BERTH_ASSIGN_OR_RETURN(const Entries without_tenth, scheme.withServing(serving));
  result.tenth_removed = plan.tenth;
  result.remove_tenth = removed_owned == 0
                            ? 0
                            : static_cast<double>(slotsChanged(full, without_tenth)) /
                                  static_cast<double>(removed_owned);
  return absl::OkStatus();
}

absl::StatusOr<AlgorithmComparison> compareOne(ComparedAlgorithm algorithm,
                                               const ComparisonPlan& plan,
                                               const TableOptions& options,
                                               const ComparisonOptions& comparison) {
  BERTH_ASSIGN_OR_RETURN(const Scheme scheme, Scheme::make(algorithm, plan.backends, options));
  const Entries& full = scheme.full();
  AlgorithmComparison result;
  result.algorithm = algorithm;
  result.in_datapath = datapathAlgorithm(algorithm).has_value();
  std::vector<uint32_t> owned(plan.backends.size() + 1, 0);
  for (uint16_t entry : full) {
    if (entry != kNoBackend) ++owned[entry];
  }
  fillBalance(owned, plan.backends, plan.total_weight, plan.slots, result);
  result.table_bytes = uint64_t{options.table_size} * sizeof(uint16_t);
  result.state_bytes = stateBytes(algorithm, plan.backends, options, result.table_bytes);
  BERTH_ASSIGN_OR_RETURN(const Entries grown, scheme.withJoining(plan.joining));
  const double joining_ideal = plan.slots * static_cast<double>(plan.joining.weight) /
                               (plan.total_weight + plan.joining.weight);
  result.add_one = slotsChanged(full, grown) / joining_ideal;
  BERTH_RETURN_IF_ERROR(measureSingleRemovals(scheme, plan, owned, result));
  BERTH_RETURN_IF_ERROR(measureRemovalCurve(scheme, plan, owned, result));
  result.notes = notesFor(algorithm, result, options, plan.equal_weights);
  if (comparison.measure_time) measureTimes(algorithm, plan.backends, options, scheme, result);
  return result;
}

}  // namespace

absl::StatusOr<std::vector<AlgorithmComparison>> compareAlgorithms(
    const std::vector<Backend>& configured, const TableOptions& options,
    const std::vector<ComparedAlgorithm>& algorithms, const ComparisonOptions& comparison) {
  if (absl::Status status = validateTable(configured, options); !status.ok()) return status;
  BERTH_ASSIGN_OR_RETURN(const ComparisonPlan plan,
                         planComparison(configured, options, comparison));
  std::vector<AlgorithmComparison> results;
  for (ComparedAlgorithm algorithm : algorithms) {
    BERTH_ASSIGN_OR_RETURN(AlgorithmComparison result,
                           compareOne(algorithm, plan, options, comparison));
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace berth
