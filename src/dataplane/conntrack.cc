#include "berth/dataplane/conntrack.h"

#include <algorithm>
#include <bit>

#include "berth/net/packet_parser.h"

namespace berth {

ConnectionState initialState(uint8_t protocol, uint8_t tcp_flags) {
  if (protocol != kProtocolTcp) return ConnectionState::kUdpUnconfirmed;
  // A SYN opens. Anything else is a connection already under way that this core has not seen
  // (a restart, or an ECMP or RSS change), or a spoofed packet: unconfirmed until the next.
  if ((tcp_flags & (kTcpSyn | kTcpAck | kTcpFin | kTcpRst)) == kTcpSyn) {
    return ConnectionState::kTcpOpening;
  }
  return ConnectionState::kTcpUnconfirmed;
}

std::array<uint32_t, kConnectionStateCount> timeoutsByState(const ConntrackTimeouts& timeouts) {
  std::array<uint32_t, kConnectionStateCount> by_state{};
  by_state[static_cast<size_t>(ConnectionState::kEmpty)] = 0;
  by_state[static_cast<size_t>(ConnectionState::kTcpOpening)] = timeouts.tcp_opening_ms;
  by_state[static_cast<size_t>(ConnectionState::kTcpEstablished)] = timeouts.tcp_established_ms;
  by_state[static_cast<size_t>(ConnectionState::kTcpClosing)] = timeouts.tcp_closing_ms;
  by_state[static_cast<size_t>(ConnectionState::kUdp)] = timeouts.udp_ms;
  by_state[static_cast<size_t>(ConnectionState::kTcpUnconfirmed)] = timeouts.tcp_opening_ms;
  by_state[static_cast<size_t>(ConnectionState::kUdpUnconfirmed)] =
      std::min(timeouts.udp_ms, timeouts.tcp_opening_ms);
  return by_state;
}

size_t ConnectionTable::bucketsFor(uint32_t entries) {
  const size_t buckets = (size_t{entries} + kConnectionsPerBucket - 1) / kConnectionsPerBucket;
  return std::bit_ceil(std::max<size_t>(buckets, 1));
}

ConnectionTable::ConnectionTable(ConnectionBucket* buckets, size_t bucket_count,
                                 const ConntrackTimeouts& timeouts, uint32_t max_inserts_per_second,
                                 ConntrackCounters* counters, const ConnectionHashKey& hash_key)
    : buckets_(buckets), mask_(bucket_count - 1), counters_(counters), hash_key_(hash_key) {
  timeout_by_state_ = timeoutsByState(timeouts);
  insert_rate_ = max_inserts_per_second;
  const uint32_t shortest = std::min(timeouts.tcp_established_ms, timeouts.udp_ms) / 3;
  refresh_shift_ = 0;
  while (refresh_shift_ < 13 && (uint32_t{2} << refresh_shift_) <= shortest) ++refresh_shift_;
}

Connection* ConnectionTable::find(const ConnectionKey& key, uint32_t hash, uint32_t now_ms) {
  ConnectionBucket& bucket = buckets_[hash & mask_];
  for (Connection& way : bucket.ways) {
    if (way.state == ConnectionState::kEmpty || !way.matches(key)) continue;
    if (expired(way, now_ms)) {
      release(way);
      count(ConntrackEvent::kExpiry);
      break;  // a key is in a bucket at most once
    }
    count(ConntrackEvent::kHit);
    return &way;
  }
  count(ConntrackEvent::kMiss);
  return nullptr;
}

bool ConnectionTable::allowInsert(uint32_t now_ms) {
  return insert_rate_ == 0 || insert_tokens_.take(now_ms, insert_rate_, insert_rate_);
}

Connection* ConnectionTable::insert(const ConnectionKey& key, uint32_t hash, uint16_t backend,
                                    ConnectionState state, uint32_t now_ms) {
  if (!allowInsert(now_ms)) {
    count(ConntrackEvent::kInsertSkipped);
    return nullptr;
  }
  if (occupied_ == capacity()) count(ConntrackEvent::kTableFull);
  ConnectionBucket& bucket = buckets_[hash & mask_];
  Connection* chosen = nullptr;
  // The least recently seen connection of each class: [0] established and the like, [1]
  // unconfirmed or opening, which a full bucket gives up first.
  Connection* oldest[2] = {nullptr, nullptr};
  uint32_t oldest_age[2] = {0, 0};
  for (Connection& way : bucket.ways) {
    if (way.state == ConnectionState::kEmpty) {
      chosen = &way;
      ++occupied_;
      break;
    }
    if (expired(way, now_ms)) {
      chosen = &way;
      gauge(way, -1);  // the way is reused, so it stays occupied
      count(ConntrackEvent::kExpiry);
      break;
    }
    const size_t weak = unconfirmedOrOpening(way.state) ? 1 : 0;
    const uint32_t age = now_ms - way.last_seen_ms;
    if (oldest[weak] == nullptr || age > oldest_age[weak]) {
      oldest[weak] = &way;
      oldest_age[weak] = age;
    }
  }
  if (chosen == nullptr) {
    chosen = oldest[1] != nullptr ? oldest[1] : oldest[0];
    gauge(*chosen, -1);
    count(ConntrackEvent::kEviction);
    if (oldest[1] != nullptr) count(ConntrackEvent::kUnconfirmedEviction);
  }
  chosen->source = key.source;
  chosen->source_port = key.source_port;
  chosen->service = key.service;
  chosen->backend = backend;
  chosen->backend_index = 0;
  chosen->generation = 0;
  chosen->last_seen_ms = now_ms;
  chosen->state = state;
  chosen->sync = 0;
  gauge(*chosen, +1);
  count(ConntrackEvent::kInsert);
  if (state == ConnectionState::kTcpUnconfirmed || state == ConnectionState::kUdpUnconfirmed) {
    count(ConntrackEvent::kUnconfirmedInsert);
  }
  return chosen;
}

void ConnectionTable::gauge(const Connection& connection, int delta) {
  gaugeConnection(traffic_, connection.service, connection.backend, delta);
}

void ConnectionTable::release(Connection& connection) {
  gauge(connection, -1);
  connection.state = ConnectionState::kEmpty;
  --occupied_;
}

void ConnectionTable::reassign(Connection& connection, uint16_t backend) {
  if (connection.backend == backend) return;
  if (traffic_.backends != nullptr) {
    traffic_.backends[connection.backend].connections.subtract(1);
    traffic_.backends[backend].connections.add(1);
  }
  connection.backend = backend;
}

void ConnectionTable::sweep(uint32_t now_ms) {
  ConnectionBucket& bucket = buckets_[sweep_cursor_];
  for (Connection& way : bucket.ways) {
    if (way.state == ConnectionState::kEmpty || !expired(way, now_ms)) continue;
    release(way);
    count(ConntrackEvent::kExpiry);
  }
  sweep_cursor_ = (sweep_cursor_ + 1) & mask_;
  const char* next = reinterpret_cast<const char*>(&buckets_[sweep_cursor_]);
  __builtin_prefetch(next);
  __builtin_prefetch(next + 64);
}

void ConnectionTable::touch(Connection& connection, uint8_t tcp_flags, uint32_t now_ms) {
  connection.last_seen_ms = now_ms;
  switch (connection.state) {
    case ConnectionState::kTcpUnconfirmed:
      connection.state = tcp_flags & (kTcpFin | kTcpRst) ? ConnectionState::kTcpClosing
                                                         : ConnectionState::kTcpEstablished;
      count(ConntrackEvent::kConfirmation);
      break;
    case ConnectionState::kUdpUnconfirmed:
      connection.state = ConnectionState::kUdp;
      count(ConntrackEvent::kConfirmation);
      break;
    case ConnectionState::kTcpOpening:
      if (tcp_flags & (kTcpFin | kTcpRst)) {
        connection.state = ConnectionState::kTcpClosing;
      } else if (tcp_flags & kTcpAck) {
        connection.state = ConnectionState::kTcpEstablished;
      }
      break;
    case ConnectionState::kTcpEstablished:
      if (tcp_flags & (kTcpFin | kTcpRst)) connection.state = ConnectionState::kTcpClosing;
      break;
    default:
      break;
  }
}

}  // namespace berth
