#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/control/control_socket.h"
#include "berth/control/drain_state.h"
#include "berth/control/fleet_binding.h"
#include "berth/control/flow_sync.h"
#include "berth/control/line_limiter.h"
#include "berth/control/mailbox.h"
#include "berth/control/metrics_server.h"
#include "berth/control/neighbor_cache.h"
#include "berth/control/periodic_jobs.h"
#include "berth/control/port_stats.h"
#include "berth/control/reload_builder.h"
#include "berth/control/reload_queue.h"
#include "berth/control/reply_renderer.h"
#include "berth/control/reports.h"
#include "berth/control/service_state.h"
#include "berth/control/service_tables.h"
#include "berth/control/stop_withdrawal.h"
#include "berth/control/systemd_notifier.h"
#include "berth/control/telemetry_answer.h"
#include "berth/dataplane/backend_loads.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/neighbor_discovery.h"
#include "berth/dataplane/snapshot.h"
#include "berth/dataplane/stall_watch.h"
#include "berth/fleet/agent.h"
#include "berth/health/monitor.h"
#include "berth/runtime/exception_path.h"
#include "berth/runtime/port.h"
#include "berth/runtime/publisher.h"
#include "berth/runtime/worker.h"
#include "berth/util/json_writer.h"
#include "berth/util/latest_file_writer.h"

namespace berth {

// A line of berthd's log on stderr; while the lcores run, written by a thread of its own so that
// the management loop never waits on stderr (util/async_log.h).
void logLine(absl::string_view line);

// What the signal handlers set, for the management loop to act on.
struct ControlPlaneSignals {
  std::atomic<bool>& stop;            // SIGINT, SIGTERM
  std::atomic<bool>& print_counters;  // SIGUSR1
  std::atomic<bool>& reload;          // SIGHUP
};

// Where berthd answers berthctl: the control socket (mode 0600, every command) and the read-only
// socket (status, stats and announce, for berth-announcer and monitoring without admin rights;
// none when its path is empty). The read-only socket is mode 0660 with `read_only_group` as its
// group, or 0666 without one.
struct ControlSocketPaths {
  std::string control;
  std::string read_only;
  std::optional<gid_t> read_only_group;
};

// How long the workers may go without all passing a quiescent state before berthd calls the
// datapath stalled and withdraws its BGP routes: far beyond any loop (microseconds), short
// beside BGP's hold time.
inline constexpr absl::Duration kDatapathStallThreshold = absl::Milliseconds(500);
inline constexpr absl::Duration kStallProbeInterval = absl::Milliseconds(100);

// The control plane as berthd runs it once the EAL is up: its ports, workers and management
// loop, set up and torn down by the steps below (docs/architecture.md, start-up). The management
// loop runs on the main lcore: it learns next hops' MACs from what workers report, asks for the
// ones still missing, applies health verdicts to the service states, republishes the snapshot
// when a MAC or a table changes, and answers the control socket, metrics and telemetry. Its
// policies are pure parts of their own (service_state.h, announce.h, reports.h, prometheus.h,
// load_publication.h, explain_reply.h); this class gathers their inputs from the runtime.
class ControlPlane : private ReloadTarget {
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
  absl::Status startLcores();
  void stopLcores();
  absl::Status openPorts();
  void closePorts();
  // Warns of each worker lcore that polls a port on another NUMA socket, or with
  // dataplane.strict_numa refuses to start naming them (control/numa_check.h).
  absl::Status checkNumaPlacement();
  // The first port on port `port`'s device: the one whose queues the workers poll.
  uint32_t deviceOf(uint32_t port) const;
  // That every worker that receives on a port has a queue on the device its traffic leaves
  // through (two-arm, docs/two-arm.md): FailedPrecondition naming the ports otherwise.
  absl::Status checkEgressQueues(const Config& config) const;
  absl::Status createWorkers();
  void destroyWorkers();
  absl::Status startExceptionPath();
  void stopExceptionPath();
  absl::Status startServices();
  void stopServices();
  absl::Status openControlSocket();
  void closeControlSocket();
  absl::Status openMetrics();
  void closeMetrics();
  absl::Status openTelemetry();
  void closeTelemetry();
  // With a fleet section: the fleet agent (fleet/agent.h) and the cache writers. Before it,
  // berthd hands over the local file's part, the version its cache held and the table generation
  // its cache held (none when absent), which the services start on.
  void setFleetStart(Config local, std::optional<FleetVersionText> cached,
                     std::shared_ptr<const FleetGeneration> cached_generation);
  absl::Status startFleet();
  void stopFleet();
  absl::Status launchWorkers();
  // Stops the workers and flushes their TX.
  void stopWorkers();

  // For tests of the systemd watchdog: while a file exists at `path`, the management loop holds
  // at the top of its turn, as a stuck loop would (a stop still ends it).
  void setTestingHoldFile(std::string path) { testing_hold_file_ = std::move(path); }

  // Runs the management loop until `stop` is set, then stops the workers and flushes their TX.
  void run();
  // The summed counters, per service and per backend, as text or as JSON.
  std::string countersText() const;
  std::string countersJson() const;
  // Seconds from the first frame any worker received to the last: how long a replay took.
  double rxWindowSeconds() const;
  // A /berth/... telemetry command's answer (control_metrics.cc); management thread only.
  TelemetryAnswer telemetryAnswer(absl::string_view command, absl::string_view params) const;

 private:
  // The snapshot of `services` on `dataplane`'s ports, with the MACs learned so far.
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshotFor(
      const DataplaneConfig& dataplane, const std::vector<ServiceState>& services,
      uint64_t generation);
  absl::Status publishSnapshot();
  // Logs "snapshot N in use by every worker T ms after <event>" once every worker has passed a
  // quiescent state since the latest publish, from a later turn of the management loop, which
  // never waits for workers (so the figure includes up to a tick of the loop).
  void reportWhenInForce(absl::Time start, absl::string_view event);
  // The management loop's step for the above, and frees retired snapshots.
  void reportRollouts();
  // The neighbour cache's turn (control/neighbor_cache.h): its requests sent through worker 0,
  // what it learned logged (at most kNeighborLogLinesPerSecond), the snapshot published on a
  // change.
  void resolveNeighbors();
  bool sendNeighborRequest(const NextHopToResolve& hop);
  static constexpr uint32_t kNeighborLogLinesPerSecond = 10;
  // `neighbors`, and `neighbors flush`.
  std::unique_ptr<ReplyStream> neighborsReply(const ControlRequest& request);
  // Logs each change, rebuilds the affected services' tables with min-disruption failover, and
  // publishes the snapshot.
  void applyHealthChanges(const std::vector<BackendHealthChange>& changes);
  // Reloads (control_reload.cc, control/reload_queue.h): a request's number, answered once a
  // build begun after it has been applied or refused; what a build reads, and its apply.
  uint64_t requestReload();
  ReloadSource fileSource() const override;
  ReloadSource versionSource(const FleetVersionText& version) const override;
  DrainsByService drains() const override;
  void versionDone(FleetVersionText version, const absl::Status& status,
                   const std::string& why) override;
  uint64_t snapshotGeneration() const override { return generation_; }
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
  // The control socket's commands (control_commands.cc): the reply to one request.
  std::unique_ptr<ReplyStream> handleControl(const ControlRequest& request);
  // The drains kept by the last run (logged), or none; an unreadable file is logged and set
  // aside, never fatal.
  DrainsByService restoredDrains();
  // Hands the drains in force to the drain state writer, which writes them off the loop.
  void saveDrains();
  // After tables changed on `event`, which began at `start`: the snapshot published (or why
  // not logged, the previous one serving on), and reported once in force on every worker.
  void publishTableChange(absl::Time start, absl::string_view event);
  using CommandHandler = std::unique_ptr<ReplyStream> (*)(ControlPlane&, const ControlRequest&);
  static const absl::flat_hash_map<std::string, CommandHandler>& commandHandlers();
  // InternalError naming a command of the table that has no handler.
  static absl::Status checkCommandHandlers();
  // The read-only socket's commands: as handleControl, with `stats` rendered at most once every
  // kReadOnlyStatsInterval.
  std::unique_ptr<ReplyStream> handleReadOnly(const ControlRequest& request);
  static constexpr absl::Duration kReadOnlyStatsInterval = absl::Seconds(1);
  std::string statusReply() const;
  // stats, services and backends gather their figures on the loop and render them on the
  // renderer's thread (control/reply_renderer.h); so does the Prometheus text.
  std::unique_ptr<ReplyStream> statsReply();
  std::shared_ptr<const RenderedText> renderStats();
  std::unique_ptr<ReplyStream> servicesReply();
  std::unique_ptr<ReplyStream> backendsReply();
  struct Rates;
  static std::string statsReplyJson(const CountersReport& report, const Rates& rates,
                                    const std::shared_ptr<const PortStatsReading>& ports,
                                    const PortRates& port_rates);
  // On the renderer's thread, or here before it starts.
  std::shared_ptr<const RenderedText> renderOffLoop(ReplyRenderer::Render render);
  // Starts rendering the Prometheus text (control_metrics.cc).
  std::shared_ptr<const RenderedText> renderMetrics();
  std::unique_ptr<ReplyStream> reloadReply();
  // The rows of `services`, `backends`, telemetry and the metrics endpoint (control/reports.h),
  // with the workers' traffic counters summed.
  TrafficTotals trafficOf(uint32_t id, bool backend) const;
  std::vector<ServiceRow> currentServiceRows() const;
  std::vector<BackendRow> currentBackendRows() const;
  // The summed counters, for `stats`, SIGUSR1 and the exit report.
  CountersReport countersReport() const;
  // The workers' counters summed (sumCounters()), then the neighbour cache's: what `stats`,
  // the metrics endpoint and telemetry all show.
  std::vector<std::pair<std::string, uint64_t>> summedCounters() const;
  // Ways of every worker's connection table that hold a connection.
  uint64_t connectionsTracked() const;
  std::string drainReply(const ControlRequest& request, bool drain);
  // `explain`: where a flow's next packet goes and why, with each worker's connection entry.
  // The reply waits, on later turns of the loop, for the workers' answers.
  std::unique_ptr<ReplyStream> explainReply(const ControlRequest& request);
  // Asks every worker free to take a question for its connection-table entry of `key`; per
  // worker, the number of the question asked, or nullopt when it was not asked.
  using WorkerQuestions = std::vector<std::optional<uint32_t>>;
  WorkerQuestions askWorkers(const ConnectionKey& key);
  bool workersAnswered(const WorkerQuestions& asked) const;
  // The first entry a worker found, or nullopt; `note` says which workers did not answer.
  std::optional<TrackedConnection> collectAnswers(const WorkerQuestions& asked,
                                                  std::string& note) const;
  // The explain reply for `flow`, with what the workers answered.
  std::string explainAnswer(const FlowKey& flow, const std::optional<TrackedConnection>& tracked,
                            const std::string& note) const;
  // `table`: one service's live table, as `berthctl table --config` renders one from a file,
  // in pieces.
  std::unique_ptr<ReplyStream> tableReply(const ControlRequest& request) const;

  // Telemetry (control_metrics.cc): the /berth/... commands answer through a mailbox the management
  // loop serves.
  void serveTelemetry();
  // /berth/ports: the port names without a parameter, else the named port's statistics.
  void portsTelemetry(absl::string_view port_name, TelemetryAnswer& answer) const;
  // Rates over the last interval for `stats`: the loop samples the summed counters every
  // kRateInterval.
  static constexpr absl::Duration kRateInterval = absl::Seconds(1);
  struct RateSample {
    absl::Time at = absl::InfinitePast();
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_packets = 0;
    uint64_t tx_bytes = 0;
    uint64_t drops = 0;  // every drop reason and parse error
  };
  struct Rates {
    double interval_s = 0;  // 0 until two samples exist
    double rx_pps = 0;
    double tx_pps = 0;
    double rx_bps = 0;
    double tx_bps = 0;
    double drops_per_s = 0;
  };
  void sampleRates(absl::Time now);
  // The management loop's periodic jobs (control/periodic_jobs.h), the ones below among them.
  void addPeriodicJobs();
  // Every kLoadPublishIntervalMs: each bounded-load service's per-backend active flows, summed
  // over the workers' connection gauges, for the workers' new-flow choices.
  void publishLoads();
  // Whether the workers still pass RCU quiescent states: a grace period started every
  // kStallProbeInterval must end within kDatapathStallThreshold, or the datapath is stalled and
  // `announce` withdraws every route until it ends.
  void watchWorkers();
  // While the testing hold file exists (setTestingHoldFile), waits.
  void holdForTesting();
  // Whether this instance has BGP announcements to withdraw before it stops.
  bool announcesOverBgp() const;
  // `announce`; with `announced` (berth-announcer's count of the routes in BIRD), a 0 while
  // stopping starts the last stretch of forwarding (control/stop_withdrawal.h).
  std::string announceReply(const ControlRequest& request);
  Rates rates() const;
  // Logs each port's link going up or down (a memif peer connecting or leaving, a cable).
  void watchLinks();
  // Flow sync's peers: the config's and, in a fleet, every other instance at the endpoint it
  // reports; their addresses are the exception path's sync class. Once a second.
  void watchSyncPeers();
  // Logs, at most once a second, how many health probes a local error stopped since the last
  // such line.
  void reportProbesNotRun();

  std::string config_path_;
  std::unique_ptr<DrainStateWriter> drain_state_;  // none without a path
  ControlSocketPaths socket_paths_;
  std::unique_ptr<ControlSocket> control_;
  std::unique_ptr<ControlSocket> read_only_;  // when socket_paths_.read_only is set
  std::shared_ptr<const RenderedText> read_only_stats_;
  std::shared_ptr<const RenderedText> backends_rendering_;  // the latest, maybe under way
  uint64_t backends_rendering_generation_ = 0;              // the snapshot it shows
  absl::Time read_only_stats_at_ = absl::InfinitePast();
  std::unique_ptr<MetricsServer> metrics_;  // when the config has `metrics`
  RateSample rates_previous_;
  RateSample rates_latest_;
  Config config_;  // as the config file gives it; what is in force is in tables_
  // Every service's settings in force, tables, health and drains, in config order (the health
  // monitor's order), with what each table change moved.
  ServiceTables tables_{[](const std::string& line) { logLine(line); }};
  std::atomic<bool>& stop_;
  std::atomic<bool>& print_counters_;
  std::atomic<bool>& reload_;
  std::atomic<bool> workers_stop_{false};
  std::vector<OpenedPort> ports_;
  // Reads every device's statistics once a second, off the loop; none before openPorts().
  std::unique_ptr<PortStatsSampler> port_stats_;
  static constexpr absl::Duration kPortStatsInterval = absl::Seconds(1);
  std::vector<MacAddress> port_macs_;
  std::vector<uint8_t> port_checksum_offloads_;  // by port, as port_macs_
  std::unique_ptr<HealthMonitor> health_;
  CounterIds counter_ids_;
  std::unique_ptr<FlowSync> flow_sync_;  // with a sync section
  NeighborCache neighbors_;
  std::vector<NeighborNews> neighbor_news_;  // one turn's, reused
  LineLimiter neighbor_log_{kNeighborLogLinesPerSecond};
  std::unique_ptr<SnapshotPublisher> publisher_;
  std::unique_ptr<BackendLoads> backend_loads_ = std::make_unique<BackendLoads>();
  PeriodicJobs jobs_;
  StallWatch stall_watch_{kStallProbeInterval, kDatapathStallThreshold};
  // Under systemd (control/systemd_notifier.h): ready once the workers have all passed a
  // quiescent state, watchdog pings each turn, stopping.
  std::unique_ptr<SystemdNotifier> systemd_;
  std::string testing_hold_file_;
  // Once a stop is asked for with BGP announcements: routes withdrawn, still forwarding until
  // the withdrawal has had time to reach the routers.
  std::optional<StopWithdrawal> stop_withdrawal_;
  std::vector<WorkerPtr> workers_;                 // each in memory on its lcore's socket
  std::unique_ptr<ExceptionPath> exception_path_;  // when a port has a kernel interface
  uint64_t generation_ = 0;
  uint64_t published_token_ = 0;  // the RCU token of the latest publish
  // Publishes not yet in force on every worker, to be reported when they are.
  struct Rollout {
    uint64_t token;
    uint64_t generation;
    absl::Time start;
    std::string event;
  };
  std::vector<Rollout> rollouts_;
  bool launched_ = false;
  std::vector<unsigned> lcores_;  // the worker lcores, one worker each
  std::vector<int> link_up_;      // per port: 1 up, 0 down, -1 not yet looked at
  // Reloads and fleet versions, one build at a time (made on the main lcore with the lcores).
  std::unique_ptr<ReloadQueue> reloads_;
  std::unique_ptr<ReplyRenderer> renderer_;
  // The fleet: the agent, versions, whose verdicts count, and the caches.
  FleetBinding fleet_{[](const std::string& line) { logLine(line); }};
  uint64_t probes_not_run_logged_ = 0;
  absl::Time started_ = absl::Now();
};

// Helpers the daemon's files share.
uint64_t logLinesDropped();
// Milliseconds of wall time, and uniform jitter in [0, 1), for the health monitor.
std::function<uint64_t()> healthClock();
std::function<double()> healthJitter();

}  // namespace berth
