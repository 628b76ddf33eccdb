#pragma once

// Shared by the encapsulating modes: the outer Ethernet and IP headers and the MTU rule.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ip.h>

#include "berth/dataplane/forwarding.h"

namespace berth {

inline constexpr size_t kEthernetLength = 14;
inline constexpr size_t kVlanTagLength = 4;

// The outer Ethernet header's length: with the target's 802.1Q tag where it has a VLAN.
inline size_t outerEthernetLength(const ForwardingTarget& target) {
  return target.vlan != 0 ? kEthernetLength + kVlanTagLength : kEthernetLength;
}
inline constexpr size_t kOuterIpv4Length = 20;
inline constexpr size_t kOuterIpv6Length = 40;
inline constexpr size_t kUdpLength = 8;
inline constexpr size_t kGreLength = 4;

inline size_t outerIpLength(IpFamily family) {
  return family == IpFamily::kIpv4 ? kOuterIpv4Length : kOuterIpv6Length;
}

// Copies `length` bytes, 16 to OuterHeaders::kMaxLength, in 16-byte words, the last one ending
// at the last byte (overlapping the one before it), so nothing past `length` is written.
inline void copyHeaders(uint8_t* to, const uint8_t* from, size_t length) {
  for (size_t at = 0; at + 16 < length; at += 16) std::memcpy(to + at, from + at, 16);
  std::memcpy(to + length - 16, from + length - 16, 16);
}

// Checks the MTU and headroom, makes room in front of the inner IP packet (which stays where it
// is) and writes the target's prepared Ethernet header (tagged with its VLAN, if any) and outer IP
// header there (ForwardingTarget::outer_headers), for a mode whose own header of `extra` bytes
// sits between the outer IP header and the inner packet. On kSend,
// `mode_header` points where that header goes and `inner_length` is the inner packet's length;
// otherwise the frame is untouched.
inline ForwardResult encapsulate(Frame& frame, const ParsedPacket& packet,
                                 const ForwardingTarget& target, size_t extra, uint8_t protocol,
                                 uint32_t flow_hash, uint8_t*& mode_header, size_t& inner_length) {
  const bool outer_ipv4 = target.backend.isV4();
  const size_t outer_length = outerIpLength(target.backend.family) + extra;
  const size_t ip_length = packet.ip_length;
  if (outer_length + ip_length > target.mtu) {
    // IPv6 is never fragmented on the way; IPv4 only when DF is clear, and berth does not.
    const bool may_fragment = packet.flow.family == IpFamily::kIpv4 && !packet.dont_fragment;
    return may_fragment ? ForwardResult::kTooBigDrop : ForwardResult::kTooBig;
  }
  // Before the inner packet go the new Ethernet header and the outer headers; the old Ethernet
  // header and VLAN tags (l3_offset bytes) are reused, the rest comes out of the headroom.
  const OuterHeaders& headers = target.outer_headers;
  const size_t needed = headers.length + extra;
  if (needed > packet.l3_offset + frame.headroom) return ForwardResult::kNoHeadroom;
  const uint8_t* inner = frame.data + packet.l3_offset;
  // The inner packet's DSCP and ECN bits, so the path treats the tunnel as it would the flow.
  const uint8_t traffic_class = packet.flow.family == IpFamily::kIpv4
                                    ? inner[1]
                                    : static_cast<uint8_t>((inner[0] & 0x0F) << 4 | inner[1] >> 4);
  uint8_t* start = frame.data + packet.l3_offset - needed;
  frame.headroom -= needed > packet.l3_offset ? needed - packet.l3_offset : 0;
  frame.data = start;
  frame.length = needed + ip_length;
  copyHeaders(start, headers.bytes.data(), headers.length);

  uint8_t* ip = start + headers.ip_offset;
  const size_t payload_length = extra + ip_length;
  inner_length = ip_length;
  if (outer_ipv4) {
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(ip);
    header->type_of_service = traffic_class;
    const rte_be16_t total_length =
        rte_cpu_to_be_16(static_cast<uint16_t>(kOuterIpv4Length + payload_length));
    header->total_length = total_length;
    header->next_proto_id = protocol;
    mode_header = ip + kOuterIpv4Length;
    if (target.checksum_offload & kChecksumOffloadIpv4Header) {
      frame.tx_checksums = kChecksumOffloadIpv4Header;
      frame.l2_length = headers.ip_offset;
      frame.l3_length = kOuterIpv4Length;
      return ForwardResult::kSend;
    }
    // The sum rte_ipv4_cksum() would give, from the fixed words' sum and the three fields
    // written here (each alone in its 16-bit word), not read back from the header: that read would
    // wait for the narrow stores above to drain (a failed store-to-load forward).
    const uint32_t sum = headers.checksum_base + rte_cpu_to_be_16(traffic_class) + total_length +
                         rte_cpu_to_be_16(protocol);
    header->hdr_checksum = static_cast<uint16_t>(~__rte_raw_cksum_reduce(sum));
    return ForwardResult::kSend;
  }
  auto* header = reinterpret_cast<rte_ipv6_hdr*>(ip);
  // Version 6, the traffic class, and a flow label from the flow hash, which routers and NICs
  // hash on to spread the backend's flows.
  header->vtc_flow =
      rte_cpu_to_be_32(6u << 28 | uint32_t{traffic_class} << 20 | (flow_hash & 0xFFFFF));
  header->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(payload_length));
  header->proto = protocol;
  mode_header = ip + kOuterIpv6Length;
  return ForwardResult::kSend;
}

}  // namespace berth
