#include "berth/dataplane/pipeline.h"

#include <algorithm>
#include <cstring>

#include "berth/dataplane/icmp_reply.h"
#include "berth/dataplane/neighbor_reply.h"
#include "berth/net/flow_hash.h"

namespace berth {
namespace {

constexpr uint8_t kRouterSolicitation = 133;
constexpr uint8_t kRedirect = 137;

bool isNeighborDiscovery(const Frame& frame, const ParsedPacket& packet) {
  if (packet.flow.protocol != kProtocolIcmpv6 || packet.icmp_error || packet.l4_offset == 0) {
    return false;
  }
  const uint8_t type = frame.data[packet.l4_offset];
  return type >= kRouterSolicitation && type <= kRedirect;
}

// ARP and ND: learn what is news about a next hop being resolved, answer questions for an
// address berth holds on this port, and drop the rest. Rare next to data packets.
Verdict handleNeighborFrame(const Snapshot& snapshot, uint32_t port_index, Frame& frame,
                            const ParsedPacket& packet, WorkerState& worker) {
  const SnapshotPort& port = snapshot.port(port_index);
  if (std::optional<NeighborObservation> seen = observeNeighbor(frame, packet)) {
    auto it = port.resolving.find(seen->address);
    if (it != port.resolving.end() && it->second != seen->mac && worker.neighbors != nullptr) {
      seen->port = static_cast<uint16_t>(port_index);
      worker.neighbors->report(*seen);
    }
  }
  const std::optional<IpAddress> asked = neighborQuery(frame, packet);
  if (asked &&
      std::find(port.answered.begin(), port.answered.end(), *asked) != port.answered.end()) {
    if (buildNeighborReply(frame, packet, *asked, port.mac)) {
      worker.counters->arp_nd_replies.add(1);
      return Verdict::kTransmit;
    }
  }
  worker.counters->count(DropReason::kNeighborNotAnswered);
  return Verdict::kDrop;
}

Verdict drop(WorkerState& worker, DropReason reason) {
  worker.counters->count(reason);
  return Verdict::kDrop;
}

}  // namespace

Verdict processFrame(const Snapshot& snapshot, uint32_t port_index, Frame& frame,
                     WorkerState& worker) {
  ParsedPacket packet;
  const ParseError error = parsePacket(frame.data, frame.length, packet);
  if (error != ParseError::kNone) {
    worker.counters->count(error);
    return Verdict::kDrop;
  }
  if (packet.type == FrameType::kArp) {
    return handleNeighborFrame(snapshot, port_index, frame, packet, worker);
  }
  if (packet.type != FrameType::kIp) return drop(worker, DropReason::kOtherEtherType);

  const SnapshotPort& port = snapshot.port(port_index);
  // A promiscuous port, or one on a bridge, also sees unicast frames meant for other hosts. ND
  // goes to multicast groups, so it is let through to be judged by its contents.
  const bool to_our_mac = std::memcmp(frame.data, port.mac.bytes.data(), 6) == 0;
  const bool to_multicast = (frame.data[0] & 1) != 0;
  if (packet.flow.family == IpFamily::kIpv6 && (to_our_mac || to_multicast) &&
      isNeighborDiscovery(frame, packet)) {
    return handleNeighborFrame(snapshot, port_index, frame, packet, worker);
  }
  if (!to_our_mac) return drop(worker, DropReason::kNotForUs);

  std::optional<uint32_t> service_index;
  if (packet.later_fragment) {
    // A later fragment carries no ports, so it follows its datagram only to a service that hashes
    // without them. RSS spreads a datagram's fragments over cores by their 3-tuple at best, so
    // there is no per-core place to wait for the first fragment's ports (DPVS drops these too).
    service_index = snapshot.findFragmentService(packet.flow);
    if (!service_index) return drop(worker, DropReason::kLaterFragment);
  } else {
    service_index = snapshot.findService(packet.flow);
    if (!service_index) return drop(worker, DropReason::kNoService);
  }
  const SnapshotService& service = snapshot.service(*service_index);
  const uint32_t hash = flowHash(packet.flow, service.hash_fields, service.hash_seed);
  const uint16_t pick = service.table.lookup(hash);
  if (pick == kNoBackend) return drop(worker, DropReason::kNoBackend);
  const uint32_t backend = service.first_backend + pick;
  const ForwardingTarget* target = snapshot.target(port_index, backend);
  if (target == nullptr) return drop(worker, DropReason::kNextHopUnresolved);

  const size_t received_length = frame.length;
  switch (service.forward(frame, packet, *target, hash)) {
    case ForwardResult::kSend:
      worker.traffic.services[service.counter_id].add(received_length);
      worker.traffic.backends[snapshot.backend(backend).counter_id].add(received_length);
      return Verdict::kTransmit;
    case ForwardResult::kTooBig: {
      const size_t overhead = encapsulationOverhead(service.forwarding, target->backend.family);
      const auto client_mtu = static_cast<uint16_t>(target->mtu - overhead);
      if (buildTooBigReply(frame, packet, client_mtu, port.mac)) {
        worker.counters->icmp_too_big_replies.add(1);
        return Verdict::kTransmit;
      }
      return drop(worker, DropReason::kTooBigNoReply);
    }
    case ForwardResult::kTooBigDrop:
      return drop(worker, DropReason::kTooBigFragmentable);
    case ForwardResult::kNoHeadroom:
      return drop(worker, DropReason::kNoHeadroom);
  }
  return Verdict::kDrop;
}

}  // namespace berth
