// berthd's control-socket commands: status, stats, reload, drain and undrain. Each runs on the
// management thread, between its other work, and answers with one JSON object, whole or in
// pieces (reply_stream.h).

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "berth/api/commands.h"
#include "berth/control/announce.h"
#include "berth/control/explain_reply.h"
#include "berth/control/table_report.h"
#include "berth/daemon/control_plane.h"
#include "berth/maglev/analysis.h"
#include "berth/net/packet_parser.h"
#include "berth/util/json_writer.h"
#include "berth/util/program_info.h"

namespace berth {
namespace {

// How long explain waits for workers to look in their connection tables: they look between
// bursts, every 1024 loops, which is well under a millisecond while they run. The loop turns
// while it waits.
constexpr absl::Duration kQueryPatience = absl::Milliseconds(200);

std::string okReply(absl::string_view text) {
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("text").value(text).endObject();
  return json.str();
}

}  // namespace

std::string ControlPlane::statsReplyJson(const CountersReport& report, const Rates& now,
                                         const std::shared_ptr<const PortStatsReading>& ports,
                                         const PortRates& port_rates) {
  std::string counters = berth::countersJson(report);
  if (!counters.empty() && counters.back() == '\n') counters.pop_back();
  JsonWriter rates;
  rates.beginObject()
      .key("interval_s")
      .value(now.interval_s)
      .key("rx_pps")
      .value(now.rx_pps)
      .key("tx_pps")
      .value(now.tx_pps)
      .key("rx_bps")
      .value(now.rx_bps)
      .key("tx_bps")
      .value(now.tx_bps)
      .key("drops_per_s")
      .value(now.drops_per_s)
      .endObject();
  const absl::Time at = absl::Now();
  const PortStatsReading none;
  const PortStatsReading& reading = ports != nullptr ? *ports : none;
  JsonWriter text;
  text.value(absl::StrCat(
      absl::StrFormat("rates over the last %.1f s: rx %.0f pps (%.0f bit/s), tx %.0f pps (%.0f "
                      "bit/s), drops %.0f/s\n",
                      now.interval_s, now.rx_pps, now.rx_bps, now.tx_pps, now.tx_bps,
                      now.drops_per_s),
      berth::countersText(report), portsText(reading, port_rates, at)));
  JsonWriter port_json;
  port_json.beginObject();
  writePortsJson(port_json, reading, port_rates, at);
  port_json.endObject();
  // The ports' members go at the reply's top level, beside "stats".
  const std::string& port_members = port_json.str();
  return absl::StrCat("{\"ok\":true,\"text\":", text.str(), ",\"rates\":", rates.str(),
                      ",\"stats\":", counters, ",",
                      absl::string_view(port_members).substr(1, port_members.size() - 2), "}");
}

std::shared_ptr<const RenderedText> ControlPlane::renderStats() {
  return renderOffLoop([report = countersReport(), rates = rates_.rates(),
                        ports = datapath_.ports().stats(), port_rates = datapath_.ports().rates()] {
    return statsReplyJson(report, rates, ports, port_rates);
  });
}

std::unique_ptr<ReplyStream> ControlPlane::statsReply() { return renderedReply(renderStats()); }

std::unique_ptr<ReplyStream> ControlPlane::servicesReply() {
  return renderedReply(
      renderOffLoop([rows = currentServiceRows(), tracked = datapath_.connectionsTracked()] {
        return servicesReplyJson(rows, tracked);
      }));
}

std::unique_ptr<ReplyStream> ControlPlane::backendsReply() {
  // Gathering 65,535 backends' rows takes the loop about 30 ms. A request that arrives while a
  // rendering of the same snapshot is under way shares it, so clients asking in a loop cost the
  // loop one gathering per rendering; after a health change, drain or reload they get a new one.
  return renderedReply(replies_.sharedBackends(rollouts_.generation(), [this] {
    return renderOffLoop([rows = currentBackendRows(), tracked = datapath_.connectionsTracked()] {
      return backendsReplyJson(rows, tracked);
    });
  }));
}

std::unique_ptr<ReplyStream> ControlPlane::reloadReply() {
  // The build runs off the loop; the reply waits for it on later turns.
  return pollingReply([this, request = requestReload()]() -> std::optional<std::string> {
    uint64_t generation = 0;
    const std::optional<absl::Status> outcome = reloads_->outcome(request, &generation);
    if (!outcome) return std::nullopt;
    return outcome->ok()
               ? okReply(absl::StrCat("reloaded ", config_path_, " (snapshot ", generation, ")\n"))
               : errorReply(outcome->message());
  });
}

// Each command of the command table (api/commands.h) and its handler.
const absl::flat_hash_map<std::string, ControlPlane::CommandHandler>&
ControlPlane::commandHandlers() {
  // The per-backend replies are rendered off the loop, explain waits for the workers and table
  // is rendered in pieces; the rest are whole.
  static const auto* handlers = new absl::flat_hash_map<std::string, CommandHandler>{
      {"status",
       [](ControlPlane& d, const ControlRequest&) { return wholeReply(d.statusReply()); }},
      {"stats", [](ControlPlane& d, const ControlRequest&) { return d.statsReply(); }},
      {"services", [](ControlPlane& d, const ControlRequest&) { return d.servicesReply(); }},
      {"backends", [](ControlPlane& d, const ControlRequest&) { return d.backendsReply(); }},
      {"reload", [](ControlPlane& d, const ControlRequest&) { return d.reloadReply(); }},
      {"drain",
       [](ControlPlane& d, const ControlRequest& r) { return wholeReply(d.drainReply(r, true)); }},
      {"undrain",
       [](ControlPlane& d, const ControlRequest& r) { return wholeReply(d.drainReply(r, false)); }},
      {"explain", [](ControlPlane& d, const ControlRequest& r) { return d.explainReply(r); }},
      {"table", [](ControlPlane& d, const ControlRequest& r) { return d.tableReply(r); }},
      {"neighbors", [](ControlPlane& d, const ControlRequest& r) { return d.neighborsReply(r); }},
      {"announce",
       [](ControlPlane& d, const ControlRequest& r) { return wholeReply(d.announceReply(r)); }},
  };
  return *handlers;
}

absl::Status ControlPlane::checkCommandHandlers() {
  for (const CommandSpec& command : controlCommands()) {
    if (!commandHandlers().contains(command.name)) {
      return absl::InternalError(
          absl::StrCat("control: command '", command.name, "' has no handler"));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<ReplyStream> ControlPlane::handleControl(const ControlRequest& request) {
  const CommandSpec* command = findControlCommand(request.command);
  if (command == nullptr) {
    return wholeReply(errorReply(absl::StrCat("unknown command '", request.command,
                                              "'; commands: ", controlCommandNames())));
  }
  if (absl::Status status = checkCommandFields(*command, request.fields); !status.ok()) {
    return wholeReply(errorReply(status.message()));
  }
  return commandHandlers().at(command->name)(*this, request);
}

std::unique_ptr<ReplyStream> ControlPlane::handleReadOnly(const ControlRequest& request) {
  // Anyone may ask for stats here, and with tens of thousands of backends a stats reply takes
  // a tenth of a second or more to render: one rendering a second serves every such request.
  if (request.command != "stats" || !request.fields.empty()) return handleControl(request);
  return renderedReply(replies_.sharedStats(absl::Now(), [this] { return renderStats(); }));
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
  report.periodic_jobs = jobs_.figures();
  report.fleet = fleet_.statusRow(config_, *health_);
  return report;
}

std::string ControlPlane::announceReply(const ControlRequest& request) {
  // What berth-announcer hands to BIRD (control/announce.h).
  if (const std::string& announced = request.field("announced"); !announced.empty()) {
    uint32_t routes = 0;
    if (!absl::SimpleAtoi(announced, &routes)) {
      return errorReply(absl::StrCat("--announced takes a count of routes, not '", announced, "'"));
    }
    if (routes == 0 && stop_withdrawal_ && !stop_withdrawal_->confirmed()) {
      stop_withdrawal_->withdrawalConfirmed(absl::Now());
      logLine(absl::StrFormat(
          "stopping: berth-announcer has withdrawn the BGP routes from BIRD; forwarding %d ms more",
          absl::ToInt64Milliseconds(stop_withdrawal_->forwardAfterWithdrawal())));
    }
  }
  ForwardingState forwarding;
  forwarding.workers_running = datapath_.launched();
  forwarding.stopping = stop_withdrawal_.has_value();
  if (datapath_.stalled()) {
    forwarding.stalled_for_ms = absl::ToInt64Milliseconds(kDatapathStallThreshold);
  }
  forwarding.ports_down = datapath_.ports().down();
  return announceReplyJson(decideAnnouncements(config_, tables_.states(), forwarding));
}

std::vector<ServiceRow> ControlPlane::currentServiceRows() const {
  return serviceRows(tables_.states(), counter_ids_, [this](uint32_t id, bool backend) {
    return datapath_.trafficOf(id, backend);
  });
}

std::vector<BackendRow> ControlPlane::currentBackendRows() const {
  std::vector<BackendRow> rows =
      backendRows(tables_.states(), counter_ids_,
                  [this](uint32_t id, bool backend) { return datapath_.trafficOf(id, backend); });
  // The rows follow the config's services and backends, as the health monitor does.
  size_t row = 0;
  const AgreedHealth* agreed = fleet_.agreedHealthIfActive();
  for (size_t s = 0; s < config_.services.size(); ++s) {
    for (size_t b = 0; b < config_.services[s].backends.size(); ++b) {
      BackendRow& entry = rows[row++];
      entry.check_stale = health_->stale(s, b);
      if (agreed == nullptr) continue;
      const auto dissent =
          agreed->dissent.find({config_.services[s].name, config_.services[s].backends[b].name});
      if (dissent != agreed->dissent.end()) entry.fleet_dissent = dissent->second;
    }
  }
  return rows;
}

std::unique_ptr<ReplyStream> ControlPlane::neighborsReply(const ControlRequest& request) {
  const std::string& action = request.field("action");
  if (action == "flush") {
    neighbors_.cache().flush(absl::Now());
    return wholeReply(
        okReply(absl::StrCat("asking ", neighbors_.cache().table().size(),
                             " next hop(s) again; the MACs in use serve until they answer\n")));
  }
  if (!action.empty()) {
    return wholeReply(
        errorReply(absl::StrCat("neighbors takes flush or nothing, not '", action, "'")));
  }
  std::vector<std::string> port_names;
  for (const PortConfig& port : config_.dataplane.ports) port_names.push_back(port.name);
  // Thousands of l2dsr backends make a long reply: rendered off the loop, like backends.
  return renderedReply(
      renderOffLoop([rows = neighbors_.cache().rows(absl::Now()), names = std::move(port_names)] {
        return neighborsReplyJson(rows, names);
      }));
}

std::string ControlPlane::drainReply(const ControlRequest& request, bool drain) {
  const std::string& backend_name = request.field("backend");
  const std::string& service_name = request.field("service");
  if (backend_name.empty()) return errorReply("give the backend's name");
  absl::StatusOr<ServiceTables::DrainOutcome> outcome = tables_.setDrained(
      service_name, backend_name, drain, [this] { return publishSnapshot(); }, absl::Now());
  if (!outcome.ok()) return errorReply(outcome.status().message());
  const std::vector<std::string>& changed = outcome->changed;
  if (!changed.empty()) {
    reloads_->drainChanged();
    saveDrains();
    logLine(absl::StrFormat("%s %s; snapshot %u published", drain ? "drained" : "undrained",
                            absl::StrJoin(outcome->moved, ", "), rollouts_.generation()));
  }
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("changed").beginArray();
  for (const std::string& key : changed) json.value(key);
  json.endArray().key("snapshot_generation").value(rollouts_.generation());
  json.key("text").value(
      changed.empty() ? absl::StrCat("nothing to ", drain ? "drain" : "undrain", ": already so\n")
                      : absl::StrFormat("%s %s (snapshot %u)\n", drain ? "drained" : "undrained",
                                        absl::StrJoin(changed, ", "), rollouts_.generation()));
  json.endObject();
  return json.str();
}

std::string ControlPlane::explainAnswer(const FlowKey& flow,
                                        const std::optional<TrackedConnection>& tracked,
                                        const std::string& note) const {
  const Snapshot& snapshot = datapath_.snapshot();
  const bool conntrack = datapath_.tracksConnections();
  const FlowExplanation explanation =
      explainFlow(snapshot, flow, tracked, conntrack, datapath_.backendLoads());
  std::string listener;
  if (explanation.service) {
    const ServiceConfig* service = config_.findService(snapshot.service(*explanation.service).name);
    if (service != nullptr) listener = service->listener();
  }
  // Untracked, a flow a peer carries goes to the peer's backend from its next packet that is
  // not a SYN (docs/scale-out.md, "Flows that survive an instance").
  std::string full_note = note;
  const FlowSync* sync = datapath_.flowSync();
  if (!tracked && explanation.service && sync != nullptr) {
    const PeerFlows* peers = sync->peerFlows().load(std::memory_order_acquire);
    const SnapshotService& service = snapshot.service(*explanation.service);
    const ConnectionKey key =
        ConnectionKey::of(flow, service.hash_fields, static_cast<uint16_t>(service.counter_id));
    const PeerFlow* peer =
        peers == nullptr ? nullptr
                         : peers->find(key, peers->hash(key.source, key.source_port, key.service),
                                       sync->workerClockMs());
    const uint32_t backend =
        peer == nullptr ? kNoBackendIndex : snapshot.backendIndexOf(peer->backend);
    if (backend != kNoBackendIndex) {
      absl::StrAppend(&full_note, full_note.empty() ? "" : "; ", "a peer's record (",
                      toString(peer->state), ") sends its next packet that is not a SYN to ",
                      snapshot.backend(backend).name);
    }
  }
  return explainReplyJson(snapshot, flow, explanation, conntrack, tracked, full_note, listener);
}

std::unique_ptr<ReplyStream> ControlPlane::explainReply(const ControlRequest& request) {
  absl::StatusOr<FlowKey> flow = explainedFlow(request);
  if (!flow.ok()) return wholeReply(errorReply(flow.status().message()));
  const Snapshot& snapshot = datapath_.snapshot();
  const bool conntrack = datapath_.tracksConnections();
  const std::optional<uint32_t> service = snapshot.findService(*flow);
  if (!service || !conntrack) return wholeReply(explainAnswer(*flow, std::nullopt, ""));
  // The workers look between bursts, well under a millisecond apart while they run: the reply
  // is checked for on each turn of the loop, and sent without them after kQueryPatience.
  Datapath::WorkerQuestions asked =
      datapath_.askWorkers(connectionKeyOf(snapshot, *service, *flow));
  const absl::Time give_up = absl::Now() + kQueryPatience;
  return pollingReply(
      [this, flow = *flow, asked = std::move(asked), give_up]() -> std::optional<std::string> {
        if (!datapath_.workersAnswered(asked) && absl::Now() < give_up) return std::nullopt;
        std::string note;
        const std::optional<TrackedConnection> tracked = datapath_.collectAnswers(asked, note);
        return explainAnswer(flow, tracked, note);
      });
}

std::unique_ptr<ReplyStream> ControlPlane::tableReply(const ControlRequest& request) const {
  const std::string& name = request.field("service");
  std::vector<std::string> names;
  for (const ServiceState& state : tables_.states()) {
    names.push_back(state.name());
    if (state.name() != name) continue;
    const Table& table = state.liveTable();
    std::vector<std::string> unhealthy;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      if (!table.healthy()[b]) unhealthy.push_back(table.backends()[b].name);
    }
    return tableReplyStream(
        state.config(), table, rollouts_.generation(),
        absl::StrCat(
            unhealthy.empty() ? "" : absl::StrCat(", unhealthy: ", absl::StrJoin(unhealthy, ", ")),
            "; live in snapshot ", rollouts_.generation()));
  }
  if (name.empty()) return wholeReply(errorReply("table needs --service NAME"));
  return wholeReply(errorReply(
      absl::StrCat("no service named '", name, "'; berthd has: ", absl::StrJoin(names, ", "))));
}

}  // namespace berth
