#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/control/reports.h"
#include "berth/control/service_state.h"
#include "berth/daemon/opened_ports.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/neighbor_discovery.h"
#include "berth/dataplane/snapshot.h"
#include "berth/dataplane/stall_watch.h"
#include "berth/metrics/port_stats.h"
#include "berth/runtime/exception_path.h"
#include "berth/runtime/port.h"
#include "berth/runtime/publisher.h"
#include "berth/runtime/worker.h"
#include "berth/sync/flow_sync.h"

namespace berth {

// How long the workers may go without all passing a quiescent state before berthd calls the
// datapath stalled and withdraws its BGP routes: far beyond any loop (microseconds), short
// beside BGP's hold time.
inline constexpr absl::Duration kDatapathStallThreshold = absl::Milliseconds(500);
inline constexpr absl::Duration kStallProbeInterval = absl::Milliseconds(100);

// The datapath as the management loop drives it: the worker lcores, the ports, one worker per
// lcore, the exception path, flow sync's rings and the RCU publisher the snapshots go through.
// It owns them from their start-up step to its stop (docs/architecture.md, start-up), and is the
// one part of the loop that touches DPDK: everything the loop learns of the workers and ports,
// and every frame it sends, goes through it. Management thread only.
class Datapath {
 public:
  using Log = std::function<void(const std::string&)>;
  // `config` is the config in force, which a reload replaces in place; it must outlive this.
  Datapath(const Config& config, Log log);
  ~Datapath();
  Datapath(const Datapath&) = delete;
  Datapath& operator=(const Datapath&) = delete;

  // The start-up steps (control_plane.h lists them), each undone by its stop.
  absl::Status startLcores();
  void stopLcores();
  absl::Status openPorts() { return ports_.open(lcores_); }
  void closePorts() { ports_.close(); }
  // With a sync section, flow sync's records are named by `counter_ids` and `config`.
  absl::Status createWorkers(const CounterIds& counter_ids);
  void destroyWorkers();
  absl::Status startExceptionPath();
  void stopExceptionPath();
  absl::Status launchWorkers();
  // Stops the workers and flushes their TX.
  void stopWorkers();

  // The ports, their statistics and their links (daemon/opened_ports.h).
  OpenedPorts& ports() { return ports_; }
  const OpenedPorts& ports() const { return ports_; }

  // Snapshots (runtime/publisher.h): the token of a publish, and whether it is in force.
  uint64_t publish(std::unique_ptr<const Snapshot> snapshot) {
    return publisher_->publish(std::move(snapshot));
  }
  bool inForce(uint64_t token) const { return publisher_->inForce(token); }
  void reclaim() { publisher_->reclaim(); }
  const Snapshot& snapshot() const { return *publisher_->snapshot(); }

  // The stall probe's turn (kStallProbeInterval): true when a probe found every worker passed a
  // quiescent state and every worker has run its loop since the launch: berthd forwards.
  bool watchStall(absl::Time now);
  bool stalled() const { return stall_watch_.stalled(); }
  bool launched() const { return launched_; }

  // Sends a neighbour request for `hop` through worker 0, which serves queue 0 of every port;
  // false when no mbuf or no room in the worker's control queue.
  bool sendNeighborRequest(const NextHopToResolve& hop);

  // Figures for the replies, summed over the workers.
  size_t workerCount() const { return workers_.size(); }
  std::vector<WorkerMetrics> workerMetrics() const;
  // Ways of the workers' connection tables that hold a connection.
  uint64_t connectionsTracked() const;
  TrafficTotals trafficOf(uint32_t id, bool backend) const;
  // The same for ids 0 to count - 1, in one pass over each worker's array.
  std::vector<TrafficTotals> trafficOfAll(size_t count, bool backend) const;
  // The workers' counters summed (sumCounters()), then the exception path's, flow sync's and
  // the port statistics reader's.
  std::vector<std::pair<std::string, uint64_t>> summedCounters() const;
  // Seconds from the first frame any worker received to the last: how long a replay took.
  double rxWindowSeconds() const;
  std::vector<std::pair<uint64_t, uint64_t>> workerPackets() const;
  // Each port's kernel interface, described (docs/exception-path.md).
  std::vector<std::string> exceptionInterfaces() const;

  // Bounded loads: each bounded-load service's per-backend active flows, summed over the
  // workers' connection gauges, published for the workers' new-flow choices.
  void publishLoads(const std::vector<ServiceState>& services, const CounterIds& counter_ids);
  const BackendLoads* backendLoads() const { return backend_loads_.get(); }

  // Flow sync, with a sync section.
  FlowSync* flowSync() { return flow_sync_.get(); }
  const FlowSync* flowSync() const { return flow_sync_.get(); }

  // `explain`'s questions to the workers: per worker, the number of the question asked, or
  // nullopt when the worker was still busy with another.
  using WorkerQuestions = std::vector<std::optional<uint32_t>>;
  bool tracksConnections() const;
  // Asks for `key`'s connection-table entry, or with `nat` for a Full-NAT session.
  WorkerQuestions askWorkers(const ConnectionKey& key,
                             const std::optional<NatQuestion>& nat = std::nullopt);
  bool workersAnswered(const WorkerQuestions& asked) const;
  // The first entry a worker found, or nullopt; `note` says which workers did not answer.
  std::optional<TrackedConnection> collectAnswers(const WorkerQuestions& asked,
                                                  std::string& note) const;

 private:
  // Logs a warning for each worker lcore that may run on a CPU of the main lcore.
  void warnAboutSharedMainCpus() const;

  const Config& config_;
  Log log_;
  std::vector<unsigned> lcores_;  // the worker lcores, one worker each
  std::unique_ptr<SnapshotPublisher> publisher_;
  OpenedPorts ports_{config_, log_};
  std::unique_ptr<BackendLoads> backend_loads_ = std::make_unique<BackendLoads>();
  std::unique_ptr<FlowSync> flow_sync_;            // with a sync section
  std::vector<WorkerPtr> workers_;                 // each in memory on its lcore's socket
  std::unique_ptr<ExceptionPath> exception_path_;  // when a port has a kernel interface
  std::atomic<bool> workers_stop_{false};
  bool launched_ = false;
  StallWatch stall_watch_{kStallProbeInterval, kDatapathStallThreshold};
};

}  // namespace berth
