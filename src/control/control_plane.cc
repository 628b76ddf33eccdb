#include "berth/control/control_plane.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <random>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/control/descriptor_budget.h"
#include "berth/control/load_publication.h"
#include "berth/control/numa_check.h"
#include "berth/dataplane/backend_loads.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/async_log.h"
#include "berth/util/json_writer.h"
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

std::function<uint64_t()> healthClock() {
  // Steady time: a wall-clock step (NTP) must not hold probes back or fire them all at once.
  return [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  };
}

std::function<double()> healthJitter() {
  auto random = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [random] { return std::uniform_real_distribution<double>(0.0, 1.0)(*random); };
}

namespace {

// Set while the management loop may run: from the lcores' start to their stop.
std::unique_ptr<AsyncLog>& asyncLog() {
  static auto* log = new std::unique_ptr<AsyncLog>();
  return *log;
}

}  // namespace

uint64_t logLinesDropped() { return asyncLog() == nullptr ? 0 : asyncLog()->dropped(); }

void logLine(absl::string_view line) {
  std::string text = absl::StrCat("berthd: ", line, "\n");
  if (asyncLog() != nullptr) {
    asyncLog()->write(std::move(text));
  } else {
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
}

ControlPlane::ControlPlane(std::string config_path, std::string drain_state_path,
                           ControlSocketPaths sockets, Config config,
                           const ControlPlaneSignals& signals)
    : config_path_(std::move(config_path)),
      drain_state_(drain_state_path.empty()
                       ? nullptr
                       : std::make_unique<DrainStateWriter>(std::move(drain_state_path))),
      socket_paths_(std::move(sockets)),
      config_(std::move(config)),
      stop_(signals.stop),
      print_counters_(signals.print_counters),
      reload_(signals.reload),
      neighbors_(NeighborSettings::of(config_.dataplane.neighbors), std::random_device{}()) {}

absl::Status ControlPlane::startLcores() {
  BERTH_RETURN_IF_ERROR(checkCommandHandlers());
  if (config_.dataplane.ports.empty()) {
    return absl::InvalidArgumentError("dataplane.ports: berthd needs at least one port");
  }
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) { lcores_.push_back(lcore); }
  if (lcores_.empty()) {
    return absl::InvalidArgumentError(
        "EAL: no worker lcore; give at least two, the first for management (-l 0-1, or "
        "--lcores 0@0,1@0 to share one CPU)");
  }
  BERTH_ASSIGN_OR_RETURN(publisher_,
                         SnapshotPublisher::create(static_cast<uint16_t>(lcores_.size())));
  // Created on the main lcore, whose CPU the EAL has pinned this thread to: the log's writer
  // runs there too, never on a worker's CPU.
  asyncLog() = std::make_unique<AsyncLog>(STDERR_FILENO, "berthd: ");
  // Likewise the reload builder and the reply renderer, so that parsing a big config or
  // rendering a big reply never takes a worker's CPU.
  reloads_ = std::make_unique<ReloadQueue>(static_cast<ReloadTarget&>(*this),
                                           [](const std::string& line) { logLine(line); });
  renderer_ = std::make_unique<ReplyRenderer>();
  return absl::OkStatus();
}

void ControlPlane::stopLcores() {
  renderer_.reset();
  reloads_.reset();
  asyncLog().reset();
  publisher_.reset();
}

namespace {

const char* rssKeyText(RssKeyKind key) {
  switch (key) {
    case RssKeyKind::kRandom:
      return "on (random Toeplitz key)";
    case RssKeyKind::kSymmetric:
      return "on (symmetric Toeplitz key)";
    case RssKeyKind::kFixed:
      return "on (the config's Toeplitz key)";
  }
  return "on";
}

// Which outer checksums the NIC fills in and which berth writes (docs/nics.md).
std::string checksumOffloadText(uint8_t offloads, bool wanted) {
  if (!wanted) return "in software (checksum_offload: false)";
  if (offloads == 0) return "in software (the PMD offers no IPv4 or UDP checksum offload)";
  return absl::StrCat(
      "by the NIC: ",
      (offloads & kChecksumOffloadIpv4Header) ? "IPv4 header" : "IPv4 header in software",
      (offloads & kChecksumOffloadUdp) ? ", UDP (GUE over IPv6)" : ", UDP in software");
}

std::string vlanText(uint16_t vlan) {
  return vlan == 0 ? std::string("untagged") : absl::StrCat("VLAN ", vlan);
}

}  // namespace

absl::Status ControlPlane::openPorts() {
  std::vector<std::string> warnings;
  const std::vector<PortConfig>& configs = config_.dataplane.ports;
  for (size_t p = 0; p < configs.size(); ++p) {
    const PortConfig& port_config = configs[p];
    // A VLAN port on a device an earlier port opened shares that port's device (docs/vlans.md).
    if (const uint32_t first = deviceOf(static_cast<uint32_t>(p)); first < p) {
      OpenedPort shared = ports_[first];
      shared.name = port_config.name;
      shared.owns_device = false;
      logLine(absl::StrFormat("port '%s': %s on the device of port '%s', MTU %u", port_config.name,
                              vlanText(port_config.vlan), configs[first].name, port_config.mtu));
      port_macs_.push_back(shared.mac);
      port_checksum_offloads_.push_back(shared.checksum_offloads);
      ports_.push_back(std::move(shared));
      continue;
    }
    // The device takes the largest MTU of its ports; each port's own bounds its traffic.
    PortConfig device_config = port_config;
    for (const PortConfig& other : configs) {
      if (other.device == port_config.device) {
        device_config.mtu = std::max(device_config.mtu, other.mtu);
      }
    }
    absl::StatusOr<OpenedPort> port =
        openPort(device_config, static_cast<uint16_t>(lcores_.size()), warnings);
    if (!port.ok()) return port.status();
    logLine(absl::StrFormat(
        "port '%s': %s, DPDK port %u, MAC %s, %u queue pair(s) of %u RX and %u TX descriptors, "
        "%u mbufs, RSS %s, MTU %u, NUMA socket %s, outer checksums %s%s",
        port->name, port->driver, port->port_id, port->mac.toString(), port->queues,
        port->rx_descriptors, port->tx_descriptors, port->pool_mbufs,
        port->rss ? rssKeyText(port_config.rss_key) : "off", device_config.mtu,
        port->socket >= 0 ? absl::StrCat(port->socket) : "unknown",
        checksumOffloadText(port->checksum_offloads, port_config.checksum_offload),
        port_config.vlan != 0 ? absl::StrCat(", ", vlanText(port_config.vlan)) : ""));
    port_macs_.push_back(port->mac);
    port_checksum_offloads_.push_back(port->checksum_offloads);
    ports_.push_back(*std::move(port));
  }
  for (const std::string& warning : warnings) logLine(absl::StrCat("warning: ", warning));
  std::vector<OpenedPort> devices;
  for (const OpenedPort& port : ports_) {
    if (port.owns_device) devices.push_back(port);
  }
  port_stats_ = std::make_unique<PortStatsSampler>(
      [devices = std::move(devices)] {
        PortStatsReading reading;
        for (const OpenedPort& device : devices) reading.ports.push_back(readPortStats(device));
        return reading;
      },
      kPortStatsInterval);
  BERTH_RETURN_IF_ERROR(checkNumaPlacement());
  return checkEgressQueues(config_);
}

absl::Status ControlPlane::checkNumaPlacement() {
  std::vector<PortOnSocket> ports;
  for (const OpenedPort& port : ports_) {
    if (port.owns_device) ports.push_back({port.name, port.socket, port.queues});
  }
  std::vector<WorkerOnSocket> workers;
  for (unsigned lcore : lcores_) {
    workers.push_back({lcore, static_cast<int>(rte_lcore_to_socket_id(lcore))});
  }
  const std::vector<std::string> lines = crossSocketPolling(ports, workers);
  if (lines.empty()) return absl::OkStatus();
  if (config_.dataplane.strict_numa) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataplane.strict_numa: ", absl::StrJoin(lines, "; ")));
  }
  for (const std::string& line : lines) logLine(absl::StrCat("warning: ", line));
  return absl::OkStatus();
}

absl::Status ControlPlane::checkEgressQueues(const Config& config) const {
  const std::vector<PortConfig>& ports = config.dataplane.ports;
  auto indexOf = [&](const std::string& name) {
    return static_cast<uint32_t>(
        absl::c_find_if(ports, [&](const PortConfig& port) { return port.name == name; }) -
        ports.begin());
  };
  // Worker w sends what it received on queue w, so the egress device needs as many queues.
  auto check = [&](uint32_t ingress, uint32_t egress, absl::string_view whose) -> absl::Status {
    const uint16_t receiving = ports_[deviceOf(ingress)].queues;
    const uint16_t sending = ports_[deviceOf(egress)].queues;
    if (sending >= receiving) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "port '%s', the egress of %s, has %u queue pair(s), fewer than the %u workers that "
        "receive on port '%s' and send through it; give it as many `queues`",
        ports[egress].name, whose, sending, receiving, ports[ingress].name));
  };
  for (uint32_t p = 0; p < ports.size(); ++p) {
    if (ports[p].egress.empty()) continue;
    BERTH_RETURN_IF_ERROR(
        check(p, indexOf(ports[p].egress), absl::StrCat("port '", ports[p].name, "'")));
  }
  for (const ServiceConfig& service : config.services) {
    if (service.egress.empty()) continue;
    for (uint32_t p = 0; p < ports.size(); ++p) {
      BERTH_RETURN_IF_ERROR(
          check(p, indexOf(service.egress), absl::StrCat("service '", service.name, "'")));
    }
  }
  return absl::OkStatus();
}

uint32_t ControlPlane::deviceOf(uint32_t port) const {
  const std::vector<PortConfig>& configs = config_.dataplane.ports;
  for (uint32_t first = 0; first < port; ++first) {
    if (configs[first].device == configs[port].device) return first;
  }
  return port;
}

void ControlPlane::closePorts() {
  // Waits for a reading under way, which must not meet a closed device.
  port_stats_.reset();
  for (OpenedPort& port : ports_) closePort(port);
  ports_.clear();
  port_macs_.clear();
  port_checksum_offloads_.clear();
}

absl::Status ControlPlane::createWorkers() {
  const bool exception_path = absl::c_any_of(
      config_.dataplane.ports, [](const PortConfig& port) { return port.exception.has_value(); });
  // With flow sync, every worker's connection table is keyed by one secret, the peers' flows'.
  std::optional<ConnectionHashKey> hash_key;
  if (config_.sync) {
    BERTH_ASSIGN_OR_RETURN(hash_key, drawConnectionHashKey());
    BERTH_ASSIGN_OR_RETURN(flow_sync_,
                           FlowSync::create(*config_.sync, publisher_->rcu(), *hash_key));
    flow_sync_->setNames(FlowRecordNames::of(counter_ids_, config_));
    logLine(absl::StrCat("sync: listening on ", config_.sync->listen.toString(), " for ",
                         config_.sync->peers.size(), " peers"));
  }
  for (uint16_t w = 0; w < lcores_.size(); ++w) {
    WorkerSetup setup;
    setup.connection_hash_key = hash_key;
    if (flow_sync_) setup.peer_flows = &flow_sync_->peerFlows();
    setup.lcore = lcores_[w];
    setup.rcu = publisher_->rcu();
    setup.rcu_thread_id = w;
    setup.snapshot = &publisher_->current();
    setup.stop = &workers_stop_;
    setup.conntrack = config_.dataplane.conntrack;
    setup.backend_loads = backend_loads_.get();
    setup.exception_path = exception_path;
    setup.idle = config_.dataplane.idle;
    // Worker w serves queue w of every device that has that many.
    for (uint32_t p = 0; p < ports_.size(); ++p) {
      setup.device_of_port.push_back(deviceOf(p));
      if (w >= ports_[p].queues || !ports_[p].owns_device) continue;
      setup.queues.push_back({ports_[p].port_id, w, p, ports_[p].poll_only_while_link_up});
    }
    BERTH_ASSIGN_OR_RETURN(WorkerPtr worker, Worker::create(setup));
    workers_.push_back(std::move(worker));
  }
  if (flow_sync_) {
    std::vector<rte_ring*> rings;
    for (const WorkerPtr& worker : workers_) rings.push_back(worker->flowExports());
    flow_sync_->setExportRings(std::move(rings));
  }
  return absl::OkStatus();
}

// The requests workers never sent are mbufs of the ports' pools, so this comes before
// closePorts() (the start-up table's reverse order).
void ControlPlane::destroyWorkers() {
  workers_.clear();
  // After the workers: they read its map and write its rings.
  flow_sync_.reset();
}

absl::Status ControlPlane::startExceptionPath() {
  std::vector<ExceptionPath::Port> ports;
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    const PortConfig& config = config_.dataplane.ports[p];
    if (!config.exception) continue;
    // Worker 0 serves queue 0 of every port: it sends the kernel's frames.
    ports.push_back({p, config, ports_[p].mac, ports_[p].pool, workers_.front().get()});
  }
  if (ports.empty()) return absl::OkStatus();
  std::vector<Worker*> workers;
  for (const WorkerPtr& worker : workers_) workers.push_back(worker.get());
  BERTH_ASSIGN_OR_RETURN(exception_path_, ExceptionPath::create(std::move(ports), workers));
  exception_path_->start();
  for (const std::string& interface : exception_path_->describe()) {
    logLine(absl::StrCat("exception path: kernel interface ", interface));
  }
  return absl::OkStatus();
}

// Before the workers are destroyed: the thread drains their rings.
void ControlPlane::stopExceptionPath() { exception_path_.reset(); }

absl::Status ControlPlane::startServices() {
  absl::StatusOr<std::unique_ptr<HealthMonitor>> monitor =
      HealthMonitor::create(config_, healthClock(), healthJitter());
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

DrainsByService ControlPlane::restoredDrains() {
  if (!drain_state_) return {};
  const std::string& path = drain_state_->path();
  absl::StatusOr<DrainsByService> drains = loadDrainState(path);
  if (!drains.ok()) {
    // berthd starts all the same: refusing would take a whole balancer down for a lost drain.
    // The file is kept aside for the operator; the next drain writes a new one.
    const std::string aside = path + ".unreadable";
    const bool kept = std::rename(path.c_str(), aside.c_str()) == 0;
    logLine(absl::StrCat("warning: drains not restored: ", drains.status().message(),
                         kept ? absl::StrCat("; kept as ", aside) : std::string()));
    return {};
  }
  std::vector<std::string> restored;
  for (const ServiceConfig& service : config_.services) {
    const auto found = drains->find(service.name);
    if (found == drains->end()) continue;
    for (const BackendConfig& backend : service.backends) {
      if (found->second.contains(backend.name)) {
        restored.push_back(absl::StrCat(service.name, "/", backend.name));
      }
    }
  }
  if (!restored.empty()) {
    logLine(absl::StrCat("drains restored from ", path, ": ", absl::StrJoin(restored, ", ")));
  }
  return *std::move(drains);
}

void ControlPlane::saveDrains() {
  if (drain_state_) drain_state_->save(drainsOf(tables_.states()));
}

void ControlPlane::stopServices() {
  tables_.replace({}, absl::Now());
  health_.reset();
}

absl::Status ControlPlane::openControlSocket() {
  BERTH_ASSIGN_OR_RETURN(control_, ControlSocket::open(socket_paths_.control));
  logLine(absl::StrCat("control socket: ", control_->path()));
  if (socket_paths_.read_only.empty()) return absl::OkStatus();
  const ControlSocketOptions read_only{.path = socket_paths_.read_only,
                                       .mode = socket_paths_.read_only_group ? 0660u : 0666u,
                                       .group = socket_paths_.read_only_group,
                                       .commands = readOnlyCommands(),
                                       .role = "read-only socket"};
  BERTH_ASSIGN_OR_RETURN(read_only_, ControlSocket::open(read_only));
  logLine(absl::StrCat("read-only socket (", absl::StrJoin(readOnlyCommands(), ", "),
                       "): ", read_only_->path()));
  return absl::OkStatus();
}

void ControlPlane::closeControlSocket() {
  read_only_.reset();
  control_.reset();
}

absl::Status ControlPlane::openMetrics() {
  if (!config_.metrics.listen) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
      MetricsServer::open(*config_.metrics.listen);
  if (!metrics.ok()) return metrics.status();
  metrics_ = *std::move(metrics);
  logLine(absl::StrCat("metrics: http://", metrics_->endpoint().toString(), "/metrics"));
  return absl::OkStatus();
}

void ControlPlane::closeMetrics() { metrics_.reset(); }

absl::Status ControlPlane::launchWorkers() {
  guardInterruptThreadUnmaps(publisher_->rcu());
  for (const WorkerPtr& worker : workers_) {
    if (const int result = rte_eal_remote_launch(runWorker, worker.get(), worker->lcore());
        result != 0) {
      stopWorkers();
      return absl::InternalError(absl::StrCat("workers: launching on lcore ", worker->lcore(), ": ",
                                              rte_strerror(-result)));
    }
    launched_ = true;
  }
  const std::optional<IdleConfig>& idle = config_.dataplane.idle;
  logLine(absl::StrFormat("forwarding: %u service(s), %u worker(s) on lcores %s, %s",
                          config_.services.size(), workers_.size(), absl::StrJoin(lcores_, ","),
                          idle ? absl::StrFormat("sleeping after %u empty polls for up to %u us",
                                                 idle->after_empty_polls, idle->max_sleep_us)
                               : std::string("busy-polling")));
  return absl::OkStatus();
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
  neighbors_.track(nextHopsToResolve(dataplane, inputs), dataplane.ports, absl::Now());
  return buildSnapshot(dataplane, inputs, port_macs_, neighbors_.table(), counter_ids_, generation,
                       port_checksum_offloads_);
}

absl::Status ControlPlane::publishSnapshot() {
  absl::StatusOr<std::unique_ptr<const Snapshot>> snapshot =
      snapshotFor(config_.dataplane, tables_.states(), generation_ + 1);
  if (!snapshot.ok()) return snapshot.status();
  ++generation_;
  published_token_ = publisher_->publish(*std::move(snapshot));
  if (flow_sync_) flow_sync_->setNames(FlowRecordNames::of(counter_ids_, config_));
  fleet_.reportTables(tables_.states());
  return absl::OkStatus();
}

void ControlPlane::reportWhenInForce(absl::Time start, absl::string_view event) {
  rollouts_.push_back(Rollout{published_token_, generation_, start, std::string(event)});
}

void ControlPlane::reportRollouts() {
  publisher_->reclaim();
  auto in_force = [this](const Rollout& rollout) { return publisher_->inForce(rollout.token); };
  for (const Rollout& rollout : rollouts_) {
    if (!in_force(rollout)) continue;
    logLine(
        absl::StrFormat("snapshot %u in use by every worker %.2f ms after %s", rollout.generation,
                        absl::ToDoubleMilliseconds(absl::Now() - rollout.start), rollout.event));
  }
  rollouts_.erase(std::remove_if(rollouts_.begin(), rollouts_.end(), in_force), rollouts_.end());
}

void ControlPlane::resolveNeighbors() {
  const absl::Time now = absl::Now();
  neighbor_news_.clear();
  const bool changed = neighbors_.turn(
      now, [this](const NextHopToResolve& hop) { return sendNeighborRequest(hop); },
      neighbor_news_);
  for (const NeighborNews& news : neighbor_news_) {
    std::optional<std::string> line = neighbor_log_.admit(
        now, absl::StrFormat("port '%s': %s", ports_[news.hop.port].name, describe(news)));
    if (line) logLine(*line);
  }
  if (changed) {
    if (absl::Status status = publishSnapshot(); !status.ok()) {
      logLine(
          absl::StrCat("snapshot not rebuilt, the previous one keeps serving: ", status.message()));
    }
  }
}

bool ControlPlane::sendNeighborRequest(const NextHopToResolve& hop) {
  const OpenedPort& port = ports_[hop.port];
  rte_mbuf* mbuf = rte_pktmbuf_alloc(port.pool);
  if (mbuf == nullptr) return false;
  const size_t length =
      buildNeighborRequest(rte_pktmbuf_mtod(mbuf, uint8_t*), rte_pktmbuf_tailroom(mbuf), port.mac,
                           hop.source, hop.address);
  if (length == 0 || rte_pktmbuf_append(mbuf, static_cast<uint16_t>(length)) == nullptr) {
    // Not a shortage that passes: counted as asked, so the next hops due after it still are.
    rte_pktmbuf_free(mbuf);
    return true;
  }
  if (const uint16_t vlan = config_.dataplane.ports[hop.port].vlan; vlan != 0) {
    mbuf->vlan_tci = vlan;
    if (rte_vlan_insert(&mbuf) != 0) {
      rte_pktmbuf_free(mbuf);
      return true;
    }
  }
  mbuf->port = hop.port;
  // Worker 0 serves queue 0 of every port.
  if (!workers_[0]->queueControlFrame(mbuf)) {
    rte_pktmbuf_free(mbuf);
    return false;
  }
  return true;
}

void ControlPlane::addPeriodicJobs() {
  jobs_.add("rates", kRateInterval, [this](absl::Time now) { sampleRates(now); });
  jobs_.add("bounded loads", absl::Milliseconds(kLoadPublishIntervalMs),
            [this](absl::Time) { publishLoads(); });
  jobs_.add("links", kLinkCheckInterval, [this](absl::Time) { watchLinks(); });
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
      if (stop_.load(std::memory_order_relaxed)) systemd_->stopping();
      systemd_->turn(absl::Now());
    }
    if (stop_.load(std::memory_order_relaxed) && !stop_withdrawal_) {
      if (!announcesOverBgp()) break;
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
    if (print_counters_.exchange(false)) {
      // Rendered and written by the renderer's thread: stdout may be a pipe nobody reads.
      renderOffLoop([report = countersReport()] {
        std::fputs(berth::countersText(report).c_str(), stdout);
        std::fflush(stdout);
        return std::string();
      });
    }
    applyHealthChanges(health_->poll(0));
    if (reload_.exchange(false)) requestReload();
    fleet_.turn(absl::Now());
    if (flow_sync_) flow_sync_->turn(absl::Now());
    serveFleetGenerations();
    reloads_->serve([this] { return fleet_.takeVersion(); });
    const auto handle = [this](const ControlRequest& request) { return handleControl(request); };
    control_->serve(handle);
    if (read_only_) {
      read_only_->serve([this](const ControlRequest& request) { return handleReadOnly(request); });
    }
    if (metrics_) metrics_->serve([this] { return renderMetrics(); });
    serveTelemetry();
    if (port_stats_) port_stats_->turn(absl::Now());
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
  while (!stop_.load(std::memory_order_relaxed) && access(testing_hold_file_.c_str(), F_OK) == 0) {
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void ControlPlane::publishLoads() {
  std::vector<TrafficCounters> traffic;
  traffic.reserve(workers_.size());
  for (const WorkerPtr& worker : workers_) traffic.push_back(worker->state.traffic);
  publishBackendLoads(
      tables_.states(), counter_ids_, [&](uint32_t id) { return activeFlows(traffic, id); },
      *backend_loads_);
}

void ControlPlane::watchSyncPeers() {
  if (!fleet_.active() || !flow_sync_) return;
  std::vector<Endpoint> peers = config_.sync->peers;
  for (const InstanceReport& report : fleet_.instanceReports()) {
    if (report.name == config_.fleet->name || report.sync.empty()) continue;
    if (absl::StatusOr<Endpoint> endpoint = Endpoint::parse(report.sync); endpoint.ok()) {
      peers.push_back(*endpoint);
    }
  }
  const size_t before = flow_sync_->peerCount();
  flow_sync_->setPeers(peers);
  std::vector<IpAddress> addresses;
  for (const Endpoint& peer : peers) {
    if (absl::c_find(addresses, peer.address) == addresses.end()) addresses.push_back(peer.address);
  }
  if (addresses == config_.dataplane.sync_peers) return;
  config_.dataplane.sync_peers = std::move(addresses);
  logLine(absl::StrCat("sync: ", flow_sync_->peerCount(), " peers (", before, " before)"));
  if (absl::Status status = publishSnapshot(); !status.ok()) {
    logLine(absl::StrCat("sync: the exception path's sync class keeps its old peers: ",
                         status.message()));
  }
}

bool ControlPlane::announcesOverBgp() const {
  if (!launched_ || !config_.bgp) return false;
  for (const ServiceConfig& service : config_.services) {
    if (service.announce_bgp) return true;
  }
  return false;
}

void ControlPlane::watchWorkers() {
  if (!launched_) return;
  const absl::Time now = absl::Now();
  const bool was_stalled = stall_watch_.stalled();
  switch (stall_watch_.next(now)) {
    case StallWatch::Step::kNothing:
      return;
    case StallWatch::Step::kStartGracePeriod:
      stall_watch_.started(rte_rcu_qsbr_start(publisher_->rcu()), now);
      return;
    case StallWatch::Step::kCheck: {
      const absl::Duration open_for = stall_watch_.openFor(now);
      const bool all_passed =
          rte_rcu_qsbr_check(publisher_->rcu(), stall_watch_.token(), false) == 1;
      stall_watch_.checked(all_passed, now);
      // Every worker has run its loop since the launch: berthd forwards.
      if (all_passed && systemd_ && !systemd_->isReady() &&
          absl::c_all_of(workers_, [](const WorkerPtr& worker) { return worker->running(); })) {
        systemd_->ready(absl::StrFormat("forwarding: %u service(s), %u worker(s)",
                                        config_.services.size(), workers_.size()));
        logLine("systemd: ready");
      }
      if (stall_watch_.stalled() && !was_stalled) {
        logLine(absl::StrFormat(
            "datapath stalled: a worker passed no quiescent state for %d ms; BGP routes withdrawn",
            absl::ToInt64Milliseconds(open_for)));
      } else if (was_stalled && !stall_watch_.stalled()) {
        logLine(
            absl::StrFormat("datapath resumed: every worker passed a quiescent state after %d ms",
                            absl::ToInt64Milliseconds(open_for)));
      }
      return;
    }
  }
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
  reportWhenInForce(start, event);
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

void ControlPlane::watchLinks() {
  link_up_.resize(ports_.size(), -1);
  for (size_t p = 0; p < ports_.size(); ++p) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(ports_[p].port_id, &link) != 0) continue;
    const int up = link.link_status == RTE_ETH_LINK_UP ? 1 : 0;
    if (up == link_up_[p]) continue;
    link_up_[p] = up;
    char text[RTE_ETH_LINK_MAX_STR_LEN];
    rte_eth_link_to_str(text, sizeof(text), &link);
    logLine(absl::StrFormat("port '%s': %s", ports_[p].name, text));
  }
}

void ControlPlane::stopWorkers() {
  workers_stop_.store(true, std::memory_order_relaxed);
  if (!launched_) return;
  rte_eal_mp_wait_lcore();
  launched_ = false;
  guardInterruptThreadUnmaps(nullptr);
}

double ControlPlane::rxWindowSeconds() const {
  uint64_t first = UINT64_MAX;
  uint64_t last = 0;
  for (const WorkerPtr& worker : workers_) {
    if (worker->first_rx_tsc.read() == 0) continue;
    first = std::min(first, worker->first_rx_tsc.read());
    last = std::max(last, worker->last_rx_tsc.read());
  }
  if (last <= first || first == UINT64_MAX) return 0;
  return static_cast<double>(last - first) / static_cast<double>(rte_get_tsc_hz());
}

std::vector<std::pair<std::string, uint64_t>> ControlPlane::summedCounters() const {
  std::vector<const WorkerCounters*> counters;
  for (const WorkerPtr& worker : workers_) counters.push_back(&worker->counters);
  std::vector<std::pair<std::string, uint64_t>> sums = sumCounters(counters);
  for (auto& sum : neighbors_.sums()) sums.push_back(std::move(sum));
  sums.emplace_back("neighbor_log_lines_held_back", neighbor_log_.heldBack());
  // A PMD whose statistics take longer than a second to read (docs/nics.md).
  if (port_stats_) sums.emplace_back("port_stats_readings_late", port_stats_->late());
  if (exception_path_) {
    for (auto& sum : exception_path_->counters()) sums.push_back(std::move(sum));
  }
  if (flow_sync_) {
    for (auto& sum : flow_sync_->counters()) sums.push_back(std::move(sum));
  }
  return sums;
}

CountersReport ControlPlane::countersReport() const {
  CountersReport report;
  report.elapsed_s = absl::ToDoubleSeconds(absl::Now() - started_);
  report.generation = generation_;
  report.rx_window_s = rxWindowSeconds();
  for (const WorkerPtr& worker : workers_) {
    report.workers.push_back(
        {worker->counters.rx_packets.read(), worker->counters.tx_packets.read()});
  }
  report.sums = summedCounters();
  const std::vector<std::string>& services = counter_ids_.serviceNames();
  for (size_t id = 0; id < services.size(); ++id) {
    report.services.emplace_back(services[id], trafficOf(static_cast<uint32_t>(id), false));
  }
  const std::vector<std::string>& backends = counter_ids_.backendNames();
  for (size_t id = 0; id < backends.size(); ++id) {
    report.backends.emplace_back(backends[id], trafficOf(static_cast<uint32_t>(id), true));
  }
  return report;
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
