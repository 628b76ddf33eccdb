#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "berth/config/config.h"
#include "berth/dataplane/frame.h"
#include "berth/net/ip_address.h"
#include "berth/net/mac_address.h"
#include "berth/net/packet_parser.h"

namespace berth {

// The forwarding modes: how a client's packet is sent on to the backend the table picked. Each
// mode is one file (forward_ipip.cc, forward_gue.cc, forward_gre.cc, forward_l2dsr.cc) behind
// the ForwardFunction below; the snapshot picks one per service, so no packet pays for a choice.
//
// The modes work on a Frame (frame.h), a view of the packet's bytes with headroom in front (an
// mbuf's data and headroom in the datapath, a plain buffer in tests), as GLB Director keeps
// glb_encap.c apart from its DPDK and pcap adapters.

// The outer Ethernet header (with the target's VLAN tag) and outer IP header that the
// encapsulating modes write in front of every packet to one target, made once from the target's
// fields by prepareOuterHeaders(): a packet then costs a few 16-byte stores of these bytes and the
// fields that change from packet to packet (the traffic class, the length, the protocol, an IPv6
// flow label and the IPv4 checksum), where writing each field cost ten times the instructions.
struct OuterHeaders {
  static constexpr size_t kMaxLength = 64;  // 18 bytes of tagged Ethernet and 40 of IPv6 fit
  alignas(16) std::array<uint8_t, kMaxLength> bytes{};
  uint8_t length = 0;  // 0: not prepared
  uint8_t ip_offset = 0;
  // IPv4: the one's complement sum of the header's 16-bit words that do not change, with the
  // traffic class, total length, protocol and checksum as zero.
  uint32_t checksum_base = 0;
};

// Everything a mode needs to know about one backend, resolved when the snapshot is built.
struct ForwardingTarget {
  IpAddress backend;             // outer destination
  IpAddress outer_source;        // the port's address of the backend's IP version
  MacAddress source_mac;         // the port's MAC
  MacAddress destination_mac;    // the gateway's (encapsulating modes) or the backend's (l2dsr)
  uint16_t gue_port = 0;         // gue: outer UDP destination port
  uint16_t mtu = 1500;           // the port's
  uint16_t vlan = 0;             // the port's 802.1Q VLAN, tagged on encapsulated frames; 0: none
  uint8_t checksum_offload = 0;  // the port's kChecksumOffload* bits
  OuterHeaders outer_headers;    // from the fields above: prepareOuterHeaders()
};

// Fills target.outer_headers from the target's other fields. Call it once they are set, and again
// after any of them changes.
void prepareOuterHeaders(ForwardingTarget& target);

enum class ForwardResult : uint8_t {
  kSend,        // frame rewritten in place: send it
  kTooBig,      // would exceed the MTU and may not be fragmented (DF, or IPv6): answer ICMP
  kTooBigDrop,  // would exceed the MTU, fragmentation allowed: berth does not fragment; drop
  kNoHeadroom,  // not enough headroom for the outer headers: drop
};

inline constexpr uint8_t kOuterHopLimit = 64;

// Rewrites `frame` (parsed as `packet`, an IP frame that parsed without error) for `target`.
// `flow_hash` feeds the fields that spread a backend's flows over its receive queues: the GUE
// source port and the outer IPv6 flow label. Encapsulating modes send frames to the gateway tagged
// with the target's VLAN (untagged without one), whatever tags they came with, drop any Ethernet
// padding, copy the inner DSCP/ECN outward, and fill outer checksums
// with DPDK's helpers; the inner packet is left byte for byte as it arrived.
using ForwardFunction = ForwardResult (*)(Frame& frame, const ParsedPacket& packet,
                                          const ForwardingTarget& target, uint32_t flow_hash);

ForwardResult forwardIpip(Frame&, const ParsedPacket&, const ForwardingTarget&, uint32_t);
ForwardResult forwardGue(Frame&, const ParsedPacket&, const ForwardingTarget&, uint32_t);
ForwardResult forwardGre(Frame&, const ParsedPacket&, const ForwardingTarget&, uint32_t);
ForwardResult forwardL2Dsr(Frame&, const ParsedPacket&, const ForwardingTarget&, uint32_t);

ForwardFunction forwardFunctionFor(Forwarding mode);

// Bytes the mode adds to the IP packet, for an outer header of the given IP version.
size_t encapsulationOverhead(Forwarding mode, IpFamily outer);

}  // namespace berth
