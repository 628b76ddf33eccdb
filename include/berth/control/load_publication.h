#pragma once

#include <cstdint>
#include <functional>

#include "absl/types/span.h"
#include "berth/control/service_state.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/snapshot.h"

namespace berth {

// Bounded-load publication (dataplane/counters.h): every kLoadPublishIntervalMs the
// management thread sums each bounded-load service's per-backend active flows over the
// workers' connection gauges and publishes them for the workers' new-flow choices. Pure but for
// the atomic stores into `loads`.

// Publishes, for every bounded-load service of `services` that has counter ids, each backend's
// active flows (`active(backend counter id)`, the workers' gauges summed; clamped to 32 bits)
// and the service's serving total: the active flows of its healthy backends with a weight.
// Bumps the generation once if it published anything, so workers drop their own counts from
// before. Returns whether it did.
bool publishBackendLoads(absl::Span<const ServiceState> services, const CounterIds& counter_ids,
                         const std::function<uint64_t(uint32_t backend_id)>& active,
                         BackendLoads& loads);

// The active flows on the backend of counter id `backend_id`: the connection gauges of every
// worker's counters for it (WorkerState::traffic), summed. What berthd passes as `active` above.
uint64_t activeFlows(absl::Span<const TrafficCounters> workers, uint32_t backend_id);

}  // namespace berth
