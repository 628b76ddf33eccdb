#include "berth/sync/flow_sync.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rte_cycles.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/util/status_macros.h"

namespace berth {
namespace {

// Per management turn (10 ms): what the loop does at most, so that a burst of news or of
// datagrams spreads over turns instead of stretching one.
constexpr size_t kMaxExportsPerRingPerTurn = 4096;
constexpr size_t kMaxDatagramsSentPerTurn = 256;
constexpr size_t kMaxResendDatagramsPerPeerPerTurn = 32;
constexpr size_t kMaxDatagramsReceivedPerTurn = 512;
// Jobs waiting for the store's thread: past this, received records are dropped and counted.
constexpr size_t kMaxStoreJobs = 64;

bool sameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, 16) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlowSync>> FlowSync::create(const SyncConfig& config,
                                                           rte_rcu_qsbr* rcu,
                                                           const ConnectionHashKey& hash_key) {
  std::unique_ptr<FlowSync> sync(new FlowSync());
  BERTH_ASSIGN_OR_RETURN(sync->keys_, readSyncKeys(config));
  const std::string listen =
      absl::StrCat("sync.listen (line ", config.line.number, ") ", config.listen.toString());
  sync->socket_ = socket(config.listen.address.isV4() ? AF_INET : AF_INET6,
                         SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sync->socket_ < 0) {
    return absl::UnavailableError(absl::StrCat(listen, ": no socket: ", std::strerror(errno)));
  }
  // On a one-NIC appliance the listen address is the port's, which its kernel interface gets
  // only once the exception path starts, after the workers: bind to it before it is there.
  const int one = 1;
  const bool v4 = config.listen.address.isV4();
  if (setsockopt(sync->socket_, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_FREEBIND : IPV6_FREEBIND,
                 &one, sizeof(one)) != 0) {
    return absl::UnavailableError(
        absl::StrCat(listen, ": cannot bind ahead of its address: ", std::strerror(errno)));
  }
  const SocketAddress address = socketAddressOf(config.listen);
  if (bind(sync->socket_, address.get(), address.length) != 0) {
    return absl::UnavailableError(absl::StrCat(listen, ": cannot bind: ", std::strerror(errno)));
  }
  sync->listen_ = config.listen;
  for (const Endpoint& endpoint : config.peers) {
    Peer peer;
    peer.endpoint = endpoint;
    peer.address = socketAddressOf(endpoint);
    sync->peers_.push_back(peer);
  }
  sync->sender_ = flowRecordName(config.listen.toString());
  sync->epoch_ = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  sync->tsc_per_ms_ = std::max<uint64_t>(1, rte_get_tsc_hz() / 1000);
  sync->outbox_.setLimits({.max_records = config.max_records, .max_queued = 1 << 16});
  BERTH_ASSIGN_OR_RETURN(sync->publisher_, RcuPublisher<PeerFlows>::createSharing(rcu));
  sync->store_side_ = std::make_shared<StoreSide>(PeerFlowStoreLimits{
      .max_records = config.max_records, .max_changes_per_second = config.max_changes_per_second});
  sync->store_side_->hash_key = hash_key;
  sync->store_side_->names = sync->names_;
  sync->store_thread_ = std::make_unique<BackgroundThread>(kMaxStoreJobs);
  return sync;
}

FlowSync::~FlowSync() {
  store_thread_.reset();
  if (socket_ >= 0) close(socket_);
}

uint32_t FlowSync::workerClockMs() const {
  // The workers' clock (Worker::run): the same TSC in milliseconds, so expiries agree.
  return static_cast<uint32_t>(rte_rdtsc() / tsc_per_ms_);
}

void FlowSync::setNames(FlowRecordNames names) {
  names_ = std::make_shared<const FlowRecordNames>(std::move(names));
}

void FlowSync::setPeers(const std::vector<Endpoint>& endpoints) {
  std::vector<Peer> peers;
  for (const Endpoint& endpoint : endpoints) {
    // Another IP version than the socket's cannot be sent to; itself is no peer.
    if (endpoint.address.family != listen_.address.family || endpoint == listen_) continue;
    if (absl::c_any_of(peers, [&](const Peer& p) { return p.endpoint == endpoint; })) continue;
    const auto known =
        absl::c_find_if(peers_, [&](const Peer& p) { return p.endpoint == endpoint; });
    if (known != peers_.end()) {
      peers.push_back(*known);
      continue;
    }
    Peer peer;
    peer.endpoint = endpoint;
    peer.address = socketAddressOf(endpoint);
    peer.resend_cursor = 0;
    peers.push_back(peer);
  }
  peers_ = std::move(peers);
}

void FlowSync::turn(absl::Time now) {
  const uint32_t now_ms = workerClockMs();
  drainExports(now_ms);
  sendQueued();
  sendResends(now_ms);
  sendHeartbeats(now);
  receive();
  postReceived();
  outbox_.expire(now_ms, 1024);
  if (now - last_tick_ >= kBuildInterval) {
    last_tick_ = now;
    postTick(now_ms);
  }
  publishBuilt();
  publisher_->reclaim();
}

void FlowSync::drainExports(uint32_t now_ms) {
  FlowExport news[256];
  for (rte_ring* ring : export_rings_) {
    for (size_t taken = 0; taken < kMaxExportsPerRingPerTurn;) {
      const unsigned count =
          rte_ring_sc_dequeue_burst_elem(ring, news, sizeof(FlowExport), 256, nullptr);
      if (count == 0) break;
      for (unsigned i = 0; i < count; ++i) outbox_.add(news[i], *names_, now_ms);
      taken += count;
    }
  }
}

void FlowSync::send(absl::Span<Peer> peers, absl::Span<const FlowRecord> records) {
  // One sequence number for every peer: each keeps its own window of this sender's.
  FlowDatagramHeader header;
  header.sender = sender_;
  header.epoch = epoch_;
  header.sequence = ++sequence_;
  absl::StatusOr<std::vector<uint8_t>> datagram = encodeFlowDatagram(header, records, keys_[0]);
  if (!datagram.ok()) {
    report_.send_errors += peers.size();
    return;
  }
  for (const Peer& peer : peers) {
    const ssize_t sent = sendto(socket_, datagram->data(), datagram->size(), MSG_DONTWAIT,
                                peer.address.get(), peer.address.length);
    if (sent != static_cast<ssize_t>(datagram->size())) {
      ++report_.send_errors;
      continue;
    }
    ++report_.datagrams_sent;
    report_.records_sent += records.size();
  }
}

void FlowSync::sendQueued() {
  std::vector<FlowRecord> batch;
  for (size_t datagrams = 0; datagrams < kMaxDatagramsSentPerTurn && outbox_.queued() > 0;
       ++datagrams) {
    batch.clear();
    outbox_.takeQueued(batch, kMaxRecordsPerDatagram);
    send(absl::MakeSpan(peers_), batch);
  }
}

void FlowSync::sendResends(uint32_t now_ms) {
  std::vector<FlowRecord> batch;
  for (Peer& peer : peers_) {
    for (size_t datagrams = 0; datagrams < kMaxResendDatagramsPerPeerPerTurn &&
                               peer.resend_cursor != FlowRecordOutbox::kResendDone;
         ++datagrams) {
      batch.clear();
      peer.resend_cursor =
          outbox_.resend(peer.resend_cursor, now_ms, batch, kMaxRecordsPerDatagram);
      if (batch.empty()) continue;
      send({&peer, 1}, batch);
      report_.records_resent += batch.size();
    }
  }
}

void FlowSync::sendHeartbeats(absl::Time now) {
  if (now - last_heartbeat_ < kHeartbeatInterval) return;
  last_heartbeat_ = now;
  send(absl::MakeSpan(peers_), {});
}

void FlowSync::receive() {
  uint8_t buffer[kMaxFlowDatagramBytes + 1];
  for (size_t i = 0; i < kMaxDatagramsReceivedPerTurn; ++i) {
    sockaddr_storage from;
    socklen_t from_length = sizeof(from);
    const ssize_t length = recvfrom(socket_, buffer, sizeof(buffer), MSG_DONTWAIT,
                                    reinterpret_cast<sockaddr*>(&from), &from_length);
    if (length < 0) break;  // EAGAIN: nothing more this turn; anything else, the same
    ++report_.datagrams_received;
    DecodedFlowDatagram decoded =
        decodeFlowDatagram(absl::MakeConstSpan(buffer, static_cast<size_t>(length)), keys_);
    if (!decoded.datagram) {
      ++report_.refused[static_cast<size_t>(decoded.refusal)];
      continue;
    }
    FlowDatagram& datagram = *decoded.datagram;
    if (datagram.header.sender == sender_) {
      ++report_.refused[static_cast<size_t>(FlowDatagramRefusal::kFromSelf)];
      continue;
    }
    const ReplayWindows::Result judged = replay_.accept(datagram.header);
    if (judged.verdict == ReplayWindows::Verdict::kRefused) {
      ++report_.refused[static_cast<size_t>(judged.refusal)];
      continue;
    }
    if (judged.verdict == ReplayWindows::Verdict::kAcceptedNewEpoch) {
      // A peer new to this instance, or restarted: it knows none of the flows carried here.
      for (Peer& peer : peers_) {
        if (sameAddress(peer.address.storage, from)) peer.resend_cursor = 0;
      }
    }
    report_.records_received += datagram.records.size();
    if (!datagram.records.empty()) {
      received_.push_back({datagram.header.sender, std::move(datagram.records)});
    }
  }
}

void FlowSync::postReceived() {
  if (received_.empty()) return;
  size_t records = 0;
  for (const Received& batch : received_) records += batch.records.size();
  std::shared_ptr<StoreSide> side = store_side_;
  const uint32_t now_ms = workerClockMs();
  auto job = [side, names = names_, batches = std::move(received_), now_ms] {
    side->names = names;
    for (const Received& batch : batches) {
      side->store.apply(batch.sender, batch.records, *names, now_ms);
    }
  };
  received_.clear();
  if (!store_thread_->post(std::move(job))) report_.records_dropped_busy += records;
}

void FlowSync::storeTick(StoreSide& side, uint32_t now_ms) {
  PeerFlowStore& store = side.store;
  // A tenth of the kept records a tick (ten a second): each is looked at about once a second.
  store.expire(now_ms, std::max<size_t>(1024, store.size() / 10));
  std::unique_ptr<const PeerFlows> map;
  bool rebuild = store.takeChanged() || side.rebuild_owed;
  if (rebuild) {
    const std::vector<PeerFlow> flows = store.flows(*side.names, now_ms);
    if (!flows.empty()) map = PeerFlows::build(flows, side.hash_key);
    // No memory for the new map: the workers keep the last one, and the next tick tries again.
    side.rebuild_owed = !flows.empty() && map == nullptr;
    rebuild = !side.rebuild_owed;
  }
  std::lock_guard<std::mutex> lock(side.mutex);
  if (rebuild) {
    side.built = true;
    side.map = std::move(map);
  }
  side.build_failures += side.rebuild_owed ? 1 : 0;
  for (size_t e = 0; e < kPeerFlowEventCount; ++e) {
    side.events[e] = store.count(static_cast<PeerFlowEvent>(e));
  }
  side.size = store.size();
}

void FlowSync::postTick(uint32_t now_ms) {
  std::shared_ptr<StoreSide> side = store_side_;
  // Refused when the thread is behind: the next tick comes in kBuildInterval.
  store_thread_->post([side, names = names_, now_ms] {
    side->names = names;
    storeTick(*side, now_ms);
  });
}

void FlowSync::publishBuilt() {
  std::unique_lock<std::mutex> lock(store_side_->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (size_t e = 0; e < kPeerFlowEventCount; ++e) {
    report_.peer_events[e] = store_side_->events[e];
  }
  report_.peer_flows = store_side_->size;
  report_.build_failures = store_side_->build_failures;
  if (!store_side_->built) return;
  store_side_->built = false;
  std::unique_ptr<const PeerFlows> map = std::move(store_side_->map);
  lock.unlock();
  publisher_->publish(std::move(map));
  ++report_.maps_published;
}

FlowSync::Report FlowSync::report() const {
  Report report = report_;
  for (size_t e = 0; e < kFlowOutboxEventCount; ++e) {
    report.outbox_events[e] = outbox_.count(static_cast<FlowOutboxEvent>(e));
  }
  report.own_flows = outbox_.kept();
  return report;
}

std::vector<std::pair<std::string, uint64_t>> FlowSync::counters() const {
  const Report r = report();
  auto peer = [&r](PeerFlowEvent event) { return r.peer_events[static_cast<size_t>(event)]; };
  auto own = [&r](FlowOutboxEvent event) { return r.outbox_events[static_cast<size_t>(event)]; };
  std::vector<std::pair<std::string, uint64_t>> counters = {
      {"sync_records_sent", r.records_sent},
      {"sync_datagrams_sent", r.datagrams_sent},
      {"sync_records_resent", r.records_resent},
      {"sync_send_errors", r.send_errors},
      {"sync_datagrams_received", r.datagrams_received},
      {"sync_records_received", r.records_received},
  };
  for (size_t i = 0; i < kFlowDatagramRefusalCount; ++i) {
    counters.emplace_back(
        absl::StrCat("sync_refused_", toString(static_cast<FlowDatagramRefusal>(i))), r.refused[i]);
  }
  counters.insert(counters.end(),
                  {
                      {"sync_records_applied", peer(PeerFlowEvent::kApplied)},
                      {"sync_records_refreshed", peer(PeerFlowEvent::kRefreshed)},
                      {"sync_records_withdrawn", peer(PeerFlowEvent::kWithdrawn)},
                      {"sync_records_expired", peer(PeerFlowEvent::kExpired)},
                      {"sync_dropped_unknown_name", peer(PeerFlowEvent::kUnknownName)},
                      {"sync_dropped_full", peer(PeerFlowEvent::kFull)},
                      {"sync_dropped_rate_limited", peer(PeerFlowEvent::kRateLimited)},
                      {"sync_dropped_busy", r.records_dropped_busy},
                      {"sync_news_queued", own(FlowOutboxEvent::kQueued)},
                      {"sync_news_dropped_unnamed", own(FlowOutboxEvent::kUnnamed)},
                      {"sync_news_dropped_queue_full", own(FlowOutboxEvent::kQueueFull)},
                      {"sync_own_flows_not_kept", own(FlowOutboxEvent::kKeptFull)},
                      {"sync_own_flows_expired", own(FlowOutboxEvent::kExpired)},
                      {"sync_maps_published", r.maps_published},
                      {"sync_map_build_failures", r.build_failures},
                      {"sync_peer_flows", r.peer_flows},
                      {"sync_own_flows", r.own_flows},
                  });
  return counters;
}

}  // namespace berth
