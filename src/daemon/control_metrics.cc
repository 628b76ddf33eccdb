// berthd's metrics for machines: DPDK telemetry commands under /berth/ and the Prometheus text
// endpoint (metrics.listen). Both report the rows `berthctl services` and `backends` show and the
// counters `berthctl stats` sums, from the same functions (control/reports.h), so they cannot
// disagree; the Prometheus text itself is rendered by metrics/prometheus.h.

#include <rte_telemetry.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "berth/daemon/control_plane.h"
#include "berth/metrics/prometheus.h"
#include "berth/util/program_info.h"

namespace berth {

namespace {

// The telemetry thread's way to the daemon. DPDK keeps registered commands for the life of the
// process, so the callbacks outlive any one ControlPlane; the mailbox is closed while none serves.
ManagementMailbox telemetry_mailbox;
std::atomic<ControlPlane*> telemetry_daemon{nullptr};
constexpr absl::Duration kTelemetryPatience = absl::Seconds(1);

void fill(rte_tel_data* data, const TelemetryAnswer& answer) {
  rte_tel_data_start_dict(data);
  for (const auto& [name, value] : answer.entries) {
    if (const uint64_t* number = std::get_if<uint64_t>(&value)) {
      rte_tel_data_add_dict_u64(data, name.c_str(), *number);
    } else if (const std::string* text = std::get_if<std::string>(&value)) {
      rte_tel_data_add_dict_string(data, name.c_str(), text->c_str());
    } else {
      rte_tel_data* column = rte_tel_data_alloc();
      if (column == nullptr) continue;
      if (const auto* numbers = std::get_if<std::vector<uint64_t>>(&value)) {
        rte_tel_data_start_array(column, RTE_TEL_U64_VAL);
        for (uint64_t n : *numbers) rte_tel_data_add_array_u64(column, n);
      } else {
        rte_tel_data_start_array(column, RTE_TEL_STRING_VAL);
        for (const std::string& s : std::get<std::vector<std::string>>(value)) {
          rte_tel_data_add_array_string(column, s.c_str());
        }
      }
      if (rte_tel_data_add_dict_container(data, name.c_str(), column, 0) != 0) {
        rte_tel_data_free(column);
      }
    }
  }
}

int telemetryCommand(const char* command, const char* params, rte_tel_data* data) {
  TelemetryAnswer answer;
  const std::function<void()> task = [&] {
    if (ControlPlane* daemon = telemetry_daemon.load()) {
      answer = daemon->telemetryAnswer(command, params == nullptr ? "" : params);
    }
  };
  if (!telemetry_mailbox.run(task, kTelemetryPatience)) return -EAGAIN;
  if (!answer.error.empty()) {
    rte_tel_data_string(data, answer.error.c_str());
    return 0;
  }
  fill(data, answer);
  return 0;
}

// One page of a table answer, column by column: rows first .. first + kTelemetryRows, with the
// table's total and the first row's number ahead of the columns.
template <typename Row>
class TelemetryPage {
 public:
  TelemetryPage(std::vector<std::pair<std::string, TelemetryValue>>& entries,
                const std::vector<Row>& rows, uint64_t first)
      : entries_(entries),
        rows_(rows),
        first_(std::min<uint64_t>(first, rows.size())),
        end_(std::min<uint64_t>(first_ + kTelemetryRows, rows.size())) {
    entries_.emplace_back("total", static_cast<uint64_t>(rows.size()));
    entries_.emplace_back("first", first);
  }
  // A column of what `value` gives for each row of the page: numbers or strings.
  template <typename Get>
  void column(const char* name, Get value) {
    std::vector<decltype(value(rows_[0]))> cells;
    for (uint64_t i = first_; i < end_; ++i) cells.push_back(value(rows_[i]));
    entries_.emplace_back(name, std::move(cells));
  }

 private:
  std::vector<std::pair<std::string, TelemetryValue>>& entries_;
  const std::vector<Row>& rows_;
  uint64_t first_;
  uint64_t end_;
};

}  // namespace

absl::Status ControlPlane::openTelemetry() {
  telemetry_daemon.store(this);
  telemetry_mailbox.setOpen(true);
  // Once per process: DPDK keeps commands registered until it exits.
  static const absl::Status registered = []() -> absl::Status {
    const struct {
      const char* command;
      const char* help;
    } commands[] = {
        {"/berth/status", "berthd's version, uptime, config, snapshot generation and workers"},
        {"/berth/stats", "The workers' counters summed (berthctl stats). No parameters"},
        {"/berth/services",
         "Per service, column by column (berthctl services). Parameter: first "
         "row (64 rows per answer)"},
        {"/berth/backends",
         "Per backend of one service, column by column (berthctl backends). "
         "Parameters: service[,first row] (64 rows per answer)"},
        {"/berth/ports",
         "A port's NIC statistics, read once a second (berthctl stats). Parameter: the port; "
         "none lists them"},
    };
    for (const auto& [command, help] : commands) {
      // DPDK refuses, among others, a help text of RTE_TEL_MAX_STRING_LEN bytes or more.
      if (const int result = rte_telemetry_register_cmd(command, telemetryCommand, help);
          result != 0) {
        return absl::InternalError(
            absl::StrCat("telemetry: registering ", command, " failed: ", std::strerror(-result)));
      }
    }
    return absl::OkStatus();
  }();
  return registered;
}

void ControlPlane::closeTelemetry() {
  telemetry_mailbox.setOpen(false);
  telemetry_daemon.store(nullptr);
}

void ControlPlane::serveTelemetry() { telemetry_mailbox.serve(); }

TelemetryAnswer ControlPlane::telemetryAnswer(absl::string_view command,
                                              absl::string_view params) const {
  TelemetryAnswer answer;
  auto& entries = answer.entries;
  if (command == "/berth/status") {
    size_t backends = 0;
    for (const ServiceConfig& service : config_.services) backends += service.backends.size();
    entries.emplace_back("version", std::string(berthVersion()));
    entries.emplace_back("uptime_s",
                         static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - started_)));
    entries.emplace_back("config", config_path_);
    entries.emplace_back("snapshot_generation", rollouts_.generation());
    entries.emplace_back("workers", static_cast<uint64_t>(datapath_.workerCount()));
    entries.emplace_back("services", static_cast<uint64_t>(config_.services.size()));
    entries.emplace_back("backends", static_cast<uint64_t>(backends));
    return answer;
  }
  if (command == "/berth/stats") {
    for (const auto& [name, value] : summedCounters()) entries.emplace_back(name, value);
    entries.emplace_back("conntrack_entries", datapath_.connectionsTracked());
    return answer;
  }
  if (command == "/berth/ports") {
    portsTelemetry(params, answer);
    return answer;
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(params, ',', absl::SkipWhitespace());
  auto firstRow = [&](size_t at, uint64_t& first) {
    first = 0;
    if (parts.size() <= at) return true;
    return absl::SimpleAtoi(parts[at], &first);
  };
  uint64_t first = 0;
  if (command == "/berth/services") {
    if (!firstRow(0, first)) {
      answer.error = "parameter: the first row, a number";
      return answer;
    }
    const std::vector<ServiceRow> rows = currentServiceRows();
    TelemetryPage<ServiceRow> page(entries, rows, first);
    page.column("name", [](const ServiceRow& r) { return r.name; });
    page.column("listener", [](const ServiceRow& r) { return r.listener; });
    page.column("forwarding", [](const ServiceRow& r) { return r.forwarding; });
    page.column("backends", [](const ServiceRow& r) { return r.backends; });
    page.column("healthy", [](const ServiceRow& r) { return r.healthy; });
    page.column("packets", [](const ServiceRow& r) { return r.traffic.packets; });
    page.column("bytes", [](const ServiceRow& r) { return r.traffic.bytes; });
    page.column("connections", [](const ServiceRow& r) { return r.traffic.connections; });
    return answer;
  }
  if (command == "/berth/backends") {
    if (parts.empty() || !firstRow(1, first)) {
      answer.error = "parameters: service[,first row]";
      return answer;
    }
    if (config_.findService(parts[0]) == nullptr) {
      answer.error = absl::StrCat("no service named '", parts[0], "'");
      return answer;
    }
    std::vector<BackendRow> rows = currentBackendRows();
    std::erase_if(rows, [&](const BackendRow& row) { return row.service != parts[0]; });
    entries.emplace_back("service", std::string(parts[0]));
    TelemetryPage<BackendRow> page(entries, rows, first);
    page.column("name", [](const BackendRow& r) { return r.name; });
    page.column("address", [](const BackendRow& r) { return r.address; });
    page.column("health", [](const BackendRow& r) {
      return std::string(r.drained ? "drained" : r.healthText());
    });
    page.column("weight", [](const BackendRow& r) { return static_cast<uint64_t>(r.weight); });
    page.column("slots", [](const BackendRow& r) { return r.slots; });
    page.column("packets", [](const BackendRow& r) { return r.traffic.packets; });
    page.column("bytes", [](const BackendRow& r) { return r.traffic.bytes; });
    page.column("connections", [](const BackendRow& r) { return r.traffic.connections; });
    return answer;
  }
  answer.error = absl::StrCat("unknown command ", command);
  return answer;
}

void ControlPlane::portsTelemetry(absl::string_view port_name, TelemetryAnswer& answer) const {
  auto& entries = answer.entries;
  const std::shared_ptr<const PortStatsReading> reading = datapath_.portStats();
  if (reading == nullptr) {
    answer.error = "no port statistics read yet";
    return;
  }
  entries.emplace_back("read_ms_ago",
                       static_cast<uint64_t>(absl::ToInt64Milliseconds(absl::Now() - reading->at)));
  if (port_name.empty()) {
    std::vector<std::string> names;
    for (const PortStats& port : reading->ports) names.push_back(port.port);
    entries.emplace_back("ports", std::move(names));
    return;
  }
  const PortRates rates = datapath_.portRates();
  for (size_t p = 0; p < reading->ports.size(); ++p) {
    const PortStats& port = reading->ports[p];
    if (port.port != port_name) continue;
    entries.emplace_back("port", port.port);
    entries.emplace_back("driver", port.driver);
    if (!port.error.empty()) entries.emplace_back("error", port.error);
    entries.emplace_back("link_up", uint64_t{port.link.up});
    entries.emplace_back("link_speed_mbps", uint64_t{port.link.speed_mbps});
    entries.emplace_back("link_full_duplex", uint64_t{port.link.full_duplex});
    entries.emplace_back("link_autoneg", uint64_t{port.link.autoneg});
    for (size_t t = 0; t < kPortTotalCount; ++t) {
      entries.emplace_back(kPortTotalNames[t], port.totals[t]);
      entries.emplace_back(
          absl::StrCat(kPortTotalNames[t], "_per_s"),
          static_cast<uint64_t>(p < rates.per_port.size() ? rates.per_port[p][t] : 0));
    }
    auto queues = [&](const std::string& prefix, const std::vector<PortQueueCounts>& counts) {
      std::vector<uint64_t> packets, bytes, errors;
      for (const PortQueueCounts& queue : counts) {
        packets.push_back(queue.packets);
        bytes.push_back(queue.bytes);
        errors.push_back(queue.errors);
      }
      entries.emplace_back(prefix + "_packets", std::move(packets));
      entries.emplace_back(prefix + "_bytes", std::move(bytes));
      if (prefix == "rx_queue") entries.emplace_back(prefix + "_errors", std::move(errors));
    };
    queues("rx_queue", port.rx_queues);
    queues("tx_queue", port.tx_queues);
    // Two columns rather than one entry per xstat: a NIC has hundreds, and a telemetry
    // dictionary holds RTE_TEL_MAX_DICT_ENTRIES; an array holds RTE_TEL_MAX_ARRAY_ENTRIES.
    std::vector<std::string> names;
    std::vector<uint64_t> values;
    for (const auto& [name, value] : port.xstats) {
      if (names.size() == RTE_TEL_MAX_ARRAY_ENTRIES) break;
      names.push_back(name);
      values.push_back(value);
    }
    entries.emplace_back("xstats_total", static_cast<uint64_t>(port.xstats.size()));
    entries.emplace_back("xstat_names", std::move(names));
    entries.emplace_back("xstat_values", std::move(values));
    return;
  }
  answer.error = absl::StrCat("no port named '", port_name,
                              "' (a VLAN port's counters are its "
                              "device's, under the device's first port)");
}

std::shared_ptr<const RenderedText> ControlPlane::renderMetrics() {
  MetricsSnapshot metrics;
  metrics.version = std::string(berthVersion());
  metrics.uptime_s = absl::ToDoubleSeconds(absl::Now() - started_);
  metrics.generation = rollouts_.generation();
  metrics.workers = datapath_.workerMetrics();
  metrics.sums = summedCounters();
  metrics.services = currentServiceRows();
  metrics.backends = currentBackendRows();
  for (const ServiceState& service : tables_.states()) {
    const TableChangeHistory* history = tables_.history(service.name());
    metrics.table_changes.push_back(
        {service.name(), history == nullptr ? TableChangeHistory() : *history});
  }
  auto endpoint = [](std::string name, const auto& counts) {
    return EndpointMetrics{std::move(name),     counts.accepted,     counts.answered,
                           counts.evicted_idle, counts.refused_full, counts.cut_at_deadline};
  };
  if (const ControlSocket* socket = replies_.control()) {
    metrics.endpoints.push_back(endpoint("control", socket->counts()));
  }
  if (const ControlSocket* socket = replies_.readOnly()) {
    metrics.endpoints.push_back(endpoint("read_only", socket->counts()));
  }
  if (const MetricsServer* server = replies_.metrics()) {
    metrics.endpoints.push_back(endpoint("metrics", server->counts()));
  }
  metrics.log_lines_dropped = logLinesDropped();
  metrics.probes_not_run = health_->probesNotRun();
  if (const std::shared_ptr<const PortStatsReading> ports = datapath_.portStats()) {
    metrics.ports = ports->ports;
  }
  if (fleet_.active()) {
    const FleetAgentStatus fleet = fleet_.agentStatus();
    metrics.fleet = FleetMetrics{fleet.running_version,  fleet.head_version, fleet.from_cache,
                                 fleet.etcd_reachable,   fleet.registered,   fleet.versions_applied,
                                 fleet.versions_refused, fleet.etcd_errors};
  }
  return renderOffLoop([metrics = std::move(metrics)] { return berth::prometheusText(metrics); });
}

}  // namespace berth
