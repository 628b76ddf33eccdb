#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "berth/dataplane/counters.h"
#include "berth/dataplane/token_bucket.h"
#include "berth/net/flow_hash.h"
#include "berth/net/flow_key.h"

namespace berth {

// The per-core connection-tracking cache (docs/architecture.md, connection table): remembers which
// backend each flow went to, so that the flow stays there while the Maglev table changes under it.
// One table per worker lcore, shared with nothing and locked by nothing: RSS brings a flow's
// packets to one core. Pure memory and arithmetic, with the clock passed in, so tests drive time by
// hand.
//
// Layout: set-associative. A bucket is two cache lines holding four 32-byte connections; a
// connection is found in the bucket its keyed hash selects (ConnectionHashKey), and a full bucket
// gives up the connection seen least recently (LRU by last-seen time, inside the bucket). An
// expired connection is reclaimed when a lookup or an insert meets it, and by the owning worker's
// sweep, one bucket per loop, so that the per-service and per-backend connection gauges count live
// connections rather than everything not yet overwritten.

// How long a connection lives after its last packet, by state.
struct ConntrackTimeouts {
  uint32_t tcp_established_ms = 300'000;
  uint32_t tcp_opening_ms = 5'000;   // a SYN seen, nothing after it yet
  uint32_t tcp_closing_ms = 10'000;  // a FIN or RST seen
  uint32_t udp_ms = 30'000;
};

// A connection is unconfirmed until a second packet shows a sender that is really there: until
// then it lives only as long as an opening one, and a full bucket gives it up first. A sender
// that spoofs one packet per flow (a lone ACK, a UDP datagram) fills the table only with entries
// that expire in seconds and make way for established ones; a real flow that ECMP or a restart
// moved here, first seen mid-way, keeps its backend from its first packet and is confirmed by its
// second.
enum class ConnectionState : uint8_t {
  kEmpty = 0,
  kTcpOpening,  // a SYN seen, nothing after it yet
  kTcpEstablished,
  kTcpClosing,
  kUdp,             // confirmed: a second packet seen
  kTcpUnconfirmed,  // its first packet was not a SYN
  kUdpUnconfirmed,  // one packet seen
};
inline constexpr size_t kConnectionStateCount = 7;

// Whether a full bucket gives `state` up before an established connection.
inline bool unconfirmedOrOpening(ConnectionState state) {
  constexpr uint32_t kWeak = 1u << static_cast<int>(ConnectionState::kTcpOpening) |
                             1u << static_cast<int>(ConnectionState::kTcpUnconfirmed) |
                             1u << static_cast<int>(ConnectionState::kUdpUnconfirmed);
  return (kWeak >> static_cast<int>(state) & 1) != 0;
}

// What identifies a connection: the service (its stable id, which also fixes the VIP, the
// protocol and, for a 5-tuple service, the destination port) and the client side of the fields
// that service hashes on: the source address, and the source port for 5-tuple services.
struct ConnectionKey {
  std::array<uint8_t, 16> source{};
  uint16_t source_port = 0;  // network byte order; 0 where the service hashes no ports
  uint16_t service = 0;

  static ConnectionKey of(const FlowKey& flow, HashFields fields, uint16_t service) {
    ConnectionKey key;
    key.source = flow.source;
    key.source_port = sourcePortOf(flow, fields);
    key.service = service;
    return key;
  }
  static uint16_t sourcePortOf(const FlowKey& flow, HashFields fields) {
    return fields == HashFields::kFiveTuple ? flow.source_port : 0;
  }
  // Whether an entry holding these fields is this key's: the address compared as two words, the
  // test every lookup makes.
  bool matches(const std::array<uint8_t, 16>& entry_source, uint16_t entry_source_port,
               uint16_t entry_service) const {
    uint64_t mine[2];
    uint64_t theirs[2];
    std::memcpy(mine, source.data(), 16);
    std::memcpy(theirs, entry_source.data(), 16);
    return ((mine[0] ^ theirs[0]) | (mine[1] ^ theirs[1])) == 0 &&
           source_port == entry_source_port && service == entry_service;
  }
};

// One tracked connection: 32 bytes, every overhead included (the bucket holds nothing else).
struct Connection {
  std::array<uint8_t, 16> source;
  uint16_t source_port;
  uint16_t service;
  uint16_t backend;  // the backend's stable id (CounterIds), which survives snapshot swaps
  // The backend's index in the snapshot of `generation` (its low 16 bits), so that a worker on
  // that snapshot goes straight there; any other snapshot looks the stable id up again.
  uint16_t backend_index;
  uint32_t last_seen_ms;
  uint16_t generation;
  ConnectionState state;
  uint8_t sync;  // kSyncExported, kSyncAdopted

  bool matches(const ConnectionKey& key) const { return key.matches(source, source_port, service); }
};
static_assert(sizeof(Connection) == 32, "four connections fill a two-cache-line bucket");

// Connection::sync: how a connection stands with the peer instances (docs/scale-out.md, "Flows
// that survive an instance").
inline constexpr uint8_t kSyncExported = 1;  // off its table's pick, and the peers were told
inline constexpr uint8_t kSyncAdopted = 2;   // its backend came from a peer's record

inline constexpr size_t kConnectionsPerBucket = 4;
struct alignas(128) ConnectionBucket {
  std::array<Connection, kConnectionsPerBucket> ways;
};
static_assert(sizeof(ConnectionBucket) == 128, "a bucket is two cache lines");

// The secret of a table's bucket hash: a connection's bucket comes from a multilinear hash of its
// key's five 32-bit words under six random 64-bit multipliers, (m0 + m1 w1 + ... + m5 w5) mod
// 2^64 (strongly universal in its high half: Lemire and Kaser, 2016), passed through MurmurHash3's
// 64-bit finalizer. Were the bucket the flow hash, whose seed is public and which is affine, a
// sender could compute offline flows that share a tracked connection's bucket and push it out;
// without the multipliers it cannot. The finalizer, a fixed bijection, adds no collision of the
// sum; it breaks the lattice a linear hash makes of structured keys: 1M clients of a /15 times
// 8 ports put from none to a third of the flows in overflowing buckets over 20 random secrets,
// and 14.2 to 14.5% (as random keys do) once mixed. Drawn at each start (runtime/worker.h); the
// Maglev pick keeps the documented flow hash.
// The last two multipliers serve the longer keys of Full-NAT's indexes (nat_sessions.h).
struct ConnectionHashKey {
  std::array<uint64_t, 8> multipliers{};
};

// MurmurHash3's 64-bit finalizer: a fixed bijection that mixes every bit into every other.
inline uint64_t murmurFinalizer(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdULL;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ULL;
  value ^= value >> 33;
  return value;
}

// The keyed hash of a connection's key fields under `key` (ConnectionHashKey): the connection
// table's bucket, and the peer flows' (peer_flows.h).
inline uint32_t keyedConnectionHash(const ConnectionHashKey& key,
                                    const std::array<uint8_t, 16>& source, uint16_t source_port,
                                    uint16_t service) {
  uint64_t words[2];
  std::memcpy(words, source.data(), 16);
  const std::array<uint64_t, 8>& m = key.multipliers;
  uint64_t sum = m[0] + m[1] * static_cast<uint32_t>(words[0]) +
                 m[5] * (uint32_t{source_port} | uint32_t{service} << 16);
  // An IPv4 source fills the first word alone: the rest add nothing, so skip their products.
  if ((words[0] >> 32 | words[1]) != 0) {
    sum +=
        m[2] * (words[0] >> 32) + m[3] * static_cast<uint32_t>(words[1]) + m[4] * (words[1] >> 32);
  }
  return static_cast<uint32_t>(murmurFinalizer(sum));
}

// How long a connection lives after its last packet, per ConnectionState: the connection
// table's, and Full-NAT's sessions'.
std::array<uint32_t, kConnectionStateCount> timeoutsByState(const ConntrackTimeouts& timeouts);

// Moves the per-service and per-backend connection gauges by one, up (+1, also counting one
// opened) or down (-1); nothing where `traffic` has no counters.
inline void gaugeConnection(const TrafficCounters& traffic, uint16_t service, uint16_t backend,
                            int delta) {
  if (traffic.services == nullptr) return;
  if (delta > 0) {
    traffic.services[service].connections.add(1);
    traffic.backends[backend].connections.add(1);
    traffic.services[service].opened.add(1);
    traffic.backends[backend].opened.add(1);
  } else {
    traffic.services[service].connections.subtract(1);
    traffic.backends[backend].connections.subtract(1);
  }
}

// The state a new connection starts in, from its first packet's TCP flags (0 for UDP).
ConnectionState initialState(uint8_t protocol, uint8_t tcp_flags);

class ConnectionTable {
 public:
  // Buckets for at least `entries` connections: a power of two, so a bucket is hash & mask.
  static size_t bucketsFor(uint32_t entries);

  // Over `bucket_count` (a power of two) zeroed buckets that the caller allocated, on the
  // worker's NUMA socket, and keeps alive. `max_inserts_per_second` 0 means no limit; the limit
  // allows bursts of one second's worth. Counts into `counters`.
  ConnectionTable(ConnectionBucket* buckets, size_t bucket_count, const ConntrackTimeouts& timeouts,
                  uint32_t max_inserts_per_second, ConntrackCounters* counters,
                  const ConnectionHashKey& hash_key);

  // The hash whose low bits pick `key`'s bucket: what find(), insert() and prefetch() take.
  uint32_t bucketHash(const ConnectionKey& key) const {
    return bucketHash(key.source, key.source_port, key.service);
  }
  // The same from the key's fields, as the datapath has them at hand (building the key first
  // cost the all-hits pipeline 1 to 2% more cycles).
  uint32_t bucketHash(const std::array<uint8_t, 16>& source, uint16_t source_port,
                      uint16_t service) const {
    return keyedConnectionHash(hash_key_, source, source_port, service);
  }

  // Starts fetching the bucket of `hash` (bucketHash): a datapath burst prefetches every packet's
  // bucket before the first lookup, which hides the DRAM latency of a table larger than L3.
  void prefetch(uint32_t hash) const {
    const char* bucket = reinterpret_cast<const char*>(&buckets_[hash & mask_]);
    __builtin_prefetch(bucket);
    __builtin_prefetch(bucket + 64);
  }

  // The live connection for `key`, or nullptr (a miss). Expired connections met in the bucket
  // are reclaimed and counted. Counts a hit or a miss.
  Connection* find(const ConnectionKey& key, uint32_t hash, uint32_t now_ms);

  // The entry for `key`, live or expired, without counting, reclaiming or refreshing anything:
  // for diagnostics (berthctl explain), on the owning worker.
  const Connection* peek(const ConnectionKey& key) const {
    for (const Connection& way : buckets_[bucketHash(key) & mask_].ways) {
      if (way.state != ConnectionState::kEmpty && way.matches(key)) return &way;
    }
    return nullptr;
  }

  // Records a new connection to `backend` (a stable id) and returns it, or returns nullptr when
  // the insert rate limit refuses (counted; the caller forwards the packet anyway). Takes an
  // empty or expired way of the bucket, or else the one seen least recently (an eviction).
  Connection* insert(const ConnectionKey& key, uint32_t hash, uint16_t backend,
                     ConnectionState state, uint32_t now_ms);

  // A packet of a tracked connection: refreshes its last-seen time and moves its state on (an
  // unconfirmed connection's second packet confirms it, counted).
  void touch(Connection& connection, uint8_t tcp_flags, uint32_t now_ms);

  // Moves a tracked connection to another backend (a stable id), keeping the gauges right.
  void reassign(Connection& connection, uint16_t backend);

  // Reclaims the expired connections of the next bucket in a round over the table, and starts
  // fetching the bucket after it for the next call. The worker calls it once per loop: a million
  // connections' table is swept in about half a second at full load, sooner when idle.
  void sweep(uint32_t now_ms);

  // Where the connection gauges are kept: the worker's traffic counters, indexed by the stable
  // service and backend ids connections carry. Without it, nothing is counted there.
  void countConnectionsIn(TrafficCounters traffic) { traffic_ = traffic; }

  // How long a connection in `state` lives after its last packet.
  uint32_t timeoutOf(ConnectionState state) const {
    return timeout_by_state_[static_cast<size_t>(state)];
  }
  // Whether a connection last seen at `seen_ms` and seen again at `now_ms` is due to have its
  // peers' record refreshed: once per refresh period, a power of two of milliseconds at most a
  // third of the shortest confirmed timeout (and at most 8.192 s), so that a record never
  // outlives its refresh while the flow sends.
  bool refreshDue(uint32_t seen_ms, uint32_t now_ms) const {
    return (seen_ms >> refresh_shift_) != (now_ms >> refresh_shift_);
  }

  // Whether `connection` has outlived its state's timeout at `now_ms`.
  bool expired(const Connection& connection, uint32_t now_ms) const {
    return now_ms - connection.last_seen_ms > timeoutOf(connection.state);
  }

  size_t capacity() const { return (mask_ + 1) * kConnectionsPerBucket; }
  ConnectionBucket* buckets() const { return buckets_; }
  // Ways holding a connection, live or expired but not yet reclaimed.
  size_t occupied() const { return occupied_; }

 private:
  bool allowInsert(uint32_t now_ms);
  // The per-service and per-backend gauges of `connection`, up (+1) or down (-1).
  void gauge(const Connection& connection, int delta);
  // An expired connection leaves its way empty.
  void release(Connection& connection);
  void count(ConntrackEvent event) { counters_->values[static_cast<size_t>(event)].add(1); }

  ConnectionBucket* buckets_;
  size_t mask_;
  std::array<uint32_t, kConnectionStateCount> timeout_by_state_;
  ConntrackCounters* counters_;
  TrafficCounters traffic_;
  size_t occupied_ = 0;
  size_t sweep_cursor_ = 0;
  ConnectionHashKey hash_key_;
  // max_inserts_per_second, with a second's worth of burst; 0: no limit.
  uint32_t insert_rate_ = 0;
  TokenBucket insert_tokens_;
  uint32_t refresh_shift_ = 13;  // refreshDue()
};

}  // namespace berth
