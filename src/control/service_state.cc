#include "berth/control/service_state.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/maglev/name_hash.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

absl::Status inService(const ServiceConfig& service, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("service '", service.name, "': ", status.message()));
}

// The service's base table: `generation` when it lists exactly the service's backends, else
// (none given) the config's own.
absl::StatusOr<Table> baseTableFor(const ServiceConfig& service, std::optional<Table> generation) {
  if (!generation) return buildTable(service.hashingBackends(), service.tableOptions());
  bool same = generation->backends().size() == service.backends.size();
  for (size_t b = 0; same && b < service.backends.size(); ++b) {
    same = generation->indexOf(service.backends[b].name).ok();
  }
  if (same) return *std::move(generation);
  return absl::InvalidArgumentError(
      "the table generation was made for other backends than the service's");
}

SlotChange availabilityChange(const Table& before, const Table& after, TableChangeCause cause) {
  return SlotChange{cause, availabilityMovement(before, after)};
}

}  // namespace

uint64_t serviceFingerprint(const ServiceConfig& service, const Table& table) {
  std::string layout = absl::StrCat("berth-service-v", kFingerprintVersion);
  layout.push_back('\0');
  absl::StrAppend(&layout, service.vip.toString(), "|", service.port, "|",
                  toString(service.protocol), "|", toString(service.hash_fields), "|",
                  kDefaultFlowHashSeed, "|", absl::StrFormat("%.17g", service.bounded_load), "|",
                  service.drain_keeps_established ? "keep" : "repick");
  layout.push_back('\0');
  // In the table's (name) order, so the config's order does not matter.
  absl::flat_hash_map<absl::string_view, const BackendConfig*> by_name;
  for (const BackendConfig& backend : service.backends) by_name[backend.name] = &backend;
  for (const Backend& backend : table.backends()) {
    const auto found = by_name.find(backend.name);
    absl::StrAppend(&layout, backend.name, "=",
                    found == by_name.end() ? "" : found->second->address.toString());
    layout.push_back('\0');
  }
  absl::StrAppend(&layout, absl::StrFormat("%016x", fingerprintOf(table)));
  return nameHash64(layout, kFingerprintSeed);
}

std::string fingerprintText(uint64_t fingerprint) {
  return absl::StrFormat("v%d-%016x", kFingerprintVersion, fingerprint);
}

absl::string_view toString(TableChangeCause cause) {
  static constexpr absl::string_view kNames[] = {BERTH_TABLE_CHANGE_CAUSES(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, cause);
}

std::string describe(const SlotChange& change) {
  const TableMovement& m = change.movement;
  const double ratio = m.movedOverMinimum();
  const std::string times = ratio == 0          ? "nothing had to"
                            : std::isinf(ratio) ? "none had to"
                                                : absl::StrFormat("%.2fx", ratio);
  if (m.sameSize()) {
    return absl::StrFormat("moved %u of %u slots (%.2f%%), least %.0f (%s): %s", m.moved_slots,
                           m.size_after, 100.0 * m.moved_share, m.minimumSlots(), times,
                           toString(change.cause));
  }
  return absl::StrFormat("M %u -> %u: moved %.2f%% of the hash space, least %.2f%% (%s): %s",
                         m.size_before, m.size_after, 100.0 * m.moved_share,
                         100.0 * m.minimum_share, times, toString(change.cause));
}

void TableChangeHistory::record(const SlotChange& change, absl::Time at) {
  slots_moved[static_cast<size_t>(change.cause)] +=
      static_cast<uint64_t>(std::llround(change.movement.movedSlotsEquivalent()));
  last = change;
  last_at = at;
}

void appendMovementFields(JsonWriter& json, const TableMovement& movement) {
  json.key("table_size_before")
      .value(movement.size_before)
      .key("table_size")
      .value(movement.size_after)
      .key("moved_slots")
      .value(movement.moved_slots)
      .key("moved_share")
      .value(movement.moved_share)
      .key("minimum_slots")
      .value(movement.minimumSlots())
      .key("minimum_share")
      .value(movement.minimum_share)
      .key("moved_over_minimum")
      .value(movement.movedOverMinimum());
}

std::optional<SlotChange> reloadChange(const ServiceState& before, const ServiceState& after) {
  const Table& old_table = before.liveTable();
  const Table& new_table = after.liveTable();
  TableMovement movement = configMovement(old_table, new_table);
  if (movement.sameSize() && movement.moved_slots == 0) return std::nullopt;
  // The one kind of change the reload made to the backends, if it made only one.
  const ServiceConfig& was = before.configured();
  const ServiceConfig& is = after.configured();
  absl::flat_hash_map<absl::string_view, int64_t> old_weights;
  for (const BackendConfig& backend : was.backends) old_weights[backend.name] = backend.weight;
  bool added = false;
  bool weight = false;
  bool only_to_or_from_zero = true;  // weight 0 drains: such a change is a drain
  size_t kept = 0;
  for (const BackendConfig& backend : is.backends) {
    const auto found = old_weights.find(backend.name);
    if (found == old_weights.end()) {
      added = true;
      continue;
    }
    ++kept;
    if (found->second == backend.weight) continue;
    weight = true;
    only_to_or_from_zero &= found->second == 0 || backend.weight == 0;
  }
  const bool removed = kept < was.backends.size();
  const bool same_table_settings = was.algorithm == is.algorithm &&
                                   was.table_size == is.table_size &&
                                   was.ring_replicas == is.ring_replicas;
  TableChangeCause cause = TableChangeCause::kReload;
  if (same_table_settings && added + removed + weight == 1) {
    cause = added                  ? TableChangeCause::kAdded
            : removed              ? TableChangeCause::kRemoved
            : only_to_or_from_zero ? TableChangeCause::kDrain
                                   : TableChangeCause::kWeight;
  }
  return SlotChange{cause, movement};
}

ServiceState::ServiceState(ServiceConfig configured, ServiceConfig config,
                           absl::flat_hash_set<std::string> drained, std::vector<bool> healthy,
                           Table base, Table live)
    : configured_(std::move(configured)),
      config_(std::move(config)),
      drained_(std::move(drained)),
      healthy_(std::move(healthy)),
      base_(std::move(base)),
      live_(std::move(live)) {
  keepWithLiveTable();
}

void ServiceState::setLive(Table live) {
  live_ = std::move(live);
  keepWithLiveTable();
}

void ServiceState::keepWithLiveTable() {
  live_fingerprint_ = serviceFingerprint(configured_, live_);
  const std::vector<uint32_t> slots = live_.slotCounts();
  live_slots_.assign(configured_.backends.size(), 0);
  for (size_t b = 0; b < configured_.backends.size(); ++b) {
    const absl::StatusOr<uint16_t> index = live_.indexOf(configured_.backends[b].name);
    if (index.ok()) live_slots_[b] = slots[*index];
  }
}

absl::StatusOr<ServiceState> ServiceState::build(const ServiceConfig& configured,
                                                 absl::flat_hash_set<std::string> drained,
                                                 std::vector<bool> healthy,
                                                 std::optional<Table> generation) {
  ServiceConfig config = configured;
  for (BackendConfig& backend : config.backends) {
    if (drained.contains(backend.name)) backend.weight = 0;
  }
  const bool from_generation = generation.has_value();
  absl::StatusOr<Table> base = baseTableFor(configured, std::move(generation));
  if (!base.ok()) return inService(config, base.status());
  absl::StatusOr<Table> live = servingTable(configured, *base, healthy, drained);
  if (!live.ok()) return inService(config, live.status());
  ServiceState state(configured, std::move(config), std::move(drained), std::move(healthy),
                     *std::move(base), *std::move(live));
  state.from_generation_ = from_generation;
  return state;
}

absl::StatusOr<ServiceState> ServiceState::create(ServiceConfig config, std::vector<bool> healthy,
                                                  const absl::flat_hash_set<std::string>& drained,
                                                  std::optional<Table> generation) {
  absl::flat_hash_set<std::string> kept;
  for (const BackendConfig& backend : config.backends) {
    if (drained.contains(backend.name)) kept.insert(backend.name);
  }
  return build(config, std::move(kept), std::move(healthy), std::move(generation));
}

absl::StatusOr<SlotChange> ServiceState::setGeneration(std::optional<Table> generation,
                                                       std::vector<bool> healthy) {
  const bool from_generation = generation.has_value();
  absl::StatusOr<Table> base = baseTableFor(configured_, std::move(generation));
  if (!base.ok()) return inService(config_, base.status());
  absl::StatusOr<Table> live = servingTable(configured_, *base, healthy, drained_);
  if (!live.ok()) return inService(config_, live.status());
  // A generation may add, reweight or fail backends: the least is what the serving backends'
  // shares ask for.
  SlotChange change{TableChangeCause::kGeneration, configMovement(live_, *live)};
  base_ = *std::move(base);
  healthy_ = std::move(healthy);
  setLive(*std::move(live));
  from_generation_ = from_generation;
  return change;
}

size_t ServiceState::healthyCount() const {
  size_t count = 0;
  for (bool up : healthy_) count += up;
  return count;
}

std::vector<std::string> ServiceState::drainedBackends() const {
  std::vector<std::string> names;
  for (const BackendConfig& backend : config_.backends) {
    if (drained_.contains(backend.name)) names.push_back(backend.name);
  }
  return names;
}

int64_t ServiceState::configuredWeight(absl::string_view backend) const {
  for (const BackendConfig& candidate : configured_.backends) {
    if (candidate.name == backend) return candidate.weight;
  }
  return 0;
}

bool ServiceState::hasBackend(absl::string_view backend) const {
  return std::any_of(configured_.backends.begin(), configured_.backends.end(),
                     [&](const BackendConfig& candidate) { return candidate.name == backend; });
}

bool ServiceState::serving() const {
  for (size_t b = 0; b < config_.backends.size(); ++b) {
    if (healthy_[b] && config_.backends[b].weight > 0) return true;
  }
  return false;
}

absl::StatusOr<SlotChange> ServiceState::setHealth(std::vector<bool> healthy) {
  absl::StatusOr<Table> live = servingTable(configured_, base_, healthy, drained_);
  if (!live.ok()) return inService(config_, live.status());
  SlotChange change = availabilityChange(live_, *live, TableChangeCause::kHealth);
  healthy_ = std::move(healthy);
  setLive(*std::move(live));
  return change;
}

absl::StatusOr<std::optional<SlotChange>> ServiceState::setDrained(absl::string_view backend,
                                                                   bool drained) {
  if (!hasBackend(backend)) {
    return absl::NotFoundError(
        absl::StrCat("service '", name(), "' has no backend named '", backend, "'"));
  }
  if (drained_.contains(backend) == drained) return std::nullopt;
  absl::flat_hash_set<std::string> next_drained = drained_;
  if (drained) {
    next_drained.insert(std::string(backend));
  } else {
    next_drained.erase(backend);
  }
  // The base table stays: a drain gives up the backend's slots as a failure does, and undrain
  // restores them exactly.
  absl::StatusOr<Table> live = servingTable(configured_, base_, healthy_, next_drained);
  if (!live.ok()) return inService(config_, live.status());
  SlotChange change = availabilityChange(live_, *live, TableChangeCause::kDrain);
  for (BackendConfig& entry : config_.backends) {
    if (entry.name == backend) entry.weight = drained ? 0 : configuredWeight(backend);
  }
  drained_ = std::move(next_drained);
  setLive(*std::move(live));
  return std::optional<SlotChange>(std::move(change));
}

DrainsByService drainsOf(absl::Span<const ServiceState> states) {
  DrainsByService drains;
  for (const ServiceState& state : states) {
    for (std::string& name : state.drainedBackends()) drains[state.name()].insert(std::move(name));
  }
  return drains;
}

absl::StatusOr<std::vector<ServiceState>> createServiceStates(
    absl::Span<const ServiceConfig> services, const DrainsByService& drains,
    const GenerationBase& generation) {
  std::vector<ServiceState> states;
  states.reserve(services.size());
  for (size_t s = 0; s < services.size(); ++s) {
    const auto drained = drains.find(services[s].name);
    std::optional<Table> base;
    if (generation) {
      BERTH_ASSIGN_OR_RETURN(base, generation(services[s]));
    }
    BERTH_ASSIGN_OR_RETURN(
        ServiceState state,
        ServiceState::create(
            services[s], std::vector<bool>(services[s].backends.size(), true),
            drained == drains.end() ? absl::flat_hash_set<std::string>() : drained->second,
            std::move(base)));
    states.push_back(std::move(state));
  }
  return states;
}

}  // namespace berth
