#include "berth/dataplane/conntrack.h"

#include <algorithm>
#include <bit>

#include "berth/net/packet_parser.h"

namespace berth {

ConnectionState initialState(uint8_t protocol, uint8_t tcp_flags) {
  if (protocol != kProtocolTcp) return ConnectionState::kUdp;
  if (tcp_flags & (kTcpFin | kTcpRst)) return ConnectionState::kTcpClosing;
  // A SYN opens; anything else is a connection already under way that this core has not seen
  // (a restart, or an ECMP or RSS change), which Maglev also keeps on the table's pick.
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) return ConnectionState::kTcpOpening;
  return ConnectionState::kTcpEstablished;
}

size_t ConnectionTable::bucketsFor(uint32_t entries) {
  const size_t buckets = (size_t{entries} + kConnectionsPerBucket - 1) / kConnectionsPerBucket;
  return std::bit_ceil(std::max<size_t>(buckets, 1));
}

ConnectionTable::ConnectionTable(ConnectionBucket* buckets, size_t bucket_count,
                                 const ConntrackTimeouts& timeouts, uint32_t max_inserts_per_second,
                                 ConntrackCounters* counters, const ConnectionHashKey& hash_key)
    : buckets_(buckets), mask_(bucket_count - 1), counters_(counters), hash_key_(hash_key) {
  timeout_by_state_[static_cast<size_t>(ConnectionState::kEmpty)] = 0;
  timeout_by_state_[static_cast<size_t>(ConnectionState::kTcpOpening)] = timeouts.tcp_opening_ms;
  timeout_by_state_[static_cast<size_t>(ConnectionState::kTcpEstablished)] =
      timeouts.tcp_established_ms;
  timeout_by_state_[static_cast<size_t>(ConnectionState::kTcpClosing)] = timeouts.tcp_closing_ms;
  timeout_by_state_[static_cast<size_t>(ConnectionState::kUdp)] = timeouts.udp_ms;
  insert_rate_ = max_inserts_per_second;
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
  Connection* oldest = nullptr;
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
    if (oldest == nullptr || now_ms - way.last_seen_ms > now_ms - oldest->last_seen_ms) {
      oldest = &way;
    }
  }
  if (chosen == nullptr) {
    chosen = oldest;
    gauge(*chosen, -1);
    count(ConntrackEvent::kEviction);
  }
  chosen->source = key.source;
  chosen->source_port = key.source_port;
  chosen->service = key.service;
  chosen->backend = backend;
  chosen->backend_index = 0;
  chosen->generation = 0;
  chosen->last_seen_ms = now_ms;
  chosen->state = state;
  gauge(*chosen, +1);
  count(ConntrackEvent::kInsert);
  return chosen;
}

void ConnectionTable::gauge(const Connection& connection, int delta) {
  if (traffic_.services == nullptr) return;
  if (delta > 0) {
    traffic_.services[connection.service].connections.add(1);
    traffic_.backends[connection.backend].connections.add(1);
  } else {
    traffic_.services[connection.service].connections.subtract(1);
    traffic_.backends[connection.backend].connections.subtract(1);
  }
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
