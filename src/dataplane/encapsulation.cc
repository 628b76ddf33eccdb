#include "dataplane/encapsulation.h"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include <cstring>

namespace berth {
namespace {

void storeBigEndian16(uint8_t* at, uint16_t value) {
  const rte_be16_t big_endian = rte_cpu_to_be_16(value);
  std::memcpy(at, &big_endian, sizeof(big_endian));
}

// Copies `length` bytes, 16 to OuterHeaders::kMaxLength, in 16-byte words, the last one ending
// at the last byte (overlapping the one before it), so nothing past `length` is written.
void copyHeaders(uint8_t* to, const uint8_t* from, size_t length) {
  for (size_t at = 0; at + 16 < length; at += 16) std::memcpy(to + at, from + at, 16);
  std::memcpy(to + length - 16, from + length - 16, 16);
}

}  // namespace

void prepareOuterHeaders(ForwardingTarget& target) {
  OuterHeaders& headers = target.outer_headers;
  headers = OuterHeaders{};
  uint8_t* start = headers.bytes.data();
  std::memcpy(start, target.destination_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  std::memcpy(start + RTE_ETHER_ADDR_LEN, target.source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  // With a VLAN, the 802.1Q tag takes the EtherType's place and the EtherType follows it.
  uint8_t* ether_type = start + 2 * RTE_ETHER_ADDR_LEN;
  if (target.vlan != 0) {
    storeBigEndian16(ether_type, RTE_ETHER_TYPE_VLAN);
    storeBigEndian16(ether_type + 2, target.vlan);
    ether_type += kVlanTagLength;
  }
  headers.ip_offset = static_cast<uint8_t>(outerEthernetLength(target));
  uint8_t* ip = start + headers.ip_offset;
  if (target.backend.isV4()) {
    storeBigEndian16(ether_type, RTE_ETHER_TYPE_IPV4);
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(ip);
    header->version_ihl = RTE_IPV4_VHL_DEF;
    // The MTU check passes before a packet is sent, so the outer packet never needs fragmenting:
    // DF lets path MTU discovery see a smaller link.
    header->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    header->time_to_live = kOuterHopLimit;
    std::memcpy(&header->src_addr, target.outer_source.bytes.data(), 4);
    std::memcpy(&header->dst_addr, target.backend.bytes.data(), 4);
    headers.checksum_base = __rte_raw_cksum(header, kOuterIpv4Length, 0);
    headers.length = static_cast<uint8_t>(headers.ip_offset + kOuterIpv4Length);
    return;
  }
  storeBigEndian16(ether_type, RTE_ETHER_TYPE_IPV6);
  auto* header = reinterpret_cast<rte_ipv6_hdr*>(ip);
  header->hop_limits = kOuterHopLimit;
  std::memcpy(header->src_addr, target.outer_source.bytes.data(), 16);
  std::memcpy(header->dst_addr, target.backend.bytes.data(), 16);
  headers.length = static_cast<uint8_t>(headers.ip_offset + kOuterIpv6Length);
}

ForwardResult encapsulate(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                          size_t extra, uint8_t protocol, uint32_t flow_hash, uint8_t*& mode_header,
                          size_t& inner_length) {
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
