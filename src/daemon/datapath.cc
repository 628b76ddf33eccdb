#include "berth/daemon/datapath.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_lcore.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/control/load_publication.h"
#include "berth/control/numa_check.h"
#include "berth/runtime/unmap_guard.h"
#include "berth/util/status_macros.h"

namespace berth {

Datapath::Datapath(const Config& config, Log log) : config_(config), log_(std::move(log)) {}

Datapath::~Datapath() {
  stopWorkers();
  stopExceptionPath();
  destroyWorkers();
  closePorts();
  stopLcores();
}

absl::Status Datapath::startLcores() {
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
  warnAboutSharedMainCpus();
  BERTH_ASSIGN_OR_RETURN(publisher_,
                         SnapshotPublisher::create(static_cast<uint16_t>(lcores_.size())));
  return absl::OkStatus();
}

void Datapath::warnAboutSharedMainCpus() const {
  auto cpusOf = [](unsigned lcore) {
    LcoreCpus placed{lcore, {}};
    const rte_cpuset_t cpus = rte_lcore_cpuset(lcore);
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &cpus)) placed.cpus.push_back(cpu);
    }
    return placed;
  };
  std::vector<LcoreCpus> workers;
  for (const unsigned lcore : lcores_) workers.push_back(cpusOf(lcore));
  for (const std::string& line : workersOnMainCpus(cpusOf(rte_get_main_lcore()), workers)) {
    log_(absl::StrCat("warning: ", line));
  }
}

void Datapath::stopLcores() {
  publisher_.reset();
  lcores_.clear();
}

absl::Status Datapath::createWorkers(const CounterIds& counter_ids) {
  const bool exception_path = absl::c_any_of(
      config_.dataplane.ports, [](const PortConfig& port) { return port.exception.has_value(); });
  // With flow sync, every worker's connection table is keyed by one secret, the peers' flows'.
  std::optional<ConnectionHashKey> hash_key;
  if (config_.sync) {
    BERTH_ASSIGN_OR_RETURN(hash_key, drawConnectionHashKey());
    BERTH_ASSIGN_OR_RETURN(flow_sync_,
                           FlowSync::create(*config_.sync, publisher_->rcu(), *hash_key));
    flow_sync_->setNames(FlowRecordNames::of(counter_ids, config_));
    log_(absl::StrCat("sync: listening on ", config_.sync->listen.toString(), " for ",
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
    if (absl::c_any_of(config_.dataplane.ports,
                       [](const PortConfig& port) { return !port.snat_addresses.empty(); })) {
      setup.nat_sessions = config_.dataplane.conntrack.nat_sessions_per_core;
    }
    setup.queue = w;
    setup.backend_loads = backend_loads_.get();
    setup.exception_path = exception_path;
    setup.idle = config_.dataplane.idle;
    // Worker w serves queue w of every device that has that many.
    const std::vector<OpenedPort>& opened = ports_.ports();
    for (uint32_t p = 0; p < opened.size(); ++p) {
      setup.device_of_port.push_back(ports_.deviceOf(p));
      if (w >= opened[p].queues || !opened[p].owns_device) continue;
      setup.queues.push_back({opened[p].port_id, w, p, opened[p].poll_only_while_link_up});
    }
    BERTH_ASSIGN_OR_RETURN(WorkerPtr worker, Worker::create(setup));
    workers_.push_back(std::move(worker));
  }
  // Worker w polls queue w: the hand-off rings by queue are the workers' in order.
  std::vector<rte_ring*> hand_offs;
  for (const WorkerPtr& worker : workers_) hand_offs.push_back(worker->handOffQueue());
  for (const WorkerPtr& worker : workers_) worker->connectHandOffs(hand_offs);
  if (flow_sync_) {
    std::vector<rte_ring*> rings;
    for (const WorkerPtr& worker : workers_) rings.push_back(worker->flowExports());
    flow_sync_->setExportRings(std::move(rings));
  }
  return absl::OkStatus();
}

// The requests workers never sent are mbufs of the ports' pools, so this comes before
// closePorts() (the start-up table's reverse order).
void Datapath::destroyWorkers() {
  // The exception path's thread drains the workers' rings: it stops first, also when a caller
  // skipped its step.
  stopExceptionPath();
  workers_.clear();
  // After the workers: they read its map and write its rings.
  flow_sync_.reset();
}

absl::Status Datapath::startExceptionPath() {
  std::vector<ExceptionPath::Port> ports;
  const std::vector<OpenedPort>& opened = ports_.ports();
  for (uint32_t p = 0; p < opened.size(); ++p) {
    const PortConfig& config = config_.dataplane.ports[p];
    if (!config.exception) continue;
    // Worker 0 serves queue 0 of every port: it sends the kernel's frames.
    ports.push_back({p, config, opened[p].mac, opened[p].pool, workers_.front().get()});
  }
  if (ports.empty()) return absl::OkStatus();
  std::vector<Worker*> workers;
  for (const WorkerPtr& worker : workers_) workers.push_back(worker.get());
  BERTH_ASSIGN_OR_RETURN(exception_path_, ExceptionPath::create(std::move(ports), workers));
  exception_path_->start();
  for (const std::string& interface : exception_path_->describe()) {
    log_(absl::StrCat("exception path: kernel interface ", interface));
  }
  return absl::OkStatus();
}

// Before the workers are destroyed: the thread drains their rings.
void Datapath::stopExceptionPath() { exception_path_.reset(); }

absl::Status Datapath::launchWorkers() {
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
  log_(absl::StrFormat("forwarding: %u service(s), %u worker(s) on lcores %s, %s",
                       config_.services.size(), workers_.size(), absl::StrJoin(lcores_, ","),
                       idle ? absl::StrFormat("sleeping after %u empty polls for up to %u us",
                                              idle->after_empty_polls, idle->max_sleep_us)
                            : std::string("busy-polling")));
  return absl::OkStatus();
}

bool Datapath::sendNeighborRequest(const NextHopToResolve& hop) {
  const OpenedPort& port = ports_.ports()[hop.port];
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

void Datapath::stopWorkers() {
  workers_stop_.store(true, std::memory_order_relaxed);
  if (!launched_) return;
  rte_eal_mp_wait_lcore();
  launched_ = false;
  guardInterruptThreadUnmaps(nullptr);
}

double Datapath::rxWindowSeconds() const {
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

bool Datapath::watchStall(absl::Time now) {
  if (!launched_) return false;
  const bool was_stalled = stall_watch_.stalled();
  switch (stall_watch_.next(now)) {
    case StallWatch::Step::kNothing:
      return false;
    case StallWatch::Step::kStartGracePeriod:
      stall_watch_.started(rte_rcu_qsbr_start(publisher_->rcu()), now);
      return false;
    case StallWatch::Step::kCheck:
      break;
  }
  const absl::Duration open_for = stall_watch_.openFor(now);
  const bool all_passed = rte_rcu_qsbr_check(publisher_->rcu(), stall_watch_.token(), false) == 1;
  stall_watch_.checked(all_passed, now);
  if (stall_watch_.stalled() && !was_stalled) {
    log_(absl::StrFormat(
        "datapath stalled: a worker passed no quiescent state for %d ms; BGP routes withdrawn",
        absl::ToInt64Milliseconds(open_for)));
  } else if (was_stalled && !stall_watch_.stalled()) {
    log_(absl::StrFormat("datapath resumed: every worker passed a quiescent state after %d ms",
                         absl::ToInt64Milliseconds(open_for)));
  }
  return all_passed &&
         absl::c_all_of(workers_, [](const WorkerPtr& worker) { return worker->running(); });
}

std::vector<WorkerMetrics> Datapath::workerMetrics() const {
  std::vector<WorkerMetrics> metrics;
  for (const WorkerPtr& worker : workers_) {
    WorkerMetrics own;
    own.rx_packets = worker->counters.rx_packets.read();
    own.rx_bytes = worker->counters.rx_bytes.read();
    own.tx_packets = worker->counters.tx_packets.read();
    own.tx_bytes = worker->counters.tx_bytes.read();
    for (const Counter& drop : worker->counters.drops) own.drops += drop.read();
    for (const Counter& error : worker->counters.parse_errors) own.drops += error.read();
    if (const ConnectionTable* table = worker->connections()) {
      own.conntrack_entries = table->occupied();
      own.conntrack_capacity = table->capacity();
    }
    if (const NatSessionTable* nat = worker->natSessions()) {
      own.nat_sessions = nat->live();
      own.nat_sessions_held = nat->held();
      own.nat_sessions_capacity = nat->limit();
      // A refused or unmatched packet is dropped: every drop counts once in drops.
      for (const NatEvent event :
           {NatEvent::kPortsExhausted, NatEvent::kPortSearchLimit, NatEvent::kTableFull,
            NatEvent::kIndexFull, NatEvent::kSpacesFull, NatEvent::kReplyNoSession,
            NatEvent::kClientNoSession, NatEvent::kIcmpNoSession, NatEvent::kIcmpHandOffFull,
            NatEvent::kNoLocalAddress}) {
        own.drops += worker->counters.nat.read(event);
      }
    }
    metrics.push_back(own);
  }
  return metrics;
}

uint64_t Datapath::connectionsTracked() const {
  uint64_t connections = 0;
  for (const WorkerPtr& worker : workers_) {
    if (worker->connections() != nullptr) connections += worker->connections()->occupied();
  }
  return connections;
}

TrafficTotals Datapath::trafficOf(uint32_t id, bool backend) const {
  TrafficTotals totals;
  for (const WorkerPtr& worker : workers_) {
    const TrafficCounter* array =
        backend ? worker->state.traffic.backends : worker->state.traffic.services;
    totals.packets += array[id].packets.read();
    totals.bytes += array[id].bytes.read();
    totals.connections += array[id].connections.read();
    totals.opened += array[id].opened.read();
  }
  return totals;
}

std::vector<TrafficTotals> Datapath::trafficOfAll(size_t count, bool backend) const {
  std::vector<TrafficTotals> all(count);
  for (const WorkerPtr& worker : workers_) {
    const TrafficCounter* array =
        backend ? worker->state.traffic.backends : worker->state.traffic.services;
    for (size_t id = 0; id < count; ++id) {
      all[id].packets += array[id].packets.read();
      all[id].bytes += array[id].bytes.read();
      all[id].connections += array[id].connections.read();
      all[id].opened += array[id].opened.read();
    }
  }
  return all;
}

std::vector<std::pair<std::string, uint64_t>> Datapath::summedCounters() const {
  std::vector<const WorkerCounters*> counters;
  for (const WorkerPtr& worker : workers_) counters.push_back(&worker->counters);
  std::vector<std::pair<std::string, uint64_t>> sums = sumCounters(counters);
  // A PMD whose statistics take longer than a second to read (docs/nics.md).
  if (ports_.readingStats()) {
    sums.emplace_back("port_stats_readings_late", ports_.statsReadingsLate());
  }
  if (exception_path_) {
    for (auto& sum : exception_path_->counters()) sums.push_back(std::move(sum));
  }
  if (flow_sync_) {
    for (auto& sum : flow_sync_->counters()) sums.push_back(std::move(sum));
  }
  return sums;
}

std::vector<std::pair<uint64_t, uint64_t>> Datapath::workerPackets() const {
  std::vector<std::pair<uint64_t, uint64_t>> packets;
  for (const WorkerPtr& worker : workers_) {
    packets.emplace_back(worker->counters.rx_packets.read(), worker->counters.tx_packets.read());
  }
  return packets;
}

std::vector<std::string> Datapath::exceptionInterfaces() const {
  return exception_path_ ? exception_path_->describe() : std::vector<std::string>();
}

void Datapath::publishLoads(const std::vector<ServiceState>& services,
                            const CounterIds& counter_ids) {
  std::vector<TrafficCounters> traffic;
  traffic.reserve(workers_.size());
  for (const WorkerPtr& worker : workers_) traffic.push_back(worker->state.traffic);
  publishBackendLoads(
      services, counter_ids, [&](uint32_t id) { return activeFlows(traffic, id); },
      *backend_loads_);
}

bool Datapath::tracksConnections() const {
  return !workers_.empty() && workers_[0]->connections() != nullptr;
}

Datapath::WorkerQuestions Datapath::askWorkers(const ConnectionKey& key,
                                               const std::optional<NatQuestion>& nat) {
  WorkerQuestions asked(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w) {
    ConntrackQuery& query = workers_[w]->conntrack_query;
    const uint32_t last = query.asked.load(std::memory_order_relaxed);
    // A question still unanswered from another explain: the worker may be reading it.
    if (query.answered.load(std::memory_order_acquire) != last) continue;
    query.key = key;
    query.nat = nat;
    query.asked.store(last + 1, std::memory_order_release);
    asked[w] = last + 1;
  }
  return asked;
}

bool Datapath::workersAnswered(const WorkerQuestions& asked) const {
  for (size_t w = 0; w < asked.size(); ++w) {
    if (!asked[w]) continue;
    if (workers_[w]->conntrack_query.answered.load(std::memory_order_acquire) != *asked[w]) {
      return false;
    }
  }
  return true;
}

std::optional<TrackedConnection> Datapath::collectAnswers(const WorkerQuestions& asked,
                                                          std::string& note) const {
  std::optional<TrackedConnection> tracked;
  std::vector<std::string> silent;
  for (size_t w = 0; w < asked.size(); ++w) {
    const ConntrackQuery& query = workers_[w]->conntrack_query;
    // The answer is ours only while no later question has replaced it.
    if (!asked[w] || query.answered.load(std::memory_order_acquire) != *asked[w] ||
        query.asked.load(std::memory_order_relaxed) != *asked[w]) {
      silent.push_back(absl::StrCat(w));
      continue;
    }
    if (tracked) continue;
    if (query.session_found) {
      const NatSession& session = query.session;
      const NatSessionTable* sessions = workers_[w]->natSessions();
      tracked = TrackedConnection{static_cast<unsigned>(w), Connection{},
                                  sessions != nullptr && sessions->expired(session, query.now_ms),
                                  query.now_ms - session.last_seen_ms, session};
      continue;
    }
    if (!query.found) continue;
    const ConnectionTable& table = *workers_[w]->connections();
    tracked = TrackedConnection{static_cast<unsigned>(w), query.connection,
                                table.expired(query.connection, query.now_ms),
                                query.now_ms - query.connection.last_seen_ms, std::nullopt};
  }
  if (!silent.empty()) {
    note = absl::StrCat("worker(s) ", absl::StrJoin(silent, ", "),
                        " did not answer in time; their connection tables were not consulted");
  }
  return tracked;
}

}  // namespace berth
