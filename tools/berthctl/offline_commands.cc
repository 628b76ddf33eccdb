#include "offline_commands.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "berth/control/service_state.h"
#include "berth/control/table_report.h"
#include "berth/maglev/analysis.h"
#include "berth/maglev/comparison.h"
#include "berth/maglev/table.h"
#include "berth/util/json_writer.h"
#include "berth/util/status_macros.h"
#include "comparison_plot.h"

namespace berth {
namespace {

// The config's warnings and the loader's notes, as text lines.
std::string warningsAndNotesText(const Config& config) {
  std::string out;
  for (const std::string& warning : config.warnings)
    absl::StrAppend(&out, "warning: ", warning, "\n");
  for (const std::string& note : config.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

// The same as JSON arrays and as text lines.
void appendWarningsAndNotes(const Config& config, JsonWriter& json, std::string& out) {
  json.key("warnings").beginArray();
  for (const std::string& warning : config.warnings) json.value(warning);
  json.endArray().key("notes").beginArray();
  for (const std::string& note : config.notes) json.value(note);
  json.endArray();
  absl::StrAppend(&out, warningsAndNotesText(config));
}

// A service's all-healthy table and the one with the requested failures applied.
struct ServiceTables {
  Table full;
  Table current;
  std::vector<std::string> failed;  // names from --fail that this service has
};

absl::StatusOr<ServiceTables> tablesFor(const ServiceConfig& service,
                                        const std::vector<std::string>& fail) {
  BERTH_ASSIGN_OR_RETURN(const Table base,
                         buildTable(service.hashingBackends(), service.tableOptions()));
  BERTH_ASSIGN_OR_RETURN(Table full, servingTable(service, base));
  std::vector<bool> healthy(service.backends.size(), true);
  std::vector<std::string> failed;
  for (const std::string& name : fail) {
    for (size_t b = 0; b < service.backends.size(); ++b) {
      if (service.backends[b].name != name) continue;
      healthy[b] = false;
      failed.push_back(name);
    }
  }
  BERTH_ASSIGN_OR_RETURN(Table current, servingTable(service, base, healthy));
  return ServiceTables{std::move(full), std::move(current), std::move(failed)};
}

absl::Status checkFailNamesExist(const Config& config, const std::vector<std::string>& fail) {
  for (const std::string& name : fail) {
    bool found = false;
    for (const ServiceConfig& service : config.services) {
      for (const BackendConfig& backend : service.backends) found |= backend.name == name;
    }
    if (!found) return absl::NotFoundError(absl::StrCat("--fail: no backend named '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const ServiceConfig*>> servicesToAnalyze(const Config& config,
                                                                    const std::string& name) {
  std::vector<const ServiceConfig*> services;
  for (const ServiceConfig& service : config.services) {
    if (name.empty() || service.name == name) services.push_back(&service);
  }
  if (!name.empty() && services.empty()) {
    std::vector<std::string> names;
    for (const ServiceConfig& service : config.services) names.push_back(service.name);
    return absl::NotFoundError(absl::StrCat("no service named '", name,
                                            "'; the config has: ", absl::StrJoin(names, ", ")));
  }
  return services;
}

std::string percent(double share) { return absl::StrFormat("%.3f%%", share * 100); }

void writeBalance(JsonWriter& json, const BalanceStats& balance) {
  json.beginObject()
      .key("serving")
      .value(balance.serving)
      .key("min_slots")
      .value(balance.min_slots)
      .key("max_slots")
      .value(balance.max_slots)
      .key("max_over_ideal")
      .value(balance.max_over_ideal)
      .endObject();
}

std::string balanceLine(const BalanceStats& balance) {
  if (balance.serving == 0) return "no backend serving: every packet is dropped as no-backend";
  return absl::StrFormat("%u serving, slots per backend min %u, max %u, max/ideal %.4f",
                         balance.serving, balance.min_slots, balance.max_slots,
                         balance.max_over_ideal);
}

}  // namespace

absl::StatusOr<std::string> tableReport(const Config& config, const std::string& service_name,
                                        const OfflineOptions& options) {
  const ServiceConfig* service = config.findService(service_name);
  if (service == nullptr) {
    std::vector<std::string> names;
    for (const ServiceConfig& s : config.services) names.push_back(s.name);
    return absl::NotFoundError(absl::StrCat("no service named '", service_name,
                                            "'; the config has: ", absl::StrJoin(names, ", ")));
  }
  if (absl::Status status = checkFailNamesExist(config, options.fail); !status.ok()) return status;
  BERTH_ASSIGN_OR_RETURN(const ServiceTables tables, tablesFor(*service, options.fail));
  if (options.json) return tableJson(*service, tables.current, options.summary) + "\n";
  return tableText(*service, tables.current,
                   tables.failed.empty()
                       ? ""
                       : absl::StrCat(", unhealthy: ", absl::StrJoin(tables.failed, ", ")),
                   options.summary);
}

namespace {

// Each single failure's movement against its share, min-disruption failover beside a full
// rebuild: the "single_failures" member, and the lines appended to `out`.
void reportSingleFailures(const Table& full, const std::vector<FailureImpact>& impacts,
                          JsonWriter& json, std::string& out) {
  json.key("single_failures").beginArray();
  for (const FailureImpact& impact : impacts) {
    json.beginObject()
        .key("backend")
        .value(impact.backend)
        .key("owned_slots")
        .value(impact.owned_slots)
        .key("owned_share")
        .value(impact.owned_share)
        .key("ideal_share")
        .value(impact.ideal_share)
        .key("failover_share")
        .value(impact.failover_share)
        .key("rebuild_share")
        .value(impact.rebuild_share)
        .key("failover_max_over_ideal")
        .value(impact.failover_balance.max_over_ideal)
        .endObject();
  }
  json.endArray();
  double failover_mean = 0, rebuild_mean = 0, failover_worst = 0, rebuild_worst = 0;
  for (const FailureImpact& impact : impacts) {
    failover_mean += impact.failover_share / impact.owned_share / impacts.size();
    rebuild_mean += impact.rebuild_share / impact.owned_share / impacts.size();
    failover_worst = std::max(failover_worst, impact.failover_share / impact.owned_share);
    rebuild_worst = std::max(rebuild_worst, impact.rebuild_share / impact.owned_share);
  }
  if (!impacts.empty()) {
    size_t owners = 0;
    for (uint32_t count : full.slotCounts()) owners += count > 0;
    absl::StrAppendFormat(&out,
                          "  one backend fails (%s); slots moved / its own share "
                          "(ideal 1.00):\n"
                          "    min-disruption failover: mean %.2f, worst %.2f\n"
                          "    full rebuild:            mean %.2f, worst %.2f\n",
                          impacts.size() == owners
                              ? absl::StrCat("each of ", owners, " in turn")
                              : absl::StrCat(impacts.size(), " of ", owners,
                                             ", evenly spaced; --max-failures=0 for all"),
                          failover_mean, failover_worst, rebuild_mean, rebuild_worst);
    // "owned" is the least a failure must move; "by weight" the share its weight asks for.
    absl::StrAppendFormat(&out, "    %-24s %8s %10s %10s %10s %10s %14s\n", "backend", "slots",
                          "owned", "by weight", "failover", "rebuild", "failover bal.");
    for (const FailureImpact& impact : impacts) {
      absl::StrAppendFormat(&out, "    %-24s %8u %10s %10s %10s %10s %14.4f\n", impact.backend,
                            impact.owned_slots, percent(impact.owned_share),
                            percent(impact.ideal_share), percent(impact.failover_share),
                            percent(impact.rebuild_share), impact.failover_balance.max_over_ideal);
    }
  }
}

// With the backends --fail names unhealthy: what failover and a rebuild move, and their balance.
absl::Status reportWithFailures(const Table& full, const ServiceTables& tables, JsonWriter& json,
                                std::string& out) {
  if (tables.failed.empty()) return absl::OkStatus();
  std::vector<bool> leave_out(full.backends().size(), false);
  for (size_t i = 0; i < leave_out.size(); ++i) leave_out[i] = !tables.current.healthy()[i];
  BERTH_ASSIGN_OR_RETURN(const Table rebuilt, rebuildWithout(full, leave_out));
  uint32_t owned_by_failed = 0;
  const std::vector<uint32_t> counts = full.slotCounts();
  for (size_t i = 0; i < leave_out.size(); ++i) owned_by_failed += leave_out[i] ? counts[i] : 0;
  const double table_size = full.size();
  const double owned = owned_by_failed / table_size;
  const double failover = slotsChanged(full, tables.current) / table_size;
  const double rebuild = slotsChanged(full, rebuilt) / table_size;
  const BalanceStats failover_balance = balanceOf(tables.current);
  const BalanceStats rebuild_balance = balanceOf(rebuilt);

  json.key("with_failures").beginObject().key("unhealthy").beginArray();
  for (const std::string& name : tables.failed) json.value(name);
  json.endArray()
      .key("owned_share")
      .value(owned)
      .key("failover_share")
      .value(failover)
      .key("rebuild_share")
      .value(rebuild)
      .key("failover_balance");
  writeBalance(json, failover_balance);
  json.key("rebuild_balance");
  writeBalance(json, rebuild_balance);
  json.endObject();

  absl::StrAppendFormat(&out, "  with %s unhealthy (the slots they owned: %s):\n",
                        absl::StrJoin(tables.failed, ", "), percent(owned));
  absl::StrAppendFormat(&out, "    min-disruption failover: moves %s; %s\n", percent(failover),
                        balanceLine(failover_balance));
  absl::StrAppendFormat(&out, "    full rebuild:            moves %s; %s\n", percent(rebuild),
                        balanceLine(rebuild_balance));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> analyzeReport(const Config& config, const OfflineOptions& options) {
  if (absl::Status status = checkFailNamesExist(config, options.fail); !status.ok()) return status;
  BERTH_ASSIGN_OR_RETURN(const std::vector<const ServiceConfig*> services,
                         servicesToAnalyze(config, options.service));
  JsonWriter json;
  json.beginObject().key("services").beginArray();
  std::string out;

  for (const ServiceConfig* service_pointer : services) {
    const ServiceConfig& service = *service_pointer;
    const std::string phase = absl::StrCat("analyze: service ", service.name);
    if (options.progress) options.progress(absl::StrCat(phase, ": building its table"), 0, 0);
    BERTH_ASSIGN_OR_RETURN(const ServiceTables tables, tablesFor(service, options.fail));
    const Table& full = tables.full;
    const BalanceStats balance = balanceOf(full);
    const std::string failures_phase = absl::StrCat(phase, ": single failures");
    BERTH_ASSIGN_OR_RETURN(
        const std::vector<FailureImpact> impacts,
        singleFailureImpacts(full, options.max_failures, [&](size_t done, size_t total) {
          if (options.progress) options.progress(failures_phase, done, total);
        }));

    json.beginObject()
        .key("name")
        .value(service.name)
        .key("listener")
        .value(service.listener())
        .key("hash_fields")
        .value(toString(service.hash_fields))
        .key("algorithm")
        .value(toString(full.algorithm()))
        .key("table_size")
        .value(full.size())
        .key("backends")
        .value(static_cast<uint64_t>(full.backends().size()))
        .key("balance");
    writeBalance(json, balance);
    absl::StrAppendFormat(&out, "service %s (%s, hash %s): %s, M=%u, N=%u\n", service.name,
                          service.listener(), toString(service.hash_fields),
                          toString(full.algorithm()), full.size(), full.backends().size());
    absl::StrAppendFormat(&out, "  balance: %s\n", balanceLine(balance));
    reportSingleFailures(full, impacts, json, out);
    BERTH_RETURN_IF_ERROR(reportWithFailures(full, tables, json, out));
    json.endObject();
  }
  json.endArray();
  appendWarningsAndNotes(config, json, out);
  json.endObject();
  return options.json ? json.str() + "\n" : out;
}

namespace {

// One algorithm's figures as `analyze --algorithms --json` gives them.
void writeComparisonJson(JsonWriter& json, const AlgorithmComparison& result) {
  json.beginObject()
      .key("algorithm")
      .value(toString(result.algorithm))
      .key("in_datapath")
      .value(result.in_datapath)
      .key("build_ms")
      .value(result.build_ms)
      .key("lookup_ns")
      .value(result.lookup_ns)
      .key("table_lookup_ns");
  if (result.in_datapath) {
    json.value(result.table_lookup_ns);
  } else {
    json.null();
  }
  json.key("table_bytes")
      .value(result.table_bytes)
      .key("state_bytes")
      .value(result.state_bytes)
      .key("max_over_ideal")
      .value(result.max_over_ideal)
      .key("min_over_ideal")
      .value(result.min_over_ideal)
      .key("coefficient_of_variation")
      .value(result.coefficient_of_variation)
      .key("weighted_error")
      .value(result.weighted_error)
      .key("add_one")
      .value(result.add_one)
      .key("remove_one")
      .beginObject()
      .key("mean")
      .value(result.remove_one.mean)
      .key("worst")
      .value(result.remove_one.worst)
      .key("cases")
      .value(result.remove_one.cases)
      .endObject()
      .key("remove_tenth")
      .beginObject()
      .key("removed")
      .value(result.tenth_removed)
      .key("moved_over_ideal")
      .value(result.remove_tenth)
      .endObject()
      .key("slots_over_ideal")
      .beginArray();
  for (double ratio : result.slots_over_ideal) json.value(ratio);
  json.endArray().key("movement").beginArray();
  for (const MovementPoint& point : result.movement) {
    json.beginObject()
        .key("removed")
        .value(point.removed)
        .key("moved")
        .value(point.moved)
        .key("ideal")
        .value(point.ideal)
        .endObject();
  }
  json.endArray().key("notes").beginArray();
  for (const std::string& note : result.notes) json.value(note);
  json.endArray().endObject();
}

}  // namespace

absl::StatusOr<ComparisonOutput> comparisonReport(const Config& config,
                                                  const OfflineOptions& options) {
  if (!options.fail.empty()) {
    return absl::InvalidArgumentError("--fail applies to analyze without --algorithms");
  }
  BERTH_ASSIGN_OR_RETURN(const std::vector<const ServiceConfig*> services,
                         servicesToAnalyze(config, options.service));
  JsonWriter json;
  json.beginObject().key("services").beginArray();
  std::string out;
  std::vector<ServiceComparison> plotted;
  for (const ServiceConfig* service : services) {
    std::vector<Backend> serving;
    for (const BackendConfig& backend : service->backends) {
      if (backend.weight > 0) serving.push_back({backend.name, backend.weight});
    }
    if (serving.empty()) {
      absl::StrAppendFormat(&out, "service %s (%s): no backend with a weight; nothing to compare\n",
                            service->name, service->listener());
      continue;
    }
    if (options.progress) {
      options.progress(absl::StrCat("analyze: service ", service->name, ": comparing algorithms"),
                       0, 0);
    }
    const ComparisonOptions comparison = {.max_removals = options.max_failures,
                                          .measure_time = options.measure_time};
    absl::StatusOr<std::vector<AlgorithmComparison>> results =
        compareAlgorithms(serving, service->tableOptions(), options.algorithms, comparison);
    if (!results.ok()) {
      return absl::Status(results.status().code(), absl::StrCat("service '", service->name,
                                                                "': ", results.status().message()));
    }
    const std::string subtitle =
        absl::StrFormat("%s, M=%u, N=%u, configured: %s", service->listener(), service->table_size,
                        serving.size(), toString(service->algorithm));
    plotted.push_back({service->name, subtitle, *results});

    json.beginObject()
        .key("name")
        .value(service->name)
        .key("listener")
        .value(service->listener())
        .key("configured_algorithm")
        .value(toString(service->algorithm))
        .key("table_size")
        .value(service->table_size)
        .key("backends")
        .value(static_cast<uint64_t>(serving.size()))
        .key("algorithms")
        .beginArray();
    absl::StrAppendFormat(&out, "service %s (%s)\n", service->name, subtitle);
    absl::StrAppendFormat(&out, "  %-12s %8s %8s %7s %8s %9s %9s %7s %8s %7s %13s %9s\n",
                          "algorithm", "build", "lookup", "table", "memory", "max/", "min/", "CV",
                          "weighted", "add", "remove one", "remove");
    absl::StrAppendFormat(&out, "  %-12s %8s %8s %7s %8s %9s %9s %7s %8s %7s %13s %9s\n", "", "ms",
                          "ns", "ns", "KiB", "ideal", "ideal", "", "error", "one", "mean  worst",
                          absl::StrCat(results->front().tenth_removed, " of ", serving.size()));
    std::vector<std::string> notes;
    for (const AlgorithmComparison& result : *results) {
      const std::string name =
          absl::StrCat(toString(result.algorithm), result.in_datapath ? " *" : "");
      const double memory_kib = static_cast<double>(result.table_bytes + result.state_bytes) / 1024;
      absl::StrAppendFormat(
          &out, "  %-12s %8.2f %8.1f %7s %8.0f %9.4f %9.4f %7.4f %8.4f %7.2f %6.2f %6.2f %9.2f\n",
          name, result.build_ms, result.lookup_ns,
          result.in_datapath ? absl::StrFormat("%.1f", result.table_lookup_ns) : "-", memory_kib,
          result.max_over_ideal, result.min_over_ideal, result.coefficient_of_variation,
          result.weighted_error, result.add_one, result.remove_one.mean, result.remove_one.worst,
          result.remove_tenth);
      for (const std::string& note : result.notes) {
        notes.push_back(absl::StrCat(toString(result.algorithm), ": ", note));
      }

      writeComparisonJson(json, result);
    }
    json.endArray().endObject();
    absl::StrAppend(&out,
                    "  * a service can choose it (algorithm:); every one of them is served from "
                    "its M-slot table,\n"
                    "    so the datapath's cost is the table column whatever the choice. Movement "
                    "columns: slots\n"
                    "    moved over the least that had to move, so 1.00 is ideal.\n");
    for (const std::string& note : notes) absl::StrAppend(&out, "  ", note, "\n");
  }
  json.endArray();
  appendWarningsAndNotes(config, json, out);
  json.endObject();
  ComparisonOutput output;
  output.report = options.json ? json.str() + "\n" : out;
  if (options.plot) output.svg = comparisonSvg(plotted);
  return output;
}

absl::StatusOr<std::string> changeReport(const Config& next, const Config& previous,
                                         const OfflineOptions& options) {
  auto stateOf = [](const ServiceConfig& service) {
    return ServiceState::create(service, std::vector<bool>(service.backends.size(), true));
  };
  JsonWriter json;
  json.beginObject().key("services").beginArray();
  std::string out;
  bool found = options.service.empty();
  for (const ServiceConfig& service : next.services) {
    if (!options.service.empty() && service.name != options.service) continue;
    found = true;
    const ServiceConfig* before = previous.findService(service.name);
    json.beginObject().key("service").value(service.name);
    if (before == nullptr) {
      json.key("change").value("new service").endObject();
      absl::StrAppendFormat(&out, "service %s: new; nothing to compare\n", service.name);
      continue;
    }
    BERTH_ASSIGN_OR_RETURN(const ServiceState old_state, stateOf(*before));
    BERTH_ASSIGN_OR_RETURN(const ServiceState new_state, stateOf(service));
    const std::optional<SlotChange> change = reloadChange(old_state, new_state);
    if (!change) {
      json.key("change").value("none").endObject();
      absl::StrAppendFormat(&out, "service %s: the table stays as it is\n", service.name);
      continue;
    }
    json.key("change").value(toString(change->cause));
    appendMovementFields(json, change->movement);
    json.endObject();
    absl::StrAppendFormat(&out, "service %s: %s\n", service.name, describe(*change));
  }
  for (const ServiceConfig& service : previous.services) {
    if (!options.service.empty() && service.name != options.service) continue;
    if (next.findService(service.name) != nullptr) continue;
    found = true;
    json.beginObject().key("service").value(service.name).key("change").value("removed service");
    json.endObject();
    absl::StrAppendFormat(&out, "service %s: removed; its flows have nowhere to go\n",
                          service.name);
  }
  json.endArray().endObject();
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no service named '", options.service, "'"));
  }
  return options.json ? json.str() + "\n" : out;
}

}  // namespace berth
