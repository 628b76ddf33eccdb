#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "berth/dataplane/conntrack.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/reply_steering.h"
#include "berth/net/ip_address.h"

namespace berth {

// A worker's Full-NAT sessions (docs/fullnat.md, "Connection state"): the other half of its
// connection table, for services that rewrite both addresses. One per worker lcore, shared with
// nothing, locked by nothing: the worker chose each session's local port so that the NIC brings
// the backend's replies back to it (reply_steering.h). Pure memory and arithmetic with the clock
// passed in, as ConnectionTable is.
//
// Layout. A session is one 64-byte cache line that holds both directions: the client's side
// (client address and port, service), the backend's (address and port), the local address and
// port berth put in between, the state, and room for the sequence offsets that the PROXY
// protocol's header and a SYN proxy will shift by. Two indexes find it, each a power of two of
// 64-byte buckets of seven (tag, session) slots: by the client's side for what the client sends,
// and by the backend's side for what the backend replies to the local address. A lookup reads an
// index bucket and the session: two cache lines, as a ConnectionTable bucket is. The 32-byte
// connections of the other modes stay as they are, so their path pays nothing for this.
//
// Unlike a ConnectionTable, a full table never evicts a live session: a NAT'd connection pushed
// out would break, and its local port could be reused while the backend still holds it. A new
// connection is refused instead, and counted under its reason. A session that ends (FIN or RST
// and the closing timeout, or idle past its state's timeout) leaves the client's index at once,
// so the client may open again from the same port; its local port stays taken, in the backend's
// index, for the reuse hold (60 s by default: the backend's TIME_WAIT), and only then is free.

// A local address a session may take ports from: its stable id (the snapshot's, which the
// session keeps) and the address itself.
struct NatLocalAddress {
  uint16_t id = 0;
  IpAddress address;
};

// One session: both sides of a NAT'd connection, in one cache line.
struct alignas(64) NatSession {
  std::array<uint8_t, 16> client;   // the client's address, of client_family
  std::array<uint8_t, 16> backend;  // the backend's address, of backend_family
  uint16_t client_port;             // network byte order, as all ports here
  uint16_t service;                 // the service's stable id (CounterIds): its VIP and port
  uint16_t backend_port;
  uint16_t local_port;
  uint16_t backend_id;     // the backend's stable id
  uint16_t local_address;  // the local address's stable id (NatLocalAddress::id)
  uint32_t last_seen_ms;
  // Added to the client's sequence numbers on the way to the backend, and to the backend's on
  // the way to the client (acknowledgements the other way by the opposite): what an inserted
  // PROXY protocol header and a SYN proxy's own sequence shift by. 0 for a plain session.
  uint32_t client_sequence_offset;
  uint32_t backend_sequence_offset;
  ConnectionState state;
  uint8_t protocol;
  IpFamily client_family;
  IpFamily backend_family;
  uint8_t flags;  // kNatSessionHeld, ...
  uint8_t spare[3];
};
static_assert(sizeof(NatSession) == 64, "a session is one cache line");

// NatSession::flags.
inline constexpr uint8_t kNatSessionInUse = 1;  // a session, live or held (else a free slot)
inline constexpr uint8_t kNatSessionHeld = 2;   // ended: only its local port, until the hold ends

// What identifies a session from the client's side.
struct NatClientKey {
  std::array<uint8_t, 16> client{};
  uint16_t client_port = 0;  // network byte order
  uint16_t service = 0;
};

// What identifies a session from the backend's side: a reply from (backend, backend_port) to
// (local address, local_port) over `protocol`.
struct NatReplyKey {
  std::array<uint8_t, 16> backend{};
  uint16_t backend_port = 0;  // network byte order
  uint16_t local_port = 0;    // network byte order
  uint16_t local_address = 0;
  uint8_t protocol = 0;
};

// One bucket of an index: seven (tag, session + 1) slots, and how many entries whose home is
// this bucket or one before it were placed past it (a miss stops at a bucket none passed).
struct alignas(64) NatIndexBucket {
  static constexpr size_t kSlots = 7;
  std::array<uint32_t, kSlots> tags;
  std::array<uint32_t, kSlots> sessions;  // index + 1; 0: the slot is empty
  uint32_t passed;
  uint32_t spare;
};
static_assert(sizeof(NatIndexBucket) == 64, "an index bucket is one cache line");

// Room a worker keeps per (local address, backend) pair it has sessions for: how many of the
// pair's ports it holds (live or in their reuse hold) and where its search goes on.
struct NatPortSpace {
  uint32_t key = 0;  // (local address id << 16 | backend id) + 1; 0: empty
  uint16_t in_use = 0;
  uint16_t cursor = 0;  // host order: the port after the last one taken
};

// What a new session needs: the client's side, the backend the table picked, the local
// addresses of the egress port to take a port from, and how the egress port's NIC spreads.
struct NatOpening {
  NatClientKey client;
  IpFamily client_family = IpFamily::kIpv4;
  uint8_t protocol = 0;
  uint8_t tcp_flags = 0;
  IpAddress backend;
  uint16_t backend_port = 0;  // network byte order
  uint16_t backend_id = 0;
  const NatLocalAddress* local_addresses = nullptr;
  size_t local_address_count = 0;
  const ReplySteering* steering = nullptr;
  uint16_t queue = 0;  // the worker's receive queue on the egress port
  // Where the search over the local addresses starts (from the client's flow hash, so a client's
  // connections spread over them).
  uint32_t start = 0;
};

// Memory the caller allocates (zeroed, on the worker's NUMA socket) and keeps alive.
struct NatSessionMemory {
  NatSession* sessions = nullptr;
  uint32_t session_count = 0;
  NatIndexBucket* client_index = nullptr;
  NatIndexBucket* reply_index = nullptr;
  size_t index_buckets = 0;  // a power of two, each index
  NatPortSpace* spaces = nullptr;
  size_t space_count = 0;  // a power of two
};

class NatSessionTable {
 public:
  // Index buckets for `sessions`: a power of two, at least two slots per session, so that a
  // bucket overflows (to the next) about once in a few thousand and none ever fills four.
  static size_t indexBucketsFor(uint32_t sessions);
  // Room for the (local address, backend) pairs: a power of two, twice `pairs`.
  static size_t spacesFor(uint32_t pairs);

  static constexpr uint32_t kDefaultReuseHoldMs = 60'000;
  // Ports whose index entry a new session's search may look up before it gives up.
  static constexpr uint32_t kPortSearchLimit = 1024;

  NatSessionTable(const NatSessionMemory& memory, const ConntrackTimeouts& timeouts,
                  NatCounters* counters, const ConnectionHashKey& hash_key,
                  uint32_t reuse_hold_ms = kDefaultReuseHoldMs);

  // The hashes the lookups take, from the keys' fields; their low bits pick the bucket.
  uint64_t clientHash(const NatClientKey& key) const;
  uint64_t replyHash(const NatReplyKey& key) const;
  // A burst's lookups in three passes, so that its misses overlap (docs/fullnat.md): first
  // prefetch every packet's index bucket, then, the buckets arrived, every session their tags
  // name, then find. Without the middle pass each lookup waits for its session in turn: 190
  // against 35 ns a lookup at 1M sessions (perf/conntrack_bench.cc).
  void prefetchClient(uint64_t hash) const { __builtin_prefetch(&client_index_[hash & mask_]); }
  void prefetchReply(uint64_t hash) const { __builtin_prefetch(&reply_index_[hash & mask_]); }
  void prefetchClientSession(uint64_t hash) const { prefetchSessionOf(client_index_, hash); }
  void prefetchReplySession(uint64_t hash) const { prefetchSessionOf(reply_index_, hash); }

  // The live session of a client's packet, or nullptr. One that has outlived its timeout is
  // ended on the way (its port held).
  NatSession* findClient(const NatClientKey& key, uint64_t hash, uint32_t now_ms);
  // The live session a backend's reply belongs to, or nullptr (a held one is no session).
  NatSession* findReply(const NatReplyKey& key, uint64_t hash, uint32_t now_ms);

  // A new session for `opening`: a local address and port of the worker's share that no session
  // of the same backend holds or held within the reuse hold, from the addresses in turn from
  // opening.start. nullptr when none is free, or the table or its room is full: the reason is
  // counted, and nothing that exists is touched.
  NatSession* open(const NatOpening& opening, uint32_t now_ms);

  // A packet of `session`, from the client (`from_client`) or the backend: refreshes it and
  // moves its state on (a FIN or RST closes it; a UDP reply confirms it).
  void touch(NatSession& session, uint8_t tcp_flags, bool from_client, uint32_t now_ms);

  // Ends a live session now (a SYN that reopens its client's port): it leaves the client's
  // index, and its port is held.
  void end(NatSession& session, uint32_t now_ms);

  // Ends the sessions past their timeout and frees the ports past their hold, over the next
  // `count` sessions in a round over the table. The worker calls it once per loop.
  void sweep(uint32_t now_ms, uint32_t count = 4);

  // Per-service and per-backend gauges, as ConnectionTable::countConnectionsIn.
  void countConnectionsIn(TrafficCounters traffic) { traffic_ = traffic; }

  // The session a client's or a backend's key names, live or held, without counting or
  // changing anything: for diagnostics, on the owning worker.
  const NatSession* peekClient(const NatClientKey& key) const;
  const NatSession* peekReply(const NatReplyKey& key) const;

  // The keys that find `session` from either side.
  static NatClientKey clientKeyOf(const NatSession& session);
  static NatReplyKey replyKeyOf(const NatSession& session);

  // How many of the pair's ports this worker holds (live sessions and held ports).
  uint32_t portsInUse(uint16_t local_address, uint16_t backend_id) const;

  uint32_t capacity() const { return session_count_; }
  uint32_t live() const { return live_; }
  uint32_t held() const { return held_; }
  uint32_t timeoutOf(ConnectionState state) const {
    return timeout_by_state_[static_cast<size_t>(state)];
  }
  bool expired(const NatSession& session, uint32_t now_ms) const {
    const uint32_t lifetime =
        (session.flags & kNatSessionHeld) != 0 ? reuse_hold_ms_ : timeoutOf(session.state);
    return now_ms - session.last_seen_ms > lifetime;
  }

 private:
  struct Found {
    NatIndexBucket* bucket = nullptr;
    size_t slot = 0;
    uint32_t home = 0;   // the bucket the hash names
    uint32_t steps = 0;  // buckets past home
  };
  static constexpr uint32_t kMaxSteps = 4;  // buckets an entry may sit past its home

  void prefetchSessionOf(const NatIndexBucket* index, uint64_t hash) const;
  template <typename Matches>
  Found findIn(NatIndexBucket* index, uint64_t hash, const Matches& matches) const;
  bool place(NatIndexBucket* index, uint64_t hash, uint32_t session);
  void erase(NatIndexBucket* index, const Found& found);
  NatPortSpace* space(uint16_t local_address, uint16_t backend_id, bool create);
  uint32_t spaceHome(uint32_t key) const;
  void dropSpace(NatPortSpace& room);
  // A free local port of `local` for `opening`, or 0 (kPortsExhausted or kPortSearchLimit
  // counted in `refusal`).
  uint16_t takePort(const NatOpening& opening, const NatLocalAddress& local, NatPortSpace& space,
                    NatEvent& refusal) const;
  void hold(NatSession& session, uint32_t now_ms);
  void release(uint32_t index);
  void gauge(const NatSession& session, int delta);

  NatSession* sessions_;
  uint32_t session_count_;
  NatIndexBucket* client_index_;
  NatIndexBucket* reply_index_;
  uint32_t mask_;
  NatPortSpace* spaces_;
  uint32_t space_mask_;
  std::array<uint32_t, kConnectionStateCount> timeout_by_state_;
  uint32_t reuse_hold_ms_;
  NatCounters* counters_;
  TrafficCounters traffic_;
  ConnectionHashKey hash_key_;
  uint32_t free_head_ = 0;  // index + 1 of the first free session; 0: none
  uint32_t live_ = 0;
  uint32_t held_ = 0;
  uint32_t sweep_cursor_ = 0;
};

}  // namespace berth
