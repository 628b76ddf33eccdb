// berthd's config reload (SIGHUP, `berthctl reload`): the file is parsed and its tables built on
// the reload builder's thread (control/reload_builder.h), so the management loop keeps turning.
// The loop then checks what needs a restart, applies health and publishes, or logs why not and
// keeps the running config serving, with the field and line of a bad file.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/control/control_plane.h"
#include "berth/control/descriptor_budget.h"

namespace berth {

uint64_t ControlPlane::requestReload() {
  ++reload_requested_;
  // A reload also retries a fleet version this instance refused.
  fleet_.forgetRefusal();
  if (!buildUnderWay()) startReloadBuild();
  return reload_requested_;
}

bool ControlPlane::buildUnderWay() const { return reload_building_ != 0 || fleet_building_; }

ReloadSource ControlPlane::fleetPartOf(ReloadSource source) const {
  if (const std::optional<FleetVersionText>& version = fleet_.version()) {
    source.fleet_text = version->text;
    source.fleet_source = version->source;
  }
  return source;
}

void ControlPlane::startReloadBuild() {
  // A build answers every request made before it began.
  reload_building_ = reload_requested_;
  ReloadSource source;
  source.path = config_path_;
  startBuild(fleetPartOf(std::move(source)));
}

void ControlPlane::startFleetBuild(FleetVersionText version) {
  ReloadSource source;
  source.local = fleet_.local();
  source.fleet_text = version.text;
  source.fleet_source = version.source;
  fleet_building_ = std::move(version);
  startBuild(std::move(source));
}

void ControlPlane::startBuild(ReloadSource source) {
  reload_build_drains_ = drain_changes_;
  reload_build_start_ = absl::Now();
  source.generation = generationBase();
  build_what_ = source.what();
  build_source_ = source;
  builder_->start(std::move(source), drainsOf(tables_.states()));
}

void ControlPlane::serveReloads() {
  if (std::optional<absl::StatusOr<BuiltReload>> built = builder_->take()) {
    finishBuild(*std::move(built));
  }
  if (buildUnderWay()) return;
  const uint64_t answered = reload_outcomes_.empty() ? 0 : reload_outcomes_.back().request;
  if (reload_requested_ > answered) {
    startReloadBuild();
  } else if (std::optional<FleetVersionText> version = fleet_.takeVersion()) {
    startFleetBuild(*std::move(version));
  }
}

void ControlPlane::finishBuild(absl::StatusOr<BuiltReload> built) {
  if (built.ok() && drain_changes_ != reload_build_drains_) {
    logLine(absl::StrCat(build_what_,
                         ": a drain changed while the new config was being built; building again"));
    startBuild(build_source_);
    return;
  }
  // The fleet hears why a version was refused, without the log line's preamble.
  std::string why = built.ok() ? "" : std::string(built.status().message());
  const absl::Status status = built.ok() ? applyReload(*std::move(built)) : refuseReload(why);
  if (fleet_building_) {
    FleetVersionText version = *std::move(fleet_building_);
    fleet_building_.reset();
    if (status.ok()) {
      fleet_.applied(std::move(version), config_);
    } else {
      fleet_.refused(version.head, why.empty() ? std::string(status.message()) : why);
    }
    return;
  }
  reload_outcomes_.push_back({reload_building_, status, generation_});
  if (reload_outcomes_.size() > kReloadOutcomesKept) reload_outcomes_.pop_front();
  reload_building_ = 0;
}

std::optional<absl::Status> ControlPlane::reloadOutcome(uint64_t request,
                                                        uint64_t* generation) const {
  for (const ReloadOutcome& outcome : reload_outcomes_) {
    if (outcome.request < request) continue;
    if (generation != nullptr) *generation = outcome.generation;
    return outcome.status;
  }
  return std::nullopt;
}

absl::Status ControlPlane::refuseReload(absl::string_view why) {
  // Next hops the refused config brought in are not resolved.
  neighbors_.keepOnly(nextHopsToResolve(config_));
  const std::string message = absl::StrCat(fleet_building_ ? "" : "reload of ", build_what_,
                                           " refused, the running config keeps serving: ", why);
  logLine(message);
  return absl::FailedPreconditionError(message);
}

absl::Status ControlPlane::applyReload(BuiltReload built) {
  Config& next = built.config;
  if (const std::vector<std::string> changed = sectionsNeedingRestart(config_, next);
      !changed.empty()) {
    return refuseReload(absl::StrCat(absl::StrJoin(changed, ", "),
                                     " changed: ports, lcores, connection tables and the metrics "
                                     "endpoint are set up at start, so this change needs a "
                                     "restart of berthd"));
  }
  if (absl::Status status = checkEgressQueues(next); !status.ok()) {
    return refuseReload(status.message());
  }
  for (const std::string& warning : next.warnings) logLine(absl::StrCat("warning: ", warning));
  for (const std::string& note : next.notes) logLine(absl::StrCat("config: ", note));

  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor =
      HealthMonitor::create(next, healthClock(), healthJitter(), health_.get());
  if (!monitor.ok()) return refuseReload(absl::StrCat("health: ", monitor.status().message()));
  if (absl::Status descriptors = ensureDescriptorsFor((*monitor)->checkCount());
      !descriptors.ok()) {
    return refuseReload(descriptors.message());
  }
  // The monitor's verdicts: carried for unchanged checks, unhealthy for new ones.
  std::vector<ServiceState>& services = built.services;
  if (absl::Status status = applyServingVerdicts(services, **monitor); !status.ok()) {
    return refuseReload(status.message());
  }
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      snapshotFor(next.dataplane, services, generation_ + 1);
  if (!snapshot.ok()) return refuseReload(snapshot.status().message());

  // Everything is built: switch over. Connections keep their backends by stable id.
  size_t backends = 0;
  for (const ServiceConfig& service : next.services) backends += service.backends.size();
  config_ = std::move(next);
  if (config_.fleet) fleet_.setLocal(std::move(built.local));
  // Each table that was there before is noted with what the reload moved.
  tables_.replace(std::move(services), absl::Now());
  health_ = *std::move(monitor);
  neighbors_.keepOnly(nextHopsToResolve(config_));
  neighbors_.setSettings(NeighborSettings::of(config_.dataplane.neighbors));
  saveDrains();  // without the backends the new config dropped
  ++generation_;
  published_token_ = publisher_->publish(*std::move(snapshot));
  logLine(absl::StrFormat("%s%s applied: %u service(s), %u backend(s); snapshot %u",
                          fleet_building_ ? "" : "reload of ", build_what_, config_.services.size(),
                          backends, generation_));
  reportWhenInForce(reload_build_start_,
                    fleet_building_ ? "the version arrived" : "the reload began");
  fleet_.reportTables(tables_.states());
  fleet_.reportVerdicts(config_, *health_);
  fleet_.reportServices(config_);
  return absl::OkStatus();
}

}  // namespace berth
