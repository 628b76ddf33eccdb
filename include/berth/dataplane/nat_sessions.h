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

// A worker's Full-NAT sessions (docs/architecture.md, "Connection table"): the other half of
// its connection table, for services that rewrite both addresses. One per worker lcore, shared
// with nothing, locked by nothing: the worker chose each session's local port so that the NIC
// brings the backend's replies back to it (reply_steering.h). Pure memory and arithmetic with
// the clock passed in, as ConnectionTable is.
//
// Layout: one cache-line read per packet in either direction, as a connection table hit is.
//   - Sessions. A session is one 64-byte cache line holding both sides: the client's address
//     and port and the service; the backend's address, port and stable id; the local address
//     (by stable id) and port berth put in between; state and last-seen time; and two sequence
//     offsets (0 for a plain session) that an inserted PROXY protocol header or a SYN proxy
//     will shift by. Sessions live in 128-byte buckets of two, at one of the two buckets their
//     reply's tuple hashes to, the first where it has room; a bucket counts the sessions that
//     went to their other one, so a backend's reply reads a second bucket only where one did.
//     berth chooses the tuple (the local port), so it skips a port whose buckets are both full:
//     a session never moves, and no live one is ever pushed out. While a (local address,
//     backend) pair has room to spare, it also passes over a port whose first bucket is full
//     (kFirstBucketSearch), so that few replies read a second bucket.
//   - The client's index. 32-byte entries, four to a 128-byte bucket, keyed by the client's
//     side, with what a client's packet needs for its rewrite: the local address and port and
//     the backend's stable id (its address from the snapshot). A client's TCP segment reads its
//     bucket alone; it touches the session only for a SYN, FIN or RST, and a UDP datagram
//     stores its last-seen time without waiting for it. An entry goes to the first of its two
//     buckets when it has room, else to the other; when both are full, one of their entries moves
//     to its own other bucket to make room. A bucket counts the entries that went to their other
//     one, so a lookup reads a second bucket only where one did.
// The 32-byte connections of the other modes are unchanged, so their path pays nothing.
//
// Unlike a ConnectionTable, nothing live is ever evicted: a NAT'd connection pushed out would
// break, and its local port could be reused while the backend still holds it. A new connection
// is refused instead, and counted under its reason. A session that ends (a FIN or RST and the
// closing timeout, or idle past its state's timeout) leaves the client's index at once, so the
// client may open again from the same port; its tuple stays in its bucket for the reuse hold
// (60 s by default: the backend's TIME_WAIT), and only then is free.
//
// Idle timeouts: a backend's reply checks its session's and refreshes it; a client's UDP
// datagram refreshes it without checking (that would wait for the line), so a session idle past
// its timeout lives on if its client sends before the sweep comes by (once over the table in
// about half a second at full load). A client's TCP segment refreshes nothing: the backend's
// acknowledgements do.

// A local address a session may take ports from: its stable id (the snapshot's, which the
// session keeps) and the address itself.
struct NatLocalAddress {
  uint16_t id = 0;
  IpAddress address;
};

// Where a session's PROXY protocol header stands (proxy_stream.h). Sessions of a service
// without `proxy_protocol` stay kNone.
enum class ProxyHeaderState : uint8_t {
  kNone = 0,
  kPending,       // the header has yet to go, or the backend showed it lacks it: the next
                  // segment at the stream's start carries it
  kSent,          // sent; segments at the stream's start that carry data carry it again
  kAcknowledged,  // the backend acknowledged it: every client segment is only shifted
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
  // With a PROXY protocol header (proxy_stream.h): the client's first sequence number after its
  // SYN, where the header goes in its stream toward the backend. The client's later bytes are
  // shifted by the header's length, proxyHeaderLength(client_family).
  uint32_t client_stream_start;
  // Added to the backend's sequence numbers on the way to the client, and taken from the
  // client's acknowledgements the other way: 0, as the backend's stream goes through unchanged.
  uint32_t backend_sequence_offset;
  ConnectionState state;
  uint8_t protocol;
  IpFamily client_family;
  IpFamily backend_family;
  uint8_t flags : 2;  // kNatSessionInUse, kNatSessionHeld
  // Where the PROXY protocol header stands (kNone: the session sends none).
  ProxyHeaderState proxy_header : 2;
  // The backend's window scale (RFC 7323) from its SYN-ACK: a window it advertises before it
  // has the header is made smaller by what the header takes of it, in the window's units.
  uint8_t backend_window_scale : 4;
  // The port the client's packets came in on (a snapshot index): where its replies go out.
  uint8_t receiving_port;
  // In a bucket's first way, whether in use or not: how many sessions whose first choice is
  // this bucket went to their other one.
  uint16_t moved;
};
static_assert(sizeof(NatSession) == 64, "a session is one cache line");

// NatSession::flags.
inline constexpr uint8_t kNatSessionInUse = 1;  // a session, live or held (else a free way)
inline constexpr uint8_t kNatSessionHeld = 2;   // ended: only its tuple, until the hold ends

inline constexpr size_t kNatSessionsPerBucket = 2;
struct alignas(128) NatSessionBucket {
  std::array<NatSession, kNatSessionsPerBucket> ways;
};
static_assert(sizeof(NatSessionBucket) == 128, "a session bucket is two cache lines");

// A client's way into its session, with what its packets' rewrite needs.
struct NatClientEntry {
  std::array<uint8_t, 16> client;
  uint16_t client_port;  // network byte order
  uint16_t service;
  // The session's place (bucket * kNatSessionsPerBucket + way) + 1; 0: empty.
  uint32_t session : 30;
  // kAcknowledged once the client's side has seen its session's header acknowledged, so that
  // its segments are shifted without reading the session; kPending while it must read it;
  // kNone for a session without a PROXY protocol header.
  ProxyHeaderState proxy_header : 2;
  uint16_t local_port;  // network byte order
  uint16_t local_address;
  uint16_t backend_id;
  // In a bucket's first entry, whether occupied or not: how many entries whose first choice is
  // this bucket went to their other one.
  uint16_t moved;
};
static_assert(sizeof(NatClientEntry) == 32, "four entries fill a two-cache-line bucket");

inline constexpr size_t kNatClientsPerBucket = 4;
struct alignas(128) NatClientBucket {
  std::array<NatClientEntry, kNatClientsPerBucket> ways;
};
static_assert(sizeof(NatClientBucket) == 128, "a client bucket is two cache lines");

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

// Memory the caller allocates (zeroed, on the worker's NUMA socket) and keeps alive: sized by
// NatSessionTable's *For() functions for the sessions it is to hold.
struct NatSessionMemory {
  NatSessionBucket* sessions = nullptr;
  size_t session_buckets = 0;  // a power of two
  NatClientBucket* clients = nullptr;
  size_t client_buckets = 0;  // a power of two
  NatPortSpace* spaces = nullptr;
  size_t space_count = 0;  // a power of two
};

class NatSessionTable {
 public:
  // Buckets for `sessions` (live and held together): twice the ways, so that a port whose
  // bucket has room is one or two candidates away.
  static size_t sessionBucketsFor(uint32_t sessions);
  // Client buckets for `sessions`: four times the entries, so that few sit in their other
  // bucket, which a client's packet would wait for after its prefetched first (at a full table
  // of 65,536 sessions, 4.0% of entries with twice the entries, 0.41% with four times).
  static size_t clientBucketsFor(uint32_t sessions);
  // Room for the (local address, backend) pairs: a power of two, twice `pairs`.
  static size_t spacesFor(uint32_t pairs);

  static constexpr uint32_t kDefaultReuseHoldMs = 60'000;
  // Candidate ports whose bucket a new session's search may read before it gives up.
  static constexpr uint32_t kPortSearchLimit = 64;
  // Candidate ports a new session's search reads at most, while its (local address, backend)
  // pair holds under half its share, for one whose reply's first bucket has room before it
  // takes a free one whose session would go to its other bucket.
  static constexpr uint32_t kFirstBucketSearch = 8;

  // A table of at most `limit` sessions (live and held) over `memory`.
  NatSessionTable(const NatSessionMemory& memory, uint32_t limit, const ConntrackTimeouts& timeouts,
                  NatCounters* counters, const ConnectionHashKey& hash_key,
                  uint32_t reuse_hold_ms = kDefaultReuseHoldMs);

  // The hashes the lookups take.
  uint64_t clientHash(const NatClientKey& key) const;
  uint64_t replyHash(const NatReplyKey& key) const;
  // Starts fetching the bucket a lookup of `hash` reads: a burst prefetches every packet's
  // bucket before its first lookup, so that their misses overlap.
  void prefetchClient(uint64_t hash) const { prefetchBucket(&clients_[hash & client_mask_]); }
  void prefetchReply(uint64_t hash) const { prefetchBucket(&sessions_[hash & session_mask_]); }

  // The client's entry of a live session, or nullptr.
  NatClientEntry* findClient(const NatClientKey& key, uint64_t hash);
  // The live session a backend's reply belongs to, or nullptr (counted): none, a held one, or
  // one past its timeout (ended on the way).
  NatSession* findReply(const NatReplyKey& key, uint64_t hash, uint32_t now_ms);

  NatSession& sessionOf(const NatClientEntry& entry) {
    return sessions_[(entry.session - 1) / kNatSessionsPerBucket]
        .ways[(entry.session - 1) % kNatSessionsPerBucket];
  }

  // A new session for `opening`: a local address and port of the worker's share that no
  // session of the same backend holds or held within the reuse hold, from the addresses in turn
  // from opening.start. nullptr when none is free, or the table or its room is full: the reason
  // is counted, and nothing that exists is touched.
  NatClientEntry* open(const NatOpening& opening, uint32_t now_ms);

  // A packet of the session from its client. A UDP datagram refreshes it (a store, not waited
  // for); a TCP segment without SYN, FIN or RST leaves the session's line alone, since the
  // backend's acknowledgements refresh it (TCP acknowledges what it receives, and a backend
  // that stops answering for the established timeout has lost the connection); a FIN or RST
  // closes it. Returns false for a SYN on a closing session, which the caller ends and opens
  // anew (the client reusing its port).
  bool touchFromClient(NatClientEntry& entry, uint8_t protocol, uint8_t tcp_flags, uint32_t now_ms);
  // Whether touchFromClient() of such a packet reads or writes the session's line.
  static bool clientTouchesSession(uint8_t protocol, uint8_t tcp_flags) {
    return protocol != kProtocolTcp || (tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) != 0;
  }
  // A packet of `session` from its backend: refreshes it and moves its state on (a SYN-ACK
  // establishes it, a FIN or RST closes it, a UDP reply confirms it).
  void touchFromBackend(NatSession& session, uint8_t tcp_flags, uint32_t now_ms);

  // Ends a live session now, counted as `why`: its client reopening its port, or its backend
  // gone. It leaves the client's index, and its tuple is held.
  void end(NatSession& session, uint32_t now_ms, NatEvent why = NatEvent::kReopened);

  // Ends the sessions past their timeout and frees the tuples past their hold, over the next
  // `count` buckets in a round over the table. The worker calls it once per loop.
  void sweep(uint32_t now_ms, uint32_t count = 1);

  // Per-service and per-backend gauges, as ConnectionTable::countConnectionsIn.
  void countConnectionsIn(TrafficCounters traffic) { traffic_ = traffic; }

  // The session a client's or a backend's key names (live, or held for the reply key), without
  // counting or changing anything: for diagnostics, on the owning worker.
  const NatSession* peekClient(const NatClientKey& key) const;
  const NatSession* peekReply(const NatReplyKey& key) const;

  // The keys that find `session` from either side.
  static NatClientKey clientKeyOf(const NatSession& session);
  static NatReplyKey replyKeyOf(const NatSession& session);

  // How many of the pair's ports this worker holds (live sessions and held tuples).
  uint32_t portsInUse(uint16_t local_address, uint16_t backend_id) const;

  uint32_t limit() const { return limit_; }
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
  static void prefetchBucket(const void* bucket) {
    __builtin_prefetch(bucket);
    __builtin_prefetch(static_cast<const char*>(bucket) + 64);
  }
  uint32_t otherClientBucket(uint64_t hash) const;
  NatClientEntry* clientEntryOf(const NatClientKey& key, uint64_t hash) const;
  bool placeClient(const NatSession& session, uint32_t place);
  // A way of full `bucket` freed by moving its entry to that entry's other bucket, or nullptr
  // when none of them has room there.
  NatClientEntry* makeRoom(NatClientBucket& bucket);
  void eraseClient(const NatSession& session);
  uint32_t otherSessionBucket(uint64_t hash) const;
  NatSessionBucket& firstBucketOf(const NatSession& session) const;
  static bool inBucket(const NatSession& session, const NatSessionBucket& bucket);
  // The session of `key` (live or held) in either of its buckets, or nullptr.
  NatSession* sessionOf(const NatReplyKey& key, uint64_t hash) const;
  NatPortSpace* space(uint16_t local_address, uint16_t backend_id, bool create);
  uint32_t spaceHome(uint32_t key) const;
  void dropSpace(NatPortSpace& room);
  // A free way for `local`: its port (host order) and the way, or 0 with the refusal set.
  uint16_t takePort(const NatOpening& opening, const NatLocalAddress& local,
                    const NatPortSpace& room, NatSession*& way, NatEvent& refusal);
  void hold(NatSession& session, uint32_t now_ms);
  void release(NatSession& session);
  uint32_t placeOf(const NatSession& session) const {
    const auto offset = static_cast<size_t>(&session - &sessions_[0].ways[0]);
    return static_cast<uint32_t>(offset) + 1;
  }

  NatSessionBucket* sessions_;
  uint32_t session_mask_;
  NatClientBucket* clients_;
  uint32_t client_mask_;
  NatPortSpace* spaces_;
  uint32_t space_mask_;
  uint32_t limit_;
  std::array<uint32_t, kConnectionStateCount> timeout_by_state_;
  uint32_t reuse_hold_ms_;
  NatCounters* counters_;
  TrafficCounters traffic_;
  ConnectionHashKey hash_key_;
  uint32_t live_ = 0;
  uint32_t held_ = 0;
  uint32_t sweep_cursor_ = 0;
};

}  // namespace berth
