#include "berth/control/reports.h"

#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

// One column of a reply: its JSON key and its text header (either may be absent), its text
// width (negative: left-aligned), and the cell of each row. `text`, when set, is what the text
// table shows instead of the JSON value.
// std::monostate is an absent value: null in JSON, "-" in text.
using Cell = std::variant<std::string, uint64_t, int64_t, bool, double, std::monostate>;
template <typename Row>
struct Column {
  const char* key;     // nullptr: text only
  const char* header;  // nullptr: JSON only
  int width;
  std::function<Cell(const Row&)> cell;
  std::function<std::string(const Row&)> text = nullptr;
};

std::string cellText(const Cell& cell) {
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&cell)) return absl::StrCat(*u);
  if (const auto* i = std::get_if<int64_t>(&cell)) return absl::StrCat(*i);
  if (const auto* d = std::get_if<double>(&cell)) return absl::StrFormat("%.1f", *d);
  if (std::holds_alternative<std::monostate>(cell)) return "-";
  return std::get<bool>(cell) ? "true" : "false";
}

void writeCell(JsonWriter& json, const Cell& cell) {
  if (const auto* s = std::get_if<std::string>(&cell)) {
    json.value(*s);
  } else if (const auto* u = std::get_if<uint64_t>(&cell)) {
    json.value(*u);
  } else if (const auto* i = std::get_if<int64_t>(&cell)) {
    json.value(*i);
  } else if (const auto* d = std::get_if<double>(&cell)) {
    json.value(*d);
  } else if (std::holds_alternative<std::monostate>(cell)) {
    json.null();
  } else {
    json.value(std::get<bool>(cell));
  }
}

std::string padded(const std::string& text, int width) {
  const size_t size = static_cast<size_t>(width < 0 ? -width : width);
  if (text.size() >= size) return text;
  const std::string pad(size - text.size(), ' ');
  return width < 0 ? text + pad : pad + text;
}

// {"ok": true, "conntrack_entries": N, ARRAY: [rows], "text": the table}, without the
// connections where none are given.
template <typename Row>
std::string tableReply(const char* array, const std::vector<Column<Row>>& columns,
                       const std::vector<Row>& rows, std::optional<uint64_t> connections_tracked,
                       const std::string& footer = "") {
  JsonWriter json;
  json.beginObject().key("ok").value(true);
  if (connections_tracked) json.key("conntrack_entries").value(*connections_tracked);
  auto line = [&](auto text_of) {
    std::string out;
    for (const Column<Row>& column : columns) {
      if (column.header == nullptr) continue;
      absl::StrAppend(&out, out.empty() ? "" : " ", padded(text_of(column), column.width));
    }
    return out + "\n";
  };
  std::string text = line([](const Column<Row>& column) { return std::string(column.header); });
  json.key(array).beginArray();
  for (const Row& row : rows) {
    json.beginObject();
    for (const Column<Row>& column : columns) {
      if (column.key == nullptr) continue;
      json.key(column.key);
      writeCell(json, column.cell(row));
    }
    json.endObject();
    absl::StrAppend(&text, line([&](const Column<Row>& column) {
      return column.text ? column.text(row) : cellText(column.cell(row));
    }));
  }
  json.endArray();
  if (connections_tracked) {
    absl::StrAppendFormat(&text, "connections tracked: %u\n", *connections_tracked);
  }
  text += footer;
  json.key("text").value(text).endObject();
  return json.str();
}

template <typename Row>
std::vector<Column<Row>> trafficColumns() {
  return {
      {"packets", "packets", 14, [](const Row& r) { return Cell(r.traffic.packets); }},
      {"bytes", "bytes", 16, [](const Row& r) { return Cell(r.traffic.bytes); }},
      {"connections", "connections", 11, [](const Row& r) { return Cell(r.traffic.connections); }},
  };
}

std::string lastCheckText(const BackendRow& row) {
  if (!row.last_check) return row.health_check == "none" ? "-" : "not yet";
  const BackendRow::LastCheck& last = *row.last_check;
  return absl::StrCat(last.ok ? "ok " : "FAILED ", last.detail, ", ", last.latency_ms, " ms, ",
                      shortDuration(last.s_ago), " ago");
}

}  // namespace

std::string shortDuration(double seconds) {
  const uint64_t s = seconds > 0 ? static_cast<uint64_t>(seconds) : 0;
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%um%02us", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%uh%02um", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%ud%02uh", s / 86400, s % 86400 / 3600);
}

std::vector<ServiceRow> serviceRows(absl::Span<const ServiceState> services,
                                    const CounterIds& counter_ids, const TrafficSource& traffic) {
  std::vector<ServiceRow> rows;
  for (const ServiceState& state : services) {
    const ServiceConfig& service = state.config();
    ServiceRow row;
    row.name = service.name;
    row.listener = service.listener();
    row.forwarding = std::string(toString(service.forwarding));
    row.algorithm = std::string(toString(service.algorithm));
    row.backends = service.backends.size();
    row.healthy = state.healthyCount();
    if (const std::optional<uint32_t> id = counter_ids.findService(service.name)) {
      row.traffic = traffic(*id, false);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<BackendRow> backendRows(absl::Span<const ServiceState> services,
                                    const CounterIds& counter_ids, const TrafficSource& traffic) {
  std::vector<BackendRow> rows;
  for (const ServiceState& state : services) {
    const ServiceConfig& service = state.config();
    const Table& table = state.liveTable();
    const std::vector<uint32_t> slots = table.slotCounts();
    for (size_t b = 0; b < service.backends.size(); ++b) {
      const BackendConfig& backend = service.backends[b];
      BackendRow row;
      row.service = service.name;
      row.name = backend.name;
      row.address = backend.address.toString();
      row.weight = backend.weight;
      row.healthy = state.healthy()[b];
      row.drained = state.drained(backend.name);
      row.health_check = std::string(toString(backend.health.type));
      const absl::StatusOr<uint16_t> index = table.indexOf(backend.name);
      row.slots = index.ok() ? slots[*index] : 0;
      if (const std::optional<uint32_t> id = counter_ids.findBackend(service.name, backend.name)) {
        row.traffic = traffic(*id, true);
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string servicesReplyJson(const std::vector<ServiceRow>& rows, uint64_t connections_tracked) {
  using R = ServiceRow;
  std::vector<Column<R>> columns = {
      {"name", "service", -16, [](const R& r) { return Cell(r.name); }},
      {"listener", "listener", -28, [](const R& r) { return Cell(r.listener); }},
      {"forwarding", "mode", -6, [](const R& r) { return Cell(r.forwarding); }},
      {"algorithm", "algorithm", -10, [](const R& r) { return Cell(r.algorithm); }},
      {"backends", "backends", 9, [](const R& r) { return Cell(r.backends); }},
      {"healthy", "healthy", 7, [](const R& r) { return Cell(r.healthy); }},
  };
  for (Column<R>& column : trafficColumns<R>()) columns.push_back(std::move(column));
  return tableReply("services", columns, rows, connections_tracked);
}

std::string backendsReplyJson(const std::vector<BackendRow>& rows, uint64_t connections_tracked) {
  using R = BackendRow;
  std::vector<Column<R>> columns = {
      {"service", "service", -16, [](const R& r) { return Cell(r.service); }},
      {"name", "backend", -16, [](const R& r) { return Cell(r.name); }},
      {"address", "address", -20, [](const R& r) { return Cell(r.address); }},
      {"weight", "weight", 7, [](const R& r) { return Cell(r.weight); }},
      {"drained", nullptr, 0, [](const R& r) { return Cell(r.drained); }},
      {"health", "health", -17, [](const R& r) { return Cell(std::string(r.healthText())); },
       [](const R& r) { return r.stateText(); }},
      {"health_check", nullptr, 0, [](const R& r) { return Cell(r.health_check); }},
      {"check_stale", nullptr, 0, [](const R& r) { return Cell(r.check_stale); }},
      {"health_reason", nullptr, 0, [](const R& r) { return Cell(r.health_reason); }},
      {"health_since_s", "since", 7, [](const R& r) { return Cell(r.health_since_s); },
       [](const R& r) { return shortDuration(r.health_since_s); }},
      {"last_check_ok", nullptr, 0,
       [](const R& r) { return r.last_check ? Cell(r.last_check->ok) : Cell(std::monostate()); }},
      {"last_check_detail", nullptr, 0,
       [](const R& r) {
         return r.last_check ? Cell(r.last_check->detail) : Cell(std::monostate());
       }},
      {"last_check_latency_ms", nullptr, 0,
       [](const R& r) {
         return r.last_check ? Cell(r.last_check->latency_ms) : Cell(std::monostate());
       }},
      {"last_check_s_ago", nullptr, 0,
       [](const R& r) {
         return r.last_check ? Cell(r.last_check->s_ago) : Cell(std::monostate());
       }},
      {"fleet_dissent", nullptr, 0,
       [](const R& r) { return Cell(absl::StrJoin(r.fleet_dissent, ",")); }},
      {"slots", "slots", 7, [](const R& r) { return Cell(r.slots); }},
  };
  for (Column<R>& column : trafficColumns<R>()) columns.push_back(std::move(column));
  // Last, since it is the widest: a failing probe's error can be long.
  columns.push_back(
      {nullptr, "  last check", 0, [](const R& r) { return Cell(lastCheckText(r)); }});
  // Each backend that is out of service says why, under the table.
  std::string why;
  for (const R& row : rows) {
    if (row.healthy && !row.check_stale) continue;
    absl::StrAppend(&why, row.service, "/", row.name, " ", row.healthText(), " for ",
                    shortDuration(row.health_since_s), ": ", row.health_reason,
                    row.check_stale ? "; stale: no probe has run to a result for longer than "
                                      "the check tolerates (local errors)"
                                    : "",
                    "\n");
  }
  return tableReply("backends", columns, rows, connections_tracked, why);
}

std::string neighborsReplyJson(const std::vector<NeighborRow>& rows,
                               const std::vector<std::string>& port_names) {
  using R = NeighborRow;
  const auto port_name = [&port_names](const R& r) {
    return r.port < port_names.size() ? port_names[r.port] : absl::StrCat(r.port);
  };
  std::vector<Column<R>> columns = {
      {"port", "port", -12, [port_name](const R& r) { return Cell(port_name(r)); }},
      {"address", "address", -26, [](const R& r) { return Cell(r.address.toString()); }},
      {"mac", "mac", -17,
       [](const R& r) { return r.mac ? Cell(r.mac->toString()) : Cell(std::monostate()); }},
      {"state", "state", -10, [](const R& r) { return Cell(std::string(toString(r.state))); }},
      {"age_s", "age_s", 8,
       [](const R& r) {
         return r.age ? Cell(absl::ToDoubleSeconds(*r.age)) : Cell(std::monostate());
       }},
      {"unanswered", "unanswered", 10, [](const R& r) { return Cell(uint64_t{r.unanswered}); }},
      {"changes", "changes", 8, [](const R& r) { return Cell(r.changes); }},
      {"refused", "refused", 8, [](const R& r) { return Cell(r.refused); }},
  };
  return tableReply("neighbors", columns, rows, std::nullopt);
}

uint64_t CountersReport::sum(absl::string_view name) const {
  for (const auto& [counter, value] : sums) {
    if (counter == name) return value;
  }
  return 0;
}

std::string countersText(const CountersReport& report) {
  std::string text = absl::StrFormat("berthd counters after %.3f s (%u workers, snapshot %u)\n",
                                     report.elapsed_s, report.workers.size(), report.generation);
  for (const auto& [name, value] : report.sums)
    absl::StrAppendFormat(&text, "  %-42s %u\n", name, value);
  if (report.rx_window_s > 0) {
    const uint64_t rx_packets = report.sum("rx_packets");
    absl::StrAppendFormat(&text, "  %-42s %.0f (%u packets in %.6f s from first to last)\n",
                          "rx_pps", static_cast<double>(rx_packets) / report.rx_window_s,
                          rx_packets, report.rx_window_s);
  }
  if (report.workers.size() > 1) {
    for (size_t w = 0; w < report.workers.size(); ++w) {
      absl::StrAppendFormat(&text, "  worker %-35u rx_packets %u tx_packets %u\n", w,
                            report.workers[w].rx_packets, report.workers[w].tx_packets);
    }
  }
  auto traffic = [&](const char* kind, const auto& named) {
    for (const auto& [name, totals] : named) {
      absl::StrAppendFormat(&text, "  %s %-34s packets %u bytes %u connections %u\n", kind, name,
                            totals.packets, totals.bytes, totals.connections);
    }
  };
  traffic("service", report.services);
  traffic("backend", report.backends);
  return text;
}

std::string countersJson(const CountersReport& report) {
  JsonWriter json;
  json.beginObject();
  json.key("elapsed_s").value(report.elapsed_s);
  json.key("workers").value(static_cast<uint64_t>(report.workers.size()));
  json.key("rx_window_s").value(report.rx_window_s);
  uint64_t rx_packets = 0;
  for (const CountersReport::PerWorker& worker : report.workers) rx_packets += worker.rx_packets;
  json.key("rx_pps").value(
      report.rx_window_s > 0 ? static_cast<double>(rx_packets) / report.rx_window_s : 0.0);
  json.key("counters").beginObject();
  for (const auto& [name, value] : report.sums) json.key(name).value(value);
  json.endObject();
  // How the load falls on the workers: RSS (or a memif peer) puts each flow on one of them.
  json.key("per_worker").beginArray();
  for (const CountersReport::PerWorker& worker : report.workers) {
    json.beginObject()
        .key("rx_packets")
        .value(worker.rx_packets)
        .key("tx_packets")
        .value(worker.tx_packets)
        .endObject();
  }
  json.endArray();
  auto traffic = [&](const char* key, const auto& named) {
    json.key(key).beginObject();
    for (const auto& [name, totals] : named) {
      json.key(name)
          .beginObject()
          .key("packets")
          .value(totals.packets)
          .key("bytes")
          .value(totals.bytes)
          .key("connections")
          .value(totals.connections)
          .endObject();
    }
    json.endObject();
  };
  traffic("services", report.services);
  traffic("backends", report.backends);
  json.endObject();
  return json.str() + "\n";
}

}  // namespace berth
