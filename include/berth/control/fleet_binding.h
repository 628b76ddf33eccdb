#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/control/fleet_serving.h"
#include "berth/control/service_state.h"
#include "berth/control/status_report.h"
#include "berth/fleet/agent.h"
#include "berth/health/monitor.h"
#include "berth/util/json_writer.h"
#include "berth/util/latest_file_writer.h"

namespace berth {

// berthd's part in a fleet (docs/scale-out.md, "A fleet through etcd"), the management loop's
// fleet subsystem: the agent (fleet/agent.h), the local file's part of the config, the fleet
// version applied and its cache on disk, the table generation served with whose verdicts count
// (control/fleet_serving.h), and the generation's cache. The loop turns it, builds each version
// it offers as it builds a reload, and serves each generation or change of etcd's reachability it
// reports on the service tables. Without a fleet section it stays inactive: it reports nothing,
// and a service is served by its own probes.
class FleetBinding {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit FleetBinding(Log log) : log_(std::move(log)) {}
  ~FleetBinding();
  FleetBinding(const FleetBinding&) = delete;
  FleetBinding& operator=(const FleetBinding&) = delete;

  // What berthd's start hands over before start(): the local file's part, the version and the
  // table generation its cache held (none when absent), which the services start on.
  void setStart(Config local, std::optional<FleetVersionText> cached,
                std::shared_ptr<const FleetGeneration> cached_generation);
  // With a fleet section in `config`: the agent and the cache writers, and the first reports.
  // Errors name the fleet.
  absl::Status start(const Config& config, absl::Span<const ServiceState> services,
                     const HealthMonitor& health);
  // Leaves the fleet (at most kLeaveTimeout) and writes the caches still pending.
  void stop();
  bool active() const { return agent_ != nullptr; }
  static constexpr absl::Duration kLeaveTimeout = absl::Seconds(2);

  // The agent's turn (fleet/agent.h); nothing while inactive.
  void turn(absl::Time now);

  // Versions. The local file's part in force, which a reload of the file replaces; the version
  // applied, which a reload composes with; the agent's newest version to build; its outcome.
  const Config& local() const { return local_; }
  void setLocal(Config local) { local_ = std::move(local); }
  const std::optional<FleetVersionText>& version() const { return version_; }
  std::optional<FleetVersionText> takeVersion();
  // A reload also retries a fleet version this instance refused.
  void forgetRefusal();
  // `version` applied with `config`: reported, cached off the loop, and its services handed to
  // the agent, which plans with them while elected.
  void applied(FleetVersionText version, const Config& config);
  void refused(const FleetHead& head, const std::string& why);

  // Health. Whose verdicts count, and the health the fleet agrees on as last read (none before
  // the agent starts).
  const FleetServing& serving() const { return serving_; }
  AgreedHealth agreedHealth() const;
  // The same without a copy, or nullptr while inactive.
  const AgreedHealth* agreedHealthIfActive() const {
    return agent_ ? &agent_->agreedHealth() : nullptr;
  }
  // Each service's base table from the generation in force, for a build.
  GenerationBase generationBase(absl::Span<const ServiceState> services) const;
  // This instance's settled verdicts, its fail-safe removals and its services to the agent.
  void reportVerdicts(const Config& config, const HealthMonitor& health);
  void reportServices(const Config& config);
  // Each service's live fingerprint, which the agent reports when it changes.
  void reportTables(absl::Span<const ServiceState> services);
  // The backends taken out fail-safe now, as "service/backend": logged when any, and reported.
  void reportFailSafe(const Config& config, const HealthMonitor& health);
  std::vector<std::string> failSafeRemovals(const Config& config,
                                            const HealthMonitor& health) const;

  // Generations. What changed since the last call, for the tables to serve: a new generation
  // (returned), or only etcd's reachability, which decides whether this instance is fail-safe
  // (`changed` with nullptr). Verdicts newly settled are reported first.
  struct Change {
    std::shared_ptr<const FleetGeneration> generation;  // nullptr: fail-safe changed
  };
  std::optional<Change> takeChange(const Config& config, const HealthMonitor& health);
  // The tables serve `generation` now: logged, reported, and cached off the loop.
  void generationServed(std::shared_ptr<const FleetGeneration> generation);

  // For status, metrics and flow sync, while active.
  FleetAgentStatus agentStatus() const { return agent_->status(); }
  const std::vector<InstanceReport>& instanceReports() const { return agent_->instanceReports(); }
  // `status`'s fleet part (control/status_report.h); none while inactive.
  std::optional<FleetStatusRow> statusRow(const Config& config, const HealthMonitor& health) const;

 private:
  Log log_;
  std::unique_ptr<FleetAgent> agent_;
  Config local_;
  std::optional<FleetVersionText> version_;
  std::unique_ptr<LatestFileWriter> version_cache_;
  FleetServing serving_;
  uint64_t settled_reported_ = 0;  // the monitor's settledCount() when verdicts were reported
  std::unique_ptr<LatestFileWriter> generation_cache_;
};

// Flow sync's peers (docs/scale-out.md, "Flows that survive an instance"): the config's, and in a
// fleet every other instance at the sync endpoint it reports; `own_name` is this instance's.
std::vector<Endpoint> syncPeersOf(const std::vector<Endpoint>& configured,
                                  const std::vector<InstanceReport>& reports,
                                  absl::string_view own_name);
// Their addresses, each once: the exception path's sync class.
std::vector<IpAddress> syncPeerAddresses(const std::vector<Endpoint>& peers);

}  // namespace berth
