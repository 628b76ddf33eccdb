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
#include "berth/control/descriptor_budget.h"
#include "berth/daemon/control_plane.h"

namespace berth {

uint64_t ControlPlane::requestReload() {
  // A reload also retries a fleet version this instance refused.
  fleet_.forgetRefusal();
  return reloads_->request();
}

ReloadSource ControlPlane::fileSource() const {
  ReloadSource source;
  source.path = config_path_;
  if (const std::optional<FleetVersionText>& version = fleet_.version()) {
    source.fleet_text = version->text;
    source.fleet_source = version->source;
  }
  return source;
}

ReloadSource ControlPlane::versionSource(const FleetVersionText& version) const {
  ReloadSource source;
  source.local = fleet_.local();
  source.fleet_text = version.text;
  source.fleet_source = version.source;
  return source;
}

DrainsByService ControlPlane::drains() const { return drainsOf(tables_.states()); }

void ControlPlane::versionDone(FleetVersionText version, const absl::Status& status,
                               const std::string& why) {
  if (status.ok()) {
    fleet_.applied(std::move(version), config_);
  } else {
    fleet_.refused(version.head, why.empty() ? std::string(status.message()) : why);
  }
}

absl::Status ControlPlane::refuseReload(absl::string_view why) {
  // Next hops the refused config brought in are not resolved.
  neighbors_.cache().keepOnly(nextHopsToResolve(config_));
  const ReloadQueue::Build& build = reloads_->building();
  const std::string message = absl::StrCat(build.fleet_version ? "" : "reload of ", build.what,
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
  if (absl::Status status = datapath_.ports().checkEgressQueues(next); !status.ok()) {
    return refuseReload(status.message());
  }
  for (const std::string& warning : next.warnings) logLine(absl::StrCat("warning: ", warning));
  for (const std::string& note : next.notes) logLine(absl::StrCat("config: ", note));

  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor = HealthMonitor::create(
      next, HealthMonitor::steadyClock(), HealthMonitor::randomJitter(), health_.get());
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
      snapshotFor(next.dataplane, services, rollouts_.next());
  if (!snapshot.ok()) return refuseReload(snapshot.status().message());

  // Everything is built: switch over. Connections keep their backends by stable id.
  size_t backends = 0;
  for (const ServiceConfig& service : next.services) backends += service.backends.size();
  config_ = std::move(next);
  if (config_.fleet) fleet_.setLocal(std::move(built.local));
  // Each table that was there before is noted with what the reload moved.
  tables_.replace(std::move(services), absl::Now());
  health_ = *std::move(monitor);
  neighbors_.cache().keepOnly(nextHopsToResolve(config_));
  neighbors_.cache().setSettings(NeighborSettings::of(config_.dataplane.neighbors));
  saveDrains();  // without the backends the new config dropped
  rollouts_.published(datapath_.publish(*std::move(snapshot)));
  const ReloadQueue::Build& build = reloads_->building();
  logLine(absl::StrFormat("%s%s applied: %u service(s), %u backend(s); snapshot %u",
                          build.fleet_version ? "" : "reload of ", build.what,
                          config_.services.size(), backends, rollouts_.generation()));
  rollouts_.reportWhenInForce(build.start,
                              build.fleet_version ? "the version arrived" : "the reload began");
  fleet_.reportTables(tables_.states());
  fleet_.reportVerdicts(config_, *health_);
  fleet_.reportServices(config_);
  return absl::OkStatus();
}

}  // namespace berth
