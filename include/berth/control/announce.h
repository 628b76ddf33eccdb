#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/control/service_state.h"

namespace berth {

// The BGP announce decision: which VIP routes this instance wants announced right now, which
// it holds back and why (docs/scale-out.md). berth-announcer hands the routes to BIRD. Pure.

// What the decision needs to know of the running datapath.
struct ForwardingState {
  bool workers_running = false;
  bool stopping = false;  // a stop was asked for: routes go first, forwarding a moment longer
  // A worker passed no quiescent state for this long; 0 while they all keep passing them.
  int64_t stalled_for_ms = 0;
  std::vector<std::string> ports_down;  // names of ports whose link is down
};

struct AnnouncedRoute {
  std::string service;
  std::string prefix;    // "198.18.100.1/32"
  std::string next_hop;  // the bgp port's address of the VIP's family; empty if it has none
};

struct WithheldRoute {
  std::string service;
  std::string reason;
};

struct AnnounceDecision {
  std::string not_forwarding;  // why nothing is announced; empty while forwarding
  std::vector<AnnouncedRoute> routes;
  std::vector<WithheldRoute> withheld;
};

// Whether any service announces its VIP over BGP (with a bgp section): routes that a stop must
// withdraw, and wait for, before the workers stop.
bool announcesOverBgp(const Config& config);

// A route per `announce: bgp` service while this instance forwards and the service has a
// healthy backend with a weight that is not drained. While it does not forward (workers not
// running, stopping, stalled, or the bgp port down), nothing is announced. Without a bgp
// section, nothing is either.
AnnounceDecision decideAnnouncements(const Config& config, absl::Span<const ServiceState> services,
                                     const ForwardingState& forwarding);

// The `announce` command's reply: "forwarding", the routes, "route_list" (the routes as
// "PREFIX NEXT_HOP" lines, what berth-announcer reads), the withheld services and the text.
std::string announceReplyJson(const AnnounceDecision& decision);

}  // namespace berth
