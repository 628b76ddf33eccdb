// berthd in a fleet (docs/scale-out.md, "A fleet through etcd"): the fleet agent turned by the
// management loop, each version it fetches built on the reload builder's thread like a reload,
// the verdict reported back, the applied version cached on disk, and the tables' fingerprints
// reported after every publish.

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "berth/control/control_plane.h"
#include "berth/util/json_writer.h"

namespace berth {

void ControlPlane::setFleetStart(Config local, std::optional<FleetVersionText> cached) {
  fleet_local_ = std::move(local);
  fleet_version_ = std::move(cached);
}

absl::Status ControlPlane::startFleet() {
  if (!config_.fleet) return absl::OkStatus();
  const FleetConfig& fleet = *config_.fleet;
  std::optional<FleetHead> running;
  if (fleet_version_) running = fleet_version_->head;
  absl::StatusOr<std::unique_ptr<FleetAgent>> agent = FleetAgent::create(
      fleet, kBerthVersion, running, [](const std::string& line) { logLine(line); });
  if (!agent.ok()) {
    return absl::Status(agent.status().code(), absl::StrCat("fleet: ", agent.status().message()));
  }
  fleet_ = *std::move(agent);
  fleet_cache_ = std::make_unique<LatestFileWriter>(fleet.cache, 0644);
  reportFleetTables();
  logLine(absl::StrCat("fleet: instance ", fleet.name, " joining through ",
                       absl::StrJoin(fleet.endpoints, ", "), " under ", fleet.prefix,
                       fleet_version_
                           ? absl::StrCat("; serving fleet version ", fleet_version_->head.version,
                                          " from its cache until etcd answers")
                           : std::string("; no fleet version yet, so no services")));
  return absl::OkStatus();
}

void ControlPlane::stopFleet() {
  // Out of the fleet's status at once, rather than a lease TTL later.
  if (fleet_) fleet_->leave(absl::Now() + kFleetLeaveTimeout);
  fleet_.reset();
  fleet_cache_.reset();  // writes the newest cached version that is still pending
}

void ControlPlane::fleetApplied(FleetVersionText version) {
  fleet_->applied(version.head, absl::ToUnixMillis(absl::Now()));
  fleet_cache_->save(renderVersionCache(version.head, version.text));
  fleet_version_ = std::move(version);
}

void ControlPlane::reportFleetTables() {
  if (!fleet_) return;
  std::map<std::string, std::string> fingerprints;
  for (const ServiceState& service : services_) {
    fingerprints.emplace(service.name(), fingerprintText(service.liveFingerprint()));
  }
  fleet_->setFingerprints(std::move(fingerprints));
}

std::string ControlPlane::fleetStatusText(JsonWriter& json) const {
  if (!fleet_) return "";
  const FleetAgentStatus status = fleet_->status();
  const absl::Status cache_written = fleet_cache_->lastWrite();
  json.key("fleet")
      .beginObject()
      .key("name")
      .value(config_.fleet->name)
      .key("version")
      .value(status.running_version)
      .key("head_version")
      .value(status.head_version)
      .key("from_cache")
      .value(status.from_cache)
      .key("etcd_reachable")
      .value(status.etcd_reachable)
      .key("registered")
      .value(status.registered)
      .key("refused_version")
      .value(status.refused_version)
      .key("refused_why")
      .value(status.refused_why)
      .key("last_error")
      .value(status.last_error)
      .key("cache")
      .value(fleet_cache_->path())
      .key("cache_write_error")
      .value(cache_written.ok() ? "" : cache_written.message())
      .endObject();
  std::string text = absl::StrCat(
      "fleet: instance ", config_.fleet->name, ", version ",
      status.running_version == 0 ? std::string("none") : absl::StrCat(status.running_version),
      status.from_cache ? " (from the cache; etcd not heard from yet)" : "", ", fleet head ",
      status.head_version, ", etcd ", status.etcd_reachable ? "reachable" : "unreachable",
      status.registered ? "" : ", not registered", "\n");
  if (status.refused_version > status.running_version) {
    absl::StrAppend(&text, "fleet: version ", status.refused_version,
                    " refused: ", status.refused_why, "\n");
  }
  if (!status.etcd_reachable && !status.last_error.empty()) {
    absl::StrAppend(&text, "fleet: last error: ", status.last_error, "\n");
  }
  if (!cache_written.ok()) {
    absl::StrAppend(&text, "fleet: cache ", fleet_cache_->path(),
                    " not written: ", cache_written.message(), "\n");
  }
  return text;
}

}  // namespace berth
