#include "berth/metrics/telemetry.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

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

// The page's first row from parameter `at` of `parts`: 0 when absent; false when not a number.
bool firstRow(const std::vector<absl::string_view>& parts, size_t at, uint64_t& first) {
  first = 0;
  if (parts.size() <= at) return true;
  return absl::SimpleAtoi(parts[at], &first);
}

}  // namespace

TelemetryAnswer statusTelemetry(const StatusReport& report) {
  TelemetryAnswer answer;
  auto& entries = answer.entries;
  entries.emplace_back("version", report.version);
  entries.emplace_back("uptime_s", static_cast<uint64_t>(report.uptime_s));
  entries.emplace_back("config", report.config_path);
  entries.emplace_back("snapshot_generation", report.snapshot_generation);
  entries.emplace_back("workers", report.workers);
  entries.emplace_back("services", report.services);
  entries.emplace_back("backends", report.backends);
  return answer;
}

TelemetryAnswer statsTelemetry(const std::vector<std::pair<std::string, uint64_t>>& sums,
                               uint64_t conntrack_entries) {
  TelemetryAnswer answer;
  for (const auto& [name, value] : sums) answer.entries.emplace_back(name, value);
  answer.entries.emplace_back("conntrack_entries", conntrack_entries);
  return answer;
}

TelemetryAnswer servicesTelemetry(const std::vector<ServiceRow>& rows, absl::string_view params) {
  TelemetryAnswer answer;
  auto& entries = answer.entries;
  const std::vector<absl::string_view> parts = absl::StrSplit(params, ',', absl::SkipWhitespace());
  uint64_t first = 0;
  if (!firstRow(parts, 0, first)) {
    answer.error = "parameter: the first row, a number";
    return answer;
  }
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

TelemetryAnswer backendsTelemetry(std::vector<BackendRow> rows, absl::string_view params,
                                  const std::function<bool(absl::string_view)>& known) {
  TelemetryAnswer answer;
  auto& entries = answer.entries;
  const std::vector<absl::string_view> parts = absl::StrSplit(params, ',', absl::SkipWhitespace());
  uint64_t first = 0;
  if (parts.empty() || !firstRow(parts, 1, first)) {
    answer.error = "parameters: service[,first row]";
    return answer;
  }
  if (!known(parts[0])) {
    answer.error = absl::StrCat("no service named '", parts[0], "'");
    return answer;
  }
  std::erase_if(rows, [&](const BackendRow& row) { return row.service != parts[0]; });
  entries.emplace_back("service", std::string(parts[0]));
  TelemetryPage<BackendRow> page(entries, rows, first);
  page.column("name", [](const BackendRow& r) { return r.name; });
  page.column("address", [](const BackendRow& r) { return r.address; });
  page.column("health", [](const BackendRow& r) {
    return std::string(r.drained ? "drained" : r.healthText());
  });
  page.column("weight", [](const BackendRow& r) { return static_cast<uint64_t>(r.weight); });
  page.column("effective_weight",
              [](const BackendRow& r) { return static_cast<uint64_t>(r.effective_weight); });
  page.column("slots", [](const BackendRow& r) { return r.slots; });
  page.column("packets", [](const BackendRow& r) { return r.traffic.packets; });
  page.column("bytes", [](const BackendRow& r) { return r.traffic.bytes; });
  page.column("connections", [](const BackendRow& r) { return r.traffic.connections; });
  return answer;
}

TelemetryAnswer portsTelemetry(const PortStatsReading* reading, const PortRates& rates,
                               absl::string_view port_name, absl::Time now, size_t max_array) {
  TelemetryAnswer answer;
  auto& entries = answer.entries;
  if (reading == nullptr) {
    answer.error = "no port statistics read yet";
    return answer;
  }
  entries.emplace_back("read_ms_ago",
                       static_cast<uint64_t>(absl::ToInt64Milliseconds(now - reading->at)));
  if (port_name.empty()) {
    std::vector<std::string> names;
    for (const PortStats& port : reading->ports) names.push_back(port.port);
    entries.emplace_back("ports", std::move(names));
    return answer;
  }
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
    entries.emplace_back("drops_reported", uint64_t{port.drops_reported});
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
    // dictionary holds RTE_TEL_MAX_DICT_ENTRIES; an array holds max_array.
    std::vector<std::string> names;
    std::vector<uint64_t> values;
    for (const auto& [name, value] : port.xstats) {
      if (names.size() == max_array) break;
      names.push_back(name);
      values.push_back(value);
    }
    entries.emplace_back("xstats_total", static_cast<uint64_t>(port.xstats.size()));
    entries.emplace_back("xstat_names", std::move(names));
    entries.emplace_back("xstat_values", std::move(values));
    return answer;
  }
  answer.error = absl::StrCat("no port named '", port_name,
                              "' (a VLAN port's counters are its "
                              "device's, under the device's first port)");
  return answer;
}

}  // namespace berth
