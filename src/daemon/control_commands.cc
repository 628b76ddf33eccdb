#include "berth/daemon/control_commands.h"

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
#include "berth/net/packet_parser.h"
#include "berth/util/did_you_mean.h"
#include "berth/util/json_writer.h"

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

std::string ControlCommands::statsReplyJson(const CountersReport& report, const Rates& now,
                                            const std::shared_ptr<const PortStatsReading>& ports,
                                            const PortRates& port_rates, bool all) {
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
  text.value(
      absl::StrCat(absl::StrFormat("rates over the last %.1f s: rx %s (%s), tx %s (%s), drops %s\n",
                                   now.interval_s, siUnits(now.rx_pps, "pps"),
                                   siUnits(now.rx_bps, "bit/s"), siUnits(now.tx_pps, "pps"),
                                   siUnits(now.tx_bps, "bit/s"), siUnits(now.drops_per_s, "/s")),
                   berth::statsText(report, all), portsText(reading, port_rates, at)));
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

std::shared_ptr<const RenderedText> ControlCommands::renderStats(bool all) {
  return renderOffLoop([report = target_.countersReport(), rates = parts_.rates.rates(),
                        ports = parts_.datapath.ports().stats(),
                        port_rates = parts_.datapath.ports().rates(),
                        all] { return statsReplyJson(report, rates, ports, port_rates, all); });
}

std::unique_ptr<ReplyStream> ControlCommands::statsReply(const ControlRequest& request) {
  return parts_.replies.gatheredReply(
      [this, all = request.field("all") == "true"] { return renderStats(all); });
}

std::unique_ptr<ReplyStream> ControlCommands::servicesReply() {
  return renderedReply(
      renderOffLoop([rows = target_.serviceRows(), tracked = parts_.datapath.connectionsTracked()] {
        return servicesReplyJson(rows, tracked);
      }));
}

std::unique_ptr<ReplyStream> ControlCommands::backendsReply() {
  // Gathering 65,535 backends' rows takes the loop about 30 ms. A request that arrives while a
  // rendering of the same snapshot is under way shares it, so clients asking in a loop cost the
  // loop one gathering per rendering; after a health change, drain or reload they get a new one.
  return parts_.replies.gatheredReply([this] {
    return parts_.replies.sharedBackends(parts_.rollouts.generation(), [this] {
      return renderOffLoop(
          [rows = target_.backendRows(), tracked = parts_.datapath.connectionsTracked()] {
            return backendsReplyJson(rows, tracked);
          });
    });
  });
}

std::unique_ptr<ReplyStream> ControlCommands::reloadReply() {
  // The build runs off the loop; the reply waits for it on later turns.
  return pollingReply([this, request = target_.requestReload()]() -> std::optional<std::string> {
    uint64_t generation = 0;
    const std::optional<absl::Status> outcome = parts_.reloads->outcome(request, &generation);
    if (!outcome) return std::nullopt;
    return outcome->ok() ? okReply(absl::StrCat("reloaded ", parts_.config_path, " (snapshot ",
                                                generation, ")\n"))
                         : errorReply(outcome->message());
  });
}

// Each command of the command table (api/commands.h) and its handler.
const absl::flat_hash_map<std::string, ControlCommands::Handler>& ControlCommands::handlers() {
  // The per-backend replies are rendered off the loop, explain waits for the workers and table
  // is rendered in pieces; the rest are whole.
  static const auto* handlers = new absl::flat_hash_map<std::string, Handler>{
      {"status",
       [](ControlCommands& d, const ControlRequest&) {
         return wholeReply(statusReplyJson(d.target_.statusReport()));
       }},
      {"stats", [](ControlCommands& d, const ControlRequest& r) { return d.statsReply(r); }},
      {"services", [](ControlCommands& d, const ControlRequest&) { return d.servicesReply(); }},
      {"backends", [](ControlCommands& d, const ControlRequest&) { return d.backendsReply(); }},
      {"reload", [](ControlCommands& d, const ControlRequest&) { return d.reloadReply(); }},
      {"drain", [](ControlCommands& d,
                   const ControlRequest& r) { return wholeReply(d.drainReply(r, true)); }},
      {"undrain", [](ControlCommands& d,
                     const ControlRequest& r) { return wholeReply(d.drainReply(r, false)); }},
      {"explain", [](ControlCommands& d, const ControlRequest& r) { return d.explainReply(r); }},
      {"table", [](ControlCommands& d, const ControlRequest& r) { return d.tableReply(r); }},
      {"neighbors",
       [](ControlCommands& d, const ControlRequest& r) { return d.neighborsReply(r); }},
      {"announce",
       [](ControlCommands& d, const ControlRequest& r) { return wholeReply(d.announceReply(r)); }},
  };
  return *handlers;
}

absl::Status ControlCommands::checkHandlers() {
  for (const CommandSpec& command : controlCommands()) {
    if (!handlers().contains(command.name)) {
      return absl::InternalError(
          absl::StrCat("control: command '", command.name, "' has no handler"));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<ReplyStream> ControlCommands::handle(const ControlRequest& request) {
  const CommandSpec* command = findControlCommand(request.command);
  if (command == nullptr) {
    std::vector<std::string> names;
    for (const CommandSpec& spec : controlCommands()) names.emplace_back(spec.name);
    const std::optional<std::string> nearest = nearestName(request.command, names);
    return wholeReply(
        errorReply(absl::StrCat("unknown command '", request.command, "'",
                                nearest ? absl::StrCat("; did you mean '", *nearest, "'?") : "",
                                " (commands: ", controlCommandNames(), ")")));
  }
  if (absl::Status status = checkCommandFields(*command, request.fields); !status.ok()) {
    return wholeReply(errorReply(status.message()));
  }
  return handlers().at(command->name)(*this, request);
}

std::unique_ptr<ReplyStream> ControlCommands::handleReadOnly(const ControlRequest& request) {
  // Anyone may ask for stats here, and with tens of thousands of backends a stats reply takes
  // a tenth of a second or more to render: one rendering a second serves every such request.
  if (request.command != "stats" || !request.fields.empty()) return handle(request);
  return parts_.replies.gatheredReply([this] {
    return parts_.replies.sharedStats(absl::Now(), [this] { return renderStats(false); });
  });
}

std::string ControlCommands::announceReply(const ControlRequest& request) {
  // What berth-announcer hands to BIRD (control/announce.h).
  if (const std::string& announced = request.field("announced"); !announced.empty()) {
    uint32_t routes = 0;
    if (!absl::SimpleAtoi(announced, &routes)) {
      return errorReply(absl::StrCat("--announced takes a count of routes, not '", announced, "'"));
    }
    target_.routesAnnounced(routes);
  }
  return announceReplyJson(
      decideAnnouncements(parts_.config, parts_.tables.states(), target_.forwardingState()));
}

std::unique_ptr<ReplyStream> ControlCommands::neighborsReply(const ControlRequest& request) {
  const std::string& action = request.field("action");
  if (action == "flush") {
    parts_.neighbors.cache().flush(absl::Now());
    return wholeReply(
        okReply(absl::StrCat("asking ", parts_.neighbors.cache().table().size(),
                             " next hop(s) again; the MACs in use serve until they answer\n")));
  }
  if (!action.empty()) {
    return wholeReply(
        errorReply(absl::StrCat("neighbors takes flush or nothing, not '", action, "'")));
  }
  std::vector<std::string> port_names;
  for (const PortConfig& port : parts_.config.dataplane.ports) port_names.push_back(port.name);
  // Thousands of l2dsr backends make a long reply: rendered off the loop, like backends.
  return renderedReply(
      renderOffLoop([rows = parts_.neighbors.cache().rows(absl::Now()),
                     names = std::move(port_names)] { return neighborsReplyJson(rows, names); }));
}

std::string ControlCommands::drainReply(const ControlRequest& request, bool drain) {
  const std::string& backend_name = request.field("backend");
  const std::string& service_name = request.field("service");
  absl::StatusOr<ServiceTables::DrainOutcome> outcome =
      target_.setDrained(service_name, backend_name, drain);
  if (!outcome.ok()) return errorReply(outcome.status().message());
  const std::vector<std::string>& changed = outcome->changed;
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("changed").beginArray();
  for (const std::string& key : changed) json.value(key);
  json.endArray().key("snapshot_generation").value(parts_.rollouts.generation());
  json.key("text").value(
      changed.empty()
          ? absl::StrCat("nothing to ", drain ? "drain" : "undrain", ": already so\n")
          : absl::StrFormat("%s %s (snapshot %u)\n", drain ? "drained" : "undrained",
                            absl::StrJoin(changed, ", "), parts_.rollouts.generation()));
  json.endObject();
  return json.str();
}

std::string ControlCommands::explainAnswer(const FlowKey& flow,
                                           const std::optional<TrackedConnection>& tracked,
                                           const std::string& note) const {
  const Snapshot& snapshot = parts_.datapath.snapshot();
  const bool conntrack = parts_.datapath.tracksConnections();
  const FlowExplanation explanation =
      explainFlow(snapshot, flow, tracked, conntrack, parts_.datapath.backendLoads());
  std::string listener;
  if (explanation.service) {
    const ServiceConfig* service =
        parts_.config.findService(snapshot.service(*explanation.service).name);
    if (service != nullptr) listener = service->listener();
  }
  // Untracked, a flow a peer carries goes to the peer's backend from its next packet that is
  // not a SYN (docs/scale-out.md, "Flows that survive an instance").
  std::string full_note = note;
  const FlowSync* sync = parts_.datapath.flowSync();
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

std::unique_ptr<ReplyStream> ControlCommands::explainReply(const ControlRequest& request) {
  absl::StatusOr<FlowKey> flow = explainedFlow(request);
  if (!flow.ok()) return wholeReply(errorReply(flow.status().message()));
  const Snapshot& snapshot = parts_.datapath.snapshot();
  const bool conntrack = parts_.datapath.tracksConnections();
  const std::optional<uint32_t> service = snapshot.findService(*flow);
  // Full-NAT (docs/fullnat.md): a client's flow has a session, and so has a backend's reply to
  // a local address.
  std::optional<NatQuestion> nat;
  std::optional<uint16_t> local_address;
  if (service && snapshot.service(*service).forwarding == Forwarding::kFullNat) {
    nat = natQuestionOf(snapshot, *service, *flow);
  } else if (!service && (local_address = natLocalAddressOf(snapshot, *flow))) {
    nat = natReplyQuestionOf(*flow, *local_address);
  }
  if (!nat && (!service || !conntrack)) {
    return wholeReply(explainAnswer(*flow, std::nullopt, ""));
  }
  // The workers look between bursts, well under a millisecond apart while they run: the reply
  // is checked for on each turn of the loop, and sent without them after kQueryPatience.
  Datapath::WorkerQuestions asked = parts_.datapath.askWorkers(
      service ? connectionKeyOf(snapshot, *service, *flow) : ConnectionKey{}, nat);
  const absl::Time give_up = absl::Now() + kQueryPatience;
  return pollingReply([this, flow = *flow, asked = std::move(asked), give_up,
                       local_address]() -> std::optional<std::string> {
    if (!parts_.datapath.workersAnswered(asked) && absl::Now() < give_up) return std::nullopt;
    std::string note;
    const std::optional<TrackedConnection> tracked = parts_.datapath.collectAnswers(asked, note);
    if (local_address) {
      return explainNatReplyJson(parts_.datapath.snapshot(), flow, *local_address, tracked, note);
    }
    return explainAnswer(flow, tracked, note);
  });
}

std::unique_ptr<ReplyStream> ControlCommands::tableReply(const ControlRequest& request) const {
  const std::string& name = request.field("service");
  std::vector<std::string> names;
  for (const ServiceState& state : parts_.tables.states()) {
    names.push_back(state.name());
    if (state.name() != name) continue;
    const Table& table = state.liveTable();
    std::vector<std::string> unhealthy;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      if (!table.healthy()[b]) unhealthy.push_back(table.backends()[b].name);
    }
    return tableReplyStream(
        state.configured(), table, parts_.rollouts.generation(),
        absl::StrCat(
            unhealthy.empty() ? "" : absl::StrCat(", unhealthy: ", absl::StrJoin(unhealthy, ", ")),
            "; live in snapshot ", parts_.rollouts.generation()),
        request.field("summary") == "true");
  }
  return wholeReply(errorReply(
      absl::StrCat("no service named '", name, "'; berthd has: ", absl::StrJoin(names, ", "))));
}

}  // namespace berth
