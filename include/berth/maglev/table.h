#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth {

// The Maglev lookup table (Eisenbud et al., NSDI 2016) and its min-disruption failover.
//
// A table maps each of M slots to a backend index. A flow's backend is entries[hash % M]: one
// array read. Entries are uint16_t so that the default M = 65537 takes 128 KiB and stays in L2.

inline constexpr uint32_t kDefaultTableSize = 65537;
// Large enough for 1,000 backends at the advised 100 slots each with room to spare, small enough
// that a table (32 MiB) and its build state stay far below a worker's memory.
inline constexpr uint32_t kMaxTableSize = 16777213;  // the largest prime below 2^24
inline constexpr uint16_t kNoBackend = 0xFFFF;
inline constexpr size_t kMaxBackends = 65535;  // indices 0..65534; 65535 is kNoBackend
inline constexpr int64_t kMaxWeight = 1'000'000;

// How a service's table is filled. All of them fill the same M-slot table, so the
// datapath's lookup is one array read whatever the choice; they differ in balance, in how many
// slots a change of backends moves, and in build cost (consistent_hash.h).
enum class Algorithm : uint8_t {
  kMaglev,      // the default: Maglev's permutations and turns, min-disruption failover
  kRing,        // ring hashing with virtual nodes (HashRing)
  kRendezvous,  // weighted highest-random-weight hashing (Rendezvous)
};
absl::string_view toString(Algorithm algorithm);
// "maglev", "ring" or "rendezvous"; InvalidArgument naming the choices otherwise.
absl::StatusOr<Algorithm> parseAlgorithm(absl::string_view text);

// A backend as the hashing sees it: only its name and weight matter. Weight 0 means drained:
// the backend owns no slots but stays in the table's backend list, so its flows can finish.
struct Backend {
  std::string name;
  int64_t weight = 1;

  friend bool operator==(const Backend&, const Backend&) = default;
};

// Where a backend's preference list starts and how far it steps: slot j is
// (offset + j * skip) % M. Because M is prime and 0 < skip < M, the list visits every slot.
struct Permutation {
  uint32_t offset = 0;
  uint32_t skip = 1;
};

// The permutation berth derives from a backend's name: offset = h1 % M and
// skip = h2 % (M - 1) + 1, where h1 and h2 are nameHash64 under kOffsetHashSeed and kSkipHashSeed.
Permutation permutationFor(absl::string_view name, uint32_t table_size);

// True when n is prime. Deterministic trial division; n <= kMaxTableSize costs microseconds.
bool isPrime(uint64_t n);

// Checks the inputs exactly as build() does, without building (see build() for the rules), so the
// config loader can reject a service before anything is applied.
absl::Status validateBackends(absl::Span<const Backend> backends, uint32_t table_size);

class Table;
class HashRing;
class Rendezvous;
struct TableOptions;

// Builds the all-healthy table. Backends are sorted by name first, so the input order never
// matters, and entry values index Table::backends() in that sorted order.
//
// Each backend with weight > 0 owns a quota of slots proportional to its weight (largest
// remainder, ties to the earlier name), so equal weights give floor(M/N) or ceil(M/N) slots.
// Backends take turns as in the paper; a backend's turns come in proportion to its weight, and a
// backend stops taking turns once it holds its quota.
//
// Errors (InvalidArgument, naming the problem): M not prime, M > kMaxTableSize, M <= N, an empty
// or duplicate name, more than kMaxBackends backends, a weight below 0 or above kMaxWeight, or a
// positive weight too small to earn one slot at this M.
// Zero backends, or only drained ones, is a valid table whose every slot is kNoBackend.
//
// Cost: O(M log M) probes of an M-bit bitmap; about 1 ms for N=1000, M=65537.
absl::StatusOr<Table> build(std::vector<Backend> backends, uint32_t table_size = kDefaultTableSize);

// As build(), with each backend's permutation given instead of hashed from its name (the
// permutations follow the same order as backends). For worked examples and tests.
absl::StatusOr<Table> buildWithPermutations(std::vector<Backend> backends,
                                            std::vector<Permutation> permutations,
                                            uint32_t table_size);

// The table to use while some backends are unhealthy or drained.
//
// For ring and rendezvous tables, the table their algorithm gives for the healthy backends alone:
// each slot of an unhealthy backend goes to the next healthy point on the ring, or to the healthy
// backend with the next-highest score, and every other slot stays. Only the vacated slots are
// recomputed (consistent_hash.h). The rest of this comment is about Maglev tables.
//
// A drained backend gives up its slots exactly as an unhealthy one does; it differs only in
// what the datapath does with its established flows (dataplane/snapshot.h). Below, "down" means
// unhealthy or drained, and "serving" means neither.
//
// Slots owned by a serving backend in the all-healthy table never move. Each slot vacated by a
// backend that is down goes to the serving backend that ranks it earliest, where a backend's
// rank of a slot is its position in that backend's preference list divided by its weight (ties
// to the earlier name). A backend already holding its cap takes no more, and the slot goes to
// the next-ranked. Vacated slots are handed out in the order of those ranks, so the result is a
// pure function of (configured backends, healthy set, drained set): every instance agrees, and
// recovery or undrain restores the all-healthy table exactly.
//
// The cap is ideal * (1 + max(slack, room / base)), rounded down, where ideal is the backend's
// weighted share of M among the serving backends, base its share among all configured ones,
// slack kFailoverLoadSlackPercent and room kFailoverSlackSlotsTenths / 10 slots.
//
// Trade-off: without a cap, each vacated slot would move only when its own owner fails, but the
// spread over backends is that of balls in bins (max/ideal near 1.04 after 10% of 1,000 backends
// fail at M = 655373). A cap bounds max/ideal. Its price is that a backend at its cap pushes its
// later-ranked vacated slots elsewhere, and when failures raise the cap, it takes some of them
// back: slots beyond the newly failed backend's own move. A cap of 3% alone is fine where a
// backend holds hundreds of slots, but at tens of slots (1,000 backends at M = 65537) nearly
// every backend meets it, each rise of one slot re-hands slots across the whole table, and a
// single step moved 5.5x the failed backend's slots. A room of 9.5 slots keeps the cap out of
// reach of all but a few backends at any size. Measured over 10% of the backends failing one by
// one in random orders, each step moved at most 1.03x the slots the newly failed backend held:
// max/ideal stays at 1.03 where each backend has at least 317 slots (M >= 100 * N gives 100 or
// more, and N=100 at 65537 or N=1,000 at 655373 give 655), and at 1 + 9.5 / base below that:
// 1.145 for N=1,000 at M=65537 (tests/unit/maglev/failover_test.cc). With only a few backends,
// ranks alone do not split vacated slots by weight, and the cap is what keeps each backend near
// its share.
//
// `healthy` and `drained` have one flag per backend, in Table::backends() order; an empty
// `drained` drains nothing. Cost: the cheaper of about M ln(V) probes and V * H rank
// computations, for V vacated slots and H serving backends; about 0.15 ms for one failure among
// N=1000 at M=65537.
inline constexpr uint32_t kFailoverLoadSlackPercent = 3;
inline constexpr uint32_t kFailoverSlackSlotsTenths = 95;

// How withHealth() computes its (identical) result; kAuto picks the cheaper. For tests and
// benchmarks that pin one.
enum class FailoverStrategy { kAuto, kByRounds, kBySlots };

absl::StatusOr<Table> withHealth(const Table& table, const std::vector<bool>& healthy,
                                 const std::vector<bool>& drained,
                                 FailoverStrategy strategy = FailoverStrategy::kAuto);
// As above with nothing drained.
absl::StatusOr<Table> withHealth(const Table& table, const std::vector<bool>& healthy,
                                 FailoverStrategy strategy = FailoverStrategy::kAuto);

// The next generation of a Maglev table (docs/scale-out.md): the table for `backends` (the
// config's, any order) with the backends named in `failed` or `drained` serving nothing, made
// from `previous` so that the least moves. Each serving backend is owed its quota (as in build(),
// among the serving backends) and keeps every slot it held up to it; one over its quota keeps the
// slots it ranks earliest. The slots let go (a removed, failed or drained backend's, and the
// excess of backends whose share fell) go to the backends under their quota by Maglev's turns.
// So an added backend takes only its quota, a weight change moves only the quota differences,
// and a failed or drained backend's slots go to the survivors; every backend ends holding exactly
// its quota (max/ideal within one slot). Unlike build() and withHealth(), the result depends on
// the history of generations, not only on the sets: every instance that applies the same
// generations agrees. Errors as build(), and InvalidArgument for a table of another algorithm.
absl::StatusOr<Table> nextGeneration(const Table& previous, std::vector<Backend> backends,
                                     const std::vector<std::string>& failed,
                                     const std::vector<std::string>& drained);

// A generation as it was stored (fleet/generation.h): the Maglev table of `backends` (any order)
// whose slots are `entries`, each naming a backend by its index in `backends` sorted by name, or
// kNoBackend. The backends named in `failed` or `drained` are marked so and must own no slot.
// What health and drains then do to it (withHealth()) starts from these entries. InvalidArgument
// when the backends are invalid at M = entries.size() (as build()), an entry is out of range, or
// a failed or drained backend owns a slot.
absl::StatusOr<Table> restoreGeneration(std::vector<Backend> backends,
                                        std::vector<uint16_t> entries,
                                        const std::vector<std::string>& failed,
                                        const std::vector<std::string>& drained);

// An immutable Maglev table. Copies are cheap: they share the entries, backend list and
// permutations.
class Table {
  __extension__ using Uint128 = unsigned __int128;

 public:
  uint32_t size() const { return size_; }
  absl::Span<const uint16_t> entries() const { return *entries_; }

  // The backend index for a 32-bit flow hash, or kNoBackend. Equals entries()[hash % size()],
  // computed with Lemire's multiply-based modulo because a 64-bit division costs ~25 cycles.
  uint16_t lookup(uint32_t hash) const { return *entryFor(hash); }
  // Where lookup(hash) reads: for callers that prefetch it a few packets ahead.
  const uint16_t* entryFor(uint32_t hash) const {
    const uint64_t low_bits = modulo_multiplier_ * hash;
    const auto slot = static_cast<uint32_t>((static_cast<Uint128>(low_bits) * size_) >> 64);
    return entries_data_ + slot;
  }

  Algorithm algorithm() const { return layout_->algorithm; }
  // Ring points per unit of weight; 0 unless algorithm() is kRing.
  uint32_t ringReplicas() const { return layout_->ring_replicas; }

  // The configured backends, sorted by name. Entry values index this list.
  absl::Span<const Backend> backends() const { return layout_->backends; }
  // Maglev's preference lists, in backends() order; empty for other algorithms.
  absl::Span<const Permutation> permutations() const { return layout_->permutations; }
  // The all-healthy table this one was derived from (itself when all are healthy).
  absl::Span<const uint16_t> fullEntries() const { return *layout_->full_entries; }
  const std::vector<bool>& healthy() const { return healthy_; }
  // Drained at run time or by the config (see withHealth()), in backends() order.
  const std::vector<bool>& drained() const { return drained_; }
  // Whether backend b takes new flows: healthy, not drained, with a weight.
  bool serves(size_t b) const {
    return healthy_[b] && !drained_[b] && layout_->backends[b].weight > 0;
  }

  // The index of the backend with this name, or NotFound.
  absl::StatusOr<uint16_t> indexOf(absl::string_view name) const;
  // Slots owned by each backend, in backends() order.
  std::vector<uint32_t> slotCounts() const;

 private:
  friend absl::StatusOr<Table> buildWithPermutations(std::vector<Backend>, std::vector<Permutation>,
                                                     uint32_t);
  friend absl::StatusOr<Table> withHealth(const Table&, const std::vector<bool>&,
                                          const std::vector<bool>&, FailoverStrategy);
  friend absl::StatusOr<Table> buildTable(std::vector<Backend>, const TableOptions&);
  friend absl::StatusOr<Table> nextGeneration(const Table&, std::vector<Backend>,
                                              const std::vector<std::string>&,
                                              const std::vector<std::string>&);
  friend absl::StatusOr<Table> restoreGeneration(std::vector<Backend>, std::vector<uint16_t>,
                                                 const std::vector<std::string>&,
                                                 const std::vector<std::string>&);

  struct Layout {
    Algorithm algorithm = Algorithm::kMaglev;
    uint32_t ring_replicas = 0;
    // What ring and rendezvous failover recompute vacated slots from.
    std::shared_ptr<const HashRing> ring;
    std::shared_ptr<const Rendezvous> rendezvous;
    std::vector<Backend> backends;
    std::vector<Permutation> permutations;
    // Shared with the all-healthy Table itself: a build allocates the entries once.
    std::shared_ptr<const std::vector<uint16_t>> full_entries;
    std::vector<uint32_t> full_slot_counts;  // per backend, in the all-healthy table
  };

  Table(std::shared_ptr<const Layout> layout, std::shared_ptr<const std::vector<uint16_t>> entries,
        std::vector<bool> healthy, std::vector<bool> drained, uint32_t size);

  // Where nextGeneration() and restoreGeneration() start: the backends validated at
  // `table_size` and sorted by name, with their permutations, and in the same order which are
  // failed and which drained.
  struct GenerationStart {
    std::shared_ptr<Layout> layout;
    std::vector<bool> healthy;
    std::vector<bool> drained;
  };
  static absl::StatusOr<GenerationStart> startGeneration(std::vector<Backend> backends,
                                                         uint32_t table_size,
                                                         const std::vector<std::string>& failed,
                                                         const std::vector<std::string>& drained);

  // What lookup() reads, first and together: one cache line of the table's first bytes.
  const uint16_t* entries_data_ = nullptr;  // entries_->data(), one indirection less per lookup
  uint64_t modulo_multiplier_ = 0;
  uint32_t size_ = 0;
  std::shared_ptr<const Layout> layout_;
  std::shared_ptr<const std::vector<uint16_t>> entries_;
  std::vector<bool> healthy_;
  std::vector<bool> drained_;
};

}  // namespace berth
