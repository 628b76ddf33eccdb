#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "berth/control/neighbor_cache.h"
#include "berth/control/service_state.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// What berthd reports, as rows: `berthctl services`, `backends` and `stats`, the Prometheus
// endpoint and telemetry all read these, so they cannot disagree, and each reply's text and
// JSON are rendered from one list of columns. Pure: the workers' counters come in through
// TrafficSource and CountersReport.

// One worker's own figures: its packets, drops and connection table.
struct WorkerMetrics {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t drops = 0;  // every drop reason and parse error together
  // Its connection table's ways in use and capacity; none without a table.
  std::optional<uint64_t> conntrack_entries;
  std::optional<uint64_t> conntrack_capacity;
  // Full-NAT sessions (docs/fullnat.md), where the worker has a session table: live, ended but
  // still holding their tuple (the reuse hold), and the most it holds.
  std::optional<uint64_t> nat_sessions;
  std::optional<uint64_t> nat_sessions_held;
  std::optional<uint64_t> nat_sessions_capacity;
};

// Packets, bytes and tracked connections of a service or a backend, summed over the workers.
struct TrafficTotals {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t connections = 0;  // tracked now
  uint64_t opened = 0;       // recorded so far
};
// The same as rates over the last interval (control/rate_meter.h TrafficRateMeter).
struct TrafficRate {
  double packets_per_s = 0;
  double bits_per_s = 0;
  double new_connections_per_s = 0;
};
// A service's or a backend's rate by counter id, or nullopt until the meter has two samples.
using RateSource = std::function<std::optional<TrafficRate>(uint32_t id, bool backend)>;
// The totals of a counter id (CounterIds): a backend's when `backend`, else a service's.
using TrafficSource = std::function<TrafficTotals(uint32_t id, bool backend)>;

struct ServiceRow {
  std::string name;
  std::string listener;
  std::string forwarding;
  std::string algorithm;
  uint64_t backends = 0;
  uint64_t healthy = 0;
  TrafficTotals traffic;
  std::optional<TrafficRate> rate;
};

struct BackendRow {
  std::string service;
  std::string name;
  std::string address;
  // As configured (a drain keeps it for the undrain), and in use: 0 while drained or unhealthy
  // (weightText in control/table_report.h).
  int64_t weight = 0;
  int64_t effective_weight = 0;
  bool healthy = true;
  bool drained = false;
  std::string health_check;
  // No probe has run for longer than the check tolerates (local errors): `healthy` is what it
  // was when probes last ran.
  bool check_stale = false;
  uint64_t slots = 0;  // in the live table
  TrafficTotals traffic;
  std::optional<TrafficRate> rate;
  // Why the health is what it is and for how long (HealthMonitor::detail), and the check's last
  // probe: none for a backend without a check or before its first probe ran.
  std::string health_reason;
  double health_since_s = 0;
  struct LastCheck {
    bool ok = false;
    std::string detail;
    uint64_t latency_ms = 0;
    double s_ago = 0;
  };
  std::optional<LastCheck> last_check;
  // In a fleet with table generations: the live instances whose probes disagree with the
  // fleet's verdict (`healthy`), by name.
  std::vector<std::string> fleet_dissent;

  const char* healthText() const { return healthy ? "healthy" : "unhealthy"; }
  // What the text tables show: "drained" over the health check's verdict, a stale verdict marked
  // as such, and the instances that see it otherwise.
  std::string stateText() const {
    if (drained) return "drained";
    std::string text = check_stale ? absl::StrCat(healthText(), " (stale)") : healthText();
    if (!fleet_dissent.empty()) {
      absl::StrAppend(&text, " (", absl::StrJoin(fleet_dissent, ","), " disagree)");
    }
    return text;
  }
};

// "45s", "4m05s", "3h07m", "2d04h": how long, as the tables show it.
std::string shortDuration(double seconds);

// One row per service, or per backend of each service, in config order.
std::vector<ServiceRow> serviceRows(absl::Span<const ServiceState> services,
                                    const CounterIds& counter_ids, const TrafficSource& traffic,
                                    const RateSource& rates = nullptr);
std::vector<BackendRow> backendRows(absl::Span<const ServiceState> services,
                                    const CounterIds& counter_ids, const TrafficSource& traffic,
                                    const RateSource& rates = nullptr);

// The `services` and `backends` replies: the rows as JSON and as the text table, and the
// connections every worker's table holds.
std::string servicesReplyJson(const std::vector<ServiceRow>& rows, uint64_t connections_tracked);
std::string backendsReplyJson(const std::vector<BackendRow>& rows, uint64_t connections_tracked);

// The `neighbors` reply: every next hop resolved by ARP or ND, as JSON and as the text table;
// `port_names` by port index.
std::string neighborsReplyJson(const std::vector<NeighborRow>& rows,
                               const std::vector<std::string>& port_names);

// The summed counters `stats` prints, and berthd on exit.
struct CountersReport {
  double elapsed_s = 0;
  uint64_t generation = 0;  // the snapshot in use
  double rx_window_s = 0;   // from the first frame any worker received to the last
  std::vector<std::pair<std::string, uint64_t>> sums;  // sumCounters(), in its order
  struct PerWorker {
    uint64_t rx_packets = 0;
    uint64_t tx_packets = 0;
  };
  std::vector<PerWorker> workers;
  // By counter id: "web", and "web/web-1" for backends.
  std::vector<std::pair<std::string, TrafficTotals>> services;
  std::vector<std::pair<std::string, TrafficTotals>> backends;

  uint64_t sum(absl::string_view name) const;
};
// Every counter, one "name value" line each: berthd's SIGUSR1 and exit report, which scripts read.
std::string countersText(const CountersReport& report);
// What `berthctl stats` shows: the counters grouped (traffic, drops, malformed frames, the
// connection table, neighbors, the kernel interfaces, flow sync, ...) with units, the zero
// ones left out and counted unless `all`, per-worker and per-service traffic, and with `all`
// every backend's.
std::string statsText(const CountersReport& report, bool all);
// 1234567 -> "1,234,567"; a rate 1.2e6 with "pps" -> "1.20 Mpps"; 1.5e6 bytes -> "1.50 MB".
std::string withThousands(uint64_t value);
std::string siUnits(double value, absl::string_view unit);
std::string countersJson(const CountersReport& report);

}  // namespace berth
