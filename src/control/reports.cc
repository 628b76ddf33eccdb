#include "berth/control/reports.h"

#include <algorithm>
#include <optional>
#include <variant>

#include "absl/strings/match.h"
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

// The totals in JSON; the text shows what is happening now, as `ipvsadm -Ln --rate` does:
// connections tracked, and packets, bits and new connections per second ("-" until the rate
// meter has two samples).
template <typename Row>
std::vector<Column<Row>> trafficColumns() {
  const auto rateCell = [](const Row& r, double TrafficRate::*member) {
    return r.rate ? Cell(r.rate.value().*member) : Cell(std::monostate());
  };
  const auto rateText = [](const Row& r, double TrafficRate::*member, const char* unit) {
    return r.rate ? siUnits(r.rate.value().*member, unit) : std::string("-");
  };
  return {
      {"packets", nullptr, 0, [](const Row& r) { return Cell(r.traffic.packets); }},
      {"bytes", nullptr, 0, [](const Row& r) { return Cell(r.traffic.bytes); }},
      {"connections", "conns", 9, [](const Row& r) { return Cell(r.traffic.connections); }},
      {"connections_opened", nullptr, 0, [](const Row& r) { return Cell(r.traffic.opened); }},
      {"packets_per_s", "packets/s", 12,
       [=](const Row& r) { return rateCell(r, &TrafficRate::packets_per_s); },
       [=](const Row& r) { return rateText(r, &TrafficRate::packets_per_s, "pps"); }},
      {"bits_per_s", "bits/s", 14,
       [=](const Row& r) { return rateCell(r, &TrafficRate::bits_per_s); },
       [=](const Row& r) { return rateText(r, &TrafficRate::bits_per_s, "bit/s"); }},
      {"new_connections_per_s", "new conns/s", 11,
       [=](const Row& r) { return rateCell(r, &TrafficRate::new_connections_per_s); },
       [=](const Row& r) {
         return r.rate ? absl::StrFormat("%.1f", r.rate->new_connections_per_s) : std::string("-");
       }},
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
                                    const CounterIds& counter_ids, const TrafficSource& traffic,
                                    const RateSource& rates) {
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
      if (rates) row.rate = rates(*id, false);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<BackendRow> backendRows(absl::Span<const ServiceState> services,
                                    const CounterIds& counter_ids, const TrafficSource& traffic,
                                    const RateSource& rates) {
  // With 65,535 backends the rows are 22 MB: built in place, in one allocation, since the loop
  // gathers them (docs/architecture.md, "The management loop").
  size_t count = 0;
  for (const ServiceState& state : services) count += state.config().backends.size();
  std::vector<BackendRow> rows;
  rows.reserve(count);
  for (const ServiceState& state : services) {
    const ServiceConfig& service = state.config();
    for (size_t b = 0; b < service.backends.size(); ++b) {
      const BackendConfig& backend = service.backends[b];
      BackendRow& row = rows.emplace_back();
      row.service = service.name;
      row.name = backend.name;
      row.address = backend.address.toString();
      // configured() holds the backends in the same order, with the weights a drain keeps.
      row.weight = state.configured().backends[b].weight;
      row.healthy = state.healthy()[b];
      row.drained = state.drained(backend.name) || row.weight == 0;
      row.effective_weight = row.healthy && !row.drained ? row.weight : 0;
      row.health_check = std::string(toString(backend.health.type));
      row.slots = state.liveSlots()[b];
      if (const std::optional<uint32_t> id = counter_ids.findBackend(service.name, backend.name)) {
        row.traffic = traffic(*id, true);
        if (rates) row.rate = rates(*id, true);
      }
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
      {"effective_weight", "in use", 6, [](const R& r) { return Cell(r.effective_weight); }},
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

std::string withThousands(uint64_t value) {
  const std::string digits = absl::StrCat(value);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string siUnits(double value, absl::string_view unit) {
  static constexpr std::pair<double, const char*> kPrefixes[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, prefix] : kPrefixes) {
    if (value >= scale) return absl::StrFormat("%.2f %s%s", value / scale, prefix, unit);
  }
  return absl::StrFormat("%.0f %s", value, unit);
}

namespace {

// The groups `stats` shows, by counter name prefix, in order; the first that matches takes a
// counter. `unit` follows each group's total.
struct CounterGroup {
  const char* title;
  std::vector<const char*> prefixes;
  const char* unit;  // nullptr: no total (the members count different things)
};
const std::vector<CounterGroup>& counterGroups() {
  static const std::vector<CounterGroup> groups = {
      {"drops", {"drop_"}, "frames"},
      {"malformed frames", {"parse_"}, "frames"},
      {"connection table", {"conntrack_"}, nullptr},
      {"Full-NAT sessions", {"nat_"}, nullptr},
      {"neighbors (ARP and ND)", {"neighbor_"}, nullptr},
      {"kernel interfaces (exception path)", {"to_kernel_", "kernel_", "from_kernel"}, nullptr},
      {"flow sync", {"sync_"}, nullptr},
      {"replies berthd built", {"arp_nd_replies", "icmp_too_big_replies"}, "frames"},
      {"idle workers", {"idle_"}, nullptr},
      {"other", {""}, nullptr},
  };
  return groups;
}

// One member of a group: its name without the group's prefix, and its value with its unit.
std::string memberLine(absl::string_view name, absl::string_view prefix, uint64_t value) {
  absl::string_view shown = name;
  if (!prefix.empty() && absl::StartsWith(shown, prefix) && shown.size() > prefix.size()) {
    shown.remove_prefix(prefix.size());
  }
  std::string value_text = withThousands(value);
  if (name == "idle_sleep_us") {
    value_text = absl::StrFormat("%.3f s", static_cast<double>(value) / 1e6);
  } else if (absl::EndsWith(name, "_bytes")) {
    absl::StrAppend(&value_text, " (", siUnits(static_cast<double>(value), "B"), ")");
  }
  return absl::StrFormat("  %-36s %16s\n", shown, value_text);
}

}  // namespace

std::string statsText(const CountersReport& report, bool all) {
  std::string text =
      absl::StrFormat("berthd up %s, %u worker(s), snapshot %u\n", shortDuration(report.elapsed_s),
                      report.workers.size(), report.generation);
  absl::StrAppendFormat(&text, "traffic: rx %s packets (%s), tx %s packets (%s)\n",
                        withThousands(report.sum("rx_packets")),
                        siUnits(static_cast<double>(report.sum("rx_bytes")), "B"),
                        withThousands(report.sum("tx_packets")),
                        siUnits(static_cast<double>(report.sum("tx_bytes")), "B"));
  const auto traffic_counter = [](absl::string_view name) {
    return name == "rx_packets" || name == "rx_bytes" || name == "tx_packets" || name == "tx_bytes";
  };
  // Each counter in the first group whose prefix it has, rendered as it is placed.
  const std::vector<CounterGroup>& groups = counterGroups();
  struct Shown {
    std::string lines;
    uint64_t total = 0;
  };
  std::vector<Shown> shown(groups.size());
  size_t zero = 0;
  for (const auto& [name, value] : report.sums) {
    if (traffic_counter(name)) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto matched = std::find_if(
          groups[g].prefixes.begin(), groups[g].prefixes.end(),
          [&name = name](const char* prefix) { return absl::StartsWith(name, prefix); });
      if (matched == groups[g].prefixes.end()) continue;
      if (value == 0 && !all) {
        ++zero;
      } else {
        shown[g].lines += memberLine(name, *matched, value);
        shown[g].total += value;
      }
      break;
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (shown[g].lines.empty()) continue;
    absl::StrAppend(&text, groups[g].title,
                    groups[g].unit == nullptr
                        ? std::string(":")
                        : absl::StrCat(": ", withThousands(shown[g].total), " ", groups[g].unit),
                    "\n", shown[g].lines);
  }
  if (all && report.rx_window_s > 0) {
    absl::StrAppendFormat(
        &text, "average rx from the first frame to the last: %s over %.3f s\n",
        siUnits(static_cast<double>(report.sum("rx_packets")) / report.rx_window_s, "pps"),
        report.rx_window_s);
  }
  if (report.workers.size() > 1) {
    text += "per worker:\n";
    for (size_t w = 0; w < report.workers.size(); ++w) {
      absl::StrAppendFormat(&text, "  %-36u rx %s tx %s\n", w,
                            withThousands(report.workers[w].rx_packets),
                            withThousands(report.workers[w].tx_packets));
    }
  }
  const auto traffic = [&](const char* title, const auto& named) {
    bool any = false;
    for (const auto& [name, totals] : named) {
      if (!all && totals.packets == 0 && totals.connections == 0) continue;
      if (!any) absl::StrAppend(&text, title, ":\n");
      any = true;
      absl::StrAppendFormat(
          &text, "  %-36s %s packets (%s), %s connections\n", name, withThousands(totals.packets),
          siUnits(static_cast<double>(totals.bytes), "B"), withThousands(totals.connections));
    }
  };
  traffic("services", report.services);
  if (all) traffic("backends", report.backends);
  if (!all) {
    absl::StrAppendFormat(&text,
                          "(%u counters at zero not shown; `berthctl stats --all` shows every "
                          "counter, and `berthctl backends` each backend's traffic)\n",
                          zero);
  }
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
