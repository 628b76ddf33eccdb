#include "berth/control/service_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

absl::Status inService(const ServiceConfig& service, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("service '", service.name, "': ", status.message()));
}

}  // namespace

absl::StatusOr<Table> tableWithHealth(const ServiceConfig& service, const Table& base,
                                      const std::vector<bool>& healthy_in_config_order) {
  if (healthy_in_config_order.size() != service.backends.size()) {
    return absl::InvalidArgumentError(absl::StrCat(healthy_in_config_order.size(),
                                                   " health flags for ", service.backends.size(),
                                                   " backends"));
  }
  std::vector<bool> healthy(base.backends().size(), true);
  for (size_t b = 0; b < service.backends.size(); ++b) {
    absl::StatusOr<uint16_t> index = base.indexOf(service.backends[b].name);
    if (index.ok()) healthy[*index] = healthy_in_config_order[b];
  }
  return withHealth(base, healthy);
}

ServiceState::ServiceState(ServiceConfig configured, ServiceConfig config,
                           absl::flat_hash_set<std::string> drained, std::vector<bool> healthy,
                           Table base, Table live)
    : configured_(std::move(configured)),
      config_(std::move(config)),
      drained_(std::move(drained)),
      healthy_(std::move(healthy)),
      base_(std::move(base)),
      live_(std::move(live)),
      live_fingerprint_(fingerprintOf(live_)) {}

absl::StatusOr<ServiceState> ServiceState::build(const ServiceConfig& configured,
                                                 absl::flat_hash_set<std::string> drained,
                                                 std::vector<bool> healthy) {
  ServiceConfig config = configured;
  for (BackendConfig& backend : config.backends) {
    if (drained.contains(backend.name)) backend.weight = 0;
  }
  absl::StatusOr<Table> base = buildTable(config.hashingBackends(), config.tableOptions());
  if (!base.ok()) return inService(config, base.status());
  absl::StatusOr<Table> live = tableWithHealth(config, *base, healthy);
  if (!live.ok()) return inService(config, live.status());
  return ServiceState(configured, std::move(config), std::move(drained), std::move(healthy),
                      *std::move(base), *std::move(live));
}

absl::StatusOr<ServiceState> ServiceState::create(ServiceConfig config, std::vector<bool> healthy,
                                                  const absl::flat_hash_set<std::string>& drained) {
  absl::flat_hash_set<std::string> kept;
  for (const BackendConfig& backend : config.backends) {
    if (drained.contains(backend.name)) kept.insert(backend.name);
  }
  return build(config, std::move(kept), std::move(healthy));
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
  absl::StatusOr<Table> live = tableWithHealth(config_, base_, healthy);
  if (!live.ok()) return inService(config_, live.status());
  SlotChange change{live_.size(), movedSlots(live_, *live)};
  healthy_ = std::move(healthy);
  live_ = *std::move(live);
  live_fingerprint_ = fingerprintOf(live_);
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
  // A weight change is a config change: the base table is built again in full.
  BERTH_ASSIGN_OR_RETURN(ServiceState next, build(configured_, std::move(next_drained), healthy_));
  SlotChange change{live_.size(), movedSlots(live_, next.live_)};
  *this = std::move(next);
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
    absl::Span<const ServiceConfig> services,
    const std::function<std::vector<bool>(size_t)>& healthy, const DrainsByService& drains) {
  std::vector<ServiceState> states;
  states.reserve(services.size());
  for (size_t s = 0; s < services.size(); ++s) {
    const auto drained = drains.find(services[s].name);
    BERTH_ASSIGN_OR_RETURN(
        ServiceState state,
        ServiceState::create(
            services[s], healthy(s),
            drained == drains.end() ? absl::flat_hash_set<std::string>() : drained->second));
    states.push_back(std::move(state));
  }
  return states;
}

}  // namespace berth
