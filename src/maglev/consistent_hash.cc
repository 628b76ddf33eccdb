#include "berth/maglev/consistent_hash.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/maglev/name_hash.h"

namespace berth {
namespace {

__extension__ using Uint128 = unsigned __int128;

std::vector<Backend> sortedByName(std::vector<Backend> backends) {
  std::sort(backends.begin(), backends.end(),
            [](const Backend& a, const Backend& b) { return a.name < b.name; });
  return backends;
}

// SplitMix64's finalizer (Steele, Lea and Flood 2014): a bijection whose output bits each depend
// on every input bit, so consecutive keys give unrelated draws.
uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<HashRing> HashRing::build(std::vector<Backend> backends, uint32_t replicas) {
  if (replicas == 0 || replicas > 10'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas must be from 1 to 10000, got ", replicas));
  }
  if (absl::Status status = validateBackends(backends, kMaxTableSize); !status.ok()) return status;
  uint64_t total = 0;
  for (const Backend& backend : backends) total += replicas * static_cast<uint64_t>(backend.weight);
  if (total > kMaxRingPoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas x weights make ", total, " ring points, more than the ",
                     kMaxRingPoints, " a ring may have; use smaller weights or fewer replicas"));
  }
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
  std::vector<uint16_t> entries(table_size, kNoBackend);
  if (points_.empty()) return entries;
  size_t next = 0;
  for (uint32_t slot = 0; slot < table_size; ++slot) {
    const auto position = static_cast<uint64_t>((Uint128{slot} << 64) / table_size);
    while (next < points_.size() && points_[next].position < position) ++next;
    entries[slot] = next < points_.size() ? points_[next].backend : points_.front().backend;
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

uint16_t Rendezvous::lookup(uint64_t key) const {
  const uint64_t spread = key * 0x9E3779B97F4A7C15ull;
  uint16_t winner = kNoBackend;
  uint64_t best_draw = 0;
  double best_score = 0;
  for (size_t b = 0; b < backends_.size(); ++b) {
    if (backends_[b].weight == 0) continue;
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
  for (uint32_t slot = 0; slot < table_size; ++slot) entries[slot] = lookup(slot);
  return entries;
}

}  // namespace berth
