#pragma once

// Full-NAT's two directions through the pipeline (docs/fullnat.md): a client's packet to a
// fullnat service, and a backend's reply (or an ICMP error) to one of a port's local addresses.
// Both look up the worker's own NatSessionTable, which the choice of each local port makes the
// only one a reply can belong to (reply_steering.h).

#include <cstdint>

#include "berth/dataplane/pipeline.h"

namespace berth {

// A call's forwarded packets and bytes per service, added to the service's counters once per run
// of frames of one service (usually the whole call) rather than once per packet: a counter's
// add is a load and a store, which packet after packet chained through memory.
class ServiceTally {
 public:
  explicit ServiceTally(TrafficCounter* services) : services_(services) {}
  ~ServiceTally() { flush(); }
  void add(uint32_t service, uint64_t length) {
    if (service != service_) {
      flush();
      service_ = service;
    }
    ++packets_;
    bytes_ += length;
  }

 private:
  void flush() {
    if (packets_ == 0) return;
    services_[service_].packets.add(packets_);
    services_[service_].bytes.add(bytes_);
    packets_ = 0;
    bytes_ = 0;
  }
  TrafficCounter* services_;
  uint32_t service_ = UINT32_MAX;
  uint64_t packets_ = 0;
  uint64_t bytes_ = 0;
};

// A client's packet (or an ICMP error from the client's side) of `service`, whose table pick is
// `table_pick` (a snapshot backend index, or kNoBackendIndex): its session's backend, or a new
// session's for a TCP SYN or a UDP datagram, with the packet rewritten to go from the local
// address and port to the backend (translated to IPv4 for an IPv4 backend, nat64.h).
// `flow_hash` spreads a client's connections over the local addresses. `client_hash` is
// NatSessionTable::clientHash() of the packet's client key. `packet` follows the frame's
// changes.
Verdict fullNatFromClient(const Snapshot& snapshot, Frame& frame, ParsedPacket& packet,
                          const SnapshotService& service, uint32_t table_pick, uint32_t flow_hash,
                          uint64_t client_hash, WorkerState& worker, ServiceTally& tally);

// A backend's packet to local address `local_address` (a stable id) on the port it came in on,
// or an ICMP error about one of the sessions' packets toward a backend: rewritten to come from
// the VIP and go to the client (translated to IPv6 for an IPv6 client), out of the port the
// client's packets came in on, to its gateway. `reply_hash` is NatSessionTable::replyHash() of
// its reply key. `packet` follows the frame's changes.
Verdict fullNatFromBackend(const Snapshot& snapshot, Frame& frame, ParsedPacket& packet,
                           uint16_t local_address, uint64_t reply_hash, WorkerState& worker,
                           ServiceTally& tally);

// The keys the two lookups take, which the burst's first stage hashes and prefetches.
NatClientKey natClientKeyOf(const ParsedPacket& packet, const SnapshotService& service);
NatReplyKey natReplyKeyOf(const ParsedPacket& packet, uint16_t local_address);

}  // namespace berth
