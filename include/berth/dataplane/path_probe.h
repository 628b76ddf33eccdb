#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "berth/dataplane/forwarding.h"
#include "berth/dataplane/frame.h"
#include "berth/net/packet_parser.h"
#include "berth/net/tcp_segment.h"

namespace berth {

// The frames of a health probe that takes the data path (health/path_conversation.h): its
// segments as they leave for one backend, and the backend's answers as berth receives them.
// Pure: plain buffers, no EAL.

// Writes `segment` on `endpoints` (berth's address and port to the VIP and its port) at
// frame.data, as a client's packet to the VIP would arrive (untagged, from the target's source
// MAC), and rewrites it with `forward` for `target` as the pipeline rewrites a client's packet
// for its backend: encapsulated toward the backend, or at the backend's MAC. frame.tailroom
// must hold the segment and frame.headroom the mode's outer headers; kNoHeadroom when they do
// not. A SYN carries the MSS option.
ForwardResult buildPathProbeFrame(Frame& frame, ForwardFunction forward,
                                  const ForwardingTarget& target, const TcpEndpoints& endpoints,
                                  const TcpSegment& segment, uint16_t maximum_segment_size);

// A TCP segment berth received, seen from berth's end: `endpoints.local` is the frame's
// destination. The payload points into the frame.
struct ReceivedSegment {
  TcpEndpoints endpoints;
  TcpSegment segment;
};

// `frame` (`length` bytes, parsed without error as `packet`) as a TCP segment for berth, or
// nullopt: not TCP, a fragment, an ICMP error, a header or payload the frame cuts short, or a
// checksum that does not hold.
std::optional<ReceivedSegment> readTcpSegment(const uint8_t* frame, size_t length,
                                              const ParsedPacket& packet);

}  // namespace berth
