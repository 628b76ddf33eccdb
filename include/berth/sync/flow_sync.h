#pragma once

#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "berth/config/config.h"
#include "berth/dataplane/conntrack.h"
#include "berth/fleet/flow_records.h"
#include "berth/net/socket_address.h"
#include "berth/runtime/publisher.h"
#include "berth/sync/flow_record_outbox.h"
#include "berth/sync/peer_flow_store.h"
#include "berth/util/background_thread.h"

namespace berth {

// Flow sync as berthd runs it (docs/scale-out.md, "Flows that survive an instance"). On the
// management loop, every turn and never waiting: the workers' news is drained from their rings,
// named, batched into signed datagrams and sent to every peer over a non-blocking UDP socket;
// datagrams from the peers are checked (HMAC, key, replay window) and their records handed to a
// thread of their own, which keeps them (PeerFlowStore), ages them out and builds the map the
// workers read; the loop publishes each map by RCU. A peer heard from in a new epoch (its first
// datagram, or its first since it restarted) is sent every flow this instance still carries,
// paced.
class FlowSync {
 public:
  // What `berthctl stats` and the metrics show.
  struct Report {
    uint64_t records_sent = 0;
    uint64_t datagrams_sent = 0;
    uint64_t send_errors = 0;  // datagrams the socket refused (its buffer full, no route)
    uint64_t records_resent = 0;
    uint64_t datagrams_received = 0;
    uint64_t records_received = 0;
    std::array<uint64_t, kFlowDatagramRefusalCount> refused{};
    uint64_t records_dropped_busy = 0;  // the store's thread was behind
    std::array<uint64_t, kPeerFlowEventCount> peer_events{};
    std::array<uint64_t, kFlowOutboxEventCount> outbox_events{};
    uint64_t peer_flows = 0;      // kept from the peers
    uint64_t build_failures = 0;  // maps not built for want of memory (the last one stays)
    uint64_t own_flows = 0;       // kept for resends
    uint64_t maps_published = 0;
  };

  // Binds `config.listen` and reads the keys; errors name the field and line. The workers read
  // the map from peerFlows(), hashed under `hash_key`, theirs; `rcu` is the snapshots' variable,
  // whose quiescent states end the map's grace periods too.
  static absl::StatusOr<std::unique_ptr<FlowSync>> create(const SyncConfig& config,
                                                          rte_rcu_qsbr* rcu,
                                                          const ConnectionHashKey& hash_key);
  ~FlowSync();

  const std::atomic<const PeerFlows*>& peerFlows() const { return publisher_->current(); }

  // The workers' rings of news (Worker::flowExports()), once they exist.
  void setExportRings(std::vector<rte_ring*> rings) { export_rings_ = std::move(rings); }
  // The names of this instance's services and backends, after each config change.
  void setNames(FlowRecordNames names);
  // The peers from now on (the config's and the fleet's). One not a peer before is sent every
  // flow this instance carries, as a restarted one is: its heartbeat may have come before.
  void setPeers(const std::vector<Endpoint>& peers);
  size_t peerCount() const { return peers_.size(); }

  // One management turn at `now`.
  void turn(absl::Time now);

  Report report() const;
  // The workers' millisecond clock now (Worker::run's), on which the peers' flows expire.
  uint32_t workerClockMs() const;
  // The report as named counters for `berthctl stats` and the metrics, each "sync_..."; two are
  // gauges, sync_peer_flows and sync_own_flows.
  std::vector<std::pair<std::string, uint64_t>> counters() const;

  // How often a peer is told this instance is alive, so that one that restarted hears of it
  // and asks for nothing: its new epoch is news to this instance, which then resends.
  static constexpr absl::Duration kHeartbeatInterval = absl::Seconds(1);
  // How often the peers' records are swept and, if they changed, a new map is built.
  static constexpr absl::Duration kBuildInterval = absl::Milliseconds(100);

 private:
  struct Peer {
    Endpoint endpoint;
    SocketAddress address;
    size_t resend_cursor = FlowRecordOutbox::kResendDone;
  };
  // A peer's records, checked, for the store's thread.
  struct Received {
    uint64_t sender = 0;
    std::vector<FlowRecord> records;
  };
  // What the store's thread shares with the loop. Every job carries the latest names.
  struct StoreSide {
    PeerFlowStore store;
    std::shared_ptr<const FlowRecordNames> names;
    ConnectionHashKey hash_key;
    bool rebuild_owed = false;  // a build found no memory: the next tick tries again
    std::mutex mutex;           // guards what follows, held briefly: the loop only try-locks it
    bool built = false;
    std::unique_ptr<const PeerFlows> map;
    std::array<uint64_t, kPeerFlowEventCount> events{};
    uint64_t size = 0;
    uint64_t build_failures = 0;

    explicit StoreSide(const PeerFlowStoreLimits& limits) : store(limits) {}
  };

  FlowSync() = default;
  void drainExports(uint32_t now_ms);
  // Signs `records` once and sends them to `peers`.
  void send(absl::Span<Peer> peers, absl::Span<const FlowRecord> records);
  void sendQueued();
  void sendResends(uint32_t now_ms);
  void sendHeartbeats(absl::Time now);
  void receive();
  void postReceived();
  void postTick(uint32_t now_ms);
  void publishBuilt();
  static void storeTick(StoreSide& side, uint32_t now_ms);

  int socket_ = -1;
  Endpoint listen_;
  std::vector<Peer> peers_;
  std::vector<FlowSyncKey> keys_;
  uint64_t sender_ = 0;
  uint64_t epoch_ = 0;
  uint64_t sequence_ = 0;
  uint64_t tsc_per_ms_ = 1;
  std::vector<rte_ring*> export_rings_;
  FlowRecordOutbox outbox_{FlowOutboxLimits{}};
  std::shared_ptr<const FlowRecordNames> names_ = std::make_shared<FlowRecordNames>();
  ReplayWindows replay_{256};
  std::vector<Received> received_;
  std::unique_ptr<RcuPublisher<PeerFlows>> publisher_;
  std::shared_ptr<StoreSide> store_side_;
  // Last: its destructor waits for the job running, which may use store_side_.
  std::unique_ptr<BackgroundThread> store_thread_;
  absl::Time last_heartbeat_ = absl::InfinitePast();
  absl::Time last_tick_ = absl::InfinitePast();
  Report report_;
};

}  // namespace berth
