#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/control/service_state.h"
#include "berth/fleet/agreed_health.h"
#include "berth/fleet/generation.h"
#include "berth/maglev/table.h"

namespace berth {

// Whose health verdicts count for an instance in a fleet with table generations
// (docs/scale-out.md, "Table generations"): the rules, pure, apart from the loop that feeds them.
// While etcd answers, the fleet's word alone (the generation's down set); while it does not
// (fail-safe), a backend this instance's own probes see down is also taken out.
struct FleetServing {
  // The generation in force; none before the first, and then every service is served by its
  // own probes alone.
  std::shared_ptr<const FleetGeneration> generation;
  // etcd out of reach with a generation in force.
  bool fail_safe = false;

  // The verdicts `service` is served with (config order), from `local`, this instance's probes'
  // verdicts, on `generation_base`: the base table the service is served on when it comes from
  // the generation (generationBaseFor()), else nullptr. A backend the base leaves out stays out
  // whatever its probes say, until a plan takes it in.
  std::vector<bool> verdicts(const ServiceConfig& service, const std::vector<bool>& local,
                             const Table* generation_base) const;
  // The same for `state` on the base table it has.
  std::vector<bool> verdicts(const ServiceState& state, const std::vector<bool>& local) const;
  // The backends taken out fail-safe now, as "service/backend": down by `local(s)` for service s
  // of `services`, not by the fleet's word. None unless fail-safe.
  std::vector<std::string> failSafeRemovals(
      absl::Span<const ServiceConfig> services,
      const std::function<const std::vector<bool>&(size_t)>& local) const;
  // Each service's base table for a build, from the generation in force and, where a service is
  // served on a step this instance took from it ahead of the elected instance, that step: so a
  // change moves only what it has to, whether or not the generation for the previous one came.
  // `agreed`: the health the instance sees the fleet agree on. Null without a generation.
  GenerationBase generationBase(absl::Span<const ServiceState> services,
                                const AgreedHealth& agreed) const;
};

}  // namespace berth
