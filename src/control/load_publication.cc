#include "berth/control/load_publication.h"

#include <algorithm>

namespace berth {
namespace {

uint32_t clamped(uint64_t value) {
  return static_cast<uint32_t>(std::min<uint64_t>(value, UINT32_MAX));
}

}  // namespace

bool publishBackendLoads(absl::Span<const ServiceState> services, const CounterIds& counter_ids,
                         const std::function<uint64_t(uint32_t backend_id)>& active,
                         BackendLoads& loads) {
  bool published = false;
  for (const ServiceState& state : services) {
    const ServiceConfig& service = state.config();
    if (service.bounded_load == 0) continue;
    const std::optional<uint32_t> service_id = counter_ids.findService(service.name);
    if (!service_id) continue;
    published = true;
    const Table& table = state.liveTable();
    uint64_t serving_total = 0;
    for (size_t b = 0; b < table.backends().size(); ++b) {
      const std::optional<uint32_t> id =
          counter_ids.findBackend(service.name, table.backends()[b].name);
      if (!id) continue;
      const uint32_t flows = clamped(active(*id));
      loads.active[*id].store(flows, std::memory_order_relaxed);
      if (table.serves(b)) serving_total += flows;
    }
    loads.serving_total[*service_id].store(clamped(serving_total), std::memory_order_relaxed);
  }
  if (published) loads.generation.fetch_add(1, std::memory_order_release);
  return published;
}

uint64_t activeFlows(absl::Span<const TrafficCounters> workers, uint32_t backend_id) {
  uint64_t active = 0;
  for (const TrafficCounters& worker : workers)
    active += worker.backends[backend_id].connections.read();
  return active;
}

}  // namespace berth
