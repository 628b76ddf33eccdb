#include "berth/sync/peer_flow_store.h"

#include <string>

namespace berth {

absl::string_view toString(PeerFlowEvent event) {
  static constexpr absl::string_view kNames[] = {BERTH_PEER_FLOW_EVENTS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, event);
}

FlowRecordNames FlowRecordNames::of(const CounterIds& ids, const Config& config) {
  FlowRecordNames names;
  for (const ServiceConfig& service : config.services) {
    const std::optional<uint32_t> service_id = ids.findService(service.name);
    if (!service_id) continue;
    const auto id = static_cast<uint16_t>(*service_id);
    const uint64_t name = flowRecordName(service.name);
    names.services_[name] = id;
    if (names.service_names_.size() <= id) {
      names.service_names_.resize(id + 1, 0);
      names.service_families_.resize(id + 1, 0);
    }
    names.service_names_[id] = name;
    names.service_families_[id] = service.vip.isV4() ? 4 : 6;
    for (const BackendConfig& backend : service.backends) {
      const std::optional<uint32_t> backend_id = ids.findBackend(service.name, backend.name);
      if (!backend_id) continue;
      const auto local = static_cast<uint16_t>(*backend_id);
      const uint64_t backend_name = flowRecordName(ids.backendNames()[local]);
      names.backends_[backend_name] = local;
      if (names.backend_names_.size() <= local) names.backend_names_.resize(local + 1, 0);
      names.backend_names_[local] = backend_name;
    }
  }
  return names;
}

std::optional<uint16_t> FlowRecordNames::service(uint64_t name) const {
  const auto found = services_.find(name);
  if (found == services_.end()) return std::nullopt;
  return found->second;
}

std::optional<uint16_t> FlowRecordNames::backend(uint64_t name) const {
  const auto found = backends_.find(name);
  if (found == backends_.end()) return std::nullopt;
  return found->second;
}

FlowRecordState flowRecordStateOf(ConnectionState state) {
  switch (state) {
    case ConnectionState::kTcpEstablished:
      return FlowRecordState::kTcpEstablished;
    case ConnectionState::kTcpClosing:
      return FlowRecordState::kTcpClosing;
    case ConnectionState::kUdp:
      return FlowRecordState::kUdp;
    default:
      return FlowRecordState::kWithdrawn;
  }
}

ConnectionState connectionStateOf(FlowRecordState state) {
  switch (state) {
    case FlowRecordState::kTcpEstablished:
      return ConnectionState::kTcpEstablished;
    case FlowRecordState::kTcpClosing:
      return ConnectionState::kTcpClosing;
    case FlowRecordState::kUdp:
      return ConnectionState::kUdp;
    case FlowRecordState::kWithdrawn:
      break;
  }
  return ConnectionState::kEmpty;
}

KeptFlowRecords::Kept* KeptFlowRecords::find(const FlowIdentity& identity) {
  const auto found = index_.find(identity);
  return found == index_.end() ? nullptr : &slots_[found->second];
}

KeptFlowRecords::Kept& KeptFlowRecords::add(const FlowRecord& record, uint64_t sender,
                                            uint32_t expires_ms) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot] = Kept{record, sender, expires_ms};
  index_.emplace(FlowIdentity::of(record), slot);
  return slots_[slot];
}

void KeptFlowRecords::forget(Kept& kept) {
  index_.erase(FlowIdentity::of(kept.record));
  kept = Kept{};
  free_slots_.push_back(static_cast<uint32_t>(&kept - slots_.data()));
}

size_t KeptFlowRecords::expire(uint32_t now_ms, size_t budget) {
  size_t forgotten = 0;
  for (size_t checked = 0; checked < budget && !slots_.empty(); ++checked) {
    if (sweep_cursor_ >= slots_.size()) sweep_cursor_ = 0;
    Kept& kept = slots_[sweep_cursor_++];
    if (kept.record.state != FlowRecordState::kWithdrawn && !kept.liveAt(now_ms)) {
      forget(kept);
      ++forgotten;
    }
  }
  return forgotten;
}

bool PeerFlowStore::takeChange(uint32_t now_ms) {
  if (limits_.max_changes_per_second == 0) return true;
  if (changes_.take(now_ms, limits_.max_changes_per_second, limits_.max_changes_per_second)) {
    return true;
  }
  countEvent(PeerFlowEvent::kRateLimited);
  return false;
}

void PeerFlowStore::apply(uint64_t sender, absl::Span<const FlowRecord> records,
                          const FlowRecordNames& names, uint32_t now_ms) {
  for (const FlowRecord& record : records) {
    KeptFlowRecords::Kept* kept = kept_.find(FlowIdentity::of(record));
    if (record.state == FlowRecordState::kWithdrawn) {
      if (kept != nullptr && takeChange(now_ms)) {
        kept_.forget(*kept);
        countEvent(PeerFlowEvent::kWithdrawn);
        changed_ = true;
      }
      continue;
    }
    if (!names.service(record.service) || !names.backend(record.backend)) {
      countEvent(PeerFlowEvent::kUnknownName);
      continue;
    }
    const uint32_t expires_ms = now_ms + record.lifetime_ms;
    if (kept != nullptr) {
      const bool same =
          kept->record.backend == record.backend && kept->record.state == record.state;
      // A refresh: workers see the later expiry at the next build, and until then hold the
      // earlier one, which a refresh comes well before (at a third of the timeout at most).
      if (!same && !takeChange(now_ms)) continue;
      kept->record = record;
      kept->sender = sender;
      kept->expires_ms = expires_ms;
      countEvent(same ? PeerFlowEvent::kRefreshed : PeerFlowEvent::kApplied);
      changed_ |= !same;
      continue;
    }
    if (kept_.size() >= limits_.max_records) {
      countEvent(PeerFlowEvent::kFull);
      continue;
    }
    if (!takeChange(now_ms)) continue;
    kept_.add(record, sender, expires_ms);
    countEvent(PeerFlowEvent::kApplied);
    changed_ = true;
  }
}

void PeerFlowStore::expire(uint32_t now_ms, size_t budget) {
  const size_t expired = kept_.expire(now_ms, budget);
  countEvent(PeerFlowEvent::kExpired, expired);
  changed_ |= expired > 0;
}

std::vector<PeerFlow> PeerFlowStore::flows(const FlowRecordNames& names, uint32_t now_ms) const {
  std::vector<PeerFlow> flows;
  flows.reserve(kept_.size());
  for (const KeptFlowRecords::Kept& kept : kept_.slots()) {
    if (kept.record.state == FlowRecordState::kWithdrawn || !kept.liveAt(now_ms)) continue;
    const std::optional<uint16_t> service = names.service(kept.record.service);
    const std::optional<uint16_t> backend = names.backend(kept.record.backend);
    if (!service || !backend) continue;
    PeerFlow flow;
    flow.source = kept.record.source;
    flow.source_port = kept.record.source_port;
    flow.service = *service;
    flow.backend = *backend;
    flow.state = connectionStateOf(kept.record.state);
    flow.expires_ms = kept.expires_ms;
    flows.push_back(flow);
  }
  return flows;
}

}  // namespace berth
