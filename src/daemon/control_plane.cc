#include "berth/daemon/control_plane.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/control/descriptor_budget.h"
#include "berth/control/load_publication.h"
#include "berth/dataplane/counters.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// How often the management loop wakes: the latency of a stop, a counter print or a learned MAC.
constexpr absl::Duration kManagementTick = absl::Milliseconds(1);
// On a stop with BGP announcements, how long berthd waits for berth-announcer to report the
// routes gone from BIRD before it stops anyway. The announcer asks every 200 ms by default and
// `birdc configure` took up to 0.25 s in the ECMP end-to-end test on a loaded 2-CPU VM; five
// seconds leave room for a much slower machine and still bound a stop.
constexpr absl::Duration kWithdrawalConfirmationLimit = absl::Seconds(5);
// How often the ports' link states are read for the log: cheap, and a peer's coming and going
// shows within a tenth of a second.
constexpr absl::Duration kLinkCheckInterval = absl::Milliseconds(100);
// Probes stopped by local errors come in storms (a descriptor limit hit by thousands of checks):
// one summary line a second at most.
constexpr absl::Duration kNotRunLogInterval = absl::Seconds(1);
// How often flow sync's peers are taken from the fleet's reports, which change only as instances
// come and go.
constexpr absl::Duration kSyncPeersInterval = absl::Seconds(1);

}  // namespace

ControlPlane::ControlPlane(std::string config_path, std::string drain_state_path,
                           ControlSocketPaths sockets, Config config,
                           const ControlPlaneSignals& signals)
    : config_path_(std::move(config_path)),
      drain_state_(drain_state_path.empty()
                       ? nullptr
                       : std::make_unique<DrainStateWriter>(std::move(drain_state_path))),
      replies_(std::move(sockets), [](const std::string& line) { logLine(line); }),
      config_(std::move(config)),
      signals_(signals),
      neighbors_(NeighborSettings::of(config_.dataplane.neighbors), std::random_device{}(),
                 [](const std::string& line) { logLine(line); }) {}

absl::Status ControlPlane::startLcores() {
  BERTH_RETURN_IF_ERROR(ControlCommands::checkHandlers());
  BERTH_RETURN_IF_ERROR(datapath_.startLcores());
  // Created on the main lcore, whose CPU the EAL has pinned this thread to: the log's writer
  // runs there too, never on a worker's CPU.
  startLogThread();
  // Likewise the reload builder and the reply renderer, so that parsing a big config or
  // rendering a big reply never takes a worker's CPU.
  reloads_ = std::make_unique<ReloadQueue>(static_cast<ReloadTarget&>(*this),
                                           [](const std::string& line) { logLine(line); });
  reloads_->startedAt(started_);
  replies_.startRenderer();
  return absl::OkStatus();
}

void ControlPlane::stopLcores() {
  replies_.stopRenderer();
  reloads_.reset();
  stopLogThread();
  datapath_.stopLcores();
}

absl::Status ControlPlane::startServices() {
  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor =
      HealthMonitor::create(config_, HealthMonitor::steadyClock(), HealthMonitor::randomJitter());
  if (!monitor.ok()) {
    return absl::Status(monitor.status().code(),
                        absl::StrCat("health: ", monitor.status().message()));
  }
  health_ = *std::move(monitor);
  BERTH_RETURN_IF_ERROR(ensureDescriptorsFor(health_->checkCount()));
  BERTH_ASSIGN_OR_RETURN(std::vector<ServiceState> services,
                         createServiceStates(config_.services, restoredDrains(), generationBase()));
  BERTH_RETURN_IF_ERROR(applyServingVerdicts(services, *health_));
  tables_.replace(std::move(services), absl::Now());
  BERTH_RETURN_IF_ERROR(publishSnapshot());
  if (health_->checkCount() > 0) {
    logLine(
        absl::StrFormat("health: %u check(s) for the configured backends", health_->checkCount()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServiceTables::DrainOutcome> ControlPlane::setDrained(const std::string& service,
                                                                     const std::string& backend,
                                                                     bool drain) {
  absl::StatusOr<ServiceTables::DrainOutcome> outcome = tables_.setDrained(
      service, backend, drain, [this] { return publishSnapshot(); }, absl::Now());
  if (!outcome.ok() || outcome->changed.empty()) return outcome;
  reloads_->drainChanged();
  saveDrains();
  logLine(absl::StrFormat("%s %s; snapshot %u published", drain ? "drained" : "undrained",
                          absl::StrJoin(outcome->moved, ", "), rollouts_.generation()));
  return outcome;
}

void ControlPlane::routesAnnounced(uint32_t routes) {
  if (routes != 0 || !stop_withdrawal_ || stop_withdrawal_->confirmed()) return;
  stop_withdrawal_->withdrawalConfirmed(absl::Now());
  logLine(absl::StrFormat(
      "stopping: berth-announcer has withdrawn the BGP routes from BIRD; forwarding %d ms more",
      absl::ToInt64Milliseconds(stop_withdrawal_->forwardAfterWithdrawal())));
}

ForwardingState ControlPlane::forwardingState() const {
  ForwardingState forwarding;
  forwarding.workers_running = datapath_.launched();
  forwarding.stopping = stop_withdrawal_.has_value();
  if (datapath_.stalled()) {
    forwarding.stalled_for_ms = absl::ToInt64Milliseconds(kDatapathStallThreshold);
  }
  forwarding.ports_down = datapath_.ports().down();
  return forwarding;
}

void ControlPlane::saveDrains() {
  if (drain_state_) drain_state_->save(drainsOf(tables_.states()));
}

void ControlPlane::stopServices() {
  tables_.replace({}, absl::Now());
  health_.reset();
}

absl::StatusOr<std::unique_ptr<const Snapshot>> ControlPlane::snapshotFor(
    const DataplaneConfig& dataplane, const std::vector<ServiceState>& services,
    uint64_t generation) {
  std::vector<ServiceInput> inputs;
  inputs.reserve(services.size());
  for (const ServiceState& service : services) {
    inputs.push_back({service.config(), service.liveTable()});
  }
  // A next hop new to the cache gets its slot before the snapshot that resolves it.
  neighbors_.cache().track(nextHopsToResolve(dataplane, inputs), dataplane.ports, absl::Now());
  return buildSnapshot(dataplane, inputs, datapath_.ports().macs(), neighbors_.cache().table(),
                       counter_ids_, generation, datapath_.ports().checksumOffloads(),
                       datapath_.ports().replySteering());
}

absl::Status ControlPlane::publishSnapshot() {
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      snapshotFor(config_.dataplane, tables_.states(), rollouts_.next());
  if (!snapshot.ok()) return snapshot.status();
  rollouts_.published(datapath_.publish(*std::move(snapshot)));
  if (FlowSync* sync = datapath_.flowSync()) {
    sync->setNames(FlowRecordNames::of(counter_ids_, config_));
  }
  fleet_.reportTables(tables_.states());
  return absl::OkStatus();
}

void ControlPlane::reportRollouts() {
  datapath_.reclaim();
  for (const std::string& line : rollouts_.takeInForce(
           [this](uint64_t token) { return datapath_.inForce(token); }, absl::Now())) {
    logLine(line);
  }
}

void ControlPlane::resolveNeighbors() {
  const bool changed = neighbors_.turn(
      absl::Now(),
      [this](const NextHopToResolve& hop) { return datapath_.sendNeighborRequest(hop); },
      config_.dataplane.ports);
  if (!changed) return;
  if (absl::Status status = publishSnapshot(); !status.ok()) {
    logLine(
        absl::StrCat("snapshot not rebuilt, the previous one keeps serving: ", status.message()));
  }
}

void ControlPlane::addPeriodicJobs() {
  jobs_.add("rates", kRateInterval, [this](absl::Time now) {
    rates_.sample(now, datapath_.workerMetrics());
    traffic_rates_.sample(now, datapath_.trafficOfAll(counter_ids_.serviceNames().size(), false),
                          datapath_.trafficOfAll(counter_ids_.backendNames().size(), true));
  });
  jobs_.add("bounded loads", absl::Milliseconds(kLoadPublishIntervalMs),
            [this](absl::Time) { datapath_.publishLoads(tables_.states(), counter_ids_); });
  jobs_.add("links", kLinkCheckInterval, [this](absl::Time) { datapath_.ports().watchLinks(); });
  jobs_.add("probes not run", kNotRunLogInterval, [this](absl::Time) { reportProbesNotRun(); });
  jobs_.add("sync peers", kSyncPeersInterval, [this](absl::Time) { watchSyncPeers(); });
}

void ControlPlane::run() {
  addPeriodicJobs();
  systemd_ = SystemdNotifier::fromEnvironment();
  if (systemd_ && systemd_->watchdogInterval() > absl::ZeroDuration()) {
    logLine(absl::StrFormat("systemd: watchdog pings every %d ms",
                            absl::ToInt64Milliseconds(systemd_->watchdogInterval() / 2)));
  }
  // On a stop signal with BGP announcements, first withdraw them while still forwarding, so that
  // routers move the flows away before this instance stops taking them (control/stop_withdrawal.h).
  while (true) {
    holdForTesting();
    if (systemd_) {
      if (signals_.stop.load(std::memory_order_relaxed)) systemd_->stopping();
      systemd_->turn(absl::Now());
    }
    if (signals_.stop.load(std::memory_order_relaxed) && !stop_withdrawal_) {
      if (!datapath_.launched() || !announcesOverBgp(config_)) break;
      stop_withdrawal_.emplace(absl::Now(),
                               absl::Milliseconds(config_.bgp->forward_after_withdrawal_ms),
                               kWithdrawalConfirmationLimit);
      logLine(absl::StrFormat(
          "stopping: BGP routes withdrawn; forwarding until berth-announcer reports them gone "
          "from BIRD (at most %d ms)",
          absl::ToInt64Milliseconds(stop_withdrawal_->confirmationLimit())));
    }
    if (stop_withdrawal_ && stop_withdrawal_->done(absl::Now())) break;
    resolveNeighbors();
    if (signals_.print_counters.exchange(false)) {
      // Rendered and written by the renderer's thread: stdout may be a pipe nobody reads.
      renderOffLoop([report = countersReport()] {
        std::fputs(berth::countersText(report).c_str(), stdout);
        std::fflush(stdout);
        return std::string();
      });
    }
    applyHealthChanges(health_->poll(0));
    if (signals_.reload.exchange(false)) requestReload();
    fleet_.turn(absl::Now());
    if (FlowSync* sync = datapath_.flowSync()) sync->turn(absl::Now());
    serveFleetGenerations();
    reloads_->serve([this] { return fleet_.takeVersion(); });
    replies_.serve(
        [this](const ControlRequest& request) { return commands_.handle(request); },
        [this](const ControlRequest& request) { return commands_.handleReadOnly(request); },
        [this] { return renderMetrics(); });
    serveTelemetry();
    datapath_.ports().turnStats(absl::Now());
    jobs_.runDue(absl::Now(), [] { return absl::Now(); });
    watchWorkers();
    reportRollouts();
    absl::SleepFor(kManagementTick);
  }
  if (systemd_) systemd_->stopping();
  if (stop_withdrawal_ && !stop_withdrawal_->confirmed()) {
    logLine(absl::StrFormat(
        "stopping: no berth-announcer reported the BGP routes gone within %d ms; stopping anyway",
        absl::ToInt64Milliseconds(stop_withdrawal_->confirmationLimit())));
  }
  stopWorkers();
  logLine("workers stopped: no longer forwarding");
}

void ControlPlane::holdForTesting() {
  if (testing_hold_file_.empty()) return;
  while (!signals_.stop.load(std::memory_order_relaxed) &&
         access(testing_hold_file_.c_str(), F_OK) == 0) {
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void ControlPlane::watchSyncPeers() {
  FlowSync* sync = datapath_.flowSync();
  if (!fleet_.active() || sync == nullptr) return;
  const std::vector<Endpoint> peers =
      syncPeersOf(config_.sync->peers, fleet_.instanceReports(), config_.fleet->name);
  const size_t before = sync->peerCount();
  sync->setPeers(peers);
  std::vector<IpAddress> addresses = syncPeerAddresses(peers);
  if (addresses == config_.dataplane.sync_peers) return;
  config_.dataplane.sync_peers = std::move(addresses);
  logLine(absl::StrCat("sync: ", sync->peerCount(), " peers (", before, " before)"));
  if (absl::Status status = publishSnapshot(); !status.ok()) {
    logLine(absl::StrCat("sync: the exception path's sync class keeps its old peers: ",
                         status.message()));
  }
}

void ControlPlane::watchWorkers() {
  if (!datapath_.watchStall(absl::Now()) || !systemd_ || systemd_->isReady()) return;
  systemd_->ready(absl::StrFormat("forwarding: %u service(s), %u worker(s)",
                                  config_.services.size(), datapath_.workerCount()));
  logLine("systemd: ready");
}

void ControlPlane::applyHealthChanges(const std::vector<BackendHealthChange>& changes) {
  if (changes.empty()) return;
  const absl::Time start = absl::Now();
  std::vector<size_t> services;
  for (const BackendHealthChange& change : changes) {
    const ServiceConfig& service = config_.services[change.service];
    logLine(absl::StrFormat("health: service '%s' backend '%s' (%s): %s -> %s: %s", service.name,
                            service.backends[change.backend].name, change.target,
                            toString(change.transition.from), toString(change.transition.to),
                            change.transition.reason));
    services.push_back(change.service);
  }
  std::sort(services.begin(), services.end());
  services.erase(std::unique(services.begin(), services.end()), services.end());
  // Min-disruption failover from each service's all-healthy table (ServiceState::setHealth).
  // In a fleet with table generations, the fleet's verdicts count instead, and these only while
  // etcd is out of reach (control/fleet_serving.h).
  fleet_.reportVerdicts(config_, *health_);
  fleet_.reportFailSafe(config_, *health_);
  if (!tables_.serveVerdicts(
          services,
          [this](const ServiceState& state, size_t s) {
            return fleet_.serving().verdicts(state, health_->healthy(s));
          },
          absl::Now())) {
    return;
  }
  publishTableChange(start, "the health change");
}

void ControlPlane::publishTableChange(absl::Time start, absl::string_view event) {
  if (absl::Status status = publishSnapshot(); !status.ok()) {
    logLine(
        absl::StrCat("snapshot not rebuilt, the previous one keeps serving: ", status.message()));
    return;
  }
  rollouts_.reportWhenInForce(start, std::string(event));
}

void ControlPlane::reportProbesNotRun() {
  const uint64_t not_run = health_->probesNotRun();
  if (not_run == probes_not_run_logged_) return;
  logLine(absl::StrFormat(
      "health: %u probe(s) could not run for a local error (the last: %s); they count for no "
      "backend, and a check without probes for long is shown as stale",
      not_run - probes_not_run_logged_, health_->lastNotRunReason()));
  probes_not_run_logged_ = not_run;
}

std::string ControlPlane::countersText() const { return berth::countersText(countersReport()); }

std::string ControlPlane::countersJson() const { return berth::countersJson(countersReport()); }

ControlPlane::~ControlPlane() {
  // The start-up table has stopped every step by now; these are no-ops then, and a safety net
  // for a caller that did not.
  closeTelemetry();
  stopWorkers();
  closeMetrics();
  closeControlSocket();
  stopServices();
  destroyWorkers();
  closePorts();
  stopLcores();
}

}  // namespace berth
