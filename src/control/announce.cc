#include "berth/control/announce.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/util/json_writer.h"

namespace berth {
namespace {

std::string whyNotForwarding(const Config& config, const ForwardingState& forwarding) {
  if (!forwarding.workers_running) return "workers not running";
  if (forwarding.stopping) return "stopping";
  if (forwarding.stalled_for_ms > 0) {
    return absl::StrFormat("datapath stalled: a worker passed no quiescent state for %d ms",
                           forwarding.stalled_for_ms);
  }
  if (config.bgp) {
    for (const std::string& port : forwarding.ports_down) {
      if (port == config.bgp->port) return absl::StrCat("port '", port, "' is down");
    }
  }
  return "";
}

}  // namespace

AnnounceDecision decideAnnouncements(const Config& config, absl::Span<const ServiceState> services,
                                     const ForwardingState& forwarding) {
  AnnounceDecision decision;
  decision.not_forwarding = whyNotForwarding(config, forwarding);
  if (!decision.not_forwarding.empty() || !config.bgp) return decision;
  for (const ServiceState& state : services) {
    const ServiceConfig& service = state.config();
    if (!service.announce_bgp) continue;
    if (!state.serving()) {
      decision.withheld.push_back({service.name, "no healthy backend with a weight"});
      continue;
    }
    const std::optional<IpAddress> next_hop =
        config.bgp->nextHopFor(service.vip.family, config.dataplane);
    decision.routes.push_back(
        {service.name, absl::StrCat(service.vip.toString(), service.vip.isV4() ? "/32" : "/128"),
         next_hop ? next_hop->toString() : ""});
  }
  return decision;
}

std::string announceReplyJson(const AnnounceDecision& decision) {
  const bool forwarding = decision.not_forwarding.empty();
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("forwarding").value(forwarding);
  if (!forwarding) json.key("reason").value(decision.not_forwarding);
  std::string text = forwarding ? std::string("forwarding\n")
                                : absl::StrCat("not forwarding: ", decision.not_forwarding,
                                               "; nothing announced\n");
  std::string route_list;
  json.key("routes").beginArray();
  for (const AnnouncedRoute& route : decision.routes) {
    json.beginObject()
        .key("service")
        .value(route.service)
        .key("prefix")
        .value(route.prefix)
        .key("next_hop")
        .value(route.next_hop)
        .endObject();
    absl::StrAppend(&route_list, route.prefix, " ", route.next_hop, "\n");
    absl::StrAppendFormat(&text, "announce %-20s via %-16s (%s)\n", route.prefix,
                          route.next_hop.empty() ? "?" : route.next_hop, route.service);
  }
  json.endArray().key("route_list").value(route_list).key("withheld").beginArray();
  for (const WithheldRoute& withheld : decision.withheld) {
    json.beginObject()
        .key("service")
        .value(withheld.service)
        .key("reason")
        .value(withheld.reason)
        .endObject();
    absl::StrAppendFormat(&text, "withhold %s: %s\n", withheld.service, withheld.reason);
  }
  json.endArray().key("text").value(text).endObject();
  return json.str();
}

bool announcesOverBgp(const Config& config) {
  if (!config.bgp) return false;
  for (const ServiceConfig& service : config.services) {
    if (service.announce_bgp) return true;
  }
  return false;
}

}  // namespace berth
