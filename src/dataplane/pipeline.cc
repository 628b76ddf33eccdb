#include "berth/dataplane/pipeline.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "berth/dataplane/counters.h"
#include "berth/dataplane/icmp_reply.h"
#include "berth/dataplane/neighbor_reply.h"
#include "berth/maglev/consistent_hash.h"
#include "berth/net/flow_hash.h"
#include "berth/util/scratch_array.h"
#include "dataplane/fullnat_path.h"

namespace berth {
namespace {

constexpr uint8_t kRouterSolicitation = 133;
constexpr uint8_t kRedirect = 137;

// Six bytes compared as a 4- and a 2-byte load, where memcmp would be a call.
inline bool sameMac(const uint8_t* bytes, const MacAddress& mac) {
  uint32_t frame_high;
  uint16_t frame_low;
  uint32_t mac_high;
  uint16_t mac_low;
  std::memcpy(&frame_high, bytes, 4);
  std::memcpy(&frame_low, bytes + 4, 2);
  std::memcpy(&mac_high, mac.bytes.data(), 4);
  std::memcpy(&mac_low, mac.bytes.data() + 4, 2);
  return ((frame_high ^ mac_high) | static_cast<uint32_t>(frame_low ^ mac_low)) == 0;
}

bool isNeighborDiscovery(const Frame& frame, const ParsedPacket& packet) {
  if (packet.flow.protocol != kProtocolIcmpv6 || packet.icmp_error || packet.l4_offset == 0) {
    return false;
  }
  const uint8_t type = frame.data[packet.l4_offset];
  return type >= kRouterSolicitation && type <= kRedirect;
}

// What an ARP or ND frame claims about a next hop being resolved: a reply to berth's request is
// recorded in the next hop's slot for the management thread to decide on; an announcement is
// recorded where the port learns from them; any other claim of a MAC other than the one in use
// is refused and counted (docs/neighbors.md). A claim of the MAC in use changes nothing.
// Returns whether the claim was refused.
bool judgeNeighborClaim(const SnapshotPort& port, const Frame& frame,
                        const NeighborObservation& seen, WorkerState& worker) {
  auto it = port.resolving.find(seen.address);
  if (it == port.resolving.end()) return false;
  const ResolvingNextHop& hop = it->second;
  NeighborSlot* slot = hop.slot.get();
  const bool other_mac = hop.mac != seen.mac;
  bool refused = false;
  auto refuse = [&](NeighborRefusal refusal) {
    if (!other_mac) return;
    refused = true;
    worker.counters->count(refusal);
    if (slot != nullptr) slot->countRefused();
  };
  switch (seen.claim) {
    case NeighborClaim::kReply:
      // berth asks from the port's MAC, so a reply to it comes to that MAC.
      if (!seen.from_claimed_mac) {
        refuse(NeighborRefusal::kSourceMismatch);
      } else if (slot == nullptr || !sameMac(frame.data, port.mac) || !slot->asking()) {
        refuse(NeighborRefusal::kUnsolicited);
      } else if (other_mac) {
        if (!slot->recordOtherAnswer(seen.mac)) refuse(NeighborRefusal::kLateAnswer);
      } else {
        slot->recordKnownAnswered();
      }
      return refused;
    case NeighborClaim::kAnnouncement:
      if (!other_mac) return false;
      if (!port.learn_announcements || slot == nullptr) {
        refuse(NeighborRefusal::kAnnouncement);
      } else if (!seen.from_claimed_mac) {
        refuse(NeighborRefusal::kSourceMismatch);
      } else {
        slot->recordAnnouncement(seen.mac);
      }
      return refused;
    case NeighborClaim::kRequest:
      refuse(NeighborRefusal::kNotAReply);
      return refused;
  }
  return refused;
}

// Whether `packet` is addressed to the port itself, not to a VIP: one of its addresses, or an
// IPv6 link-local one (the kernel interface's own, fe80::/10).
bool toPortAddress(const SnapshotPort& port, const ParsedPacket& packet) {
  const std::array<uint8_t, 16>& destination = packet.flow.destination;
  if (packet.flow.family == IpFamily::kIpv4) {
    return port.ipv4 && port.ipv4->bytes == destination;
  }
  if (destination[0] == 0xfe && (destination[1] & 0xc0) == 0x80) return true;
  return port.ipv6 && port.ipv6->bytes == destination;
}

// A frame that is not berth's: the kernel's, where the port has an interface for it, else
// dropped for `reason`.
Verdict notOurs(const SnapshotPort& port, const Frame& frame, const ParsedPacket& packet,
                WorkerState& worker, DropReason reason) {
  if (port.to_kernel) return toKernel(classifyForKernel(port, frame, packet));
  worker.counters->count(reason);
  return Verdict::kDrop;
}

// ARP and ND: judge what a frame claims about a next hop, answer questions for an address berth
// holds on this port, and hand the rest to the kernel interface (to this port's MAC or to all),
// or drop it. Rare next to data packets.
Verdict handleNeighborFrame(const Snapshot& snapshot, uint32_t port_index, Frame& frame,
                            const ParsedPacket& packet, WorkerState& worker) {
  const SnapshotPort& port = snapshot.port(port_index);
  bool refused = false;
  if (std::optional<NeighborObservation> seen = observeNeighbor(frame, packet)) {
    refused = judgeNeighborClaim(port, frame, *seen, worker);
  }
  const std::optional<IpAddress> asked = neighborQuery(frame, packet);
  if (asked &&
      std::find(port.answered.begin(), port.answered.end(), *asked) != port.answered.end()) {
    if (buildNeighborReply(frame, packet, *asked, port.mac)) {
      worker.counters->arp_nd_replies.add(1);
      return Verdict::kTransmit;
    }
  }
  // The kernel resolves its own neighbours (BGP's router) from the replies and announcements;
  // berth answers the questions for the port's addresses itself (docs/exception-path.md). A
  // claim berth refused about one of its next hops is kept from the kernel too, so a spoofer
  // cannot take over the kernel's entry for the gateway either.
  const bool to_port = sameMac(frame.data, port.mac) || (frame.data[0] & 1) != 0;
  if (port.to_kernel && to_port && !refused) return toKernel(ExceptionClass::kNeighbor);
  worker.counters->count(DropReason::kNeighborNotAnswered);
  return Verdict::kDrop;
}

// TCP or UDP (not an ICMP error about them) to a port outside the local addresses' pool.
bool outsideNatPool(const SnapshotPort& port, const ParsedPacket& packet) {
  const uint8_t protocol = packet.flow.protocol;
  if ((protocol != kProtocolTcp && protocol != kProtocolUdp) || packet.icmp_error ||
      packet.later_fragment) {
    return false;
  }
  const uint16_t local_port = ntohs(packet.flow.destination_port);
  return local_port < port.nat_first_port || local_port > port.nat_last_port;
}

Verdict drop(WorkerState& worker, DropReason reason) {
  worker.counters->count(reason);
  return Verdict::kDrop;
}

}  // namespace

ExceptionClass classifyForKernel(const SnapshotPort& port, const Frame& frame,
                                 const ParsedPacket& packet) {
  if (packet.type == FrameType::kArp) return ExceptionClass::kNeighbor;
  if (packet.type != FrameType::kIp) return ExceptionClass::kOther;
  if (isNeighborDiscovery(frame, packet)) return ExceptionClass::kNeighbor;
  const uint8_t protocol = packet.flow.protocol;
  if (packet.icmp_error || protocol == kProtocolIcmp || protocol == kProtocolIcmpv6) {
    return ExceptionClass::kIcmp;
  }
  const IpAddress source{packet.flow.family, packet.flow.source};
  auto from = [&source](const std::vector<IpAddress>& peers) {
    return std::find(peers.begin(), peers.end(), source) != peers.end();
  };
  if (protocol == kProtocolUdp) {
    const bool sync = !packet.later_fragment && port.sync_port != 0 &&
                      packet.flow.destination_port == port.sync_port && from(port.sync_peers);
    return sync ? ExceptionClass::kSync : ExceptionClass::kOther;
  }
  if (protocol != kProtocolTcp) return ExceptionClass::kOther;
  constexpr uint16_t kBgpPort = (179 >> 8) | ((179 & 0xff) << 8);  // network byte order
  if (!packet.later_fragment &&
      (packet.flow.source_port == kBgpPort || packet.flow.destination_port == kBgpPort) &&
      from(port.bgp_peers)) {
    return ExceptionClass::kBgp;
  }
  if (port.health_targets.contains(source)) return ExceptionClass::kHealth;
  return ExceptionClass::kOther;
}

namespace {

// A frame between the two stages: classified, hashed, and its table slot being fetched.
struct Classified {
  ParsedPacket packet;
  const SnapshotService* service = nullptr;  // null: the verdict is already decided
  const uint16_t* entry = nullptr;
  uint32_t hash = 0;  // the flow hash: the Maglev table's slot
  // With a connection table: the bucket of the flow's connection (keyed, never the flow hash),
  // and its bucket in the peers' flows, which are keyed alike.
  uint32_t bucket_hash = 0;
  // Full-NAT: a reply's local address (its stable id; -1: not a reply), and the hash of the
  // session lookup its direction takes (the client's or the reply's key).
  int32_t nat_local = -1;
  uint64_t nat_hash = 0;
};

// Where a frame stands after stage one's second pass: decided (dropped, answered, the kernel's),
// or bound for stage two through the table and connection table, or through Full-NAT's sessions.
// Kept per frame, so that each later pass tells the two paths apart with the one test it made
// before Full-NAT was there.
enum class Stage : uint8_t { kDecided, kPicked, kSessions };

ConnectionKey connectionOf(const Classified& classified) {
  return ConnectionKey::of(classified.packet.flow, classified.service->hash_fields,
                           static_cast<uint16_t>(classified.service->counter_id));
}

// Stage one, second pass: from the frame's parse (`error`, out.packet) to its service, or for a
// reply to a Full-NAT local address its local address (out.service null). Returns kDecided with
// the verdict decided for frames that end here (drops, ARP/ND); otherwise sets out.service.
Stage classify(const Snapshot& snapshot, uint32_t device, Frame& frame, WorkerState& worker,
               ParseError error, Classified& out, Verdict& verdict) {
  ParsedPacket& packet = out.packet;
  verdict = Verdict::kDrop;
  if (error != ParseError::kNone) {
    worker.counters->count(error);
    return Stage::kDecided;
  }
  const uint32_t port_index = snapshot.receivingPort(device, packet);
  if (port_index == kNoPort) {
    worker.counters->count(DropReason::kVlanNotConfigured);
    return Stage::kDecided;
  }
  frame.port = port_index;
  if (packet.type == FrameType::kArp) {
    verdict = handleNeighborFrame(snapshot, port_index, frame, packet, worker);
    return Stage::kDecided;
  }
  const SnapshotPort& port = snapshot.port(port_index);
  // A promiscuous port, or one on a bridge, also sees unicast frames meant for other hosts. ND
  // goes to multicast groups, so it is let through to be judged by its contents; other multicast
  // and broadcast is the kernel interface's, where the port has one.
  const bool to_our_mac = sameMac(frame.data, port.mac);
  const bool to_multicast = (frame.data[0] & 1) != 0;
  if (packet.type != FrameType::kIp) {
    verdict = to_our_mac || to_multicast
                  ? notOurs(port, frame, packet, worker, DropReason::kOtherEtherType)
                  : drop(worker, DropReason::kOtherEtherType);
    return Stage::kDecided;
  }
  if (packet.flow.family == IpFamily::kIpv6 && (to_our_mac || to_multicast) &&
      isNeighborDiscovery(frame, packet)) {
    verdict = handleNeighborFrame(snapshot, port_index, frame, packet, worker);
    return Stage::kDecided;
  }
  if (!to_our_mac) {
    verdict = to_multicast ? notOurs(port, frame, packet, worker, DropReason::kNotForUs)
                           : drop(worker, DropReason::kNotForUs);
    return Stage::kDecided;
  }

  std::optional<uint32_t> service_index;
  if (packet.later_fragment) {
    // A later fragment carries no ports, so it follows its datagram only to a service that hashes
    // without them. RSS spreads a datagram's fragments over cores by their 3-tuple at best, so
    // there is no per-core place to wait for the first fragment's ports (DPVS drops these too).
    service_index = snapshot.findFragmentService(packet.flow);
  } else {
    service_index = snapshot.findService(packet.flow);
  }
  if (!service_index && worker.nat != nullptr) {
    // A backend's reply to one of the port's Full-NAT local addresses (docs/fullnat.md).
    out.nat_local = port.natAddressId(packet.flow.family, packet.flow.destination);
    if (out.nat_local >= 0) {
      if (port.to_kernel && outsideNatPool(port, packet)) {
        // The kernel's: a health probe's answer to the local address it came from.
        verdict = notOurs(port, frame, packet, worker, DropReason::kNoService);
        return Stage::kDecided;
      }
      out.service = nullptr;  // a reply: its session names its service
      return Stage::kSessions;
    }
  }
  if (!service_index) {
    // Not a VIP's: traffic to the port's own address is the kernel's (BGP, SSH, ping).
    const DropReason reason =
        packet.later_fragment ? DropReason::kLaterFragment : DropReason::kNoService;
    verdict = toPortAddress(port, packet) ? notOurs(port, frame, packet, worker, reason)
                                          : drop(worker, reason);
    return Stage::kDecided;
  }
  out.service = &snapshot.service(*service_index);
  return out.service->forwarding == Forwarding::kFullNat ? Stage::kSessions : Stage::kPicked;
}

// The flow hash and its table slot, prefetched (stage one's third pass, below).
inline void hashSlot(Classified& out) {
  const SnapshotService& service = *out.service;
  out.hash = flowHash(out.packet.flow, service.hash_fields, service.hash_seed);
  out.entry = service.table.entryFor(out.hash);
  __builtin_prefetch(out.entry);
}

// Stage one, third pass: the flow hash, its table slot (prefetched: the table is 128 KiB at the
// default M, an L2 read per packet, which the rest of the burst's work then overlaps) and, with a
// connection table, the connection's bucket hash.
void hashFlow(const WorkerState& worker, Classified& out) {
  const ParsedPacket& packet = out.packet;
  const SnapshotService& service = *out.service;
  hashSlot(out);
  if (const ConnectionTable* table = worker.conntrack; table != nullptr) {
    const uint16_t source_port = ConnectionKey::sourcePortOf(packet.flow, service.hash_fields);
    out.bucket_hash = table->bucketHash(packet.flow.source, source_port,
                                        static_cast<uint16_t>(service.counter_id));
  }
}

// Full-NAT's part of stage one's third pass: a reply's session hash, or a client's table slot
// (its pick, should it open a session) and session hash. Out of line, so that the other modes'
// path through processFrames() stays as it was.
[[gnu::noinline]] void hashFullNat(const WorkerState& worker, Classified& out) {
  const ParsedPacket& packet = out.packet;
  if (out.service == nullptr) {
    out.nat_hash =
        worker.nat->replyHash(natReplyKeyOf(packet, static_cast<uint16_t>(out.nat_local)));
    return;
  }
  hashSlot(out);
  if (worker.nat != nullptr)
    out.nat_hash = worker.nat->clientHash(natClientKeyOf(packet, *out.service));
}

// The snapshot index of the backend `connection` went to, or kNoBackendIndex if the snapshot no
// longer has it. The index is cached in the connection for its snapshot generation.
uint32_t backendOf(const Snapshot& snapshot, Connection& connection) {
  const auto generation = static_cast<uint16_t>(snapshot.generation());
  if (connection.generation == generation && connection.backend_index < snapshot.backendCount() &&
      snapshot.backend(connection.backend_index).counter_id == connection.backend) {
    return connection.backend_index;
  }
  const uint32_t index = snapshot.backendIndexOf(connection.backend);
  if (index != kNoBackendIndex) {
    connection.backend_index = static_cast<uint16_t>(index);
    connection.generation = generation;
  }
  return index;
}

void remember(const Snapshot& snapshot, Connection& connection, uint32_t backend) {
  connection.backend = static_cast<uint16_t>(snapshot.backend(backend).counter_id);
  connection.backend_index = static_cast<uint16_t>(backend);
  connection.generation = static_cast<uint16_t>(snapshot.generation());
}

// Where a new connection of a bounded-load service starts (maglev/consistent_hash.h,
// boundedLoadChoice): the first backend under its bound in the table's order from the flow's slot.
uint32_t boundedLoadPick(const Snapshot& snapshot, WorkerState& worker,
                         const Classified& classified, uint32_t generation) {
  const SnapshotService& service = *classified.service;
  const WorkerLoads& loads = *worker.loads;
  const uint16_t* entries = service.table.entries().data();
  const auto slot = static_cast<uint32_t>(classified.entry - entries);
  const double total_and_this_one =
      static_cast<double>(loads.servingTotal(service.counter_id, generation)) + 1;
  const uint16_t pick = boundedLoadChoice(entries, service.table.size(), slot, [&](uint16_t entry) {
    const SnapshotBackend& backend = snapshot.backend(service.first_backend + entry);
    return static_cast<double>(loads.backend(backend.counter_id, generation)) <
           backend.load_share * total_and_this_one;
  });
  if (pick != *classified.entry) {
    worker.counters->conntrack.values[static_cast<size_t>(ConntrackEvent::kBoundedLoadFallback)]
        .add(1);
  }
  return pick == kNoBackend ? kNoBackendIndex : service.first_backend + pick;
}

bool confirmed(ConnectionState state) {
  return state == ConnectionState::kTcpEstablished || state == ConnectionState::kTcpClosing ||
         state == ConnectionState::kUdp;
}

// Tells the peers about `c` after its packet (docs/scale-out.md, "Flows that survive an
// instance"): a confirmed connection of this instance's own off its table's pick is news when it
// first is, when this packet changed its state or backend (`news`) and once per refresh period
// (ConnectionTable::refreshDue, from `seen_before`, its last packet's time); an exported one
// that is back on the pick, or no longer confirmed, is withdrawn. The peers know nothing of the
// rest, which every instance's table already agrees on.
void exportConnection(WorkerState& worker, Connection& c, bool off_pick, bool news,
                      uint32_t seen_before) {
  if ((c.sync & kSyncAdopted) != 0) return;
  const bool exported = (c.sync & kSyncExported) != 0;
  ConnectionState state = c.state;
  uint32_t lifetime_ms = 0;
  if (off_pick && confirmed(c.state)) {
    if (exported && !news && !worker.conntrack->refreshDue(seen_before, worker.now_ms)) {
      return;
    }
    c.sync |= kSyncExported;
    lifetime_ms = worker.conntrack->timeoutOf(c.state);
  } else if (exported) {
    c.sync &= static_cast<uint8_t>(~kSyncExported);
    state = ConnectionState::kEmpty;
  } else {
    return;
  }
  FlowExports& exports = *worker.exports;
  if (exports.count == FlowExports::kCapacity) {
    worker.counters->conntrack.values[static_cast<size_t>(ConntrackEvent::kSyncRingFull)].add(1);
    return;
  }
  FlowExport& record = exports.records[exports.count++];
  record.source = c.source;
  record.source_port = c.source_port;
  record.service = c.service;
  record.backend = c.backend;
  record.state = state;
  record.lifetime_ms = lifetime_ms;
  worker.counters->conntrack.values[static_cast<size_t>(ConntrackEvent::kSyncExport)].add(1);
}

// A TCP SYN starts a connection the client never had anywhere, so no peer's record is its: it
// takes the table's pick without asking them.
bool opensConnection(const ParsedPacket& packet) {
  return packet.flow.protocol == kProtocolTcp &&
         (packet.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
}

// A connection-table miss that a peer's record answers: the peer's backend, while this snapshot
// has it and it keeps connections, now tracked here as adopted (never exported again: its
// record is the peer's). kNoBackendIndex: no such record, and the table picks as usual.
uint32_t adoptFromPeer(const Snapshot& snapshot, WorkerState& worker, const Classified& classified,
                       const ConnectionKey& key) {
  const PeerFlow* peer = worker.peer_flows->find(key, classified.bucket_hash, worker.now_ms);
  if (peer == nullptr) return kNoBackendIndex;
  const uint32_t backend = snapshot.backendIndexOf(peer->backend);
  if (backend == kNoBackendIndex ||
      !keepsConnection(*classified.service, snapshot.backend(backend))) {
    return kNoBackendIndex;
  }
  worker.counters->conntrack.values[static_cast<size_t>(ConntrackEvent::kSyncAdoption)].add(1);
  if (classified.packet.icmp_error) return backend;
  Connection* connection = worker.conntrack->insert(key, classified.bucket_hash, peer->backend,
                                                    peer->state, worker.now_ms);
  // Not recorded (the insert limit): the next packet asks the peer's record again.
  if (connection == nullptr) return backend;
  remember(snapshot, *connection, backend);
  connection->sync = kSyncAdopted;
  worker.conntrack->touch(*connection, classified.packet.tcp_flags, worker.now_ms);
  if (classified.service->bounded_load > 0 && worker.loads != nullptr) {
    worker.loads->add(classified.service->counter_id, peer->backend, worker.loads->generation());
  }
  return backend;
}

// The backend for a classified packet: its connection's, or the table's pick (recorded). A new
// connection of a bounded-load service may start further along the table instead; a tracked
// one never moves because of load.
uint32_t chooseBackend(const Snapshot& snapshot, WorkerState& worker,
                       const Classified& classified) {
  const SnapshotService& service = *classified.service;
  const ParsedPacket& packet = classified.packet;
  auto tablePick = [&]() -> uint32_t {
    const uint16_t pick = *classified.entry;
    return pick == kNoBackend ? kNoBackendIndex : service.first_backend + pick;
  };
  ConnectionTable* table = worker.conntrack;
  if (table == nullptr) return tablePick();
  const bool bounded = service.bounded_load > 0 && worker.loads != nullptr;
  // The load publication a new connection's choice saw, read only for new connections.
  uint32_t generation = 0;
  auto newConnectionPick = [&]() -> uint32_t {
    if (!bounded) return tablePick();
    generation = worker.loads->generation();
    return boundedLoadPick(snapshot, worker, classified, generation);
  };
  auto countNewConnection = [&](uint32_t backend) {
    if (bounded) {
      worker.loads->add(service.counter_id, snapshot.backend(backend).counter_id, generation);
    }
  };

  const ConnectionKey key = connectionOf(classified);
  Connection* connection = table->find(key, classified.bucket_hash, worker.now_ms);
  const uint8_t flags = packet.tcp_flags;
  if (connection == nullptr) {
    if (worker.peer_flows != nullptr && !opensConnection(packet)) {
      const uint32_t backend = adoptFromPeer(snapshot, worker, classified, key);
      if (backend != kNoBackendIndex) return backend;
    }
    if (packet.icmp_error) return tablePick();
    uint32_t backend = newConnectionPick();
    if (backend == kNoBackendIndex) return backend;
    connection = table->insert(key, classified.bucket_hash,
                               static_cast<uint16_t>(snapshot.backend(backend).counter_id),
                               initialState(packet.flow.protocol, flags), worker.now_ms);
    if (connection == nullptr) {
      // Not recorded (the insert limit): the table's plain pick, which does not depend on load,
      // keeps the flow's later packets together.
      return tablePick();
    }
    remember(snapshot, *connection, backend);
    countNewConnection(backend);
    return backend;
  }

  // A SYN on a connection that closed is the client reusing its port: a new connection.
  const bool reopened =
      connection->state == ConnectionState::kTcpClosing && (flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
  uint32_t backend = reopened ? kNoBackendIndex : backendOf(snapshot, *connection);
  if (backend != kNoBackendIndex) {
    if (!keepsConnection(service, snapshot.backend(backend))) backend = kNoBackendIndex;
  }
  const ConnectionState state_before = connection->state;
  const uint32_t seen_before = connection->last_seen_ms;
  const bool moved = backend == kNoBackendIndex;
  if (moved) {
    if (!reopened)
      worker.counters->conntrack.values[static_cast<size_t>(ConntrackEvent::kRepick)].add(1);
    backend = newConnectionPick();
    if (backend == kNoBackendIndex) return backend;
    table->reassign(*connection, static_cast<uint16_t>(snapshot.backend(backend).counter_id));
    remember(snapshot, *connection, backend);
    countNewConnection(backend);
    if (reopened) connection->state = initialState(packet.flow.protocol, flags);
  }
  if (packet.icmp_error) return backend;
  table->touch(*connection, flags, worker.now_ms);
  if (worker.exports != nullptr) {
    const bool off_pick = backend != tablePick();
    if (off_pick || (connection->sync & kSyncExported) != 0) {
      const bool news = moved || connection->state != state_before;
      exportConnection(worker, *connection, off_pick, news, seen_before);
    }
  }
  return backend;
}

// Stage two: the target and the rewrite for the backend chooseBackend() gave.
Verdict forward(const Snapshot& snapshot, Frame& frame, WorkerState& worker,
                const Classified& classified, uint32_t backend, ServiceTally& tally) {
  const uint32_t port_index = frame.port;
  const SnapshotService& service = *classified.service;
  if (backend == kNoBackendIndex) return drop(worker, DropReason::kNoBackend);
  // Two-arm: the service's or the receiving port's egress, whose next hop and VLAN the target
  // has (docs/two-arm.md).
  const uint32_t egress = snapshot.egressOf(port_index, service);
  const ForwardingTarget* target = snapshot.target(egress, backend);
  if (target == nullptr) return drop(worker, DropReason::kNextHopUnresolved);

  const size_t received_length = frame.length;
  switch (service.forward(frame, classified.packet, *target, classified.hash)) {
    case ForwardResult::kSend:
      frame.port = egress;
      tally.add(service.counter_id, received_length);
      worker.traffic.backends[snapshot.backend(backend).counter_id].add(received_length);
      return Verdict::kTransmit;
    case ForwardResult::kTooBig: {
      const size_t overhead = encapsulationOverhead(service.forwarding, target->backend.family);
      return answerTooBig(snapshot, port_index, frame, classified.packet,
                          static_cast<uint16_t>(target->mtu - overhead), worker);
    }
    case ForwardResult::kTooBigDrop:
      return drop(worker, DropReason::kTooBigFragmentable);
    case ForwardResult::kNoHeadroom:
      return drop(worker, DropReason::kNoHeadroom);
  }
  return Verdict::kDrop;
}

// Full-NAT's prefetches: each packet's session bucket, then, for a client's packet that
// touches its session, the session's own line. Out of line, as hashFullNat().
[[gnu::noinline]] void prefetchFullNat(NatSessionTable& nat_table, const Classified* classified,
                                       const Stage* pending, uint16_t count) {
  NatSessionTable* nat = &nat_table;
  for (uint16_t i = 0; i < count; ++i) {
    if (pending[i] != Stage::kSessions) continue;
    if (classified[i].service == nullptr) {
      nat->prefetchReply(classified[i].nat_hash);
    } else {
      nat->prefetchClient(classified[i].nat_hash);
    }
  }
  // A client's packet that touches its session (a datagram, a SYN, FIN or RST) has that line
  // fetched here, once the client buckets above are on their way, so that its store does not
  // wait for DRAM with the rest of the packet's work behind it. The lookup is done again in
  // stage two, in cache by then, so that an earlier packet of the burst opening or ending a
  // session is seen.
  for (uint16_t i = 0; i < count; ++i) {
    if (pending[i] != Stage::kSessions || classified[i].service == nullptr ||
        !NatSessionTable::clientTouchesSession(classified[i].packet.flow.protocol,
                                               classified[i].packet.tcp_flags)) {
      continue;
    }
    const NatClientEntry* entry = nat->findClient(
        natClientKeyOf(classified[i].packet, *classified[i].service), classified[i].nat_hash);
    if (entry != nullptr) __builtin_prefetch(&nat->sessionOf(*entry), 1);
  }
}

// Stage two of a Full-NAT packet: a client's (its table pick, should it open a session) or a
// backend's reply.
[[gnu::noinline]] Verdict forwardFullNatFrame(const Snapshot& snapshot, Frame& frame,
                                              WorkerState& worker, Classified& classified,
                                              ServiceTally& tally) {
  if (worker.nat == nullptr) {
    worker.counters->nat.count(NatEvent::kNoLocalAddress);
    return Verdict::kDrop;
  }
  if (classified.service == nullptr) {
    return fullNatFromBackend(snapshot, frame, classified.packet,
                              static_cast<uint16_t>(classified.nat_local), classified.nat_hash,
                              worker, tally);
  }
  const uint16_t pick = *classified.entry;
  return fullNatFromClient(
      snapshot, frame, classified.packet, *classified.service,
      pick == kNoBackend ? kNoBackendIndex : classified.service->first_backend + pick,
      classified.hash, classified.nat_hash, worker, tally);
}

}  // namespace

Verdict answerTooBig(const Snapshot& snapshot, uint32_t port_index, Frame& frame,
                     const ParsedPacket& packet, uint16_t mtu, WorkerState& worker) {
  if (!mayAnswerWithIcmpError(frame, packet)) {
    return drop(worker, DropReason::kTooBigNotAnswerable);
  }
  const IcmpConfig& icmp = snapshot.icmp();
  if (!worker.too_big_replies.take(worker.now_ms, icmp.too_big_per_second, icmp.too_big_burst)) {
    return drop(worker, DropReason::kTooBigRateLimited);
  }
  if (!buildTooBigReply(frame, packet, mtu, snapshot.port(port_index).mac)) {
    return drop(worker, DropReason::kTooBigNoReply);
  }
  worker.counters->icmp_too_big_replies.add(1);
  return Verdict::kTransmit;
}

Verdict processFrame(const Snapshot& snapshot, uint32_t device, Frame& frame, WorkerState& worker) {
  Verdict verdict;
  processFrames(snapshot, device, &frame, &verdict, 1, worker);
  return verdict;
}

void processFrames(const Snapshot& snapshot, uint32_t device, Frame* frames, Verdict* verdicts,
                   uint16_t count, WorkerState& worker) {
  // The first pass parses into each frame's entry before anything reads it.
  ScratchArray<Classified, kMaxFramesPerCall> classified;
  Stage pending[kMaxFramesPerCall];
  // Stage one in three passes over the burst, each short and independent from frame to frame,
  // so that the core overlaps many frames' loads and hash chains: one frame's whole stage one is a
  // chain of dependent steps too long for the out-of-order window to reach the next frame's.
  ParseError errors[kMaxFramesPerCall];
  for (uint16_t i = 0; i < count; ++i) {
    errors[i] = parsePacket(frames[i].data, frames[i].length, classified[i].packet);
  }
  for (uint16_t i = 0; i < count; ++i) {
    pending[i] =
        classify(snapshot, device, frames[i], worker, errors[i], classified[i], verdicts[i]);
  }
  for (uint16_t i = 0; i < count; ++i) {
    if (pending[i] == Stage::kPicked) {
      hashFlow(worker, classified[i]);
    } else if (pending[i] == Stage::kSessions) {
      hashFullNat(worker, classified[i]);
    }
  }
  // The connection table's buckets are DRAM reads (and TLB misses) at a million connections.
  // Their prefetches go out back to back, after stage one, rather than one per frame inside it:
  // issued between other work they stalled on their page walks (7.9 against 12.9 Mpps on the
  // pipeline benchmark), issued together the walks and misses overlap.
  if (ConnectionTable* table = worker.conntrack; table != nullptr) {
    // A miss reads the peers' flows too. Their bucket comes in right after the connection
    // table's, which is read first, unless its hint rules the flow out, as for nearly every flow
    // no peer has: the hint is in L2, a bucket a DRAM read. (Issued after all of the table's,
    // they cost a hit 24% more cycles than no map, against 21%.)
    const PeerFlows* peers = worker.peer_flows;
    for (uint16_t i = 0; i < count; ++i) {
      if (pending[i] != Stage::kPicked) continue;
      table->prefetch(classified[i].bucket_hash);
      if (peers != nullptr && !opensConnection(classified[i].packet)) {
        peers->prefetch(classified[i].bucket_hash);
      }
    }
  }
  if (NatSessionTable* nat = worker.nat; nat != nullptr) {
    prefetchFullNat(*nat, &classified[0], pending, count);
  }
  ServiceTally tally(worker.traffic.services);
  for (uint16_t i = 0; i < count; ++i) {
    if (pending[i] == Stage::kPicked) {
      verdicts[i] = forward(snapshot, frames[i], worker, classified[i],
                            chooseBackend(snapshot, worker, classified[i]), tally);
    } else if (pending[i] == Stage::kSessions) {
      verdicts[i] = forwardFullNatFrame(snapshot, frames[i], worker, classified[i], tally);
    }
  }
}

}  // namespace berth
