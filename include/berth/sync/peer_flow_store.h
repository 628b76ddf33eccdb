#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/dataplane/peer_flows.h"
#include "berth/dataplane/snapshot.h"
#include "berth/dataplane/token_bucket.h"
#include "berth/fleet/flow_records.h"
#include "berth/util/named_enum.h"

namespace berth {

// The management thread's side of flow sync (docs/scale-out.md, "Flows that survive an
// instance"): the records peers sent, kept until they are withdrawn or age out, and turned into
// the map the workers read (dataplane/peer_flows.h). Pure: the clock is the workers' millisecond
// clock, passed in, so that an expiry here and the workers' liveness test agree.

// The wire's names of this instance's services and backends (flowRecordName() of "web" and of
// "web/web-1", as CounterIds names them), both ways, and each service's address family. Made
// again when the config changes; ids are stable across reloads, so records kept by name resolve
// again after one.
class FlowRecordNames {
 public:
  // The services of `config` and their backends, under the ids `ids` gave them.
  static FlowRecordNames of(const CounterIds& ids, const Config& config);

  std::optional<uint16_t> service(uint64_t name) const;
  std::optional<uint16_t> backend(uint64_t name) const;
  // The name of a local id, and a service's family (4 or 6); 0 for an id not in the config.
  uint64_t serviceName(uint16_t id) const { return at(service_names_, id); }
  uint64_t backendName(uint16_t id) const { return at(backend_names_, id); }
  uint8_t serviceFamily(uint16_t id) const {
    return id < service_families_.size() ? service_families_[id] : 0;
  }

 private:
  static uint64_t at(const std::vector<uint64_t>& names, uint16_t id) {
    return id < names.size() ? names[id] : 0;
  }

  absl::flat_hash_map<uint64_t, uint16_t> services_;
  absl::flat_hash_map<uint64_t, uint16_t> backends_;
  std::vector<uint64_t> service_names_;  // by local id
  std::vector<uint64_t> backend_names_;
  std::vector<uint8_t> service_families_;
};

// The wire's state of a connection's, and back; kWithdrawn for states never sent (unconfirmed).
FlowRecordState flowRecordStateOf(ConnectionState state);
ConnectionState connectionStateOf(FlowRecordState state);

// A flow as the wire identifies it: the records of one flow replace each other.
struct FlowIdentity {
  uint64_t service = 0;
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;
  uint8_t family = 4;

  static FlowIdentity of(const FlowRecord& record) {
    return {record.service, record.source, record.source_port, record.family};
  }
  friend bool operator==(const FlowIdentity&, const FlowIdentity&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const FlowIdentity& identity) {
    return H::combine(std::move(state), identity.service, identity.source, identity.source_port,
                      identity.family);
  }
};

// What became of received records, and of those kept; each a counter.
#define BERTH_PEER_FLOW_EVENTS(X)                                                               \
  X(kApplied, "applied")          /* a new flow, or one on another backend or in a new state */ \
  X(kRefreshed, "refreshed")      /* the same again: its lifetime starts over */                \
  X(kWithdrawn, "withdrawn")      /* its sender forgot it */                                    \
  X(kExpired, "expired")          /* no record of it for its lifetime */                        \
  X(kUnknownName, "unknown_name") /* a service or backend this instance does not have */        \
  X(kFull, "full")                /* a new flow with the store at max_records */                \
  X(kRateLimited, "rate_limited") /* a change past max_changes_per_second */

enum class PeerFlowEvent : uint8_t { BERTH_PEER_FLOW_EVENTS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kPeerFlowEventCount = static_cast<size_t>(PeerFlowEvent::kCount);
absl::string_view toString(PeerFlowEvent event);

// Flow records kept by flow until forgotten or past their expiry: slots reused through a free
// list, an index by FlowIdentity, and an expiry sweep that goes on where it stopped, so that each
// call does bounded work however many are kept.
class KeptFlowRecords {
 public:
  struct Kept {
    FlowRecord record;  // state kWithdrawn: a free slot
    uint64_t sender = 0;
    uint32_t expires_ms = 0;

    bool liveAt(uint32_t now_ms) const { return static_cast<int32_t>(expires_ms - now_ms) > 0; }
  };

  Kept* find(const FlowIdentity& identity);
  // Keeps `record`, whose flow is not kept yet.
  Kept& add(const FlowRecord& record, uint64_t sender, uint32_t expires_ms);
  void forget(Kept& kept);
  // Forgets up to `budget` slots' worth of records past their expiry, from where the last call
  // stopped. Returns how many it forgot.
  size_t expire(uint32_t now_ms, size_t budget);

  size_t size() const { return index_.size(); }
  // Every slot, free ones included (record.state kWithdrawn), in a stable order.
  absl::Span<const Kept> slots() const { return slots_; }

 private:
  std::vector<Kept> slots_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<FlowIdentity, uint32_t> index_;
  size_t sweep_cursor_ = 0;
};

struct PeerFlowStoreLimits {
  size_t max_records = 1 << 20;
  // Changes a second (applied and withdrawn records), in bursts of one second's worth; a refresh
  // is no change. 0: no limit.
  uint32_t max_changes_per_second = 100'000;
};

class PeerFlowStore {
 public:
  explicit PeerFlowStore(const PeerFlowStoreLimits& limits) : limits_(limits) {}

  // The limits for records from now on; those kept stay, even past a lower max_records.
  void setLimits(const PeerFlowStoreLimits& limits) { limits_ = limits; }

  // Takes `records` from `sender`, in order, at `now_ms`. A record replaces the one of its flow,
  // whoever sent that; a withdrawal forgets it. A sender's records outlive the sender: they are
  // kept for the flows it carried, which come here when it dies, so they only age out.
  void apply(uint64_t sender, absl::Span<const FlowRecord> records, const FlowRecordNames& names,
             uint32_t now_ms);

  // Forgets up to `budget` slots' worth of records past their lifetime (KeptFlowRecords), so that
  // each management turn does a bounded part of the sweep. Workers never use an expired record
  // meanwhile: PeerFlow carries the expiry.
  void expire(uint32_t now_ms, size_t budget);

  // Whether the records changed since the last takeChanged(), which clears it.
  bool takeChanged() {
    const bool changed = changed_;
    changed_ = false;
    return changed;
  }
  // The live records as workers read them, in this instance's ids under `names`; a record whose
  // names no longer resolve (a reload removed them) is left out.
  std::vector<PeerFlow> flows(const FlowRecordNames& names, uint32_t now_ms) const;

  size_t size() const { return kept_.size(); }
  uint64_t count(PeerFlowEvent event) const { return events_[static_cast<size_t>(event)]; }

 private:
  bool takeChange(uint32_t now_ms);
  void countEvent(PeerFlowEvent event, uint64_t n = 1) { events_[static_cast<size_t>(event)] += n; }

  PeerFlowStoreLimits limits_;
  KeptFlowRecords kept_;
  TokenBucket changes_;
  bool changed_ = false;
  std::array<uint64_t, kPeerFlowEventCount> events_{};
};

}  // namespace berth
