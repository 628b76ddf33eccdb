// berthd's control-socket commands: status, stats, reload, drain and undrain. Each runs on the
// management thread, between its other work, and answers with one JSON object.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/net/crc32c.h"
#include "berth/util/json_writer.h"
#include "berthd/daemon.h"

namespace berth {
namespace {

constexpr char kVersion[] = "0.1.0";
constexpr char kCommands[] = "status, stats, services, backends, reload, drain, undrain";

std::string okReply(absl::string_view text) {
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("text").value(text).endObject();
  return json.str();
}

}  // namespace

std::string Daemon::handleControl(const ControlRequest& request) {
  if (request.command == "status") return statusReply();
  if (request.command == "stats") {
    std::string counters = countersJson();
    if (!counters.empty() && counters.back() == '\n') counters.pop_back();
    JsonWriter text;
    text.value(countersText());
    return absl::StrCat("{\"ok\":true,\"text\":", text.str(), ",\"stats\":", counters, "}");
  }
  if (request.command == "services" || request.command == "backends") {
    return poolReply(request.command == "backends");
  }
  if (request.command == "reload") {
    absl::Status status = reload();
    return status.ok()
               ? okReply(absl::StrCat("reloaded ", config_path_, " (snapshot ", generation_, ")\n"))
               : errorReply(status.message());
  }
  if (request.command == "drain") return drainReply(request, true);
  if (request.command == "undrain") return drainReply(request, false);
  return errorReply(absl::StrCat("unknown command '", request.command, "'; commands: ", kCommands));
}

std::string Daemon::statusReply() const {
  // The config file as berthd last read it: its CRC32-C tells two instances' files apart.
  std::ifstream file(config_path_, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  const std::string text = contents.str();
  const uint32_t config_crc = crc32cPortable(0, text.data(), text.size());
  size_t backends = 0;
  for (const ServiceConfig& service : config_.services) backends += service.backends.size();
  JsonWriter json;
  json.beginObject()
      .key("ok")
      .value(true)
      .key("version")
      .value(kVersion)
      .key("uptime_s")
      .value(absl::ToDoubleSeconds(absl::Now() - started_))
      .key("config")
      .value(config_path_)
      .key("config_crc32c")
      .value(absl::StrFormat("%08x", config_crc))
      .key("snapshot_generation")
      .value(generation_)
      .key("workers")
      .value(static_cast<uint64_t>(workers_.size()))
      .key("services")
      .value(static_cast<uint64_t>(config_.services.size()))
      .key("backends")
      .value(static_cast<uint64_t>(backends))
      .key("drained")
      .beginArray();
  std::vector<std::string> drained;
  for (const auto& [name, weight] : drained_) {
    json.value(name);
    drained.push_back(name);
  }
  json.endArray();
  json.key("text").value(absl::StrFormat(
      "berthd %s, up %.0f s\nconfig %s (crc32c %08x)\nsnapshot %u, %u worker(s), %u service(s), "
      "%u backend(s)\ndrained: %s\n",
      kVersion, absl::ToDoubleSeconds(absl::Now() - started_), config_path_, config_crc,
      generation_, workers_.size(), config_.services.size(), backends,
      drained.empty() ? "none" : absl::StrJoin(drained, ", ")));
  json.endObject();
  return json.str();
}

Daemon::TrafficTotals Daemon::trafficOf(uint32_t id, bool backend) const {
  TrafficTotals totals;
  for (const Worker* worker : workers_) {
    const TrafficCounter* array =
        backend ? worker->state.traffic.backends : worker->state.traffic.services;
    totals.packets += array[id].packets.read();
    totals.bytes += array[id].bytes.read();
    totals.connections += array[id].connections.read();
  }
  return totals;
}

std::string Daemon::poolReply(bool backends) const {
  JsonWriter json;
  json.beginObject().key("ok").value(true);
  uint64_t connections = 0;
  for (const Worker* worker : workers_) {
    if (worker->connections) connections += worker->connections->occupied();
  }
  json.key("conntrack_entries").value(connections);
  std::string text =
      backends ? absl::StrFormat("%-16s %-16s %-20s %7s %-10s %7s %14s %16s %11s\n", "service",
                                 "backend", "address", "weight", "health", "slots", "packets",
                                 "bytes", "connections")
               : absl::StrFormat("%-16s %-28s %-6s %9s %7s %14s %16s %11s\n", "service", "listener",
                                 "mode", "backends", "healthy", "packets", "bytes", "connections");
  json.key(backends ? "backends" : "services").beginArray();
  for (size_t s = 0; s < config_.services.size(); ++s) {
    const ServiceConfig& service = config_.services[s];
    const Table& table = tables_[s];
    const std::vector<uint32_t> slots = table.slotCounts();
    const std::vector<bool>& healthy = health_->healthy(s);
    size_t healthy_count = 0;
    for (bool up : healthy) healthy_count += up;
    if (!backends) {
      const std::optional<uint32_t> id = counter_ids_.findService(service.name);
      const TrafficTotals totals = id ? trafficOf(*id, false) : TrafficTotals{};
      const std::string listener =
          absl::StrCat(toString(service.protocol), " ",
                       service.vip.isV4() ? service.vip.toString()
                                          : absl::StrCat("[", service.vip.toString(), "]"),
                       ":", service.port);
      json.beginObject().key("name").value(service.name).key("listener").value(listener);
      json.key("forwarding").value(toString(service.forwarding));
      json.key("backends").value(static_cast<uint64_t>(service.backends.size()));
      json.key("healthy").value(static_cast<uint64_t>(healthy_count));
      json.key("packets").value(totals.packets).key("bytes").value(totals.bytes);
      json.key("connections").value(totals.connections).endObject();
      absl::StrAppendFormat(&text, "%-16s %-28s %-6s %9u %7u %14u %16u %11u\n", service.name,
                            listener, toString(service.forwarding), service.backends.size(),
                            healthy_count, totals.packets, totals.bytes, totals.connections);
      continue;
    }
    for (size_t b = 0; b < service.backends.size(); ++b) {
      const BackendConfig& backend = service.backends[b];
      const absl::StatusOr<uint16_t> index = table.indexOf(backend.name);
      const uint32_t owned = index.ok() ? slots[*index] : 0;
      const std::optional<uint32_t> id = counter_ids_.findBackend(service.name, backend.name);
      const TrafficTotals totals = id ? trafficOf(*id, true) : TrafficTotals{};
      const bool drained = drained_.contains(absl::StrCat(service.name, "/", backend.name));
      const char* health = healthy[b] ? "healthy" : "unhealthy";
      json.beginObject()
          .key("service")
          .value(service.name)
          .key("name")
          .value(backend.name)
          .key("address")
          .value(backend.address.toString())
          .key("weight")
          .value(backend.weight)
          .key("drained")
          .value(drained)
          .key("health")
          .value(health)
          .key("health_check")
          .value(toString(backend.health.type))
          .key("slots")
          .value(owned)
          .key("packets")
          .value(totals.packets)
          .key("bytes")
          .value(totals.bytes)
          .key("connections")
          .value(totals.connections)
          .endObject();
      absl::StrAppendFormat(&text, "%-16s %-16s %-20s %7d %-10s %7u %14u %16u %11u\n", service.name,
                            backend.name, backend.address.toString(), backend.weight,
                            drained ? "drained" : health, owned, totals.packets, totals.bytes,
                            totals.connections);
    }
  }
  json.endArray();
  absl::StrAppendFormat(&text, "connections tracked: %u\n", connections);
  json.key("text").value(text).endObject();
  return json.str();
}

void Daemon::applyDrains(Config& config) const {
  for (ServiceConfig& service : config.services) {
    for (BackendConfig& backend : service.backends) {
      if (drained_.contains(absl::StrCat(service.name, "/", backend.name))) backend.weight = 0;
    }
  }
}

std::string Daemon::drainReply(const ControlRequest& request, bool drain) {
  const std::string& backend_name = request.field("backend");
  const std::string& service_name = request.field("service");
  if (backend_name.empty()) return errorReply("give the backend's name");
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t s = 0; s < config_.services.size(); ++s) {
    if (!service_name.empty() && config_.services[s].name != service_name) continue;
    for (size_t b = 0; b < config_.services[s].backends.size(); ++b) {
      if (config_.services[s].backends[b].name == backend_name) matches.emplace_back(s, b);
    }
  }
  if (matches.empty()) {
    return errorReply(service_name.empty() ? absl::StrCat("no backend named '", backend_name, "'")
                                           : absl::StrCat("no backend named '", backend_name,
                                                          "' in service '", service_name, "'"));
  }
  std::vector<std::string> changed;
  for (const auto& [s, b] : matches) {
    ServiceConfig& service = config_.services[s];
    BackendConfig& backend = service.backends[b];
    const std::string key = absl::StrCat(service.name, "/", backend.name);
    if (drain) {
      if (drained_.contains(key)) continue;
      drained_[key] = backend.weight;
      backend.weight = 0;
    } else {
      auto it = drained_.find(key);
      if (it == drained_.end()) continue;
      backend.weight = it->second;
      drained_.erase(it);
    }
    // A weight change is a config change: the service's table is built again in full.
    absl::StatusOr<Table> full = build(service.maglevBackends(), service.table_size);
    if (!full.ok()) return errorReply(full.status().message());
    absl::StatusOr<Table> table = tableWithHealth(service, *full, health_->healthy(s));
    if (!table.ok()) return errorReply(table.status().message());
    full_tables_[s] = *std::move(full);
    tables_[s] = *std::move(table);
    changed.push_back(key);
  }
  if (!changed.empty()) {
    if (absl::Status status = publishSnapshot(); !status.ok()) return errorReply(status.message());
    logLine(absl::StrFormat("%s %s; snapshot %u published", drain ? "drained" : "undrained",
                            absl::StrJoin(changed, ", "), generation_));
  }
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("changed").beginArray();
  for (const std::string& key : changed) json.value(key);
  json.endArray().key("snapshot_generation").value(generation_);
  json.key("text").value(
      changed.empty() ? absl::StrCat("nothing to ", drain ? "drain" : "undrain", ": already so\n")
                      : absl::StrFormat("%s %s (snapshot %u)\n", drain ? "drained" : "undrained",
                                        absl::StrJoin(changed, ", "), generation_));
  json.endObject();
  return json.str();
}

}  // namespace berth
