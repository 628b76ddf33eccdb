// berthd's metrics for machines: DPDK telemetry commands under /berth/ and the Prometheus text
// endpoint (metrics.listen). Both report the rows `berthctl services` and `backends` show and the
// counters `berthctl stats` sums, from the same functions (control.cc), so they cannot disagree.

#include <rte_telemetry.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "berth/control/control_plane.h"

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

// Prometheus label values: backslash, double quote and newline escaped.
std::string label(absl::string_view value) {
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
    absl::StrAppendFormat(&out_, "%s%s %.6g\n", name_,
                          labels.empty() ? "" : absl::StrCat("{", labels, "}"), value);
  }

 private:
  std::string& out_;
  std::string name_;
};

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
  static const bool registered = [] {
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
    };
    for (const auto& [command, help] : commands) {
      rte_telemetry_register_cmd(command, telemetryCommand, help);
    }
    return true;
  }();
  (void)registered;
  return absl::OkStatus();
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
    entries.emplace_back("version", std::string(kBerthVersion));
    entries.emplace_back("uptime_s",
                         static_cast<uint64_t>(absl::ToInt64Seconds(absl::Now() - started_)));
    entries.emplace_back("config", config_path_);
    entries.emplace_back("snapshot_generation", generation_);
    entries.emplace_back("workers", static_cast<uint64_t>(workers_.size()));
    entries.emplace_back("services", static_cast<uint64_t>(config_.services.size()));
    entries.emplace_back("backends", static_cast<uint64_t>(backends));
    return answer;
  }
  if (command == "/berth/stats") {
    std::vector<const WorkerCounters*> counters;
    for (const WorkerPtr& worker : workers_) counters.push_back(&worker->counters);
    for (const auto& [name, value] : sumCounters(counters)) entries.emplace_back(name, value);
    entries.emplace_back("conntrack_entries", connectionsTracked());
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

void ControlPlane::sampleRates() {
  const absl::Time now = absl::Now();
  if (now - rates_latest_.at < kRateInterval) return;
  RateSample sample;
  sample.at = now;
  for (const WorkerPtr& worker : workers_) {
    sample.rx_packets += worker->counters.rx_packets.read();
    sample.rx_bytes += worker->counters.rx_bytes.read();
    sample.tx_packets += worker->counters.tx_packets.read();
    sample.tx_bytes += worker->counters.tx_bytes.read();
    for (const Counter& drop : worker->counters.drops) sample.drops += drop.read();
    for (const Counter& error : worker->counters.parse_errors) sample.drops += error.read();
  }
  rates_previous_ = rates_latest_;
  rates_latest_ = sample;
}

ControlPlane::Rates ControlPlane::rates() const {
  Rates rates;
  const double seconds = absl::ToDoubleSeconds(rates_latest_.at - rates_previous_.at);
  if (rates_previous_.at == absl::InfinitePast() || seconds <= 0) return rates;
  rates.interval_s = seconds;
  rates.rx_pps =
      static_cast<double>(rates_latest_.rx_packets - rates_previous_.rx_packets) / seconds;
  rates.tx_pps =
      static_cast<double>(rates_latest_.tx_packets - rates_previous_.tx_packets) / seconds;
  rates.rx_bps =
      8.0 * static_cast<double>(rates_latest_.rx_bytes - rates_previous_.rx_bytes) / seconds;
  rates.tx_bps =
      8.0 * static_cast<double>(rates_latest_.tx_bytes - rates_previous_.tx_bytes) / seconds;
  rates.drops_per_s = static_cast<double>(rates_latest_.drops - rates_previous_.drops) / seconds;
  return rates;
}

std::string ControlPlane::prometheusText() const {
  std::string out;
  Family(out, "berth_info", "gauge", "berthd's version; always 1")
      .sample(absl::StrCat("version=\"", kBerthVersion, "\""), uint64_t{1});
  Family(out, "berth_uptime_seconds", "gauge", "Seconds since berthd started")
      .sample("", absl::ToDoubleSeconds(absl::Now() - started_));
  Family(out, "berth_snapshot_generation", "gauge", "The snapshot the workers use")
      .sample("", generation_);

  // Per worker.
  struct WorkerMetric {
    const char* name;
    const char* help;
    const Counter WorkerCounters::*counter;
  };
  const WorkerMetric per_worker[] = {
      {"berth_worker_rx_packets_total", "Frames received", &WorkerCounters::rx_packets},
      {"berth_worker_rx_bytes_total", "Bytes received", &WorkerCounters::rx_bytes},
      {"berth_worker_tx_packets_total", "Frames sent", &WorkerCounters::tx_packets},
      {"berth_worker_tx_bytes_total", "Bytes sent", &WorkerCounters::tx_bytes},
  };
  for (const WorkerMetric& metric : per_worker) {
    Family family(out, metric.name, "counter", metric.help);
    for (size_t w = 0; w < workers_.size(); ++w) {
      family.sample(absl::StrCat("worker=\"", w, "\""),
                    (workers_[w]->counters.*metric.counter).read());
    }
  }
  {
    Family family(out, "berth_worker_drops_total", "counter",
                  "Frames dropped, every reason and parse error together");
    for (size_t w = 0; w < workers_.size(); ++w) {
      uint64_t drops = 0;
      for (const Counter& drop : workers_[w]->counters.drops) drops += drop.read();
      for (const Counter& error : workers_[w]->counters.parse_errors) drops += error.read();
      family.sample(absl::StrCat("worker=\"", w, "\""), drops);
    }
  }
  {
    Family entries(out, "berth_conntrack_entries", "gauge", "Connections the worker's table holds");
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (workers_[w]->connections() == nullptr) continue;
      entries.sample(absl::StrCat("worker=\"", w, "\""),
                     static_cast<uint64_t>(workers_[w]->connections()->occupied()));
    }
    Family capacity(out, "berth_conntrack_capacity", "gauge", "Connections the table can hold");
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (workers_[w]->connections() == nullptr) continue;
      capacity.sample(absl::StrCat("worker=\"", w, "\""),
                      static_cast<uint64_t>(workers_[w]->connections()->capacity()));
    }
  }

  // Summed over workers, by reason, error and event.
  std::vector<const WorkerCounters*> counters;
  for (const WorkerPtr& worker : workers_) counters.push_back(&worker->counters);
  const auto sums = sumCounters(counters);
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
  for (const auto& [counter, value] : sums) {
    if (counter == "arp_nd_replies" || counter == "icmp_too_big_replies") {
      Family(out, absl::StrCat("berth_", counter, "_total"), "counter",
             "Replies berthd built itself")
          .sample("", value);
    }
  }

  // Per service and per backend.
  const std::vector<ServiceRow> services = currentServiceRows();
  auto perService = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const ServiceRow& row : services) {
      family.sample(absl::StrCat("service=\"", label(row.name), "\""), value(row));
    }
  };
  perService("berth_service_packets_total", "counter", "Packets forwarded for the service",
             [](const ServiceRow& r) { return r.traffic.packets; });
  perService("berth_service_bytes_total", "counter", "Bytes received for the service and sent on",
             [](const ServiceRow& r) { return r.traffic.bytes; });
  perService("berth_service_connections", "gauge", "Connections tracked for the service",
             [](const ServiceRow& r) { return r.traffic.connections; });
  perService("berth_service_backends_healthy", "gauge", "Healthy backends",
             [](const ServiceRow& r) { return r.healthy; });
  const std::vector<BackendRow> backends = currentBackendRows();
  auto perBackend = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const BackendRow& row : backends) {
      family.sample(
          absl::StrCat("service=\"", label(row.service), "\",backend=\"", label(row.name), "\""),
          static_cast<uint64_t>(value(row)));
    }
  };
  perBackend("berth_backend_packets_total", "counter", "Packets forwarded to the backend",
             [](const BackendRow& r) { return r.traffic.packets; });
  perBackend("berth_backend_bytes_total", "counter", "Bytes forwarded to the backend",
             [](const BackendRow& r) { return r.traffic.bytes; });
  perBackend("berth_backend_connections", "gauge", "Connections tracked to the backend",
             [](const BackendRow& r) { return r.traffic.connections; });
  perBackend("berth_backend_healthy", "gauge", "1 while health checks pass",
             [](const BackendRow& r) { return r.healthy ? 1 : 0; });
  perBackend("berth_backend_drained", "gauge", "1 while drained (berthctl drain)",
             [](const BackendRow& r) { return r.drained ? 1 : 0; });
  perBackend("berth_backend_weight", "gauge", "Weight in the table (0 while drained)",
             [](const BackendRow& r) { return r.weight; });
  perBackend("berth_backend_slots", "gauge", "Slots the backend owns in the live table",
             [](const BackendRow& r) { return r.slots; });
  return out;
}

}  // namespace berth
