#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/strings/string_view.h"
#include "berth/dataplane/peer_flows.h"
#include "berth/fleet/flow_records.h"
#include "berth/sync/peer_flow_store.h"
#include "berth/util/named_enum.h"

namespace berth {

// This instance's own news for its peers (docs/scale-out.md, "Flows that survive an instance"):
// the workers' FlowExports, named for the wire, queued once for every peer, and kept while their
// flows live, so that a peer that restarted can be sent the whole current set again. Pure, on the
// workers' millisecond clock; the management thread sends what it takes from here.

#define BERTH_FLOW_OUTBOX_EVENTS(X)                                                   \
  X(kQueued, "queued")        /* news queued for the peers */                         \
  X(kUnnamed, "unnamed")      /* news of a service or backend no longer configured */ \
  X(kQueueFull, "queue_full") /* news dropped: the peers are not being sent to */     \
  X(kKeptFull, "kept_full")   /* a flow not kept for resends: max_records reached */  \
  X(kExpired, "expired")      /* a kept flow with no news for its lifetime */

enum class FlowOutboxEvent : uint8_t { BERTH_FLOW_OUTBOX_EVENTS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kFlowOutboxEventCount = static_cast<size_t>(FlowOutboxEvent::kCount);
absl::string_view toString(FlowOutboxEvent event);

struct FlowOutboxLimits {
  size_t max_records = 1 << 20;  // kept for resends
  size_t max_queued = 1 << 16;   // waiting to be sent
};

class FlowRecordOutbox {
 public:
  explicit FlowRecordOutbox(const FlowOutboxLimits& limits) : limits_(limits) {}

  void setLimits(const FlowOutboxLimits& limits) { limits_ = limits; }

  // One worker's news at `now_ms`, named by `names`: queued for every peer, and kept (or
  // forgotten, for a withdrawal).
  void add(const FlowExport& news, const FlowRecordNames& names, uint32_t now_ms);

  // Takes up to `max` queued records, oldest first, into `out` (appended).
  void takeQueued(std::vector<FlowRecord>& out, size_t max);
  size_t queued() const { return queue_.size(); }

  // For a peer that restarted: up to `max` kept records from slot `cursor` on, each with the
  // lifetime it has left at `now_ms`, into `out` (appended). Returns the cursor to go on from,
  // or kResendDone once every slot was visited. Records kept or moved meanwhile may be missed or
  // sent twice; news about them is queued for every peer anyway.
  size_t resend(size_t cursor, uint32_t now_ms, std::vector<FlowRecord>& out, size_t max) const;
  static constexpr size_t kResendDone = SIZE_MAX;

  // Forgets up to `budget` slots' worth of kept records past their lifetime.
  void expire(uint32_t now_ms, size_t budget);

  size_t kept() const { return kept_.size(); }
  uint64_t count(FlowOutboxEvent event) const { return events_[static_cast<size_t>(event)]; }

 private:
  void countEvent(FlowOutboxEvent event, uint64_t n = 1) {
    events_[static_cast<size_t>(event)] += n;
  }

  FlowOutboxLimits limits_;
  KeptFlowRecords kept_;
  std::deque<FlowRecord> queue_;
  std::array<uint64_t, kFlowOutboxEventCount> events_{};
};

}  // namespace berth
