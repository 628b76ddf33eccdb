// berthd's fleet subsystem (control/fleet_binding.h, docs/scale-out.md "A fleet through etcd").

#include "berth/control/fleet_binding.h"

#include <algorithm>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "berth/util/program_info.h"

namespace berth {

FleetBinding::~FleetBinding() = default;

void FleetBinding::setStart(Config local, std::optional<FleetVersionText> cached,
                            std::shared_ptr<const FleetGeneration> cached_generation) {
  local_ = std::move(local);
  version_ = std::move(cached);
  // Until etcd answers, the cached generation is served with this instance's own verdicts.
  serving_.fail_safe = cached_generation != nullptr;
  serving_.generation = std::move(cached_generation);
}

absl::Status FleetBinding::start(const Config& config, absl::Span<const ServiceState> services,
                                 const HealthMonitor& health) {
  if (!config.fleet) return absl::OkStatus();
  const FleetConfig& fleet = *config.fleet;
  std::optional<FleetHead> running;
  if (version_) running = version_->head;
  absl::StatusOr<std::unique_ptr<FleetAgent>> agent =
      FleetAgent::create(fleet, std::string(berthVersion()), running, log_);
  if (!agent.ok()) {
    return absl::Status(agent.status().code(), absl::StrCat("fleet: ", agent.status().message()));
  }
  agent_ = *std::move(agent);
  if (config.sync) agent_->setSyncEndpoint(config.sync->listen.toString());
  version_cache_ = std::make_unique<LatestFileWriter>(fleet.cache, 0644);
  generation_cache_ = std::make_unique<LatestFileWriter>(generationCachePath(fleet), 0644);
  reportTables(services);
  reportVerdicts(config, health);
  reportServices(config);
  log_(absl::StrCat("fleet: instance ", fleet.name, " joining through ",
                    absl::StrJoin(fleet.endpoints, ", "), " under ", fleet.prefix,
                    version_ ? absl::StrCat("; serving fleet version ", version_->head.version,
                                            " from its cache until etcd answers")
                             : std::string("; no fleet version yet, so no services"),
                    serving_.generation
                        ? absl::StrCat("; table generation ",
                                       serving_.generation->manifest.generation, " from its cache")
                        : std::string()));
  return absl::OkStatus();
}

void FleetBinding::stop() {
  // Out of the fleet's status at once, rather than a lease TTL later.
  if (agent_) agent_->leave(absl::Now() + kLeaveTimeout);
  agent_.reset();
  version_cache_.reset();  // writes the newest cached version that is still pending
  generation_cache_.reset();
}

void FleetBinding::turn(absl::Time now) {
  if (agent_) agent_->turn(now);
}

std::optional<FleetVersionText> FleetBinding::takeVersion() {
  return agent_ ? agent_->takeVersion() : std::nullopt;
}

void FleetBinding::forgetRefusal() {
  if (agent_) agent_->forgetRefusal();
}

void FleetBinding::applied(FleetVersionText version, const Config& config) {
  agent_->applied(version.head, absl::ToUnixMillis(absl::Now()));
  version_cache_->save(renderVersionCache(version.head, version.text));
  version_ = std::move(version);
  reportServices(config);
}

void FleetBinding::refused(const FleetHead& head, const std::string& why) {
  agent_->refused(head, why);
}

AgreedHealth FleetBinding::agreedHealth() const {
  // Before the agent starts (serving the cached generation at start), no instance's word is in.
  return agent_ ? agent_->agreedHealth() : AgreedHealth();
}

GenerationBase FleetBinding::generationBase(absl::Span<const ServiceState> services) const {
  return serving_.generationBase(services, agreedHealth());
}

std::vector<std::string> FleetBinding::failSafeRemovals(const Config& config,
                                                        const HealthMonitor& health) const {
  return serving_.failSafeRemovals(
      config.services, [&](size_t s) -> const std::vector<bool>& { return health.healthy(s); });
}

void FleetBinding::reportVerdicts(const Config& config, const HealthMonitor& health) {
  if (!agent_) return;
  std::map<std::string, std::map<std::string, bool>> verdicts;
  for (size_t s = 0; s < config.services.size(); ++s) {
    const ServiceConfig& service = config.services[s];
    const std::vector<bool>& local = health.healthy(s);
    std::map<std::string, bool>& up = verdicts[service.name];
    for (size_t b = 0; b < service.backends.size() && b < local.size(); ++b) {
      // A check a reload added counts once it has reached a verdict (rise or fall probes).
      if (health.settled(s, b)) up[service.backends[b].name] = local[b];
    }
  }
  agent_->setVerdicts(std::move(verdicts));
  settled_reported_ = health.settledCount();
  agent_->setFailSafe(failSafeRemovals(config, health));
}

void FleetBinding::reportServices(const Config& config) {
  if (!agent_) return;
  agent_->setServices(std::make_shared<const std::vector<ServiceConfig>>(config.services),
                      version_ ? version_->head.version : 0);
}

void FleetBinding::reportTables(absl::Span<const ServiceState> services) {
  if (!agent_) return;
  std::map<std::string, std::string> fingerprints;
  for (const ServiceState& service : services) {
    fingerprints.emplace(service.name(), fingerprintText(service.liveFingerprint()));
  }
  agent_->setFingerprints(std::move(fingerprints));
}

void FleetBinding::reportFailSafe(const Config& config, const HealthMonitor& health) {
  const std::vector<std::string> removed = failSafeRemovals(config, health);
  if (!removed.empty()) {
    log_(absl::StrCat(
        "fleet: etcd out of reach, so taken out fail-safe by this instance's probes alone: ",
        absl::StrJoin(removed, ", ")));
  }
  if (agent_) agent_->setFailSafe(removed);
}

std::optional<FleetBinding::Change> FleetBinding::takeChange(const Config& config,
                                                             const HealthMonitor& health) {
  if (!agent_) return std::nullopt;
  if (health.settledCount() != settled_reported_) reportVerdicts(config, health);
  std::shared_ptr<const FleetGeneration> generation = agent_->takeGeneration();
  const bool fail_safe = (generation || serving_.generation) && !agent_->status().etcd_reachable;
  if (!generation && fail_safe == serving_.fail_safe) return std::nullopt;
  if (fail_safe != serving_.fail_safe) {
    log_(fail_safe ? "fleet: etcd out of reach: serving the last table generation, and this "
                     "instance's own probes may take backends out (fail-safe)"
                   : "fleet: etcd answers: serving the fleet's generation and verdicts");
  }
  serving_.fail_safe = fail_safe;
  if (generation) serving_.generation = generation;
  return Change{std::move(generation)};
}

void FleetBinding::generationServed(std::shared_ptr<const FleetGeneration> generation) {
  const GenerationManifest& manifest = generation->manifest;
  log_(absl::StrCat("fleet: serving table generation ", manifest.generation, " (made by ",
                    manifest.made_by, " for version ", manifest.config_version, ")"));
  agent_->generationApplied(manifest.generation);
  // Encoding every table takes O(M) each: on the writer's thread, from the immutable generation.
  generation_cache_->saveRendered(
      [generation = std::move(generation)] { return renderGenerationCache(*generation); });
}

std::optional<FleetStatusRow> FleetBinding::statusRow(const Config& config,
                                                      const HealthMonitor& health) const {
  if (!agent_) return std::nullopt;
  FleetStatusRow row;
  row.instance = config.fleet->name;
  row.agent = agent_->status();
  row.cache_path = version_cache_->path();
  row.cache_written = version_cache_->lastWrite();
  row.generation = serving_.generation ? serving_.generation->manifest.generation : 0;
  row.fail_safe = serving_.fail_safe;
  row.fail_safe_removed = failSafeRemovals(config, health);
  row.agreed = agent_->agreedHealth();
  return row;
}

std::vector<Endpoint> syncPeersOf(const std::vector<Endpoint>& configured,
                                  const std::vector<InstanceReport>& reports,
                                  absl::string_view own_name) {
  std::vector<Endpoint> peers = configured;
  for (const InstanceReport& report : reports) {
    if (report.name == own_name || report.sync.empty()) continue;
    if (absl::StatusOr<Endpoint> endpoint = Endpoint::parse(report.sync); endpoint.ok()) {
      peers.push_back(*endpoint);
    }
  }
  return peers;
}

std::vector<IpAddress> syncPeerAddresses(const std::vector<Endpoint>& peers) {
  std::vector<IpAddress> addresses;
  for (const Endpoint& peer : peers) {
    if (std::find(addresses.begin(), addresses.end(), peer.address) == addresses.end()) {
      addresses.push_back(peer.address);
    }
  }
  return addresses;
}

}  // namespace berth
