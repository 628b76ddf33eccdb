#include "berth/metrics/prometheus.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {

std::string prometheusLabel(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

namespace {

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string& out, absl::string_view name, absl::string_view type, absl::string_view help)
      : out_(out), name_(name) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void sample(absl::string_view labels, uint64_t value) {
    absl::StrAppend(&out_, name_, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ", value,
                    "\n");
  }
  void sample(absl::string_view labels, double value) {
    const std::string braced = labels.empty() ? "" : absl::StrCat("{", labels, "}");
    if (std::isinf(value)) {
      absl::StrAppend(&out_, name_, braced, value > 0 ? " +Inf\n" : " -Inf\n");
      return;
    }
    absl::StrAppendFormat(&out_, "%s%s %.6g\n", name_, braced, value);
  }
  // Seconds since the epoch, to the millisecond: %.6g would round them to 1,000 s.
  void timestamp(absl::string_view labels, absl::Time at) {
    absl::StrAppendFormat(&out_, "%s%s %.3f\n", name_,
                          labels.empty() ? "" : absl::StrCat("{", labels, "}"),
                          absl::ToDoubleSeconds(at - absl::UnixEpoch()));
  }

 private:
  std::string& out_;
  std::string name_;
};

// Each worker's own figures.
void writeWorkers(std::string& out, const MetricsSnapshot& metrics) {
  struct WorkerMetric {
    const char* name;
    const char* type;
    const char* help;
    std::optional<uint64_t> (*value)(const WorkerMetrics&);
  };
  const WorkerMetric per_worker[] = {
      {"berth_worker_rx_packets_total", "counter", "Frames received",
       [](const WorkerMetrics& w) -> std::optional<uint64_t> { return w.rx_packets; }},
      {"berth_worker_rx_bytes_total", "counter", "Bytes received",
       [](const WorkerMetrics& w) -> std::optional<uint64_t> { return w.rx_bytes; }},
      {"berth_worker_tx_packets_total", "counter", "Frames sent",
       [](const WorkerMetrics& w) -> std::optional<uint64_t> { return w.tx_packets; }},
      {"berth_worker_tx_bytes_total", "counter", "Bytes sent",
       [](const WorkerMetrics& w) -> std::optional<uint64_t> { return w.tx_bytes; }},
      {"berth_worker_drops_total", "counter",
       "Frames dropped, every reason and parse error together",
       [](const WorkerMetrics& w) -> std::optional<uint64_t> { return w.drops; }},
      {"berth_conntrack_entries", "gauge", "Connections the worker's table holds",
       [](const WorkerMetrics& w) { return w.conntrack_entries; }},
      {"berth_conntrack_capacity", "gauge", "Connections the table can hold",
       [](const WorkerMetrics& w) { return w.conntrack_capacity; }},
      {"berth_nat_sessions", "gauge", "Full-NAT sessions the worker holds, live",
       [](const WorkerMetrics& w) { return w.nat_sessions; }},
      {"berth_nat_sessions_held", "gauge",
       "Full-NAT sessions ended and holding their local port for the reuse hold",
       [](const WorkerMetrics& w) { return w.nat_sessions_held; }},
      {"berth_nat_sessions_capacity", "gauge", "Full-NAT sessions the worker's table can hold",
       [](const WorkerMetrics& w) { return w.nat_sessions_capacity; }},
  };
  for (const WorkerMetric& metric : per_worker) {
    Family family(out, metric.name, metric.type, metric.help);
    for (size_t w = 0; w < metrics.workers.size(); ++w) {
      if (const std::optional<uint64_t> value = metric.value(metrics.workers[w])) {
        family.sample(absl::StrCat("worker=\"", w, "\""), *value);
      }
    }
  }
}

// The counters summed over the workers, by reason, error and event, and the single ones.
void writeSums(std::string& out, const MetricsSnapshot& metrics) {
  const auto& sums = metrics.sums;
  auto byPrefix = [&](absl::string_view prefix, const char* name, const char* label_name,
                      const char* help) {
    Family family(out, name, "counter", help);
    for (const auto& [counter, value] : sums) {
      if (!absl::StartsWith(counter, prefix)) continue;
      family.sample(absl::StrCat(label_name, "=\"", counter.substr(prefix.size()), "\""), value);
    }
  };
  byPrefix("drop_", "berth_drops_total", "reason", "Frames dropped after parsing, by reason");
  byPrefix("parse_", "berth_parse_errors_total", "error", "Malformed frames dropped, by error");
  byPrefix("conntrack_", "berth_conntrack_events_total", "event", "Connection-table events");
  byPrefix("nat_", "berth_nat_events_total", "event",
           "Full-NAT sessions opened, closed, released and refused, by event");
  byPrefix("neighbor_", "berth_neighbor_events_total", "event",
           "Next-hop resolution: requests, answers, MAC changes, losses, claims refused");
  // Flow sync (docs/scale-out.md), where configured: its counters by event, and the two sizes as
  // gauges.
  if (absl::c_any_of(sums, [](const auto& sum) { return absl::StartsWith(sum.first, "sync_"); })) {
    Family family(out, "berth_sync_total", "counter",
                  "Flow sync: records and datagrams sent, received, applied, expired, refused "
                  "and dropped, by event");
    for (const auto& [counter, value] : sums) {
      if (!absl::StartsWith(counter, "sync_") || counter == "sync_peer_flows" ||
          counter == "sync_own_flows") {
        continue;
      }
      family.sample(absl::StrCat("event=\"", counter.substr(5), "\""), value);
    }
  }
  for (const auto& [counter, value] : sums) {
    if (counter == "sync_peer_flows") {
      Family(out, "berth_sync_peer_flows", "gauge", "Peers' flows in the map the workers read")
          .sample("", value);
    }
    if (counter == "sync_own_flows") {
      Family(out, "berth_sync_own_flows", "gauge",
             "This instance's off-pick flows kept for a restarted peer")
          .sample("", value);
    }
    if (counter == "arp_nd_replies" || counter == "icmp_too_big_replies") {
      Family(out, absl::StrCat("berth_", counter, "_total"), "counter",
             "Replies berthd built itself")
          .sample("", value);
    }
    if (counter == "idle_sleeps") {
      Family(out, "berth_worker_idle_sleeps_total", "counter",
             "Times workers slept with their queues empty (dataplane.idle)")
          .sample("", value);
    }
    if (counter == "idle_sleep_us") {
      Family(out, "berth_worker_idle_sleep_seconds_total", "counter",
             "Time workers spent in idle sleeps, wake-ups included")
          .sample("", static_cast<double>(value) / 1e6);
    }
  }
}

// Per service: traffic, healthy backends and what table changes moved.
void writeServices(std::string& out, const MetricsSnapshot& metrics) {
  const std::vector<ServiceRow>& services = metrics.services;
  auto perService = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const ServiceRow& row : services) {
      family.sample(absl::StrCat("service=\"", prometheusLabel(row.name), "\""), value(row));
    }
  };
  perService("berth_service_packets_total", "counter", "Packets forwarded for the service",
             [](const ServiceRow& r) { return r.traffic.packets; });
  perService("berth_service_bytes_total", "counter", "Bytes received for the service and sent on",
             [](const ServiceRow& r) { return r.traffic.bytes; });
  perService("berth_service_connections", "gauge", "Connections tracked for the service",
             [](const ServiceRow& r) { return r.traffic.connections; });
  perService("berth_service_connections_opened_total", "counter",
             "Connections recorded for the service: its new-connection rate",
             [](const ServiceRow& r) { return r.traffic.opened; });
  perService("berth_service_backends_healthy", "gauge", "Healthy backends",
             [](const ServiceRow& r) { return r.healthy; });
  {
    Family family(out, "berth_table_slots_moved_total", "counter",
                  "Slots whose backend changed, by cause (health, drain, weight, added, removed, "
                  "reload); where M changed, the share of the hash space times the new M");
    for (const TableChangeMetrics& changes : metrics.table_changes) {
      for (size_t c = 0; c < changes.history.slots_moved.size(); ++c) {
        family.sample(absl::StrCat("service=\"", prometheusLabel(changes.service), "\",cause=\"",
                                   toString(static_cast<TableChangeCause>(c)), "\""),
                      changes.history.slots_moved[c]);
      }
    }
  }
  {
    Family family(out, "berth_table_last_change_moved_over_minimum", "gauge",
                  "The last table change's slots moved over the least that had to move (1 is "
                  "ideal; 0 when nothing moved)");
    for (const TableChangeMetrics& changes : metrics.table_changes) {
      if (!changes.history.last) continue;
      family.sample(absl::StrCat("service=\"", prometheusLabel(changes.service), "\""),
                    changes.history.last->movement.movedOverMinimum());
    }
  }
}

// Per backend, and the probes a local error stopped.
void writeBackends(std::string& out, const MetricsSnapshot& metrics) {
  const std::vector<BackendRow>& backends = metrics.backends;
  auto perBackend = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const BackendRow& row : backends) {
      family.sample(absl::StrCat("service=\"", prometheusLabel(row.service), "\",backend=\"",
                                 prometheusLabel(row.name), "\""),
                    static_cast<uint64_t>(value(row)));
    }
  };
  perBackend("berth_backend_packets_total", "counter", "Packets forwarded to the backend",
             [](const BackendRow& r) { return r.traffic.packets; });
  perBackend("berth_backend_bytes_total", "counter", "Bytes forwarded to the backend",
             [](const BackendRow& r) { return r.traffic.bytes; });
  perBackend("berth_backend_connections", "gauge", "Connections tracked to the backend",
             [](const BackendRow& r) { return r.traffic.connections; });
  perBackend("berth_backend_connections_opened_total", "counter",
             "Connections recorded to the backend: its new-connection rate",
             [](const BackendRow& r) { return r.traffic.opened; });
  perBackend("berth_backend_healthy", "gauge", "1 while health checks pass",
             [](const BackendRow& r) { return r.healthy ? 1 : 0; });
  perBackend("berth_backend_drained", "gauge", "1 while drained (berthctl drain)",
             [](const BackendRow& r) { return r.drained ? 1 : 0; });
  perBackend("berth_backend_weight", "gauge",
             "Weight as configured; a drain keeps it for the undrain (0: drained by the config)",
             [](const BackendRow& r) { return r.weight; });
  perBackend("berth_backend_effective_weight", "gauge",
             "Weight in use: the configured weight, 0 while drained or unhealthy",
             [](const BackendRow& r) { return r.effective_weight; });
  perBackend("berth_backend_slots", "gauge", "Slots the backend owns in the live table",
             [](const BackendRow& r) { return r.slots; });
  perBackend("berth_backend_health_check_stale", "gauge",
             "1 while no probe has run for longer than the check tolerates (local errors)",
             [](const BackendRow& r) { return r.check_stale ? 1 : 0; });
  Family(out, "berth_health_probes_not_run_total", "counter",
         "Health probes a local error stopped (descriptors, memory, local ports); they count for "
         "no backend")
      .sample("", metrics.probes_not_run);
}

// Per device and queue, as its NIC reports it.
void writePorts(std::string& out, const MetricsSnapshot& metrics) {
  auto perPort = [&](const std::string& name, const char* type, const std::string& help, auto value,
                     bool (*shown)(const PortStats&) = nullptr) {
    Family family(out, name, type, help);
    for (const PortStats& port : metrics.ports) {
      if (shown != nullptr && !shown(port)) continue;
      family.sample(absl::StrCat("port=\"", prometheusLabel(port.port), "\""),
                    static_cast<uint64_t>(value(port)));
    }
  };
  perPort("berth_port_link_up", "gauge", "1 while the port's link is up",
          [](const PortStats& p) { return p.link.up ? 1 : 0; });
  perPort("berth_port_link_speed_mbps", "gauge", "The link's speed; 0 where the PMD does not know",
          [](const PortStats& p) { return p.link.speed_mbps; });
  perPort("berth_port_link_full_duplex", "gauge", "1 while the link is full-duplex",
          [](const PortStats& p) { return p.link.full_duplex ? 1 : 0; });
  perPort("berth_port_drops_reported", "gauge",
          "1 where the driver counts the frames it drops (imissed); 0 where it does not "
          "(net_af_packet), which leaves berth_port_imissed_total out for the port",
          [](const PortStats& p) { return p.drops_reported ? 1 : 0; });
  const char* total_help[kPortTotalCount] = {
      "Frames the port received (rte_eth_stats ipackets)",
      "Frames the port sent (opackets)",
      "Bytes the port received (ibytes)",
      "Bytes the port sent (obytes)",
      "Frames the NIC dropped for want of a free RX descriptor: a worker fell behind (imissed)",
      "Frames received in error (ierrors)",
      "Frames that failed to send (oerrors)",
      "RX descriptors left empty because the mbuf pool was empty (rx_nombuf)",
  };
  for (size_t t = 0; t < kPortTotalCount; ++t) {
    perPort(
        absl::StrCat("berth_port_", kPortTotalNames[t], "_total"), "counter", total_help[t],
        [t](const PortStats& p) { return p.totals[t]; },
        t == kPortImissed ? +[](const PortStats& p) { return p.drops_reported; } : nullptr);
  }
  auto perQueue = [&](const char* name, const char* help, bool rx, auto value) {
    Family family(out, name, "counter", help);
    for (const PortStats& port : metrics.ports) {
      const std::vector<PortQueueCounts>& queues = rx ? port.rx_queues : port.tx_queues;
      for (size_t q = 0; q < queues.size(); ++q) {
        family.sample(absl::StrCat("port=\"", prometheusLabel(port.port), "\",queue=\"", q, "\""),
                      value(queues[q]));
      }
    }
  };
  perQueue("berth_port_queue_ipackets_total", "Frames an RX queue received", true,
           [](const PortQueueCounts& q) { return q.packets; });
  perQueue("berth_port_queue_ibytes_total", "Bytes an RX queue received", true,
           [](const PortQueueCounts& q) { return q.bytes; });
  perQueue("berth_port_queue_errors_total", "Frames an RX queue dropped", true,
           [](const PortQueueCounts& q) { return q.errors; });
  perQueue("berth_port_queue_opackets_total", "Frames a TX queue sent", false,
           [](const PortQueueCounts& q) { return q.packets; });
  perQueue("berth_port_queue_obytes_total", "Bytes a TX queue sent", false,
           [](const PortQueueCounts& q) { return q.bytes; });
  {
    Family family(out, "berth_port_xstat_total", "counter",
                  "The PMD's extended statistics (rte_eth_xstats), by the PMD's names");
    for (const PortStats& port : metrics.ports) {
      for (const auto& [name, value] : port.xstats) {
        family.sample(absl::StrCat("port=\"", prometheusLabel(port.port), "\",name=\"",
                                   prometheusLabel(name), "\""),
                      value);
      }
    }
  }
}

// Full-NAT's pools (docs/fullnat.md): each (local address, backend) pair's ports, and each
// worker's share of them; only where a fullnat service has backends.
void writeNatPool(std::string& out, const MetricsSnapshot& metrics) {
  if (metrics.nat_pool.empty() && metrics.nat_pool_omitted == 0) return;
  auto labels = [](const NatPoolRow& row) {
    return absl::StrCat("port=\"", prometheusLabel(row.port), "\",address=\"",
                        prometheusLabel(row.address), "\",service=\"", prometheusLabel(row.service),
                        "\",backend=\"", prometheusLabel(row.backend), "\"");
  };
  {
    Family family(out, "berth_nat_pool_ports", "gauge",
                  "Local ports a Full-NAT local address lends each backend");
    for (const NatPoolRow& row : metrics.nat_pool) family.sample(labels(row), uint64_t{row.ports});
  }
  {
    Family family(out, "berth_nat_pool_worker_ports", "gauge",
                  "Of those, the ports whose replies RSS brings to the worker's queue: its share");
    for (const NatPoolRow& row : metrics.nat_pool) {
      for (size_t w = 0; w < row.worker_ports.size(); ++w) {
        family.sample(absl::StrCat(labels(row), ",worker=\"", w, "\""),
                      uint64_t{row.worker_ports[w]});
      }
    }
  }
  Family(out, "berth_nat_pool_pairs_omitted", "gauge",
         "(local address, backend) pairs past the number the pool metrics show")
      .sample("", metrics.nat_pool_omitted);
}

// berthd's own endpoints, log and fleet agent.
void writeOwn(std::string& out, const MetricsSnapshot& metrics) {
  Family connections(out, "berth_endpoint_connections_total", "counter",
                     "Connections to berthd's control sockets and metrics endpoint, by outcome");
  for (const EndpointMetrics& endpoint : metrics.endpoints) {
    const std::pair<const char*, uint64_t> outcomes[] = {
        {"accepted", endpoint.accepted},
        {"answered", endpoint.answered},
        {"evicted_idle", endpoint.evicted_idle},
        {"refused_full", endpoint.refused_full},
        {"cut_at_deadline", endpoint.cut_at_deadline},
    };
    for (const auto& [outcome, value] : outcomes) {
      connections.sample(
          absl::StrCat("endpoint=\"", endpoint.endpoint, "\",outcome=\"", outcome, "\""), value);
    }
  }
  // As Prometheus and HAProxy name them, so that one alert rule reads them all alike.
  const ReloadHistory& reloads = metrics.reloads;
  Family(out, "berth_config_last_reload_successful", "gauge",
         "1 when the last config reload applied (or none has ended since start), 0 when refused")
      .sample("", uint64_t{reloads.lastSucceeded()});
  if (reloads.last_success_at != absl::InfinitePast()) {
    Family(out, "berth_config_last_reload_success_timestamp_seconds", "gauge",
           "When the config in force went into force: berthd's start or the last applied reload")
        .timestamp("", reloads.last_success_at);
  }
  Family reload_results(out, "berth_config_reloads_total", "counter",
                        "Config reloads that ended, file and fleet version, by result");
  reload_results.sample("result=\"applied\"", reloads.applied);
  reload_results.sample("result=\"refused\"", reloads.refused);
  Family(out, "berth_log_lines_dropped_total", "counter",
         "Log lines dropped because stderr was not read fast enough")
      .sample("", metrics.log_lines_dropped);
  if (const std::optional<FleetMetrics>& fleet = metrics.fleet) {
    Family(out, "berth_fleet_version", "gauge",
           "The fleet config version this instance applied (0 for none yet)")
        .sample("", fleet->version);
    Family(out, "berth_fleet_head_version", "gauge",
           "The newest fleet config version this instance has seen in etcd")
        .sample("", fleet->head_version);
    Family(out, "berth_fleet_serving_cache", "gauge",
           "1 while serving the version cached on disk, etcd not yet heard from since start")
        .sample("", uint64_t{fleet->from_cache});
    Family(out, "berth_fleet_etcd_reachable", "gauge", "1 when etcd answered the last call")
        .sample("", uint64_t{fleet->etcd_reachable});
    Family(out, "berth_fleet_registered", "gauge",
           "1 when this instance's report is in etcd under its lease")
        .sample("", uint64_t{fleet->registered});
    Family(out, "berth_fleet_versions_applied_total", "counter", "Fleet versions applied")
        .sample("", fleet->versions_applied);
    Family(out, "berth_fleet_versions_refused_total", "counter",
           "Fleet versions this instance could not apply; it kept the one it ran")
        .sample("", fleet->versions_refused);
    Family(out, "berth_fleet_etcd_errors_total", "counter", "Calls to etcd that failed")
        .sample("", fleet->etcd_errors);
  }
}

}  // namespace

std::string prometheusText(const MetricsSnapshot& metrics) {
  std::string out;
  Family(out, "berth_info", "gauge", "berthd's version; always 1")
      .sample(absl::StrCat("version=\"", prometheusLabel(metrics.version), "\""), uint64_t{1});
  Family(out, "berth_uptime_seconds", "gauge", "Seconds since berthd started")
      .sample("", metrics.uptime_s);
  Family(out, "berth_snapshot_generation", "gauge", "The snapshot the workers use")
      .sample("", metrics.generation);

  writeWorkers(out, metrics);
  writeSums(out, metrics);
  writeServices(out, metrics);
  writeBackends(out, metrics);
  writePorts(out, metrics);
  writeNatPool(out, metrics);
  writeOwn(out, metrics);
  return out;
}

}  // namespace berth
