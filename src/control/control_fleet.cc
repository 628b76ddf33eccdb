// berthd in a fleet (docs/scale-out.md, "A fleet through etcd"): the fleet agent turned by the
// management loop, each version it fetches built on the reload builder's thread like a reload,
// the verdict reported back, the applied version cached on disk, and the tables' fingerprints
// reported after every publish.

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "berth/control/control_plane.h"
#include "berth/util/json_writer.h"
#include "berth/util/program_info.h"
#include "berth/util/status_macros.h"

namespace berth {

void ControlPlane::setFleetStart(Config local, std::optional<FleetVersionText> cached,
                                 std::shared_ptr<const FleetGeneration> cached_generation) {
  fleet_local_ = std::move(local);
  fleet_version_ = std::move(cached);
  // Until etcd answers, the cached generation is served with this instance's own verdicts.
  fleet_serving_.fail_safe = cached_generation != nullptr;
  fleet_serving_.generation = std::move(cached_generation);
}

absl::Status ControlPlane::startFleet() {
  if (!config_.fleet) return absl::OkStatus();
  const FleetConfig& fleet = *config_.fleet;
  std::optional<FleetHead> running;
  if (fleet_version_) running = fleet_version_->head;
  absl::StatusOr<std::unique_ptr<FleetAgent>> agent = FleetAgent::create(
      fleet, std::string(berthVersion()), running, [](const std::string& line) { logLine(line); });
  if (!agent.ok()) {
    return absl::Status(agent.status().code(), absl::StrCat("fleet: ", agent.status().message()));
  }
  fleet_ = *std::move(agent);
  if (config_.sync) fleet_->setSyncEndpoint(config_.sync->listen.toString());
  fleet_cache_ = std::make_unique<LatestFileWriter>(fleet.cache, 0644);
  generation_cache_ = std::make_unique<LatestFileWriter>(generationCachePath(fleet), 0644);
  reportFleetTables();
  reportFleetVerdicts();
  reportFleetServices();
  logLine(absl::StrCat(
      "fleet: instance ", fleet.name, " joining through ", absl::StrJoin(fleet.endpoints, ", "),
      " under ", fleet.prefix,
      fleet_version_ ? absl::StrCat("; serving fleet version ", fleet_version_->head.version,
                                    " from its cache until etcd answers")
                     : std::string("; no fleet version yet, so no services"),
      fleet_serving_.generation
          ? absl::StrCat("; table generation ", fleet_serving_.generation->manifest.generation,
                         " from its cache")
          : std::string()));
  return absl::OkStatus();
}

void ControlPlane::stopFleet() {
  // Out of the fleet's status at once, rather than a lease TTL later.
  if (fleet_) fleet_->leave(absl::Now() + kFleetLeaveTimeout);
  fleet_.reset();
  fleet_cache_.reset();  // writes the newest cached version that is still pending
  generation_cache_.reset();
}

void ControlPlane::fleetApplied(FleetVersionText version) {
  fleet_->applied(version.head, absl::ToUnixMillis(absl::Now()));
  fleet_cache_->save(renderVersionCache(version.head, version.text));
  fleet_version_ = std::move(version);
  reportFleetServices();
}

absl::Status ControlPlane::applyServingVerdicts(std::vector<ServiceState>& services,
                                                const HealthMonitor& monitor) const {
  // Built with every backend healthy: failover from there.
  for (size_t s = 0; s < services.size(); ++s) {
    std::vector<bool> healthy = fleet_serving_.verdicts(services[s], monitor.healthy(s));
    if (std::find(healthy.begin(), healthy.end(), false) == healthy.end()) continue;
    if (absl::StatusOr<SlotChange> change = services[s].setHealth(std::move(healthy));
        !change.ok()) {
      return change.status();
    }
  }
  return absl::OkStatus();
}

GenerationBase ControlPlane::generationBase() const {
  return fleet_serving_.generationBase(tables_.states(), fleetAgreedHealth());
}

AgreedHealth ControlPlane::fleetAgreedHealth() const {
  // Before the agent starts (serving the cached generation at start), no instance's word is in.
  return fleet_ ? fleet_->agreedHealth() : AgreedHealth();
}

std::vector<std::string> ControlPlane::failSafeRemovals() const {
  return fleet_serving_.failSafeRemovals(
      config_.services,
      [this](size_t s) -> const std::vector<bool>& { return health_->healthy(s); });
}

void ControlPlane::reportFleetVerdicts() {
  if (!fleet_ || !health_) return;
  std::map<std::string, std::map<std::string, bool>> verdicts;
  for (size_t s = 0; s < config_.services.size(); ++s) {
    const ServiceConfig& service = config_.services[s];
    const std::vector<bool>& local = health_->healthy(s);
    std::map<std::string, bool>& up = verdicts[service.name];
    for (size_t b = 0; b < service.backends.size() && b < local.size(); ++b) {
      // A check a reload added counts once it has reached a verdict (rise or fall probes).
      if (health_->settled(s, b)) up[service.backends[b].name] = local[b];
    }
  }
  fleet_->setVerdicts(std::move(verdicts));
  fleet_settled_reported_ = health_->settledCount();
  fleet_->setFailSafe(failSafeRemovals());
}

void ControlPlane::reportFleetServices() {
  if (!fleet_) return;
  fleet_->setServices(std::make_shared<const std::vector<ServiceConfig>>(config_.services),
                      fleet_version_ ? fleet_version_->head.version : 0);
}

void ControlPlane::serveFleetGenerations() {
  if (!fleet_) return;
  if (health_->settledCount() != fleet_settled_reported_) reportFleetVerdicts();
  const absl::Time start = absl::Now();
  std::shared_ptr<const FleetGeneration> generation = fleet_->takeGeneration();
  const bool fail_safe =
      (generation || fleet_serving_.generation) && !fleet_->status().etcd_reachable;
  if (!generation && fail_safe == fleet_serving_.fail_safe) return;
  if (fail_safe != fleet_serving_.fail_safe) {
    logLine(fail_safe ? "fleet: etcd out of reach: serving the last table generation, and "
                        "this instance's own probes may take backends out (fail-safe)"
                      : "fleet: etcd answers: serving the fleet's generation and verdicts");
  }
  fleet_serving_.fail_safe = fail_safe;
  if (generation) fleet_serving_.generation = generation;

  const auto verdicts_on = [this](const ServiceConfig& service, size_t s, const Table* base) {
    return fleet_serving_.verdicts(service, health_->healthy(s), base);
  };
  const bool changed =
      generation
          ? tables_.serveGeneration(
                generation->manifest.generation,
                [&](const ServiceState& state) {
                  return generationBaseFor(*generation, state.configured(), fleetAgreedHealth());
                },
                verdicts_on, absl::Now())
          : tables_.serveVerdicts(
                [&](const ServiceState& state, size_t s) {
                  return fleet_serving_.verdicts(state, health_->healthy(s));
                },
                absl::Now());
  if (generation) {
    const GenerationManifest& manifest = generation->manifest;
    logLine(absl::StrCat("fleet: serving table generation ", manifest.generation, " (made by ",
                         manifest.made_by, " for version ", manifest.config_version, ")"));
    fleet_->generationApplied(manifest.generation);
    // Encoding every table takes O(M) each: on the writer's thread, from the immutable
    // generation.
    generation_cache_->saveRendered([generation] { return renderGenerationCache(*generation); });
  }
  reportFailSafe();
  if (!changed) return;
  publishTableChange(start,
                     generation ? "the table generation arrived" : "etcd's reachability changed");
}

void ControlPlane::reportFailSafe() {
  const std::vector<std::string> removed = failSafeRemovals();
  if (!removed.empty()) {
    logLine(absl::StrCat(
        "fleet: etcd out of reach, so taken out fail-safe by this instance's probes alone: ",
        absl::StrJoin(removed, ", ")));
  }
  if (fleet_) fleet_->setFailSafe(removed);
}

void ControlPlane::reportFleetTables() {
  if (!fleet_) return;
  std::map<std::string, std::string> fingerprints;
  for (const ServiceState& service : tables_.states()) {
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
      .key("generation")
      .value(fleet_serving_.generation ? fleet_serving_.generation->manifest.generation
                                       : uint64_t{0})
      .key("generation_head")
      .value(status.generation_head)
      .key("leader")
      .value(status.leader)
      .key("elected")
      .value(status.elected)
      .key("generations_made")
      .value(status.generations_made)
      .key("generation_error")
      .value(status.generation_error)
      .key("fail_safe_active")
      .value(fleet_serving_.fail_safe);
  const std::vector<std::string> removed = failSafeRemovals();
  json.key("fail_safe").beginArray();
  for (const std::string& entry : removed) json.value(entry);
  json.endArray();
  // The backends whose verdicts some live instances do not share: the fleet's word decides.
  const AgreedHealth& agreed = fleet_->agreedHealth();
  json.key("dissent").beginArray();
  for (const auto& [backend, instances] : agreed.dissent) {
    const auto down = agreed.down.find(backend.first);
    const bool fleet_down = down != agreed.down.end() && down->second.count(backend.second) != 0;
    json.beginObject()
        .key("service")
        .value(backend.first)
        .key("backend")
        .value(backend.second)
        .key("fleet_says")
        .value(fleet_down ? "down" : "up")
        .key("instances")
        .beginArray();
    for (const std::string& instance : instances) json.value(instance);
    json.endArray().endObject();
  }
  json.endArray().endObject();
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
  absl::StrAppend(
      &text, "fleet: table generation ",
      fleet_serving_.generation ? absl::StrCat(fleet_serving_.generation->manifest.generation)
                                : std::string("none"),
      ", newest stored ", status.generation_head, ", made by ",
      status.elected ? std::string("this instance")
                     : (status.leader.empty() ? std::string("no instance yet") : status.leader),
      "\n");
  if (!status.generation_error.empty()) {
    absl::StrAppend(&text, "fleet: generation error: ", status.generation_error, "\n");
  }
  if (fleet_serving_.fail_safe) {
    absl::StrAppend(&text, "fleet: fail-safe: etcd out of reach, this instance's probes count",
                    removed.empty() ? "" : "; taken out: ", absl::StrJoin(removed, ", "), "\n");
  }
  for (const auto& [backend, instances] : agreed.dissent) {
    const auto down = agreed.down.find(backend.first);
    const bool fleet_down = down != agreed.down.end() && down->second.count(backend.second) != 0;
    absl::StrAppend(&text, "fleet: service '", backend.first, "' backend '", backend.second,
                    "' is ", fleet_down ? "down" : "up", " by the fleet's word; ",
                    absl::StrJoin(instances, ", "), " see", instances.size() == 1 ? "s" : "",
                    " it ", fleet_down ? "up" : "down", "\n");
  }
  if (!cache_written.ok()) {
    absl::StrAppend(&text, "fleet: cache ", fleet_cache_->path(),
                    " not written: ", cache_written.message(), "\n");
  }
  return text;
}

}  // namespace berth
