#pragma once

#include <cstdint>

#include "berth/dataplane/conntrack.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/forwarding.h"
#include "berth/dataplane/nat_sessions.h"
#include "berth/dataplane/neighbor_discovery.h"
#include "berth/dataplane/peer_flows.h"
#include "berth/dataplane/snapshot.h"
#include "berth/dataplane/token_bucket.h"

namespace berth {

// What happens to one received frame: parse, service lookup, the connection table or the Maglev
// pick, forwarding-mode rewrite; or an ARP/ND answer; or, on a port with a kernel interface, the
// kernel's (docs/exception-path.md); or a drop with its named counter.
//
// With a connection table, a tracked flow goes to the backend it went to before, whatever the
// Maglev table now says, while that backend is in the snapshot, healthy, and not drained (or
// drained under the service's keep_established policy); otherwise it is picked again from the
// table and the connection follows (a repick). An untracked flow is picked from the table and
// recorded, TCP packets without SYN included (a flow picked up after a restart or an ECMP
// change). ICMP errors follow their flow's connection but never create or age one. With flow
// sync, an untracked flow that a peer tracks off its table's pick goes to the peer's backend
// instead and is tracked as adopted; a confirmed connection of this instance's own off its
// table's pick is reported in worker.exports. Pure over the
// Frame view, so the pipeline fixtures and the benchmark run it without an EAL, and the worker runs
// it on mbufs.

enum class Verdict : uint8_t {
  kDrop,  // counted under its reason; free the buffer
  // The frame was rewritten in place: send it out of the device of port frame.port (the port it
  // came in on for berth's replies, the egress port for forwarded traffic).
  kTransmit,
  // An ICMP error about a Full-NAT session another worker holds (the NIC hashed it on its own
  // addresses, not the session's): pass it, unchanged, to the worker of frame.owner_queue,
  // which runs it through the pipeline again (docs/fullnat.md, "ICMP, fragments").
  kHandOff,
  // Not berth's, on a port with a kernel interface: hand it, unchanged, to the exception path.
  // kToKernel + ExceptionClass: one verdict per class (toKernel(), exceptionClassOf()).
  kToKernel,
};
inline constexpr Verdict toKernel(ExceptionClass exception_class) {
  return static_cast<Verdict>(static_cast<uint8_t>(Verdict::kToKernel) +
                              static_cast<uint8_t>(exception_class));
}
inline constexpr bool goesToKernel(Verdict verdict) { return verdict >= Verdict::kToKernel; }
inline constexpr ExceptionClass exceptionClassOf(Verdict verdict) {
  return static_cast<ExceptionClass>(static_cast<uint8_t>(verdict) -
                                     static_cast<uint8_t>(Verdict::kToKernel));
}

// The class a frame for the port's kernel interface is policed in (config.h, ExceptionClass):
// ARP and ND; any ICMP; TCP to or from port 179 of one of the port's BGP peers; other TCP from an
// address the health checks probe; the rest.
ExceptionClass classifyForKernel(const SnapshotPort& port, const Frame& frame,
                                 const ParsedPacket& packet);

// What one worker brings to the pipeline: its counters, and its connection table with the time
// the table ages connections by. What ARP and ND frames claim about next hops goes to their
// slots in the snapshot (SnapshotPort::resolving).
class WorkerLoads;

struct WorkerState {
  WorkerCounters* counters = nullptr;
  TrafficCounters traffic;
  ConnectionTable* conntrack = nullptr;  // null: every packet goes to the table's pick
  // Active-flow counts for bounded-load services; null: they take the table's pick too.
  WorkerLoads* loads = nullptr;
  // With a connection table and flow sync (docs/scale-out.md): the peers' flows, which a
  // connection-table miss consults before the table's pick (null: none), loaded with the snapshot
  // once per burst; and where this worker's news about its off-pick connections goes (null: none
  // is kept).
  const PeerFlows* peer_flows = nullptr;
  FlowExports* exports = nullptr;
  // Full-NAT sessions (docs/fullnat.md), where a port has local addresses; null: none, and a
  // fullnat service's packets are refused (no_local_address). `queue` is the worker's receive
  // queue on every device it polls (worker w polls queue w): where the replies of the sessions
  // it opens must come in.
  NatSessionTable* nat = nullptr;
  uint16_t queue = 0;
  uint32_t now_ms = 0;  // a millisecond clock, set once per worker loop
  // The "fragmentation needed" and "packet too big" replies this worker may still send
  // (Snapshot::icmp()).
  TokenBucket too_big_replies;
};

// Decides `frame`, received on the device of port `device` (the device's first port in the
// snapshot, SnapshotPort::device). The frame is for the device's port on its outer VLAN, which
// frame.port is set to (docs/vlans.md); a frame on a VLAN none of them has is dropped as
// vlan_not_configured. Counts the frame's drop reason, or its service's and backend's packets
// and bytes. Does not count rx or tx: the caller owns the burst. No allocation, no lock, no
// exception.
Verdict processFrame(const Snapshot& snapshot, uint32_t device, Frame& frame, WorkerState& worker);

// The answer to a packet too big for where it goes (icmp_reply.h, buildTooBigReply): the frame
// turned into "fragmentation needed" or "packet too big" naming `mtu`, back out of port
// `port_index` to its sender, when an ICMP error may answer it and the worker's rate allows;
// otherwise dropped, each refusal counted under its reason. The encapsulating modes' answer, and
// NAT64's to a backend whose reply outgrows the clients' port as IPv6.
Verdict answerTooBig(const Snapshot& snapshot, uint32_t port_index, Frame& frame,
                     const ParsedPacket& packet, uint16_t mtu, WorkerState& worker);

// As processFrame() for each of `count` (at most kMaxFramesPerCall) frames, in two stages over
// the whole burst: first every frame is parsed, looked up and hashed, and its Maglev table slot
// prefetched; then each is picked and rewritten. The table read, an L2 access per packet, then
// overlaps with the other frames' work instead of stalling each one. Stage one itself runs as
// three passes over the burst (parse; port, MAC and service; hashes), each short and independent
// from frame to frame, so the core overlaps many frames' dependent steps (docs/performance.md).
inline constexpr uint16_t kMaxFramesPerCall = 32;
static_assert(FlowExports::kCapacity >= kMaxFramesPerCall, "a call's news fits, one per frame");
void processFrames(const Snapshot& snapshot, uint32_t device, Frame* frames, Verdict* verdicts,
                   uint16_t count, WorkerState& worker);

}  // namespace berth
