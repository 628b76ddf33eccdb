#include "berth/control/status_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace berth {
namespace {

// Whether the fleet's word takes `backend` of `service` down.
bool fleetSaysDown(const AgreedHealth& agreed, const std::string& service,
                   const std::string& backend) {
  const auto down = agreed.down.find(service);
  return down != agreed.down.end() && down->second.count(backend) != 0;
}

void writeFleetJson(const FleetStatusRow& fleet, JsonWriter& json) {
  const FleetAgentStatus& status = fleet.agent;
  json.key("fleet")
      .beginObject()
      .key("name")
      .value(fleet.instance)
      .key("version")
      .value(status.running_version)
      .key("head_version")
      .value(status.head_version)
      .key("from_cache")
      .value(status.from_cache)
      .key("etcd_reachable")
      .value(status.etcd_reachable)
      .key("registered")
      .value(status.registered)
      .key("refused_version")
      .value(status.refused_version)
      .key("refused_why")
      .value(status.refused_why)
      .key("last_error")
      .value(status.last_error)
      .key("cache")
      .value(fleet.cache_path)
      .key("cache_write_error")
      .value(fleet.cache_written.ok() ? "" : fleet.cache_written.message())
      .key("generation")
      .value(fleet.generation)
      .key("generation_head")
      .value(status.generation_head)
      .key("leader")
      .value(status.leader)
      .key("elected")
      .value(status.elected)
      .key("generations_made")
      .value(status.generations_made)
      .key("generation_error")
      .value(status.generation_error)
      .key("fail_safe_active")
      .value(fleet.fail_safe);
  json.key("fail_safe").beginArray();
  for (const std::string& entry : fleet.fail_safe_removed) json.value(entry);
  json.endArray();
  // The backends whose verdicts some live instances do not share: the fleet's word decides.
  json.key("dissent").beginArray();
  for (const auto& [backend, instances] : fleet.agreed.dissent) {
    json.beginObject()
        .key("service")
        .value(backend.first)
        .key("backend")
        .value(backend.second)
        .key("fleet_says")
        .value(fleetSaysDown(fleet.agreed, backend.first, backend.second) ? "down" : "up")
        .key("instances")
        .beginArray();
    for (const std::string& instance : instances) json.value(instance);
    json.endArray().endObject();
  }
  json.endArray().endObject();
}

std::string fleetText(const FleetStatusRow& fleet) {
  const FleetAgentStatus& status = fleet.agent;
  std::string text = absl::StrCat(
      "fleet: instance ", fleet.instance, ", version ",
      status.running_version == 0 ? std::string("none") : absl::StrCat(status.running_version),
      status.from_cache ? " (from the cache; etcd not heard from yet)" : "", ", fleet head ",
      status.head_version, ", etcd ", status.etcd_reachable ? "reachable" : "unreachable",
      status.registered ? "" : ", not registered", "\n");
  if (status.refused_version > status.running_version) {
    absl::StrAppend(&text, "fleet: version ", status.refused_version,
                    " refused: ", status.refused_why, "\n");
  }
  if (!status.etcd_reachable && !status.last_error.empty()) {
    absl::StrAppend(&text, "fleet: last error: ", status.last_error, "\n");
  }
  absl::StrAppend(&text, "fleet: table generation ",
                  fleet.generation != 0 ? absl::StrCat(fleet.generation) : std::string("none"),
                  ", newest stored ", status.generation_head, ", made by ",
                  status.elected
                      ? std::string("this instance")
                      : (status.leader.empty() ? std::string("no instance yet") : status.leader),
                  "\n");
  if (!status.generation_error.empty()) {
    absl::StrAppend(&text, "fleet: generation error: ", status.generation_error, "\n");
  }
  if (fleet.fail_safe) {
    absl::StrAppend(&text, "fleet: fail-safe: etcd out of reach, this instance's probes count",
                    fleet.fail_safe_removed.empty() ? "" : "; taken out: ",
                    absl::StrJoin(fleet.fail_safe_removed, ", "), "\n");
  }
  for (const auto& [backend, instances] : fleet.agreed.dissent) {
    const bool fleet_down = fleetSaysDown(fleet.agreed, backend.first, backend.second);
    absl::StrAppend(&text, "fleet: service '", backend.first, "' backend '", backend.second,
                    "' is ", fleet_down ? "down" : "up", " by the fleet's word; ",
                    absl::StrJoin(instances, ", "), " see", instances.size() == 1 ? "s" : "",
                    " it ", fleet_down ? "up" : "down", "\n");
  }
  if (!fleet.cache_written.ok()) {
    absl::StrAppend(&text, "fleet: cache ", fleet.cache_path,
                    " not written: ", fleet.cache_written.message(), "\n");
  }
  return text;
}

// Per service, the fingerprint of the table in use: instances behind one ECMP group send a flow
// to the same backend exactly when these agree. With the last change of each table, and what it
// moved against the least it had to.
std::string writeTables(const std::vector<TableStatusRow>& tables, JsonWriter& json) {
  json.key("tables").beginArray();
  std::string text;
  for (const TableStatusRow& table : tables) {
    json.beginObject()
        .key("service")
        .value(table.service)
        .key("algorithm")
        .value(toString(table.algorithm))
        .key("table_size")
        .value(table.table_size)
        .key("fingerprint")
        .value(table.fingerprint);
    absl::StrAppendFormat(&text, "table %s: %s, M=%u, fingerprint %s\n", table.service,
                          toString(table.algorithm), table.table_size, table.fingerprint);
    if (table.last_change) {
      const SlotChange& last = *table.last_change;
      json.key("last_change")
          .beginObject()
          .key("cause")
          .value(toString(last.cause))
          .key("seconds_ago")
          .value(table.last_change_seconds_ago);
      appendMovementFields(json, last.movement);
      json.endObject();
      absl::StrAppendFormat(&text, "  last change %.0f s ago: %s\n", table.last_change_seconds_ago,
                            describe(last));
    }
    json.endObject();
  }
  json.endArray();
  return text;
}

// The loop's periodic jobs, with the longest run of each: one that runs long delays every other
// piece of the loop's work.
void writeJobs(const std::vector<PeriodicJobs::JobFigures>& jobs, JsonWriter& json) {
  json.key("periodic_jobs").beginArray();
  for (const PeriodicJobs::JobFigures& job : jobs) {
    json.beginObject()
        .key("name")
        .value(job.name)
        .key("interval_ms")
        .value(absl::ToDoubleMilliseconds(job.interval))
        .key("runs")
        .value(job.runs)
        .key("longest_ms")
        .value(absl::ToDoubleMilliseconds(job.longest))
        .endObject();
  }
  json.endArray();
}

// How reloads ended: the last one's result and reason, and since when the config in force
// serves. A reload SIGHUP asked for has no one to tell but this and the metrics.
std::string writeReloads(const ReloadHistory& reloads, absl::Time now, JsonWriter& json) {
  const auto unix_seconds = [](absl::Time at) {
    return at == absl::InfinitePast() ? 0.0 : absl::ToDoubleSeconds(at - absl::UnixEpoch());
  };
  json.key("reloads")
      .beginObject()
      .key("applied")
      .value(reloads.applied)
      .key("refused")
      .value(reloads.refused)
      .key("last_successful")
      .value(reloads.lastSucceeded())
      .key("last_at")
      .value(unix_seconds(reloads.last_at))
      .key("last_what")
      .value(reloads.last_what)
      .key("last_error")
      .value(reloads.lastSucceeded() ? "" : reloads.last_status.message())
      .key("in_force_since")
      .value(unix_seconds(reloads.last_success_at))
      .endObject();
  const double in_force_s = absl::ToDoubleSeconds(now - reloads.last_success_at);
  if (!reloads.anyEnded()) {
    return absl::StrFormat("reloads: none since start; config in force for %.0f s\n", in_force_s);
  }
  const std::string counts =
      absl::StrFormat("%u applied, %u refused", reloads.applied, reloads.refused);
  const double ago_s = absl::ToDoubleSeconds(now - reloads.last_at);
  if (reloads.lastSucceeded()) {
    return absl::StrFormat("last reload: applied %.0f s ago (%s); %s\n", ago_s, reloads.last_what,
                           counts);
  }
  return absl::StrFormat(
      "last reload: REFUSED %.0f s ago (%s): %s\n  the config in force has served for %.0f s; "
      "%s\n",
      ago_s, reloads.last_what, reloads.last_status.message(), in_force_s, counts);
}

}  // namespace

std::string writeFleetStatus(const FleetStatusRow& fleet, JsonWriter& json) {
  writeFleetJson(fleet, json);
  return fleetText(fleet);
}

std::string statusReplyJson(const StatusReport& report) {
  JsonWriter json;
  json.beginObject()
      .key("ok")
      .value(true)
      .key("version")
      .value(report.version)
      .key("uptime_s")
      .value(report.uptime_s)
      .key("config")
      .value(report.config_path)
      .key("config_crc32c")
      .value(absl::StrFormat("%08x", report.config_crc32c))
      .key("snapshot_generation")
      .value(report.snapshot_generation)
      .key("workers")
      .value(report.workers)
      .key("services")
      .value(report.services)
      .key("backends")
      .value(report.backends)
      .key("drained")
      .beginArray();
  for (const std::string& drained : report.drained) json.value(drained);
  json.endArray();
  std::string drain_state_text = "drain state: not kept (--drain-state off)\n";
  json.key("drain_state").beginObject();
  if (report.drain_state_path) {
    const absl::Status& written = report.drain_state_written;
    json.key("path").value(*report.drain_state_path);
    json.key("last_write_error").value(written.ok() ? "" : written.message());
    drain_state_text = absl::StrCat(
        "drain state: ", *report.drain_state_path,
        written.ok() ? "" : absl::StrCat(" (last write failed: ", written.message(), ")"), "\n");
  }
  json.endObject();
  // Each port's kernel interface (docs/exception-path.md).
  json.key("exception_interfaces").beginArray();
  std::string exception_text;
  for (const std::string& interface : report.exception_interfaces) {
    json.value(interface);
    absl::StrAppend(&exception_text, "kernel interface: ", interface, "\n");
  }
  json.endArray();
  json.key("port_spreads").beginArray();
  for (const std::string& spread : report.port_spreads) {
    json.value(spread);
    absl::StrAppend(&exception_text, spread, "\n");
  }
  json.endArray();
  const std::string tables_text = writeTables(report.tables, json);
  writeJobs(report.periodic_jobs, json);
  const std::string fleet_text = report.fleet ? writeFleetStatus(*report.fleet, json) : "";
  const std::string reloads_text = writeReloads(report.reloads, report.taken_at, json);
  json.key("text").value(absl::StrFormat(
      "berthd %s, up %.0f s\nconfig %s (crc32c %08x)\n%s%ssnapshot %u, %u worker(s), %u "
      "service(s), "
      "%u backend(s)\ndrained: %s\n%s%s%s",
      report.version, report.uptime_s, report.config_path, report.config_crc32c, reloads_text,
      fleet_text, report.snapshot_generation, report.workers, report.services, report.backends,
      report.drained.empty() ? "none" : absl::StrJoin(report.drained, ", "), drain_state_text,
      exception_text, tables_text));
  json.endObject();
  return json.str();
}

}  // namespace berth
