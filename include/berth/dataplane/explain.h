#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "berth/dataplane/conntrack.h"
#include "berth/dataplane/counters.h"
#include "berth/dataplane/nat_sessions.h"
#include "berth/dataplane/snapshot.h"
#include "berth/net/flow_key.h"

namespace berth {

// `berthctl explain`: where the next packet of a flow goes and why, worked out from a snapshot
// and the flow's connection-table entry with the same rules as the pipeline (pipeline.cc,
// chooseBackend), so that the answer is what the datapath does, not a second opinion.

// A flow's entry as the worker holding it reported it: its connection-table entry, or for a
// fullnat service its Full-NAT session (docs/fullnat.md).
struct TrackedConnection {
  unsigned worker = 0;
  Connection connection{};
  bool expired = false;               // outlived its timeout; the next lookup reclaims it
  uint32_t idle_ms = 0;               // since its last packet
  std::optional<NatSession> session;  // set for a Full-NAT session; then `connection` is empty
};

// What `explain` asks the workers about a Full-NAT flow: the session of a client's flow, or
// (by_reply) the one a backend's reply to a local address belongs to.
struct NatQuestion {
  bool by_reply = false;
  NatClientKey client;
  NatReplyKey reply;
};
// The question for a client's `flow` of fullnat service `service`, or for a reply `flow` to
// local address `local_address`.
NatQuestion natQuestionOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow);
NatQuestion natReplyQuestionOf(const FlowKey& flow, uint16_t local_address);
// The local address a flow is sent to, on any port: its stable id, or nullopt.
std::optional<uint16_t> natLocalAddressOf(const Snapshot& snapshot, const FlowKey& flow);

struct FlowExplanation {
  std::optional<uint32_t> service;  // the snapshot's service index; none: dropped as no_service
  uint32_t hash = 0;                // the service's flow hash
  uint32_t slot = 0;                // hash % M
  uint32_t table_backend = kNoBackendIndex;  // the table's entry at the slot
  uint32_t next_backend = kNoBackendIndex;   // where the next packet goes; none: dropped
  bool tracked = false;                      // a live connection-table entry decides it
  bool fell_back = false;                    // bounded load: a new flow goes past the table's pick
  std::string reason;                        // why next_backend, in a sentence
};

// The flow's service, hash and slot, and the backend its next (non-SYN) packet goes to given
// `tracked`, its connection-table entry if a worker holds one. `conntrack_enabled` false: the
// table alone decides. For a service with bounded_load, a flow that starts anew goes to the
// first backend under its bound from its slot on, as the pipeline chooses it
// (maglev/consistent_hash.h, boundedLoadChoice), judged by `loads` as last published; a worker also
// counts the flows it placed since, which explain cannot see. Without `loads` the table's pick is
// given.
FlowExplanation explainFlow(const Snapshot& snapshot, const FlowKey& flow,
                            const std::optional<TrackedConnection>& tracked, bool conntrack_enabled,
                            const BackendLoads* loads = nullptr);

// A Full-NAT session's two tuples, "client -> VIP | local -> backend (name)", and its state.
std::string describeSession(const Snapshot& snapshot, const NatSession& session);

// The connection-table key and hash of `flow` for the snapshot's service `service`.
ConnectionKey connectionKeyOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow);
uint32_t flowHashOf(const Snapshot& snapshot, uint32_t service, const FlowKey& flow);

absl::string_view toString(ConnectionState state);

}  // namespace berth
