#include "berth/sync/flow_record_outbox.h"

#include <algorithm>

namespace berth {

absl::string_view toString(FlowOutboxEvent event) {
  static constexpr absl::string_view kNames[] = {BERTH_FLOW_OUTBOX_EVENTS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, event);
}

void FlowRecordOutbox::add(const FlowExport& news, const FlowRecordNames& names, uint32_t now_ms) {
  FlowRecord record;
  record.service = names.serviceName(news.service);
  record.backend = names.backendName(news.backend);
  record.family = names.serviceFamily(news.service);
  if (record.service == 0 || record.backend == 0 || record.family == 0) {
    countEvent(FlowOutboxEvent::kUnnamed);
    return;
  }
  record.source = news.source;
  record.source_port = news.source_port;
  record.state = flowRecordStateOf(news.state);
  record.lifetime_ms = record.state == FlowRecordState::kWithdrawn
                           ? 0
                           : std::min(news.lifetime_ms, kMaxFlowRecordLifetimeMs);

  KeptFlowRecords::Kept* kept = kept_.find(FlowIdentity::of(record));
  if (record.state == FlowRecordState::kWithdrawn) {
    if (kept != nullptr) kept_.forget(*kept);
  } else if (kept != nullptr) {
    kept->record = record;
    kept->expires_ms = now_ms + record.lifetime_ms;
  } else if (kept_.size() < limits_.max_records) {
    kept_.add(record, 0, now_ms + record.lifetime_ms);
  } else {
    countEvent(FlowOutboxEvent::kKeptFull);
  }

  if (queue_.size() >= limits_.max_queued) {
    countEvent(FlowOutboxEvent::kQueueFull);
    return;
  }
  queue_.push_back(record);
  countEvent(FlowOutboxEvent::kQueued);
}

void FlowRecordOutbox::takeQueued(std::vector<FlowRecord>& out, size_t max) {
  const size_t taken = std::min(max, queue_.size());
  out.insert(out.end(), queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(taken));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(taken));
}

size_t FlowRecordOutbox::resend(size_t cursor, uint32_t now_ms, std::vector<FlowRecord>& out,
                                size_t max) const {
  const absl::Span<const KeptFlowRecords::Kept> slots = kept_.slots();
  size_t added = 0;
  for (; cursor < slots.size() && added < max; ++cursor) {
    const KeptFlowRecords::Kept& kept = slots[cursor];
    if (kept.record.state == FlowRecordState::kWithdrawn || !kept.liveAt(now_ms)) continue;
    FlowRecord record = kept.record;
    record.lifetime_ms = kept.expires_ms - now_ms;
    out.push_back(record);
    ++added;
  }
  return cursor < slots.size() ? cursor : kResendDone;
}

void FlowRecordOutbox::expire(uint32_t now_ms, size_t budget) {
  countEvent(FlowOutboxEvent::kExpired, kept_.expire(now_ms, budget));
}

}  // namespace berth
