#include "berth/maglev/consistent_hash.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/maglev/name_hash.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

__extension__ using Uint128 = unsigned __int128;

std::vector<Backend> sortedByName(std::vector<Backend> backends) {
  std::sort(backends.begin(), backends.end(),
            [](const Backend& a, const Backend& b) { return a.name < b.name; });
  return backends;
}

absl::Status ringLimits(absl::Span<const Backend> backends, uint32_t replicas) {
  if (replicas == 0 || replicas > kMaxRingReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas must be from 1 to ", kMaxRingReplicas, ", got ", replicas));
  }
  uint64_t total = 0;
  for (const Backend& backend : backends) total += replicas * static_cast<uint64_t>(backend.weight);
  if (total > kMaxRingPoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas x weights make ", total, " ring points, more than the ",
                     kMaxRingPoints, " a ring may have; use smaller weights or fewer replicas"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HashRing> HashRing::build(std::vector<Backend> backends, uint32_t replicas) {
  if (absl::Status status = validateBackends(backends, kMaxTableSize); !status.ok()) return status;
  if (absl::Status status = ringLimits(backends, replicas); !status.ok()) return status;
  uint64_t total = 0;
  for (const Backend& backend : backends) total += replicas * static_cast<uint64_t>(backend.weight);
  HashRing ring;
  ring.backends_ = sortedByName(std::move(backends));
  ring.points_.reserve(total);
  for (size_t b = 0; b < ring.backends_.size(); ++b) {
    const Backend& backend = ring.backends_[b];
    const uint64_t points = replicas * static_cast<uint64_t>(backend.weight);
    for (uint64_t i = 0; i < points; ++i) {
      ring.points_.push_back(Point{nameHash64(absl::StrCat(backend.name, "#", i), kRingHashSeed),
                                   static_cast<uint16_t>(b)});
    }
  }
  // Ties (a 64-bit collision) go to the earlier name, so every instance orders them alike.
  std::sort(ring.points_.begin(), ring.points_.end(), [](const Point& a, const Point& b) {
    return a.position != b.position ? a.position < b.position : a.backend < b.backend;
  });
  return ring;
}

uint16_t HashRing::lookup(uint64_t key) const {
  if (points_.empty()) return kNoBackend;
  const auto at =
      std::lower_bound(points_.begin(), points_.end(), key,
                       [](const Point& point, uint64_t k) { return point.position < k; });
  return at == points_.end() ? points_.front().backend : at->backend;
}

std::vector<double> HashRing::shares() const {
  std::vector<double> shares(backends_.size(), 0.0);
  if (points_.empty()) return shares;
  if (points_.size() == 1) {
    shares[points_[0].backend] = 1.0;
    return shares;
  }
  constexpr double kRing = 18446744073709551616.0;  // 2^64
  for (size_t i = 0; i < points_.size(); ++i) {
    // The arc from the previous point (exclusive) to this one; unsigned subtraction wraps the
    // first point's arc around the top of the ring.
    const uint64_t previous = points_[i == 0 ? points_.size() - 1 : i - 1].position;
    shares[points_[i].backend] += static_cast<double>(points_[i].position - previous) / kRing;
  }
  return shares;
}

std::vector<uint16_t> HashRing::slotTable(uint32_t table_size) const {
  return slotTable(table_size, std::vector<bool>(backends_.size(), true));
}

std::vector<uint16_t> HashRing::slotTable(uint32_t table_size,
                                          const std::vector<bool>& serving) const {
  std::vector<uint16_t> entries(table_size, kNoBackend);
  // The points of serving backends only; a flag per possible entry value keeps the filter
  // free of bounds checks.
  std::vector<uint8_t> keep(size_t{kNoBackend} + 1, 0);
  for (size_t b = 0; b < backends_.size() && b < serving.size(); ++b) keep[b] = serving[b];
  auto first_kept = std::find_if(points_.begin(), points_.end(),
                                 [&](const Point& point) { return keep[point.backend]; });
  if (first_kept == points_.end()) return entries;
  const uint16_t wrap_owner = first_kept->backend;
  auto next = first_kept;
  for (uint32_t slot = 0; slot < table_size; ++slot) {
    const auto position = static_cast<uint64_t>((Uint128{slot} << 64) / table_size);
    while (next != points_.end() && (next->position < position || !keep[next->backend])) ++next;
    entries[slot] = next != points_.end() ? next->backend : wrap_owner;
  }
  return entries;
}

absl::StatusOr<Rendezvous> Rendezvous::build(std::vector<Backend> backends) {
  if (absl::Status status = validateBackends(backends, kMaxTableSize); !status.ok()) return status;
  Rendezvous rendezvous;
  rendezvous.backends_ = sortedByName(std::move(backends));
  int64_t weight = 0;
  for (const Backend& backend : rendezvous.backends_) {
    rendezvous.seeds_.push_back(nameHash64(backend.name, kRendezvousHashSeed));
    if (backend.weight == 0) continue;
    if (weight != 0 && backend.weight != weight) rendezvous.equal_weights_ = false;
    weight = backend.weight;
  }
  return rendezvous;
}

uint16_t Rendezvous::lookup(uint64_t key) const { return winner(key, nullptr); }

uint16_t Rendezvous::winner(uint64_t key, const uint8_t* serving) const {
  const uint64_t spread = key * 0x9E3779B97F4A7C15ull;
  uint16_t winner = kNoBackend;
  uint64_t best_draw = 0;
  double best_score = 0;
  for (size_t b = 0; b < backends_.size(); ++b) {
    if (backends_[b].weight == 0 || (serving != nullptr && !serving[b])) continue;
    const uint64_t draw = mix64(seeds_[b] ^ spread);
    if (equal_weights_) {
      // Ties (equal 64-bit draws) go to the earlier name.
      if (winner == kNoBackend || draw > best_draw) {
        winner = static_cast<uint16_t>(b);
        best_draw = draw;
      }
      continue;
    }
    // u in (0, 1) from the top 53 bits; weight / -ln(u) grows with u, and with the weight.
    const double u = (static_cast<double>(draw >> 11) + 0.5) * 0x1.0p-53;
    const double score = static_cast<double>(backends_[b].weight) / -std::log(u);
    if (winner == kNoBackend || score > best_score) {
      winner = static_cast<uint16_t>(b);
      best_score = score;
    }
  }
  return winner;
}

std::vector<uint16_t> Rendezvous::slotTable(uint32_t table_size) const {
  std::vector<uint16_t> entries(table_size);
  for (uint32_t slot = 0; slot < table_size; ++slot) entries[slot] = winner(slot, nullptr);
  return entries;
}

std::vector<uint16_t> Rendezvous::slotTable(absl::Span<const uint16_t> full,
                                            const std::vector<bool>& serving) const {
  std::vector<uint8_t> keep(backends_.size(), 0);
  for (size_t b = 0; b < backends_.size() && b < serving.size(); ++b) keep[b] = serving[b];
  std::vector<uint16_t> entries(full.begin(), full.end());
  for (uint32_t slot = 0; slot < entries.size(); ++slot) {
    const uint16_t owner = entries[slot];
    if (owner != kNoBackend && !keep[owner]) entries[slot] = winner(slot, keep.data());
  }
  return entries;
}

TableOptions optionsOf(const Table& table) {
  TableOptions options;
  options.algorithm = table.algorithm();
  options.table_size = table.size();
  if (table.algorithm() == Algorithm::kRing) options.ring_replicas = table.ringReplicas();
  return options;
}

absl::Status validateTable(absl::Span<const Backend> backends, const TableOptions& options) {
  if (absl::Status status = validateBackends(backends, options.table_size); !status.ok()) {
    return status;
  }
  if (options.algorithm != Algorithm::kRing) return absl::OkStatus();
  return ringLimits(backends, options.ring_replicas);
}

absl::StatusOr<Table> buildTable(std::vector<Backend> backends, const TableOptions& options) {
  if (options.algorithm == Algorithm::kMaglev)
    return build(std::move(backends), options.table_size);
  if (absl::Status status = validateTable(backends, options); !status.ok()) return status;

  auto layout = std::make_shared<Table::Layout>();
  layout->algorithm = options.algorithm;
  std::vector<uint16_t> entries;
  if (options.algorithm == Algorithm::kRing) {
    BERTH_ASSIGN_OR_RETURN(HashRing ring,
                           HashRing::build(std::move(backends), options.ring_replicas));
    entries = ring.slotTable(options.table_size);
    layout->ring_replicas = options.ring_replicas;
    layout->backends = ring.backends();
    layout->ring = std::make_shared<const HashRing>(std::move(ring));
  } else {
    BERTH_ASSIGN_OR_RETURN(Rendezvous rendezvous, Rendezvous::build(std::move(backends)));
    entries = rendezvous.slotTable(options.table_size);
    layout->backends = rendezvous.backends();
    layout->rendezvous = std::make_shared<const Rendezvous>(std::move(rendezvous));
  }
  layout->full_slot_counts.assign(layout->backends.size(), 0);
  for (uint16_t entry : entries) {
    if (entry != kNoBackend) ++layout->full_slot_counts[entry];
  }
  auto shared_entries = std::make_shared<const std::vector<uint16_t>>(std::move(entries));
  layout->full_entries = shared_entries;
  std::vector<bool> healthy(layout->backends.size(), true);
  std::vector<bool> drained(layout->backends.size(), false);
  return Table(std::move(layout), std::move(shared_entries), std::move(healthy), std::move(drained),
               options.table_size);
}

}  // namespace berth
