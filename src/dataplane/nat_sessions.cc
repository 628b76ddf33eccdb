#include "berth/dataplane/nat_sessions.h"

#include <algorithm>
#include <bit>

#include "berth/net/flow_key.h"
#include "berth/net/packet_parser.h"

namespace berth {
namespace {

// A key's 32-bit words through the table's secret multipliers, as keyedConnectionHash does for
// the connection table (conntrack.h, ConnectionHashKey), to 64 bits.
uint64_t keyedHash(const ConnectionHashKey& key, const std::array<uint8_t, 16>& address,
                   uint32_t word4, uint32_t word5) {
  uint32_t words[4];
  std::memcpy(words, address.data(), 16);
  const std::array<uint64_t, 8>& m = key.multipliers;
  return murmurFinalizer(m[0] + m[1] * words[0] + m[2] * words[1] + m[3] * words[2] +
                         m[4] * words[3] + m[5] * word4 + m[6] * word5);
}

bool sameAddress(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b) {
  uint64_t x[2];
  uint64_t y[2];
  std::memcpy(x, a.data(), 16);
  std::memcpy(y, b.data(), 16);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

uint16_t toNetwork(uint16_t port) { return static_cast<uint16_t>(port >> 8 | port << 8); }

bool inUse(const NatSession& session) { return (session.flags & kNatSessionInUse) != 0; }
bool isHeld(const NatSession& session) { return (session.flags & kNatSessionHeld) != 0; }

bool replyMatches(const NatSession& session, const NatReplyKey& key) {
  return inUse(session) && sameAddress(session.backend, key.backend) &&
         session.backend_port == key.backend_port && session.local_port == key.local_port &&
         session.local_address == key.local_address && session.protocol == key.protocol;
}

bool clientMatches(const NatClientEntry& entry, const NatClientKey& key) {
  return entry.session != 0 && sameAddress(entry.client, key.client) &&
         entry.client_port == key.client_port && entry.service == key.service;
}

NatSession* freeWay(NatSessionBucket& bucket) {
  for (NatSession& way : bucket.ways) {
    if (!inUse(way)) return &way;
  }
  return nullptr;
}

}  // namespace

size_t NatSessionTable::sessionBucketsFor(uint32_t sessions) {
  return std::bit_ceil(std::max<size_t>(size_t{sessions}, 1));  // two ways per session
}

size_t NatSessionTable::clientBucketsFor(uint32_t sessions) {
  return std::bit_ceil(std::max<size_t>(4 * size_t{sessions} / kNatClientsPerBucket, 2));
}

size_t NatSessionTable::spacesFor(uint32_t pairs) {
  return std::bit_ceil(std::max<size_t>(2 * size_t{pairs}, 2));
}

NatSessionTable::NatSessionTable(const NatSessionMemory& memory, uint32_t limit,
                                 const ConntrackTimeouts& timeouts, NatCounters* counters,
                                 const ConnectionHashKey& hash_key, uint32_t reuse_hold_ms)
    : sessions_(memory.sessions),
      session_mask_(static_cast<uint32_t>(memory.session_buckets - 1)),
      clients_(memory.clients),
      client_mask_(static_cast<uint32_t>(memory.client_buckets - 1)),
      spaces_(memory.spaces),
      space_mask_(static_cast<uint32_t>(memory.space_count - 1)),
      limit_(limit),
      timeout_by_state_(timeoutsByState(timeouts)),
      reuse_hold_ms_(reuse_hold_ms),
      counters_(counters),
      hash_key_(hash_key) {}

uint64_t NatSessionTable::clientHash(const NatClientKey& key) const {
  return keyedHash(hash_key_, key.client, uint32_t{key.client_port} | uint32_t{key.service} << 16,
                   0);
}

uint64_t NatSessionTable::replyHash(const NatReplyKey& key) const {
  return keyedHash(hash_key_, key.backend,
                   uint32_t{key.backend_port} | uint32_t{key.local_port} << 16,
                   uint32_t{key.local_address} | uint32_t{key.protocol} << 16 | 1u << 24);
}

NatClientKey NatSessionTable::clientKeyOf(const NatSession& session) {
  NatClientKey key;
  key.client = session.client;
  key.client_port = session.client_port;
  key.service = session.service;
  return key;
}

NatReplyKey NatSessionTable::replyKeyOf(const NatSession& session) {
  NatReplyKey key;
  key.backend = session.backend;
  key.backend_port = session.backend_port;
  key.local_port = session.local_port;
  key.local_address = session.local_address;
  key.protocol = session.protocol;
  return key;
}

uint32_t NatSessionTable::otherClientBucket(uint64_t hash) const {
  const auto first = static_cast<uint32_t>(hash & client_mask_);
  const auto other = static_cast<uint32_t>(hash >> 40 & client_mask_);
  return other == first ? (first ^ 1) & client_mask_ : other;
}

NatClientEntry* NatSessionTable::clientEntryOf(const NatClientKey& key, uint64_t hash) const {
  NatClientBucket& first = clients_[hash & client_mask_];
  for (NatClientEntry& entry : first.ways) {
    if (clientMatches(entry, key)) return &entry;
  }
  if (first.ways[0].moved == 0) return nullptr;
  for (NatClientEntry& entry : clients_[otherClientBucket(hash)].ways) {
    if (clientMatches(entry, key)) return &entry;
  }
  return nullptr;
}

NatClientEntry* NatSessionTable::findClient(const NatClientKey& key, uint64_t hash) {
  return clientEntryOf(key, hash);
}

uint32_t NatSessionTable::otherSessionBucket(uint64_t hash) const {
  const auto first = static_cast<uint32_t>(hash & session_mask_);
  const auto other = static_cast<uint32_t>(hash >> 40 & session_mask_);
  return other == first ? (first ^ 1) & session_mask_ : other;
}

NatSession* NatSessionTable::sessionOf(const NatReplyKey& key, uint64_t hash) const {
  NatSessionBucket& first = sessions_[hash & session_mask_];
  for (NatSession& way : first.ways) {
    if (replyMatches(way, key)) return &way;
  }
  if (first.ways[0].moved == 0) return nullptr;
  for (NatSession& way : sessions_[otherSessionBucket(hash)].ways) {
    if (replyMatches(way, key)) return &way;
  }
  return nullptr;
}

NatSession* NatSessionTable::findReply(const NatReplyKey& key, uint64_t hash, uint32_t now_ms) {
  NatSession* session = sessionOf(key, hash);
  if (session != nullptr && !isHeld(*session)) {
    if (!expired(*session, now_ms)) return session;
    hold(*session, now_ms);
  }
  counters_->count(NatEvent::kReplyNoSession);
  return nullptr;
}

const NatSession* NatSessionTable::peekClient(const NatClientKey& key) const {
  const NatClientEntry* entry = clientEntryOf(key, clientHash(key));
  if (entry == nullptr) return nullptr;
  return &sessions_[(entry->session - 1) / kNatSessionsPerBucket]
              .ways[(entry->session - 1) % kNatSessionsPerBucket];
}

const NatSession* NatSessionTable::peekReply(const NatReplyKey& key) const {
  return sessionOf(key, replyHash(key));
}

bool NatSessionTable::placeClient(const NatSession& session, uint32_t place) {
  const NatClientKey key = clientKeyOf(session);
  const uint64_t hash = clientHash(key);
  NatClientBucket& first = clients_[hash & client_mask_];
  NatClientBucket& other = clients_[otherClientBucket(hash)];
  auto freeWay = [](NatClientBucket& bucket) -> NatClientEntry* {
    for (NatClientEntry& entry : bucket.ways) {
      if (entry.session == 0) return &entry;
    }
    return nullptr;
  };
  NatClientEntry* entry = freeWay(first);
  if (entry == nullptr) {
    entry = freeWay(other);
    if (entry != nullptr) {
      ++first.ways[0].moved;
    } else {
      // Both full: one of their entries moves to its own other bucket, where that has room.
      // Without this step, 0.36% of a million entries found both buckets full at half the
      // index's ways in use (pipeline_bench's 1M sessions); with it from the first bucket alone,
      // 5 of them.
      entry = makeRoom(first);
      if (entry == nullptr) {
        entry = makeRoom(other);
        if (entry == nullptr) return false;
        ++first.ways[0].moved;
      }
    }
  }
  const uint16_t moved = entry->moved;  // the bucket's count, kept in its first entry
  // The client's side shifts without reading the session only once its header is acknowledged.
  const ProxyHeaderState proxy_header =
      session.proxy_header == ProxyHeaderState::kNone ||
              session.proxy_header == ProxyHeaderState::kAcknowledged
          ? session.proxy_header
          : ProxyHeaderState::kPending;
  *entry = NatClientEntry{
      key.client,         key.client_port,       key.service,        place, proxy_header,
      session.local_port, session.local_address, session.backend_id, moved};
  return true;
}

NatClientEntry* NatSessionTable::makeRoom(NatClientBucket& bucket) {
  const auto index = static_cast<uint32_t>(&bucket - clients_);
  for (NatClientEntry& resident : bucket.ways) {
    NatClientKey key;
    key.client = resident.client;
    key.client_port = resident.client_port;
    key.service = resident.service;
    const uint64_t hash = clientHash(key);
    const uint32_t home = static_cast<uint32_t>(hash & client_mask_);
    const uint32_t elsewhere = home == index ? otherClientBucket(hash) : home;
    if (elsewhere == index) continue;
    NatClientBucket& alternative = clients_[elsewhere];
    for (NatClientEntry& room : alternative.ways) {
      if (room.session != 0) continue;
      const uint16_t room_count = room.moved;
      room = resident;
      room.moved = room_count;
      // The resident's home counts it as moved while it is away from it.
      if (home == index) {
        ++bucket.ways[0].moved;
      } else {
        --alternative.ways[0].moved;
      }
      resident.session = 0;
      return &resident;
    }
  }
  return nullptr;
}

void NatSessionTable::eraseClient(const NatSession& session) {
  const NatClientKey key = clientKeyOf(session);
  const uint64_t hash = clientHash(key);
  NatClientEntry* entry = clientEntryOf(key, hash);
  if (entry == nullptr) return;
  entry->session = 0;
  NatClientBucket& first = clients_[hash & client_mask_];
  const bool in_first = entry >= &first.ways[0] && entry < &first.ways[0] + kNatClientsPerBucket;
  if (!in_first) --first.ways[0].moved;
}

uint32_t NatSessionTable::spaceHome(uint32_t key) const {
  return (key * 0x9e3779b1u) >> 8 & space_mask_;
}

NatPortSpace* NatSessionTable::space(uint16_t local_address, uint16_t backend_id, bool create) {
  const uint32_t key = (uint32_t{local_address} << 16 | backend_id) + 1;
  // Linear probing; the room is twice the pairs, so runs stay short.
  uint32_t at = spaceHome(key);
  for (uint32_t probes = 0; probes <= space_mask_; ++probes) {
    NatPortSpace& room = spaces_[at];
    if (room.key == key) return &room;
    if (room.key == 0) {
      if (!create) return nullptr;
      room = NatPortSpace{key, 0, 0};
      return &room;
    }
    at = (at + 1) & space_mask_;
  }
  return nullptr;
}

void NatSessionTable::dropSpace(NatPortSpace& room) {
  // Take the pair's room out of its probe run without breaking the run for the others: move
  // back every later entry that may sit in the gap (backward-shift deletion).
  auto gap = static_cast<uint32_t>(&room - spaces_);
  uint32_t next = (gap + 1) & space_mask_;
  // A run ends at an empty place; the room is twice the pairs it is sized for, but a full one
  // must not spin.
  for (uint32_t looked = 0; spaces_[next].key != 0 && looked < space_mask_; ++looked) {
    const uint32_t home = spaceHome(spaces_[next].key);
    // Whether `next`'s home lies cyclically outside (gap, next]: then it may fill the gap.
    if (((next - home) & space_mask_) >= ((next - gap) & space_mask_)) {
      spaces_[gap] = spaces_[next];
      gap = next;
    }
    next = (next + 1) & space_mask_;
  }
  spaces_[gap] = NatPortSpace{};
}

uint32_t NatSessionTable::portsInUse(uint16_t local_address, uint16_t backend_id) const {
  const NatPortSpace* found =
      const_cast<NatSessionTable*>(this)->space(local_address, backend_id, false);
  return found == nullptr ? 0 : found->in_use;
}

uint16_t NatSessionTable::takePort(const NatOpening& opening, const NatLocalAddress& local,
                                   const NatPortSpace& room, NatSession*& way, NatEvent& refusal) {
  const ReplySteering& steering = *opening.steering;
  const uint32_t base = steering.baseOf(opening.backend, toNetwork(opening.backend_port),
                                        local.address, opening.protocol);
  const IpFamily family = opening.backend.family;
  const uint32_t share = steering.shareOf(base, opening.queue, family, opening.protocol);
  if (room.in_use >= share) {
    refusal = NatEvent::kPortsExhausted;
    return 0;
  }
  NatReplyKey key;
  key.backend = opening.backend.bytes;
  key.backend_port = opening.backend_port;
  key.local_address = local.id;
  key.protocol = opening.protocol;
  uint16_t from = room.cursor;
  const uint32_t limit = std::min(kPortSearchLimit, share);
  // While the pair has room to spare, a free port whose session would go to its other bucket is
  // kept aside as the search looks on for one whose first bucket has room: a reply reads only
  // its first bucket unless its session is in the other, which it then waits for as well. The
  // cursor comes round to a port passed over again.
  const bool prefer_first = room.in_use < share / 2;
  NatSession* second_choice = nullptr;
  uint16_t second_choice_port = 0;
  for (uint32_t looked = 0; looked < limit; ++looked) {
    if (second_choice != nullptr && looked >= kFirstBucketSearch) break;
    const uint16_t port = steering.nextPortFor(base, opening.queue, family, opening.protocol, from,
                                               steering.rangeSize());
    if (port == 0) break;
    from = port == steering.lastPort() ? steering.firstPort() : static_cast<uint16_t>(port + 1);
    // The port is free for this backend when its tuple is in neither of its buckets (live or
    // held), and one of them has a free way.
    key.local_port = toNetwork(port);
    const uint64_t hash = replyHash(key);
    if (sessionOf(key, hash) != nullptr) continue;
    way = freeWay(sessions_[hash & session_mask_]);
    if (way != nullptr) return port;
    if (second_choice != nullptr) continue;
    second_choice = freeWay(sessions_[otherSessionBucket(hash)]);
    second_choice_port = port;
    if (second_choice != nullptr && !prefer_first) break;
  }
  if (second_choice != nullptr) {
    way = second_choice;
    return second_choice_port;
  }
  refusal = NatEvent::kPortSearchLimit;
  return 0;
}

NatClientEntry* NatSessionTable::open(const NatOpening& opening, uint32_t now_ms) {
  if (live_ + held_ >= limit_) {
    counters_->count(NatEvent::kTableFull);
    return nullptr;
  }
  NatEvent refusal = NatEvent::kPortsExhausted;
  const size_t count = opening.local_address_count;
  for (size_t tried = 0; tried < count; ++tried) {
    const NatLocalAddress& local = opening.local_addresses[(opening.start + tried) % count];
    if (local.address.family != opening.backend.family) continue;
    NatPortSpace* room = space(local.id, opening.backend_id, true);
    if (room == nullptr) {
      refusal = NatEvent::kSpacesFull;
      continue;
    }
    NatSession* way = nullptr;
    NatEvent why = NatEvent::kPortsExhausted;
    const uint16_t port = takePort(opening, local, *room, way, why);
    // Free ports that the search did not reach say more than an address whose share is taken.
    if (refusal != NatEvent::kPortSearchLimit) refusal = why;
    if (port == 0) {
      if (room->in_use == 0) dropSpace(*room);  // made for nothing: give the room back
      continue;
    }
    NatSession& session = *way;
    const uint16_t moved = session.moved;  // its bucket's count, when it is the first way
    session = NatSession{};
    session.moved = moved;
    session.client = opening.client.client;
    session.client_port = opening.client.client_port;
    session.service = opening.client.service;
    session.backend = opening.backend.bytes;
    session.backend_port = opening.backend_port;
    session.local_port = toNetwork(port);
    session.backend_id = opening.backend_id;
    session.local_address = local.id;
    session.last_seen_ms = now_ms;
    session.state = initialState(opening.protocol, opening.tcp_flags);
    session.protocol = opening.protocol;
    session.client_family = opening.client_family;
    session.backend_family = opening.backend.family;
    if (!placeClient(session, placeOf(session))) {
      session.flags = 0;
      if (room->in_use == 0) dropSpace(*room);
      counters_->count(NatEvent::kIndexFull);
      return nullptr;
    }
    session.flags = kNatSessionInUse;
    NatSessionBucket& first = firstBucketOf(session);
    if (!inBucket(session, first)) ++first.ways[0].moved;
    ++room->in_use;
    room->cursor = port == opening.steering->lastPort() ? opening.steering->firstPort()
                                                        : static_cast<uint16_t>(port + 1);
    ++live_;
    gaugeConnection(traffic_, session.service, session.backend_id, +1);
    counters_->count(NatEvent::kOpened);
    return clientEntryOf(opening.client, clientHash(opening.client));
  }
  counters_->count(refusal);
  return nullptr;
}

bool NatSessionTable::touchFromClient(NatClientEntry& entry, uint8_t protocol, uint8_t tcp_flags,
                                      uint32_t now_ms) {
  if (!clientTouchesSession(protocol, tcp_flags)) return true;
  NatSession& session = sessionOf(entry);
  // A store the core need not wait for: the session's line comes in behind it.
  session.last_seen_ms = now_ms;
  if ((tcp_flags & (kTcpSyn | kTcpFin | kTcpRst)) == 0) return true;
  if ((tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn) {
    return session.state != ConnectionState::kTcpClosing;
  }
  if ((tcp_flags & (kTcpFin | kTcpRst)) != 0) session.state = ConnectionState::kTcpClosing;
  return true;
}

void NatSessionTable::touchFromBackend(NatSession& session, uint8_t tcp_flags, uint32_t now_ms) {
  session.last_seen_ms = now_ms;
  if (session.protocol != kProtocolTcp) {
    // An answer shows the backend is there: a UDP session is confirmed by it.
    session.state = ConnectionState::kUdp;
    return;
  }
  if ((tcp_flags & (kTcpFin | kTcpRst)) != 0) {
    session.state = ConnectionState::kTcpClosing;
  } else if (session.state == ConnectionState::kTcpOpening &&
             (tcp_flags & (kTcpSyn | kTcpAck)) == (kTcpSyn | kTcpAck)) {
    // The backend accepted: from berth's side the connection is made.
    session.state = ConnectionState::kTcpEstablished;
  }
}

void NatSessionTable::hold(NatSession& session, uint32_t now_ms) {
  eraseClient(session);
  session.flags |= kNatSessionHeld;
  session.last_seen_ms = now_ms;
  --live_;
  ++held_;
  gaugeConnection(traffic_, session.service, session.backend_id, -1);
  counters_->count(NatEvent::kClosed);
}

void NatSessionTable::end(NatSession& session, uint32_t now_ms, NatEvent why) {
  if (!inUse(session) || isHeld(session)) return;
  hold(session, now_ms);
  counters_->count(why);
}

NatSessionBucket& NatSessionTable::firstBucketOf(const NatSession& session) const {
  return sessions_[replyHash(replyKeyOf(session)) & session_mask_];
}

bool NatSessionTable::inBucket(const NatSession& session, const NatSessionBucket& bucket) {
  return &session >= &bucket.ways[0] && &session < &bucket.ways[0] + kNatSessionsPerBucket;
}

void NatSessionTable::release(NatSession& session) {
  NatSessionBucket& first = firstBucketOf(session);
  if (!inBucket(session, first)) --first.ways[0].moved;
  if (NatPortSpace* room = space(session.local_address, session.backend_id, false)) {
    if (--room->in_use == 0) dropSpace(*room);
  }
  session.flags = 0;
  --held_;
  counters_->count(NatEvent::kReleased);
}

void NatSessionTable::sweep(uint32_t now_ms, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    NatSessionBucket& bucket = sessions_[sweep_cursor_];
    sweep_cursor_ = (sweep_cursor_ + 1) & session_mask_;
    for (NatSession& session : bucket.ways) {
      if (!inUse(session) || !expired(session, now_ms)) continue;
      if (isHeld(session)) {
        release(session);
      } else {
        hold(session, now_ms);
      }
    }
  }
  prefetchBucket(&sessions_[sweep_cursor_]);
}

}  // namespace berth
