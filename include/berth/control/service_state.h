#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/table.h"
#include "berth/util/json_writer.h"
#include "berth/util/named_enum.h"

namespace berth {

// Why a service's table changed. A reload names the one kind of change it made to the service's
// backends (added, removed, weight; a weight set to or from 0 is a drain), or `reload` for
// anything else or a mix.
#define BERTH_TABLE_CHANGE_CAUSES(X) \
  X(kHealth, "health")               \
  X(kDrain, "drain")                 \
  X(kWeight, "weight")               \
  X(kAdded, "added")                 \
  X(kRemoved, "removed")             \
  X(kReload, "reload")               \
  X(kGeneration, "generation")
enum class TableChangeCause : uint8_t { BERTH_TABLE_CHANGE_CAUSES(BERTH_ENUMERATOR) kCount };
absl::string_view toString(TableChangeCause cause);

// What a change to a service's table did: how many slots now name another backend, against the
// least that had to move (maglev/analysis.h TableMovement), and why. The control plane logs it
// with every change, counts it per cause and shows the last one, so an operator sees how much
// each change moved. Which slots moved, movedSlots() of the two tables says.
struct SlotChange {
  TableChangeCause cause = TableChangeCause::kHealth;
  TableMovement movement;
};

// One service as the control plane holds it (docs/architecture.md, per-service state): its
// settings, its base table (every backend healthy), its live table (the base with health
// applied, which the snapshot carries), the backends' health and the backends drained at run
// time. Every change goes through a method that returns the slots it moved and leaves the state
// as it was when it fails. Pure: no DPDK, no clock, no I/O.
//
// The health policy is min-disruption failover from the base table (maglev/table.h
// withHealth()): serving backends keep their slots, and the live table is a pure function of
// (settings, drained set, healthy set), so every instance that agrees on those agrees on it. In a
// fleet with table generations the base table is the generation's instead (setGeneration()), and
// every instance that serves the same generation with the same verdicts agrees.
// A drain is handled as a failure is: the base table stays, only the drained backend's slots
// move, and undrain restores them.
class ServiceState {
 public:
  // The service as `config` gives it, with the backends named in `drained` drained (a reload
  // keeps run-time drains; names `config` lacks are dropped) and `healthy` (config order, one
  // flag per backend) applied. Errors name the service.
  // `generation`: in a fleet, the table generation's base for the service (fleet/generation.h
  // generationBaseFor()), which the base table is then instead of the config's own.
  static absl::StatusOr<ServiceState> create(ServiceConfig config, std::vector<bool> healthy,
                                             const absl::flat_hash_set<std::string>& drained = {},
                                             std::optional<Table> generation = std::nullopt);

  const std::string& name() const { return config_.name; }
  // The settings as the config file gives them, drains not applied.
  const ServiceConfig& configured() const { return configured_; }
  // The settings in force: as configured, with each drained backend's weight 0. The tables keep
  // the configured weights (ServiceConfig::hashingBackends()).
  const ServiceConfig& config() const { return config_; }
  const Table& baseTable() const { return base_; }
  const Table& liveTable() const { return live_; }
  // serviceFingerprint() of the live table, kept with it: `status` reports it on every request,
  // and a 655,373-slot table takes milliseconds to hash.
  uint64_t liveFingerprint() const { return live_fingerprint_; }
  // The slots each backend owns in the live table, config order: kept with it, since the
  // per-backend replies read them for every backend on the management loop.
  const std::vector<uint32_t>& liveSlots() const { return live_slots_; }
  // One flag per backend, in config order.
  const std::vector<bool>& healthy() const { return healthy_; }
  size_t healthyCount() const;
  bool hasBackend(absl::string_view backend) const;
  bool drained(absl::string_view backend) const { return drained_.contains(backend); }
  // The drained backends' names, in config order.
  std::vector<std::string> drainedBackends() const;
  // Whether a new flow has somewhere to go: a healthy backend with a weight, not drained.
  bool serving() const;

  // New health verdicts (config order). Only the live table changes.
  absl::StatusOr<SlotChange> setHealth(std::vector<bool> healthy);
  // A new table generation's base for the service, or nullopt for the config's own table, with
  // the verdicts that go with it (config order); the drains in force apply to it as before.
  absl::StatusOr<SlotChange> setGeneration(std::optional<Table> generation,
                                           std::vector<bool> healthy);
  // Whether the base table is a fleet generation's.
  bool fromGeneration() const { return from_generation_; }
  // Drains or undrains the backend named `backend`. NotFound when the service has no such
  // backend; nullopt when it already was so, and nothing changed.
  absl::StatusOr<std::optional<SlotChange>> setDrained(absl::string_view backend, bool drained);

 private:
  ServiceState(ServiceConfig configured, ServiceConfig config,
               absl::flat_hash_set<std::string> drained, std::vector<bool> healthy, Table base,
               Table live);
  // The state `configured` gives with exactly these drains (names it has) and verdicts.
  static absl::StatusOr<ServiceState> build(const ServiceConfig& configured,
                                            absl::flat_hash_set<std::string> drained,
                                            std::vector<bool> healthy,
                                            std::optional<Table> generation);
  int64_t configuredWeight(absl::string_view backend) const;
  // The live table, and what is kept with it: its fingerprint and each backend's slots.
  void setLive(Table live);
  void keepWithLiveTable();

  ServiceConfig configured_;  // as the config file gives it
  ServiceConfig config_;      // in force: drains applied
  absl::flat_hash_set<std::string> drained_;
  std::vector<bool> healthy_;
  Table base_;
  Table live_;
  uint64_t live_fingerprint_ = 0;
  std::vector<uint32_t> live_slots_;
  bool from_generation_ = false;
};

// The table changes of one service since berthd started, kept by the control plane across
// reloads by the service's name: slots moved per cause (where M changed, the share of the hash
// space times the new M), and the last change.
struct TableChangeHistory {
  std::array<uint64_t, static_cast<size_t>(TableChangeCause::kCount)> slots_moved{};
  std::optional<SlotChange> last;
  absl::Time last_at;

  void record(const SlotChange& change, absl::Time at);
};

// A fingerprint of everything that decides where a service's flows go: the VIP, port and
// protocol, the hash fields and the flow-hash seed, bounded load and the drain policy, each
// backend's name and address, and the table (maglev/analysis.h fingerprintOf()). Two instances
// send every flow of the service to the same backend exactly when their fingerprints agree (but
// for a 2^-64 chance), so comparing them across an ECMP group shows whether a flow may land
// anywhere. The text form carries kFingerprintVersion ("v2-0123456789abcdef"), so that instances
// of different releases show as such rather than as a false divergence.
inline constexpr int kFingerprintVersion = 2;
uint64_t serviceFingerprint(const ServiceConfig& service, const Table& table);
std::string fingerprintText(uint64_t fingerprint);

// One line for the log and the status: "moved 66 of 65537 slots (0.10%), least 66 (1.00x):
// drain", or, where M changed, the shares of the hash space.
std::string describe(const SlotChange& change);

// The figures of `movement` as fields of the JSON object being written: table_size_before,
// table_size, moved_slots, moved_share, minimum_slots, minimum_share, moved_over_minimum. What
// `status` and `berthctl analyze --against` report.
void appendMovementFields(JsonWriter& json, const TableMovement& movement);

// What a reload did to one service's table, from the state before to the state after.
// nullopt when the live table did not change.
std::optional<SlotChange> reloadChange(const ServiceState& before, const ServiceState& after);

// The backends drained at run time, by service name: what a reload carries over.
using DrainsByService = absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>;
DrainsByService drainsOf(absl::Span<const ServiceState> states);

// A service's base table from the fleet's table generation, or nullopt for the config's own.
using GenerationBase = std::function<absl::StatusOr<std::optional<Table>>(const ServiceConfig&)>;

// The states of `services`, in order, every backend healthy (the management loop applies the
// health verdicts, which it owns, by failover from there); each keeps the drains `drains` lists
// under its name (a reload); in a fleet, `generation` gives their base tables. Errors name the
// service.
absl::StatusOr<std::vector<ServiceState>> createServiceStates(
    absl::Span<const ServiceConfig> services, const DrainsByService& drains = {},
    const GenerationBase& generation = nullptr);

}  // namespace berth
