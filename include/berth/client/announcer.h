#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/config/config.h"
#include "berth/net/ip_address.h"

namespace berth {

// berth-announcer's pure parts (docs/scale-out.md): the routes berthd wants announced, as BIRD
// static routes, and the BIRD config berth generates for an instance.

// A VIP route: the VIP as a host prefix, and the berth port address routers send its traffic to.
struct VipRoute {
  IpAddress vip;
  IpAddress next_hop;

  friend bool operator==(const VipRoute&, const VipRoute&) = default;
};

// berthd's `announce` reply lists its routes as "PREFIX NEXT_HOP" lines ("198.18.100.1/32
// 198.18.0.11"). Errors name the line.
absl::StatusOr<std::vector<VipRoute>> parseRouteList(absl::string_view text);

// The BIRD static routes of one IP version, one per line ("route 198.18.100.1/32 via
// 198.18.0.11;"), sorted so that the same routes always give the same file.
std::string birdStaticRoutes(const std::vector<VipRoute>& routes, IpFamily family);

// Where berth-announcer writes each IP version's routes; the generated config includes both.
std::string routesFile(const std::string& directory, IpFamily family);

// A BIRD 2 config for this instance: its router id, a static protocol per IP version that
// includes berth-announcer's route files, and a BGP session per neighbour that exports only those
// routes, with the berth port's address kept as their next hop. InvalidArgument without a bgp
// section.
absl::StatusOr<std::string> birdConfig(const Config& config, const std::string& config_path,
                                       const std::string& routes_directory);

}  // namespace berth
