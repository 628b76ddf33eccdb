#include "berth/control/fleet_serving.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {

std::vector<bool> FleetServing::verdicts(const ServiceConfig& service,
                                         const std::vector<bool>& local,
                                         const Table* generation_base) const {
  const GenerationService* fleet = generation ? generation->manifest.find(service.name) : nullptr;
  if (fleet == nullptr) return local;  // no generation for it yet: its own probes decide
  std::vector<bool> serving(service.backends.size(), true);
  for (size_t b = 0; b < service.backends.size(); ++b) {
    const std::string& name = service.backends[b].name;
    // Out by the fleet's word, or failed in the base table, which is the generation's or the
    // step the elected instance's plan takes from it (fleet/generation.h generationBaseFor()).
    bool fleet_down = std::binary_search(fleet->down.begin(), fleet->down.end(), name);
    if (generation_base != nullptr) {
      const absl::StatusOr<uint16_t> index = generation_base->indexOf(name);
      fleet_down |= index.ok() && !generation_base->healthy()[*index];
    }
    serving[b] = !fleet_down && (!fail_safe || b >= local.size() || local[b]);
  }
  return serving;
}

std::vector<bool> FleetServing::verdicts(const ServiceState& state,
                                         const std::vector<bool>& local) const {
  return verdicts(state.configured(), local, state.fromGeneration() ? &state.baseTable() : nullptr);
}

std::vector<std::string> FleetServing::failSafeRemovals(
    absl::Span<const ServiceConfig> services,
    const std::function<const std::vector<bool>&(size_t)>& local) const {
  std::vector<std::string> removed;
  if (!fail_safe || !generation) return removed;
  for (size_t s = 0; s < services.size(); ++s) {
    const ServiceConfig& service = services[s];
    const GenerationService* fleet = generation->manifest.find(service.name);
    if (fleet == nullptr) continue;
    const std::vector<bool>& up = local(s);
    for (size_t b = 0; b < service.backends.size() && b < up.size(); ++b) {
      const std::string& name = service.backends[b].name;
      if (!up[b] && !std::binary_search(fleet->down.begin(), fleet->down.end(), name)) {
        removed.push_back(absl::StrCat(service.name, "/", name));
      }
    }
  }
  return removed;
}

GenerationBase FleetServing::generationBase(absl::Span<const ServiceState> services,
                                            const AgreedHealth& agreed) const {
  if (!generation) return nullptr;
  auto from = std::make_shared<FleetGeneration>(*generation);
  for (const ServiceState& state : services) {
    if (state.fromGeneration()) from->tables.insert_or_assign(state.name(), state.baseTable());
  }
  return [from = std::shared_ptr<const FleetGeneration>(std::move(from)), agreed](
             const ServiceConfig& service) { return generationBaseFor(*from, service, agreed); };
}

}  // namespace berth
