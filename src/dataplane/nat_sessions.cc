#include "berth/dataplane/nat_sessions.h"

#include <algorithm>
#include <bit>

#include "berth/net/flow_key.h"
#include "berth/net/packet_parser.h"

namespace berth {
namespace {

// A key's 32-bit words through the table's secret multipliers, as keyedConnectionHash does for
// the connection table (conntrack.h, ConnectionHashKey), to 64 bits: the low ones pick the
// bucket, the high ones are the slot's tag.
uint64_t keyedHash(const ConnectionHashKey& key, const std::array<uint8_t, 16>& address,
                   uint32_t word4, uint32_t word5) {
  uint32_t words[4];
  std::memcpy(words, address.data(), 16);
  const std::array<uint64_t, 8>& m = key.multipliers;
  uint64_t sum = m[0] + m[1] * words[0] + m[2] * words[1] + m[3] * words[2] + m[4] * words[3] +
                 m[5] * word4 + m[6] * word5;
  return murmurFinalizer(sum);
}

// A tag is never 0, so that an empty slot (tag 0) never matches.
uint32_t tagOf(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }

bool sameAddress(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b) {
  uint64_t x[2];
  uint64_t y[2];
  std::memcpy(x, a.data(), 16);
  std::memcpy(y, b.data(), 16);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

uint16_t toNetwork(uint16_t port) { return static_cast<uint16_t>(port >> 8 | port << 8); }

}  // namespace

size_t NatSessionTable::indexBucketsFor(uint32_t sessions) {
  const size_t buckets =
      (2 * size_t{sessions} + NatIndexBucket::kSlots - 1) / NatIndexBucket::kSlots;
  return std::bit_ceil(std::max<size_t>(buckets, 1));
}

size_t NatSessionTable::spacesFor(uint32_t pairs) {
  return std::bit_ceil(std::max<size_t>(2 * size_t{pairs}, 2));
}

NatSessionTable::NatSessionTable(const NatSessionMemory& memory, const ConntrackTimeouts& timeouts,
                                 NatCounters* counters, const ConnectionHashKey& hash_key,
                                 uint32_t reuse_hold_ms)
    : sessions_(memory.sessions),
      session_count_(memory.session_count),
      client_index_(memory.client_index),
      reply_index_(memory.reply_index),
      mask_(static_cast<uint32_t>(memory.index_buckets - 1)),
      spaces_(memory.spaces),
      space_mask_(static_cast<uint32_t>(memory.space_count - 1)),
      timeout_by_state_(timeoutsByState(timeouts)),
      reuse_hold_ms_(reuse_hold_ms),
      counters_(counters),
      hash_key_(hash_key) {
  // The free sessions form a list through last_seen_ms (the next one's index + 1), lowest first.
  for (uint32_t i = session_count_; i > 0; --i) {
    sessions_[i - 1].flags = 0;
    sessions_[i - 1].last_seen_ms = free_head_;
    free_head_ = i;
  }
}

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

void NatSessionTable::prefetchSessionOf(const NatIndexBucket* index, uint64_t hash) const {
  // The home bucket's slots only: an entry placed past it is rare, and found without the hint.
  const NatIndexBucket& bucket = index[hash & mask_];
  const uint32_t tag = tagOf(hash);
  for (size_t slot = 0; slot < NatIndexBucket::kSlots; ++slot) {
    if (bucket.tags[slot] == tag && bucket.sessions[slot] != 0) {
      __builtin_prefetch(&sessions_[bucket.sessions[slot] - 1]);
    }
  }
}

template <typename Matches>
NatSessionTable::Found NatSessionTable::findIn(NatIndexBucket* index, uint64_t hash,
                                               const Matches& matches) const {
  const uint32_t tag = tagOf(hash);
  const auto home = static_cast<uint32_t>(hash & mask_);
  for (uint32_t steps = 0; steps < kMaxSteps; ++steps) {
    NatIndexBucket& bucket = index[(home + steps) & mask_];
    for (size_t slot = 0; slot < NatIndexBucket::kSlots; ++slot) {
      if (bucket.tags[slot] == tag && bucket.sessions[slot] != 0 &&
          matches(sessions_[bucket.sessions[slot] - 1])) {
        return Found{&bucket, slot, home, steps};
      }
    }
    // No entry from here or before was placed further on: the key is nowhere else.
    if (bucket.passed == 0) break;
  }
  return Found{};
}

bool NatSessionTable::place(NatIndexBucket* index, uint64_t hash, uint32_t session) {
  const auto home = static_cast<uint32_t>(hash & mask_);
  for (uint32_t steps = 0; steps < kMaxSteps; ++steps) {
    NatIndexBucket& bucket = index[(home + steps) & mask_];
    for (size_t slot = 0; slot < NatIndexBucket::kSlots; ++slot) {
      if (bucket.sessions[slot] != 0) continue;
      bucket.tags[slot] = tagOf(hash);
      bucket.sessions[slot] = session + 1;
      for (uint32_t before = 0; before < steps; ++before) ++index[(home + before) & mask_].passed;
      return true;
    }
  }
  return false;
}

void NatSessionTable::erase(NatIndexBucket* index, const Found& found) {
  if (found.bucket == nullptr) return;
  found.bucket->sessions[found.slot] = 0;
  found.bucket->tags[found.slot] = 0;
  for (uint32_t before = 0; before < found.steps; ++before) {
    --index[(found.home + before) & mask_].passed;
  }
}

NatSession* NatSessionTable::findClient(const NatClientKey& key, uint64_t hash, uint32_t now_ms) {
  const Found found = findIn(client_index_, hash, [&](const NatSession& session) {
    return sameAddress(session.client, key.client) && session.client_port == key.client_port &&
           session.service == key.service;
  });
  if (found.bucket == nullptr) return nullptr;
  NatSession& session = sessions_[found.bucket->sessions[found.slot] - 1];
  if (!expired(session, now_ms)) return &session;
  hold(session, now_ms);
  return nullptr;
}

NatSession* NatSessionTable::findReply(const NatReplyKey& key, uint64_t hash, uint32_t now_ms) {
  const Found found = findIn(reply_index_, hash, [&](const NatSession& session) {
    return sameAddress(session.backend, key.backend) && session.backend_port == key.backend_port &&
           session.local_port == key.local_port && session.local_address == key.local_address &&
           session.protocol == key.protocol;
  });
  NatSession* session =
      found.bucket == nullptr ? nullptr : &sessions_[found.bucket->sessions[found.slot] - 1];
  if (session != nullptr && (session->flags & kNatSessionHeld) == 0) {
    if (!expired(*session, now_ms)) return session;
    hold(*session, now_ms);
  }
  counters_->count(NatEvent::kReplyNoSession);
  return nullptr;
}

const NatSession* NatSessionTable::peekClient(const NatClientKey& key) const {
  const Found found = findIn(client_index_, clientHash(key), [&](const NatSession& session) {
    return sameAddress(session.client, key.client) && session.client_port == key.client_port &&
           session.service == key.service;
  });
  return found.bucket == nullptr ? nullptr : &sessions_[found.bucket->sessions[found.slot] - 1];
}

const NatSession* NatSessionTable::peekReply(const NatReplyKey& key) const {
  const Found found = findIn(reply_index_, replyHash(key), [&](const NatSession& session) {
    return sameAddress(session.backend, key.backend) && session.backend_port == key.backend_port &&
           session.local_port == key.local_port && session.local_address == key.local_address &&
           session.protocol == key.protocol;
  });
  return found.bucket == nullptr ? nullptr : &sessions_[found.bucket->sessions[found.slot] - 1];
}

NatPortSpace* NatSessionTable::space(uint16_t local_address, uint16_t backend_id, bool create) {
  const uint32_t key = (uint32_t{local_address} << 16 | backend_id) + 1;
  // Linear probing from a mix of the key; the room is twice the pairs, so runs stay short.
  uint32_t at = spaceHome(key);
  for (uint32_t probes = 0; probes <= space_mask_; ++probes) {
    NatPortSpace& space = spaces_[at];
    if (space.key == key) return &space;
    if (space.key == 0) {
      if (!create) return nullptr;
      space = NatPortSpace{key, 0, 0};
      return &space;
    }
    at = (at + 1) & space_mask_;
  }
  return nullptr;
}

uint32_t NatSessionTable::spaceHome(uint32_t key) const {
  return (key * 0x9e3779b1u) >> 8 & space_mask_;
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
                                   NatPortSpace& space, NatEvent& refusal) const {
  const ReplySteering& steering = *opening.steering;
  const uint16_t backend_port = toNetwork(opening.backend_port);
  const uint32_t base =
      steering.baseOf(opening.backend, backend_port, local.address, opening.protocol);
  const IpFamily family = opening.backend.family;
  const uint32_t share = steering.shareOf(base, opening.queue, family, opening.protocol);
  if (space.in_use >= share) {
    refusal = NatEvent::kPortsExhausted;
    return 0;
  }
  NatReplyKey key;
  key.backend = opening.backend.bytes;
  key.backend_port = opening.backend_port;
  key.local_address = local.id;
  key.protocol = opening.protocol;
  uint16_t from = space.cursor;
  uint32_t looked = 0;
  const uint32_t limit = std::min(kPortSearchLimit, share);
  while (looked < limit) {
    const uint16_t port = steering.nextPortFor(base, opening.queue, family, opening.protocol, from,
                                               steering.rangeSize());
    if (port == 0) break;
    ++looked;
    key.local_port = toNetwork(port);
    if (peekReply(key) == nullptr) return port;
    from = port == steering.lastPort() ? steering.firstPort() : static_cast<uint16_t>(port + 1);
  }
  refusal = NatEvent::kPortSearchLimit;
  return 0;
}

NatSession* NatSessionTable::open(const NatOpening& opening, uint32_t now_ms) {
  if (free_head_ == 0) {
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
    const uint16_t port = takePort(opening, local, *room, refusal);
    if (port == 0) {
      if (room->in_use == 0) dropSpace(*room);  // made for nothing: give the room back
      continue;
    }
    const uint32_t index = free_head_ - 1;
    NatSession& session = sessions_[index];
    const uint32_t next_free = session.last_seen_ms;
    session = NatSession{};
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
    session.flags = kNatSessionInUse;
    if (!place(client_index_, clientHash(opening.client), index)) {
      session.flags = 0;
      session.last_seen_ms = next_free;
      if (room->in_use == 0) dropSpace(*room);
      counters_->count(NatEvent::kIndexFull);
      return nullptr;
    }
    if (!place(reply_index_, replyHash(replyKeyOf(session)), index)) {
      erase(client_index_, findIn(client_index_, clientHash(opening.client),
                                  [&](const NatSession& s) { return &s == &session; }));
      session.flags = 0;
      session.last_seen_ms = next_free;
      if (room->in_use == 0) dropSpace(*room);
      counters_->count(NatEvent::kIndexFull);
      return nullptr;
    }
    free_head_ = next_free;
    ++room->in_use;
    room->cursor = port == opening.steering->lastPort() ? opening.steering->firstPort()
                                                        : static_cast<uint16_t>(port + 1);
    ++live_;
    gauge(session, +1);
    counters_->count(NatEvent::kOpened);
    return &session;
  }
  counters_->count(refusal);
  return nullptr;
}

void NatSessionTable::touch(NatSession& session, uint8_t tcp_flags, bool from_client,
                            uint32_t now_ms) {
  session.last_seen_ms = now_ms;
  if (session.protocol != kProtocolTcp) {
    // A reply shows the backend is there: a UDP session is confirmed by its backend's answer.
    if (!from_client) session.state = ConnectionState::kUdp;
    return;
  }
  if ((tcp_flags & (kTcpFin | kTcpRst)) != 0) {
    session.state = ConnectionState::kTcpClosing;
  } else if (session.state == ConnectionState::kTcpOpening && from_client &&
             (tcp_flags & (kTcpSyn | kTcpAck)) == kTcpAck) {
    // The client's ACK of the backend's SYN-ACK completes the handshake.
    session.state = ConnectionState::kTcpEstablished;
  }
}

void NatSessionTable::gauge(const NatSession& session, int delta) {
  gaugeConnection(traffic_, session.service, session.backend_id, delta);
}

void NatSessionTable::hold(NatSession& session, uint32_t now_ms) {
  const NatClientKey key = clientKeyOf(session);
  erase(client_index_, findIn(client_index_, clientHash(key),
                              [&](const NatSession& s) { return &s == &session; }));
  session.flags |= kNatSessionHeld;
  session.last_seen_ms = now_ms;
  --live_;
  ++held_;
  gauge(session, -1);
  counters_->count(NatEvent::kClosed);
}

void NatSessionTable::end(NatSession& session, uint32_t now_ms) {
  if ((session.flags & (kNatSessionInUse | kNatSessionHeld)) != kNatSessionInUse) return;
  hold(session, now_ms);
  counters_->count(NatEvent::kReopened);
}

void NatSessionTable::release(uint32_t index) {
  NatSession& session = sessions_[index];
  erase(reply_index_, findIn(reply_index_, replyHash(replyKeyOf(session)),
                             [&](const NatSession& s) { return &s == &session; }));
  if (NatPortSpace* room = space(session.local_address, session.backend_id, false)) {
    if (--room->in_use == 0) dropSpace(*room);
  }
  session.flags = 0;
  session.last_seen_ms = free_head_;
  free_head_ = index + 1;
  --held_;
  counters_->count(NatEvent::kReleased);
}

void NatSessionTable::sweep(uint32_t now_ms, uint32_t count) {
  for (uint32_t i = 0; i < count && session_count_ > 0; ++i) {
    const uint32_t index = sweep_cursor_;
    sweep_cursor_ = sweep_cursor_ + 1 == session_count_ ? 0 : sweep_cursor_ + 1;
    NatSession& session = sessions_[index];
    if ((session.flags & kNatSessionInUse) == 0 || !expired(session, now_ms)) continue;
    if ((session.flags & kNatSessionHeld) == 0) {
      hold(session, now_ms);
    } else {
      release(index);
    }
  }
}

}  // namespace berth
