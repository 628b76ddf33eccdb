#include "dataplane/fullnat_path.h"

#include "berth/dataplane/nat64.h"
#include "berth/dataplane/nat_rewrite.h"
#include "berth/dataplane/proxy_stream.h"
#include "berth/net/checksum.h"
#include "berth/net/flow_key.h"

namespace berth {
namespace {

Verdict drop(WorkerState& worker, DropReason reason) {
  worker.counters->count(reason);
  return Verdict::kDrop;
}

Verdict refuse(WorkerState& worker, NatEvent event) {
  worker.counters->nat.count(event);
  return Verdict::kDrop;
}

// A packet that opens a session: a TCP SYN (not a SYN-ACK), or any UDP datagram. Nothing
// else may take a local port, so a flood of stray ACKs cannot drain the pool.
bool opensSession(const ParsedPacket& packet) {
  if (packet.flow.protocol == kProtocolUdp) return true;
  return (packet.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
}

// An ICMP error is hashed by the NIC on its own addresses, so it may come in on another queue
// than its session's packets. The tuple it carries (packet.flow: the session's packets as they
// come in here, the client's or the backend's) names the queue, and so the worker, that holds
// the session: true, with frame.owner_queue set, when that is another worker's.
bool belongsToAnotherWorker(const Snapshot& snapshot, Frame& frame, const ParsedPacket& packet,
                            const WorkerState& worker) {
  const ReplySteering* steering = snapshot.port(frame.port).reply_steering.get();
  if (steering == nullptr) return false;
  const uint16_t owner = steering->queueOfFlow(packet.flow);
  if (owner == worker.queue || owner > UINT8_MAX) return false;
  frame.owner_queue = static_cast<uint8_t>(owner);
  return true;
}

void countForwarded(const Snapshot& snapshot, WorkerState& worker, ServiceTally& tally,
                    uint32_t service_counter, uint32_t backend, size_t length) {
  tally.add(service_counter, length);
  worker.traffic.backends[snapshot.backend(backend).counter_id].add(length);
}

// A new session for a client's opening packet, on the table's pick.
NatClientEntry* openSession(const Snapshot& snapshot, const Frame& frame,
                            const ParsedPacket& packet, const SnapshotService& service,
                            uint32_t backend, uint32_t egress, uint32_t flow_hash,
                            WorkerState& worker) {
  const SnapshotPort& port = snapshot.port(egress);
  const SnapshotBackend& chosen = snapshot.backend(backend);
  const std::vector<NatLocalAddress>& locals = port.natAddresses(chosen.address.family);
  if (locals.empty() || port.reply_steering == nullptr) {
    worker.counters->nat.count(NatEvent::kNoLocalAddress);
    return nullptr;
  }
  NatOpening opening;
  opening.client = natClientKeyOf(packet, service);
  opening.client_family = packet.flow.family;
  opening.protocol = packet.flow.protocol;
  opening.tcp_flags = packet.tcp_flags;
  opening.backend = chosen.address;
  opening.backend_port = service.port;
  opening.backend_id = static_cast<uint16_t>(chosen.counter_id);
  opening.local_addresses = locals.data();
  opening.local_address_count = locals.size();
  opening.steering = port.reply_steering.get();
  opening.queue = worker.queue;
  opening.start = flow_hash;
  NatClientEntry* entry = worker.nat->open(opening, worker.now_ms);
  if (entry != nullptr) {
    NatSession& session = worker.nat->sessionOf(*entry);
    session.receiving_port = static_cast<uint8_t>(frame.port);
    if (service.proxy_protocol && packet.flow.protocol == kProtocolTcp) {
      startProxyStream(session, frame, packet);
      entry->proxy_header = ProxyHeaderState::kPending;
    }
  }
  return entry;
}

// A client's TCP segment of a session with a PROXY protocol header (proxy_stream.h): shifted
// alone once the client's side knows the header is acknowledged, which is every segment but
// the first few; until then the session says where the header stands.
void proxyClientSegment(const Snapshot& snapshot, Frame& frame, ParsedPacket& packet,
                        const SnapshotService& service, NatClientEntry& entry, uint32_t egress,
                        WorkerState& worker) {
  const uint32_t header_length = proxyHeaderLength(packet.flow.family);
  if (entry.proxy_header == ProxyHeaderState::kAcknowledged && (packet.tcp_flags & kTcpSyn) == 0) {
    shiftClientSequence(frame, packet, header_length);
    return;
  }
  NatSession& session = worker.nat->sessionOf(entry);
  ProxyEndpoints header;
  header.family = session.client_family;
  header.source = session.client;
  header.destination = service.vip.bytes;
  header.source_port = session.client_port;
  header.destination_port = service.port;
  switch (proxyFromClient(frame, packet, session, header, snapshot.port(egress).mtu)) {
    case ProxyClientStep::kHeaderAlone:
      worker.counters->nat.count(NatEvent::kProxyHeaderAlone);
      [[fallthrough]];
    case ProxyClientStep::kHeaderInserted:
      worker.counters->nat.count(NatEvent::kProxyHeaderSent);
      break;
    case ProxyClientStep::kSynDataDropped:
      worker.counters->nat.count(NatEvent::kProxySynData);
      break;
    case ProxyClientStep::kShifted:
    case ProxyClientStep::kSyn:
      break;
  }
  if (session.proxy_header == ProxyHeaderState::kAcknowledged) {
    entry.proxy_header = ProxyHeaderState::kAcknowledged;
  }
}

}  // namespace

NatClientKey natClientKeyOf(const ParsedPacket& packet, const SnapshotService& service) {
  NatClientKey key;
  key.client = packet.flow.source;
  key.client_port = packet.flow.source_port;
  key.service = static_cast<uint16_t>(service.counter_id);
  return key;
}

NatReplyKey natReplyKeyOf(const ParsedPacket& packet, uint16_t local_address) {
  NatReplyKey key;
  key.backend = packet.flow.source;
  key.backend_port = packet.flow.source_port;
  key.local_port = packet.flow.destination_port;
  key.local_address = local_address;
  key.protocol = packet.flow.protocol;
  return key;
}

Verdict fullNatFromClient(const Snapshot& snapshot, Frame& frame, ParsedPacket& packet,
                          const SnapshotService& service, uint32_t table_pick, uint32_t flow_hash,
                          uint64_t client_hash, WorkerState& worker, ServiceTally& tally) {
  if (packet.fragment) return drop(worker, DropReason::kNatFragment);
  if (packet.icmp_error && belongsToAnotherWorker(snapshot, frame, packet, worker)) {
    return Verdict::kHandOff;
  }
  NatSessionTable& nat = *worker.nat;
  const uint32_t egress = snapshot.egressOf(frame.port, service);
  NatClientEntry* entry = nat.findClient(natClientKeyOf(packet, service), client_hash);
  uint32_t backend = kNoBackendIndex;
  if (entry != nullptr) {
    backend = snapshot.backendIndexOf(entry->backend_id);
    NatSession& session = nat.sessionOf(*entry);
    if (backend == kNoBackendIndex || !keepsConnection(service, snapshot.backend(backend))) {
      // The backend holds the connection, not berth: another backend would only reset it. The
      // session ends; the client's next SYN (or datagram) opens one on the table's pick.
      nat.end(session, worker.now_ms, NatEvent::kBackendGone);
      entry = nullptr;
    } else if (packet.icmp_error) {
      // An error about a reply the client was sent: for the backend, about its packet.
      NatEndpoints embedded;
      embedded.source = session.backend;
      embedded.destination = snapshot.natLocalAddress(session.local_address).bytes;
      embedded.source_port = session.backend_port;
      embedded.destination_port = session.local_port;
      const ForwardingTarget* target = snapshot.target(egress, backend);
      if (target == nullptr) return drop(worker, DropReason::kNextHopUnresolved);
      const bool nat64 = session.backend_family != session.client_family;
      const bool translated = nat64 ? translateIcmpErrorToIpv4(frame, packet, embedded.destination,
                                                               session.backend, embedded)
                                    : rewriteIcmpError(frame, packet, session.backend, embedded);
      if (!translated) return drop(worker, DropReason::kNatNotTranslatable);
      if (nat64) worker.counters->nat.count(NatEvent::kNat64Icmp);
      const size_t length = frame.length;
      if (forwardL2Dsr(frame, packet, *target, 0) != ForwardResult::kSend) {
        return drop(worker, DropReason::kNoHeadroom);
      }
      frame.port = egress;
      countForwarded(snapshot, worker, tally, service.counter_id, backend, length);
      return Verdict::kTransmit;
    } else if (!nat.touchFromClient(*entry, packet.flow.protocol, packet.tcp_flags,
                                    worker.now_ms)) {
      // A SYN on a closing session: the client reuses its port for a new connection.
      nat.end(session, worker.now_ms);
      entry = nullptr;
    }
  }
  if (entry == nullptr) {
    if (packet.icmp_error) return refuse(worker, NatEvent::kIcmpNoSession);
    if (!opensSession(packet)) return refuse(worker, NatEvent::kClientNoSession);
    backend = table_pick;
    if (backend == kNoBackendIndex) return drop(worker, DropReason::kNoBackend);
    entry = openSession(snapshot, frame, packet, service, backend, egress, flow_hash, worker);
    if (entry == nullptr) return Verdict::kDrop;  // counted by the session table
  }
  const ForwardingTarget* target = snapshot.target(egress, backend);
  if (target == nullptr) return drop(worker, DropReason::kNextHopUnresolved);
  if (entry->proxy_header != ProxyHeaderState::kNone) {
    proxyClientSegment(snapshot, frame, packet, service, *entry, egress, worker);
  }
  NatEndpoints to;
  const IpAddress& backend_address = snapshot.backend(backend).address;
  to.source = snapshot.natLocalAddress(entry->local_address).bytes;
  to.destination = backend_address.bytes;
  to.source_port = entry->local_port;
  to.destination_port = service.port;
  const size_t length = frame.length;
  if (backend_address.family != packet.flow.family) {
    // NAT64. The Identification, for a packet small enough to leave without DF, is the client's
    // transport checksum as it came: it differs between segments that carry different bytes.
    const uint16_t identification = loadBigEndian16(
        frame.data + packet.l4_offset + (packet.flow.protocol == kProtocolUdp ? 6 : 16));
    translateToIpv4(frame, packet, to, identification);
    worker.counters->nat.count(NatEvent::kNat64ToIpv4);
    if (forwardL2Dsr(frame, packet, *target, 0) != ForwardResult::kSend) {
      return drop(worker, DropReason::kNoHeadroom);
    }
  } else if (forwardFullNat(frame, packet, *target, to) != ForwardResult::kSend) {
    return drop(worker, DropReason::kNoHeadroom);
  }
  frame.port = egress;
  countForwarded(snapshot, worker, tally, service.counter_id, backend, length);
  return Verdict::kTransmit;
}

Verdict fullNatFromBackend(const Snapshot& snapshot, Frame& frame, ParsedPacket& packet,
                           uint16_t local_address, uint64_t reply_hash, WorkerState& worker,
                           ServiceTally& tally) {
  if (packet.fragment) return drop(worker, DropReason::kNatFragment);
  if (packet.icmp_error && belongsToAnotherWorker(snapshot, frame, packet, worker)) {
    return Verdict::kHandOff;
  }
  NatSession* session =
      worker.nat->findReply(natReplyKeyOf(packet, local_address), reply_hash, worker.now_ms);
  if (session == nullptr) return Verdict::kDrop;  // counted as reply_no_session
  const uint32_t service_index = snapshot.serviceIndexOf(session->service);
  const uint32_t backend = snapshot.backendIndexOf(session->backend_id);
  if (service_index == Snapshot::kNoServiceIndex || backend == kNoBackendIndex) {
    worker.nat->end(*session, worker.now_ms, NatEvent::kBackendGone);
    return drop(worker, DropReason::kNoService);
  }
  const SnapshotService& service = snapshot.service(service_index);
  const uint32_t out = session->receiving_port;
  if (out >= snapshot.portCount()) return drop(worker, DropReason::kVlanNotConfigured);
  const SnapshotPort& port = snapshot.port(out);
  if (!port.client_hop_ready) return drop(worker, DropReason::kNextHopUnresolved);
  const size_t length = frame.length;
  if (packet.icmp_error) {
    // An error about the client's packet on its way to the backend: for the client, about the
    // packet it sent to the VIP.
    NatEndpoints embedded;
    embedded.source = session->client;
    embedded.destination = service.vip.bytes;
    embedded.source_port = session->client_port;
    embedded.destination_port = service.port;
    const bool nat64 = session->client_family != session->backend_family;
    const bool translated = nat64 ? translateIcmpErrorToIpv6(frame, packet, service.vip.bytes,
                                                             session->client, embedded)
                                  : rewriteIcmpError(frame, packet, session->client, embedded);
    if (!translated) return drop(worker, DropReason::kNatNotTranslatable);
    if (nat64) worker.counters->nat.count(NatEvent::kNat64Icmp);
    if (session->proxy_header != ProxyHeaderState::kNone) {
      unshiftEmbeddedSequence(frame, packet, *session);
    }
    if (forwardL2Dsr(frame, packet, port.client_hop, 0) != ForwardResult::kSend) {
      return drop(worker, DropReason::kNoHeadroom);
    }
  } else {
    worker.nat->touchFromBackend(*session, packet.tcp_flags, worker.now_ms);
    if (session->proxy_header != ProxyHeaderState::kNone) {
      const ProxyHeaderState before = session->proxy_header;
      proxyFromBackend(frame, packet, *session);
      if (before == ProxyHeaderState::kSent &&
          session->proxy_header == ProxyHeaderState::kPending) {
        worker.counters->nat.count(NatEvent::kProxyHeaderLost);
      }
    }
    NatEndpoints to;
    to.source = service.vip.bytes;
    to.destination = session->client;
    to.source_port = service.port;
    to.destination_port = session->client_port;
    if (session->client_family != packet.flow.family) {
      // NAT64: 20 bytes more as IPv6 (less any IPv4 options), which may no longer fit the
      // clients' port.
      // berth does not fragment: with DF, the backend is told the MTU its packets must keep.
      const size_t options = packet.l4_offset - packet.l3_offset - 20;
      if (packet.ip_length + kNat64Growth - options > port.mtu) {
        if (!packet.dont_fragment) return drop(worker, DropReason::kTooBigFragmentable);
        return answerTooBig(snapshot, frame.port, frame, packet,
                            static_cast<uint16_t>(port.mtu - kNat64Growth), worker);
      }
      if (!translateToIpv6(frame, packet, to) ||
          forwardL2Dsr(frame, packet, port.client_hop, 0) != ForwardResult::kSend) {
        return drop(worker, DropReason::kNoHeadroom);
      }
      worker.counters->nat.count(NatEvent::kNat64ToIpv6);
    } else if (forwardFullNat(frame, packet, port.client_hop, to) != ForwardResult::kSend) {
      return drop(worker, DropReason::kNoHeadroom);
    }
  }
  frame.port = out;
  countForwarded(snapshot, worker, tally, service.counter_id, backend, length);
  return Verdict::kTransmit;
}

}  // namespace berth
