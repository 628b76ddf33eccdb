#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/api/control_socket.h"
#include "berth/api/telemetry_answer.h"
#include "berth/config/config.h"
#include "berth/control/drain_state.h"
#include "berth/control/fleet_binding.h"
#include "berth/control/nat_pool.h"
#include "berth/control/neighbor_resolver.h"
#include "berth/control/periodic_jobs.h"
#include "berth/control/rate_meter.h"
#include "berth/control/reload_builder.h"
#include "berth/control/reload_queue.h"
#include "berth/control/reply_channels.h"
#include "berth/control/service_tables.h"
#include "berth/control/snapshot_rollouts.h"
#include "berth/control/status_report.h"
#include "berth/control/stop_withdrawal.h"
#include "berth/control/systemd_notifier.h"
#include "berth/daemon/control_commands.h"
#include "berth/daemon/datapath.h"
#include "berth/daemon/log_line.h"
#include "berth/dataplane/snapshot.h"
#include "berth/fleet/agent.h"
#include "berth/health/monitor.h"

namespace berth {

// What the signal handlers set, for the management loop to act on.
struct ControlPlaneSignals {
  std::atomic<bool>& stop;            // SIGINT, SIGTERM
  std::atomic<bool>& print_counters;  // SIGUSR1
  std::atomic<bool>& reload;          // SIGHUP
};

// The control plane as berthd runs it once the EAL is up: its ports, workers and management
// loop, set up and torn down by the steps below (docs/architecture.md, start-up). The management
// loop runs on the main lcore: it learns next hops' MACs from what workers report, asks for the
// ones still missing, applies health verdicts to the service states, republishes the snapshot
// when a MAC or a table changes, and answers the control socket, metrics and telemetry. Its
// policies are pure parts of their own (service_state.h, announce.h, reports.h, prometheus.h,
// load_publication.h, explain_reply.h); this class gathers their inputs from the runtime.
class ControlPlane : private ReloadTarget, private CommandTarget {
 public:
  // `drain_state_path`: where drains made with berthctl are kept across restarts
  // (control/drain_state.h); empty for nowhere.
  ControlPlane(std::string config_path, std::string drain_state_path, ControlSocketPaths sockets,
               Config config, const ControlPlaneSignals& signals);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // The start-up steps, in the order berthd's start-up table runs them (src/berthd/main.cc).
  // Each step's stop undoes it, and does nothing when the step did not run, so a failed start
  // unwinds by calling the stops of the steps before it, in reverse.
  //   lcores:  the worker lcores and the RCU publisher
  //   ports:   every configured port, started
  //   workers: one per worker lcore, on its socket (Worker::create)
  //   exception path: the ports' kernel interfaces made, and the thread between them and the
  //            workers started (runtime/exception_path.h); nothing without an `exception` port
  //   services: the health monitor, every service's state, and the first snapshot published
  //   control sockets (the full and the read-only one), metrics (when configured), telemetry
  //   launch:  every worker running its loop
  // Errors name what failed.
  // The datapath's steps (daemon/datapath.h) are the lcores', ports', workers', exception
  // path's and launch's.
  absl::Status startLcores();
  void stopLcores();
  absl::Status openPorts() { return datapath_.openPorts(); }
  void closePorts() { datapath_.closePorts(); }
  absl::Status createWorkers() { return datapath_.createWorkers(counter_ids_); }
  void destroyWorkers() { datapath_.destroyWorkers(); }
  absl::Status startExceptionPath() { return datapath_.startExceptionPath(); }
  void stopExceptionPath() { datapath_.stopExceptionPath(); }
  absl::Status startServices();
  void stopServices();
  absl::Status openControlSocket() { return replies_.openSockets(); }
  void closeControlSocket() { replies_.closeSockets(); }
  absl::Status openMetrics() { return replies_.openMetrics(config_.metrics.listen); }
  void closeMetrics() { replies_.closeMetrics(); }
  absl::Status openTelemetry();
  void closeTelemetry();
  // With a fleet section: the fleet agent (fleet/agent.h) and the cache writers. Before it,
  // berthd hands over the local file's part, the version its cache held and the table generation
  // its cache held (none when absent), which the services start on.
  void setFleetStart(Config local, std::optional<FleetVersionText> cached,
                     std::shared_ptr<const FleetGeneration> cached_generation);
  absl::Status startFleet();
  void stopFleet();
  absl::Status launchWorkers() { return datapath_.launchWorkers(); }
  // Stops the workers and flushes their TX.
  void stopWorkers() { datapath_.stopWorkers(); }

  // For tests of the systemd watchdog: while a file exists at `path`, the management loop holds
  // at the top of its turn, as a stuck loop would (a stop still ends it).
  void setTestingHoldFile(std::string path) { testing_hold_file_ = std::move(path); }

  // Runs the management loop until `stop` is set, then stops the workers and flushes their TX.
  void run();
  // The summed counters, per service and per backend, as text or as JSON.
  std::string countersText() const;
  std::string countersJson() const;
  // Seconds from the first frame any worker received to the last: how long a replay took.
  double rxWindowSeconds() const { return datapath_.rxWindowSeconds(); }
  // A /berth/... telemetry command's answer (control_metrics.cc); management thread only.
  TelemetryAnswer telemetryAnswer(absl::string_view command, absl::string_view params) const;

 private:
  // The snapshot of `services` on `dataplane`'s ports, with the MACs learned so far.
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshotFor(
      const DataplaneConfig& dataplane, const std::vector<ServiceState>& services,
      uint64_t generation);
  absl::Status publishSnapshot();
  // Logs the publishes now in force on every worker (control/snapshot_rollouts.h), and frees
  // retired snapshots.
  void reportRollouts();
  // The neighbour cache's turn (control/neighbor_resolver.h): its requests sent through worker
  // 0, the snapshot published on a change.
  void resolveNeighbors();
  // Logs each change, rebuilds the affected services' tables with min-disruption failover, and
  // publishes the snapshot.
  void applyHealthChanges(const std::vector<BackendHealthChange>& changes);
  // Reloads (control_reload.cc, control/reload_queue.h): a request's number, answered once a
  // build begun after it has been applied or refused; what a build reads, and its apply.
  uint64_t requestReload() override;
  ReloadSource fileSource() const override;
  ReloadSource versionSource(const FleetVersionText& version) const override;
  DrainsByService drains() const override;
  void versionDone(FleetVersionText version, const absl::Status& status,
                   const std::string& why) override;
  uint64_t snapshotGeneration() const override { return rollouts_.generation(); }
  // Table generations (control_fleet.cc, docs/scale-out.md "Table generations"). Each turn: a
  // new generation from the agent becomes every service's base table, and whether etcd answers
  // decides whose verdicts count. While it does, the fleet's (the generation's down set) alone;
  // while it does not, a backend this instance's probes see down is also taken out, fail-safe,
  // logged and reported as a divergence, and put back once etcd answers unless the fleet agrees.
  void serveFleetGenerations();
  // Each of `services` (built with every backend healthy) served with `monitor`'s verdicts.
  absl::Status applyServingVerdicts(std::vector<ServiceState>& services,
                                    const HealthMonitor& monitor) const;
  // Each service's base table from the generation in force, for a build.
  GenerationBase generationBase() const override { return fleet_.generationBase(tables_.states()); }
  absl::Status applyReload(BuiltReload built) override;
  absl::Status refuseReload(absl::string_view why) override;
  // The drains kept by the last run (control/drain_state.h), or none.
  DrainsByService restoredDrains() const {
    return drain_state_ ? drain_state_->restore(config_.services, logLine) : DrainsByService{};
  }
  // Hands the drains in force to the drain state writer, which writes them off the loop.
  void saveDrains();
  // After tables changed on `event`, which began at `start`: the snapshot published (or why
  // not logged, the previous one serving on), and reported once in force on every worker.
  void publishTableChange(absl::Time start, absl::string_view event);
  // What the control socket's commands ask of the loop (daemon/control_commands.h); the figures
  // are gathered in control_metrics.cc, with the metrics endpoint's and telemetry's.
  StatusReport statusReport() const override;
  CountersReport countersReport() const override;
  std::vector<ServiceRow> serviceRows() const override;
  std::vector<BackendRow> backendRows() const override;
  absl::StatusOr<ServiceTables::DrainOutcome> setDrained(const std::string& service,
                                                         const std::string& backend,
                                                         bool drain) override;
  void routesAnnounced(uint32_t routes) override;
  ForwardingState forwardingState() const override;
  // The workers' counters summed (sumCounters()), then the neighbour cache's: what `stats`,
  // the metrics endpoint and telemetry all show.
  std::vector<std::pair<std::string, uint64_t>> summedCounters() const;
  // On the renderer's thread, or here before it starts.
  std::shared_ptr<const RenderedText> renderOffLoop(ReplyRenderer::Render render) {
    return replies_.renderOffLoop(std::move(render));
  }
  // Starts rendering the Prometheus text (control_metrics.cc).
  std::shared_ptr<const RenderedText> renderMetrics();

  // Telemetry (control_metrics.cc): the /berth/... commands answer through a mailbox the management
  // loop serves.
  void serveTelemetry();
  // Rates over the last interval for `stats`: the loop samples the summed counters every
  // kRateInterval.
  static constexpr absl::Duration kRateInterval = absl::Seconds(1);
  // The management loop's periodic jobs (control/periodic_jobs.h), the ones below among them.
  void addPeriodicJobs();
  // Whether the workers still pass RCU quiescent states: a grace period started every
  // kStallProbeInterval must end within kDatapathStallThreshold, or the datapath is stalled and
  // `announce` withdraws every route until it ends. systemd hears berthd ready on the first
  // probe that finds every worker running.
  void watchWorkers();
  // While the testing hold file exists (setTestingHoldFile), waits.
  void holdForTesting();
  // `announce`; with `announced` (berth-announcer's count of the routes in BIRD), a 0 while
  // stopping starts the last stretch of forwarding (control/stop_withdrawal.h).
  std::string announceReply(const ControlRequest& request);
  // Flow sync's peers: the config's and, in a fleet, every other instance at the endpoint it
  // reports; their addresses are the exception path's sync class. Once a second.
  void watchSyncPeers();
  // Logs, at most once a second, how many health probes a local error stopped since the last
  // such line.
  void reportProbesNotRun();

  std::string config_path_;
  std::unique_ptr<DrainStateWriter> drain_state_;  // none without a path
  // The sockets, the metrics endpoint and the renderer thread.
  ReplyChannels replies_;
  RateMeter rates_;
  TrafficRateMeter traffic_rates_;  // per service and backend
  NatPools nat_pools_;              // each worker's share of the Full-NAT pools, for metrics
  Config config_;                   // as the config file gives it; what is in force is in tables_
  // Every service's settings in force, tables, health and drains, in config order (the health
  // monitor's order), with what each table change moved.
  ServiceTables tables_{[](const std::string& line) { logLine(line); }};
  ControlPlaneSignals signals_;
  // The lcores, ports, workers and exception path, and the snapshots' publisher.
  Datapath datapath_{config_, [](const std::string& line) { logLine(line); }};
  std::unique_ptr<HealthMonitor> health_;
  CounterIds counter_ids_;
  NeighborResolver neighbors_;
  PeriodicJobs jobs_;
  // Under systemd (control/systemd_notifier.h): ready once the workers have all passed a
  // quiescent state, watchdog pings each turn, stopping.
  std::unique_ptr<SystemdNotifier> systemd_;
  std::string testing_hold_file_;
  // Once a stop is asked for with BGP announcements: routes withdrawn, still forwarding until
  // the withdrawal has had time to reach the routers.
  std::optional<StopWithdrawal> stop_withdrawal_;
  // The snapshot generation in use, and the publishes to report once in force.
  SnapshotRollouts rollouts_;
  // Reloads and fleet versions, one build at a time (made on the main lcore with the lcores).
  std::unique_ptr<ReloadQueue> reloads_;
  // The fleet: the agent, versions, whose verdicts count, and the caches.
  FleetBinding fleet_{[](const std::string& line) { logLine(line); }};
  uint64_t probes_not_run_logged_ = 0;
  absl::Time started_ = absl::Now();
  // The control socket's commands, over the parts above.
  ControlCommands commands_{CommandParts{config_, config_path_, tables_, datapath_, neighbors_,
                                         rollouts_, replies_, rates_, reloads_},
                            *this};
};

}  // namespace berth
