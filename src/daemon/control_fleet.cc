// berthd in a fleet: the management loop's side of the fleet subsystem (control/fleet_binding.h,
// docs/scale-out.md "A fleet through etcd"). Each generation or change of etcd's reachability it
// reports is served on the service tables (control/service_tables.h) and published.

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "berth/daemon/control_plane.h"

namespace berth {

void ControlPlane::setFleetStart(Config local, std::optional<FleetVersionText> cached,
                                 std::shared_ptr<const FleetGeneration> cached_generation) {
  fleet_.setStart(std::move(local), std::move(cached), std::move(cached_generation));
}

absl::Status ControlPlane::startFleet() {
  return fleet_.start(config_, tables_.states(), *health_);
}

void ControlPlane::stopFleet() { fleet_.stop(); }

absl::Status ControlPlane::applyServingVerdicts(std::vector<ServiceState>& services,
                                                const HealthMonitor& monitor) const {
  // Built with every backend healthy: failover from there.
  for (size_t s = 0; s < services.size(); ++s) {
    std::vector<bool> healthy = fleet_.serving().verdicts(services[s], monitor.healthy(s));
    if (std::find(healthy.begin(), healthy.end(), false) == healthy.end()) continue;
    if (absl::StatusOr<SlotChange> change = services[s].setHealth(std::move(healthy));
        !change.ok()) {
      return change.status();
    }
  }
  return absl::OkStatus();
}

void ControlPlane::serveFleetGenerations() {
  const absl::Time start = absl::Now();
  const std::optional<FleetBinding::Change> change = fleet_.takeChange(config_, *health_);
  if (!change) return;
  const std::shared_ptr<const FleetGeneration>& generation = change->generation;
  const FleetServing& serving = fleet_.serving();
  const bool changed =
      generation ? tables_.serveGeneration(
                       generation->manifest.generation,
                       [&, agreed = fleet_.agreedHealth()](const ServiceState& state) {
                         return generationBaseFor(*generation, state.configured(), agreed);
                       },
                       [&](const ServiceConfig& service, size_t s, const Table* base) {
                         return serving.verdicts(service, health_->healthy(s), base);
                       },
                       absl::Now())
                 : tables_.serveVerdicts(
                       [&](const ServiceState& state, size_t s) {
                         return serving.verdicts(state, health_->healthy(s));
                       },
                       absl::Now());
  if (generation) fleet_.generationServed(generation);
  fleet_.reportFailSafe(config_, *health_);
  if (!changed) return;
  publishTableChange(start,
                     generation ? "the table generation arrived" : "etcd's reachability changed");
}

}  // namespace berth
