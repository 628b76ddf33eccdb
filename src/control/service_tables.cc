#include "berth/control/service_tables.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {

const TableChangeHistory* ServiceTables::history(absl::string_view service) const {
  const auto found = history_.find(service);
  return found == history_.end() ? nullptr : &found->second;
}

void ServiceTables::record(const std::string& service, const SlotChange& change, absl::Time now) {
  history_[service].record(change, now);
}

void ServiceTables::note(const std::string& service, const SlotChange& change, absl::Time now) {
  log_(absl::StrCat("table: service '", service, "': ", describe(change)));
  record(service, change, now);
}

void ServiceTables::replace(std::vector<ServiceState> states, absl::Time now) {
  // What the reload did to each table that was there before, against the least it had to move.
  std::vector<std::pair<std::string, SlotChange>> changes;
  for (const ServiceState& after : states) {
    for (const ServiceState& before : states_) {
      if (before.name() != after.name()) continue;
      if (std::optional<SlotChange> change = reloadChange(before, after)) {
        changes.emplace_back(after.name(), *std::move(change));
      }
    }
  }
  states_ = std::move(states);
  for (const auto& [service, change] : changes) note(service, change, now);
}

bool ServiceTables::serveVerdicts(absl::Span<const size_t> which, const VerdictsOf& verdicts,
                                  absl::Time now) {
  bool changed = false;
  for (size_t s : which) {
    ServiceState& state = states_[s];
    std::vector<bool> healthy = verdicts(state, s);
    // In a fleet with etcd answering, this instance's own verdicts change no table.
    if (healthy == state.healthy()) continue;
    absl::StatusOr<SlotChange> change = state.setHealth(std::move(healthy));
    if (!change.ok()) {
      log_(absl::StrCat("health: table not rebuilt, the previous one keeps serving: ",
                        change.status().message()));
      continue;
    }
    note(state.name(), *change, now);
    changed = true;
  }
  return changed;
}

bool ServiceTables::serveVerdicts(const VerdictsOf& verdicts, absl::Time now) {
  std::vector<size_t> all(states_.size());
  for (size_t s = 0; s < all.size(); ++s) all[s] = s;
  return serveVerdicts(all, verdicts, now);
}

bool ServiceTables::serveGeneration(
    uint64_t generation, const BaseOf& base_of,
    const std::function<std::vector<bool>(const ServiceConfig&, size_t, const Table*)>& verdicts,
    absl::Time now) {
  bool took = false;
  for (size_t s = 0; s < states_.size(); ++s) {
    ServiceState& state = states_[s];
    absl::StatusOr<SlotChange> change = [&]() -> absl::StatusOr<SlotChange> {
      absl::StatusOr<std::optional<Table>> base = base_of(state);
      if (!base.ok()) return base.status();
      // The verdicts on the base they are served on.
      std::vector<bool> healthy = verdicts(state.configured(), s, *base ? &**base : nullptr);
      return state.setGeneration(*std::move(base), std::move(healthy));
    }();
    if (!change.ok()) {
      log_(absl::StrCat("fleet: table generation ", generation, " not applied to service '",
                        state.name(), "', its table keeps serving: ", change.status().message()));
      continue;
    }
    if (change->movement.moved_slots > 0 || !change->movement.sameSize()) {
      note(state.name(), *change, now);
    }
    took = true;
  }
  return took;
}

absl::StatusOr<ServiceTables::DrainOutcome> ServiceTables::setDrained(
    absl::string_view service, absl::string_view backend, bool drained,
    const std::function<absl::Status()>& publish, absl::Time now) {
  std::vector<size_t> matches;
  for (size_t s = 0; s < states_.size(); ++s) {
    if (!service.empty() && states_[s].name() != service) continue;
    if (states_[s].hasBackend(backend)) matches.push_back(s);
  }
  if (matches.empty()) {
    return absl::NotFoundError(service.empty() ? absl::StrCat("no backend named '", backend, "'")
                                               : absl::StrCat("no backend named '", backend,
                                                              "' in service '", service, "'"));
  }
  // Every match is changed on a copy first, so that a failed build changes none of them.
  DrainOutcome outcome;
  std::vector<std::pair<size_t, ServiceState>> next_states;
  std::vector<SlotChange> changes;
  for (size_t s : matches) {
    ServiceState next = states_[s];
    absl::StatusOr<std::optional<SlotChange>> change = next.setDrained(backend, drained);
    if (!change.ok()) return change.status();
    if (!change->has_value()) continue;
    outcome.changed.push_back(absl::StrCat(next.name(), "/", backend));
    outcome.moved.push_back(absl::StrCat(outcome.changed.back(), " ", describe(**change)));
    changes.push_back(**std::move(change));
    next_states.emplace_back(s, std::move(next));
  }
  if (next_states.empty()) return outcome;
  // In force by swapping: next_states holds what they were, to swap back should the publish fail.
  for (auto& [s, next] : next_states) std::swap(states_[s], next);
  if (absl::Status status = publish(); !status.ok()) {
    for (auto& [s, was] : next_states) std::swap(states_[s], was);
    return status;
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    record(states_[next_states[i].first].name(), changes[i], now);
  }
  return outcome;
}

}  // namespace berth
