#pragma once

#include <string>

#include "berth/config/config.h"

namespace berth {

// `berthctl fleet push FILE` and `berthctl fleet status`, against the etcd of `local`'s fleet
// section (docs/scale-out.md). Each returns berthctl's exit status: 0 done, 1 an error (printed),
// and for status, 3 when the instances do not agree.
int fleetPush(const FleetConfig& fleet, const std::string& path);
int fleetStatus(const FleetConfig& fleet, bool json);

}  // namespace berth
