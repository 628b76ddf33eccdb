#pragma once

// The PROXY protocol on a Full-NAT TCP connection (docs/fullnat.md, "PROXY protocol"): berth puts
// a version 2 header (net/proxy_protocol.h) in front of the client's first byte toward the
// backend, and from then on the two streams are numbered apart by the header's length. Pure
// arithmetic over a frame and its session, as the rest of the Full-NAT path is.
//
// - The client's side. The header goes in the first client segment after the handshake at the
//   stream's start (NatSession::client_stream_start), which is the client's ACK of the backend's
//   SYN-ACK in the usual case: so a server that speaks first (SMTP, SSH) has it before it
//   speaks, and a client that sends first has it in front of its request. Until the backend
//   acknowledges it, a segment at the stream's start that carries data (the first request, or a
//   retransmission of it) carries the same header again, byte for byte, and a backend that
//   acknowledges only up to the stream's start (it lacks the header) makes the next segment
//   there carry it once more. Every later byte is shifted: sequence number plus the header's
//   length. A SYN's own data (TCP Fast Open) would reach the backend before the header, so it
//   is dropped; the client sends it again once the connection is up.
// - The MTU. A segment at the start with data of a full MSS has no room for the header too. The
//   first time, the header goes alone and the data is dropped (the client resends it, shifted);
//   once the header has gone, such a segment is only shifted.
// - The backend's side. Acknowledgements and SACK blocks (D-SACK included) come back into the
//   client's numbering: minus the header's length past the header, the stream's start within
//   it. A block that covers only header bytes is taken out, and so is every block while the
//   backend lacks the header, since the client cannot resend what it never sent. A window
//   advertised before the backend has the whole header is made smaller by what the header still
//   takes of it. The backend's sequence numbers pass unchanged (backend_sequence_offset is 0).

#include <cstdint>

#include "absl/strings/string_view.h"
#include "berth/dataplane/frame.h"
#include "berth/dataplane/nat_sessions.h"
#include "berth/net/packet_parser.h"
#include "berth/net/proxy_protocol.h"

namespace berth {

// "none", "pending", "sent" or "acknowledged", for explain.
absl::string_view toString(ProxyHeaderState state);

// What a client's segment of a session with a header became.
enum class ProxyClientStep : uint8_t {
  kShifted,         // its sequence number moved past the header
  kHeaderInserted,  // the header put in front of its data (or into an empty segment)
  kHeaderAlone,     // the header with its data would exceed the MTU: the header alone went
  kSynDataDropped,  // a SYN whose data was dropped
  kSyn,             // a SYN as it came
};

// Starts the header's stream for a new session whose client's SYN is `packet`: the stream
// starts after the SYN's sequence number, and the header is pending.
void startProxyStream(NatSession& session, const Frame& frame, const ParsedPacket& packet);

// The packets below are as parsePacket() accepted them: a TCP header within the IP packet, and
// the IP packet within the frame.
//
// A client's TCP segment of `session` (proxy_header not kNone), before its endpoints' rewrite:
// the header inserted or the sequence number shifted as above. `header` names the client and
// the VIP; `mtu` is the egress port's. The frame may grow by the header's length (into its
// tailroom) or shrink; packet.ip_length follows.
ProxyClientStep proxyFromClient(Frame& frame, ParsedPacket& packet, NatSession& session,
                                const ProxyEndpoints& header, uint16_t mtu);

// A client's segment once its session's header is acknowledged: its sequence number plus
// `header_length`, the checksum adjusted. What most segments pay.
void shiftClientSequence(Frame& frame, const ParsedPacket& packet, uint32_t header_length);

// A backend's TCP segment of `session` (proxy_header not kNone), before its endpoints' rewrite:
// its acknowledgement, SACK blocks and window into the client's numbering, and the header's
// state moved on (acknowledged, or lacking).
void proxyFromBackend(Frame& frame, const ParsedPacket& packet, NatSession& session);

// An ICMP error from the backend's side about a client's segment of `session`, its embedded
// addresses already rewritten (rewriteIcmpError()): the embedded sequence number back into the
// client's numbering, since the client's stack ignores an error about a sequence number it
// never sent (path MTU discovery among them). The ICMP checksum, and the embedded TCP checksum
// where the error carries it, follow.
void unshiftEmbeddedSequence(Frame& frame, const ParsedPacket& packet, const NatSession& session);

}  // namespace berth
