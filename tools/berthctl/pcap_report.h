#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "offline_commands.h"

namespace berth {

// `berthctl analyze --config FILE --pcap CAPTURE`: the flows of a real capture, hashed with each
// service's own hash fields and seed, against the service's table with every backend healthy.
// Per service: per backend, flows and packets against its weighted share; a chi-squared test of
// the flows over the serving backends against their weights, and of the flow hashes over 1,024
// equal bins of the hash space, each with its p-value (Boost.Math's chi-squared distribution). A
// small p says the keys do not spread as the weights ask: a few heavy clients, a structured
// address plan, or source-only hashing behind a NAT. Bounded load is not modelled: it depends on
// the loads at the time. Frames that are not TCP or UDP to a configured VIP and port are counted
// and skipped. Errors name the file.
absl::StatusOr<std::string> pcapReport(const Config& config, const std::string& capture,
                                       const OfflineOptions& options);

}  // namespace berth
