#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "berth/gen/traffic.h"
#include "berth/net/flow_key.h"

namespace berth {

// berthgen --reflect: berthgen answers, as the backends would, what berthd sends them in
// Full-NAT mode, so that one berthgen over memif stands in for the clients, the NIC and the
// backends of a two-way test (docs/fullnat.md, "Testing without a NIC"). Pure, like the sink.
//
// A backend's reply carries the request's L4 payload back, followed by the backend's own address
// (kReplyBackendBytes, an IPv4 address in the first four), so that the sink, which sees the reply
// only once berthd has rewritten it from the VIP to the client, can still tell which backend
// served the flow. A TCP SYN is answered with SYN-ACK, anything else with ACK; the sequence
// number is the request's, which is how the sink places the reply in its flow.
inline constexpr size_t kReplyBackendBytes = 16;

// Turns `frame` (`length` bytes of a buffer of `capacity`) in place into the reply of the
// backend it is addressed to: MACs, addresses and ports swapped, the payload and the backend's
// address, the TTL reset and every checksum computed anew. Returns the reply's length and its
// 5-tuple in `reply` (the NIC hashes it to pick the reply's queue), or 0, leaving the frame as it
// was, where the frame is not a packet to a Full-NAT backend: not plain TCP or UDP over IPv4 or
// IPv6 (tunnels, ICMP, fragments, VLAN tags), addressed to or from one of `vips` (l2dsr, or
// berthd's translated replies), UDP to `gue_port`, shorter than its headers say, or without the
// room the reply needs.
size_t replyAsBackend(uint8_t* frame, size_t length, size_t capacity,
                      const std::vector<VipTarget>& vips, uint16_t gue_port, FlowKey& reply);

}  // namespace berth
