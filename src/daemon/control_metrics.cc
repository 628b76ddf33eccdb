// berthd's metrics for machines: DPDK telemetry commands under /berth/ and the Prometheus text
// endpoint (metrics.listen). Both report the rows `berthctl services` and `backends` show and the
// counters `berthctl stats` sums, gathered here from the same functions (control/reports.h), so
// they cannot disagree; the Prometheus text itself is rendered by metrics/prometheus.h.

#include <rte_telemetry.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "berth/api/mailbox.h"
#include "berth/daemon/control_plane.h"
#include "berth/maglev/analysis.h"
#include "berth/metrics/prometheus.h"
#include "berth/metrics/telemetry.h"
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
  if (command == "/berth/status") return statusTelemetry(statusReport());
  if (command == "/berth/stats") {
    return statsTelemetry(summedCounters(), datapath_.connectionsTracked());
  }
  if (command == "/berth/ports") {
    return portsTelemetry(datapath_.ports().stats().get(), datapath_.ports().rates(), params,
                          absl::Now(), RTE_TEL_MAX_ARRAY_ENTRIES);
  }
  if (command == "/berth/services") return servicesTelemetry(serviceRows(), params);
  if (command == "/berth/backends") {
    return backendsTelemetry(backendRows(), params, [this](absl::string_view name) {
      return config_.findService(name) != nullptr;
    });
  }
  TelemetryAnswer answer;
  answer.error = absl::StrCat("unknown command ", command);
  return answer;
}

std::shared_ptr<const RenderedText> ControlPlane::renderMetrics() {
  MetricsSnapshot metrics;
  metrics.version = std::string(berthVersion());
  metrics.uptime_s = absl::ToDoubleSeconds(absl::Now() - started_);
  metrics.generation = rollouts_.generation();
  metrics.workers = datapath_.workerMetrics();
  metrics.sums = summedCounters();
  metrics.services = serviceRows();
  metrics.backends = backendRows();
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
  // The pairs' shares are a table lookup each once their port's are counted (NatPools).
  constexpr size_t kNatPoolRowsShown = 4096;
  size_t omitted = 0;
  std::vector<const ServiceConfig*> services;
  for (const ServiceState& service : tables_.states()) services.push_back(&service.config());
  metrics.nat_pool =
      nat_pools_.rows(datapath_.snapshot(), config_.dataplane, services,
                      static_cast<uint16_t>(datapath_.workerCount()), kNatPoolRowsShown, omitted);
  metrics.nat_pool_omitted = omitted;
  metrics.log_lines_dropped = logLinesDropped();
  metrics.probes_not_run = health_->probesNotRun();
  if (reloads_) metrics.reloads = reloads_->history();
  if (const std::shared_ptr<const PortStatsReading> ports = datapath_.ports().stats()) {
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

// --- the figures the loop gathers, for the commands, the metrics endpoint and telemetry -----

std::vector<std::pair<std::string, uint64_t>> ControlPlane::summedCounters() const {
  std::vector<std::pair<std::string, uint64_t>> sums = datapath_.summedCounters();
  for (auto& sum : neighbors_.sums()) sums.push_back(std::move(sum));
  return sums;
}

CountersReport ControlPlane::countersReport() const {
  CountersReport report;
  report.elapsed_s = absl::ToDoubleSeconds(absl::Now() - started_);
  report.generation = rollouts_.generation();
  report.rx_window_s = rxWindowSeconds();
  for (const auto& [rx, tx] : datapath_.workerPackets()) report.workers.push_back({rx, tx});
  report.sums = summedCounters();
  const std::vector<std::string>& services = counter_ids_.serviceNames();
  for (size_t id = 0; id < services.size(); ++id) {
    report.services.emplace_back(services[id],
                                 datapath_.trafficOf(static_cast<uint32_t>(id), false));
  }
  const std::vector<std::string>& backends = counter_ids_.backendNames();
  for (size_t id = 0; id < backends.size(); ++id) {
    report.backends.emplace_back(backends[id],
                                 datapath_.trafficOf(static_cast<uint32_t>(id), true));
  }
  return report;
}

StatusReport ControlPlane::statusReport() const {
  StatusReport report;
  report.version = std::string(berthVersion());
  report.uptime_s = absl::ToDoubleSeconds(absl::Now() - started_);
  report.config_path = config_path_;
  // The CRC32-C of the config in force tells two instances' configs apart. It is the text berthd
  // last loaded, not the file on disk, which a refused reload leaves different.
  report.config_crc32c = config_.source_crc32c;
  report.snapshot_generation = rollouts_.generation();
  report.workers = datapath_.workerCount();
  report.services = config_.services.size();
  for (const ServiceConfig& service : config_.services) report.backends += service.backends.size();
  for (const ServiceState& service : tables_.states()) {
    for (const std::string& backend : service.drainedBackends()) {
      report.drained.push_back(absl::StrCat(service.name(), "/", backend));
    }
    const Table& table = service.liveTable();
    TableStatusRow& row = report.tables.emplace_back();
    row.service = service.name();
    row.algorithm = table.algorithm();
    row.table_size = table.size();
    row.fingerprint = fingerprintText(service.liveFingerprint());
    if (const TableChangeHistory* history = tables_.history(service.name());
        history != nullptr && history->last) {
      row.last_change = history->last;
      row.last_change_seconds_ago = absl::ToDoubleSeconds(absl::Now() - history->last_at);
    }
  }
  if (drain_state_) {
    report.drain_state_path = drain_state_->path();
    report.drain_state_written = drain_state_->lastWrite();
  }
  report.exception_interfaces = datapath_.exceptionInterfaces();
  report.port_spreads = datapath_.ports().describeSpreads();
  report.periodic_jobs = jobs_.figures();
  report.fleet = fleet_.statusRow(config_, *health_);
  if (reloads_) report.reloads = reloads_->history();
  report.taken_at = absl::Now();
  return report;
}

std::vector<ServiceRow> ControlPlane::serviceRows() const {
  return berth::serviceRows(
      tables_.states(), counter_ids_,
      [this](uint32_t id, bool backend) { return datapath_.trafficOf(id, backend); },
      [this](uint32_t id, bool backend) { return traffic_rates_.rate(id, backend); });
}

std::vector<BackendRow> ControlPlane::backendRows() const {
  std::vector<BackendRow> rows = berth::backendRows(
      tables_.states(), counter_ids_,
      [this](uint32_t id, bool backend) { return datapath_.trafficOf(id, backend); },
      [this](uint32_t id, bool backend) { return traffic_rates_.rate(id, backend); });
  // The rows follow the config's services and backends, as the health monitor does.
  size_t row = 0;
  const AgreedHealth* agreed = fleet_.agreedHealthIfActive();
  const uint64_t health_now = health_->now();
  for (size_t s = 0; s < config_.services.size(); ++s) {
    for (size_t b = 0; b < config_.services[s].backends.size(); ++b) {
      BackendRow& entry = rows[row++];
      entry.check_stale = health_->stale(s, b);
      BackendHealthDetail detail = health_->detail(s, b, health_now);
      entry.health_reason = std::move(detail.reason);
      entry.health_since_s = detail.since_s;
      if (detail.last_probe) {
        entry.last_check =
            BackendRow::LastCheck{detail.last_probe->success, std::move(detail.last_probe->detail),
                                  detail.last_probe->latency_ms, detail.last_probe_s_ago};
      }
      if (agreed == nullptr) continue;
      const auto dissent =
          agreed->dissent.find({config_.services[s].name, config_.services[s].backends[b].name});
      if (dissent != agreed->dissent.end()) entry.fleet_dissent = dissent->second;
    }
  }
  return rows;
}

}  // namespace berth
