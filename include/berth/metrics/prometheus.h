#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "berth/control/nat_pool.h"
#include "berth/control/reload_history.h"
#include "berth/control/reports.h"
#include "berth/metrics/port_stats.h"

namespace berth {

// The Prometheus text exposition of berthd's metrics (metrics.listen): the same rows and
// counters `berthctl services`, `backends` and `stats` report (control/reports.h), so the two
// cannot disagree. Pure.

// What happened to the connections of one of berthd's own endpoints: the control socket, the
// read-only socket and the metrics endpoint.
struct EndpointMetrics {
  std::string endpoint;
  uint64_t accepted = 0;
  uint64_t answered = 0;
  uint64_t evicted_idle = 0;
  uint64_t refused_full = 0;
  uint64_t cut_at_deadline = 0;
};

// What one service's table changes moved since berthd started (TableChangeHistory).
struct TableChangeMetrics {
  std::string service;
  TableChangeHistory history;
};

// An instance in a fleet (fleet/agent.h FleetAgentStatus).
struct FleetMetrics {
  uint64_t version = 0;       // applied; 0 for none
  uint64_t head_version = 0;  // the fleet's newest seen
  bool from_cache = false;
  bool etcd_reachable = false;
  bool registered = false;
  uint64_t versions_applied = 0;
  uint64_t versions_refused = 0;
  uint64_t etcd_errors = 0;
};

struct MetricsSnapshot {
  std::string version;
  double uptime_s = 0;
  uint64_t generation = 0;
  std::vector<WorkerMetrics> workers;
  std::vector<std::pair<std::string, uint64_t>> sums;  // sumCounters(), by counter name
  std::vector<ServiceRow> services;
  std::vector<BackendRow> backends;
  std::vector<TableChangeMetrics> table_changes;
  std::vector<EndpointMetrics> endpoints;
  uint64_t log_lines_dropped = 0;
  uint64_t probes_not_run = 0;        // HealthMonitor::probesNotRun
  std::vector<PortStats> ports;       // the latest reading; none before the first
  std::optional<FleetMetrics> fleet;  // with a fleet section
  ReloadHistory reloads;
  // Full-NAT's pools (control/nat_pool.h), at most a bounded number of (local address,
  // backend) pairs; nat_pool_omitted counts the rest.
  std::vector<NatPoolRow> nat_pool;
  uint64_t nat_pool_omitted = 0;
};

// Label values escaped as the exposition format asks: backslash, double quote and newline.
std::string prometheusLabel(absl::string_view value);

std::string prometheusText(const MetricsSnapshot& metrics);

}  // namespace berth
