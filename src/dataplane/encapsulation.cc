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

// Where the outer headers go, after the MTU and headroom checks.
struct OuterLayout {
  uint8_t* start = nullptr;  // the new first byte of the frame
  const uint8_t* inner = nullptr;
  size_t inner_length = 0;  // the inner IP packet, without Ethernet padding
};

ForwardResult prepareOuter(Frame& frame, const ParsedPacket& packet, size_t extra,
                           const ForwardingTarget& target, OuterLayout& layout) {
  const size_t outer_length = outerIpLength(target.backend.family) + extra;
  const size_t new_ip_length = outer_length + packet.ip_length;
  if (new_ip_length > target.mtu) {
    // IPv6 is never fragmented on the way; IPv4 only when DF is clear, and berth does not.
    const bool may_fragment = packet.flow.family == IpFamily::kIpv4 && !packet.dont_fragment;
    return may_fragment ? ForwardResult::kTooBigDrop : ForwardResult::kTooBig;
  }
  // Before the inner packet go the new Ethernet header and the outer headers; the old Ethernet
  // header and VLAN tags (l3_offset bytes) are reused, the rest comes out of the headroom.
  const size_t needed = outerEthernetLength(target) + outer_length;
  if (needed > packet.l3_offset + frame.headroom) return ForwardResult::kNoHeadroom;
  const size_t grow = needed > packet.l3_offset ? needed - packet.l3_offset : 0;
  layout.inner = frame.data + packet.l3_offset;
  layout.inner_length = packet.ip_length;
  layout.start = frame.data + packet.l3_offset - needed;
  frame.headroom -= grow;
  frame.data = layout.start;
  frame.length = needed + packet.ip_length;
  return ForwardResult::kSend;
}

uint8_t* writeOuterHeaders(uint8_t* start, const ForwardingTarget& target,
                           const ParsedPacket& packet, const uint8_t* inner, uint8_t protocol,
                           size_t payload_length, uint32_t flow_hash) {
  auto* ethernet = reinterpret_cast<rte_ether_hdr*>(start);
  std::memcpy(&ethernet->dst_addr, target.destination_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  std::memcpy(&ethernet->src_addr, target.source_mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  // The inner packet's DSCP and ECN bits, so the path treats the tunnel as it would the flow.
  const uint8_t traffic_class = packet.flow.family == IpFamily::kIpv4
                                    ? inner[1]
                                    : static_cast<uint8_t>((inner[0] & 0x0F) << 4 | inner[1] >> 4);
  // With a VLAN, the 802.1Q tag takes the EtherType's place and the EtherType follows it.
  uint8_t* ether_type = start + 2 * RTE_ETHER_ADDR_LEN;
  if (target.vlan != 0) {
    storeBigEndian16(ether_type, RTE_ETHER_TYPE_VLAN);
    storeBigEndian16(ether_type + 2, target.vlan);
    ether_type += kVlanTagLength;
  }
  uint8_t* ip = start + outerEthernetLength(target);
  if (target.backend.isV4()) {
    storeBigEndian16(ether_type, RTE_ETHER_TYPE_IPV4);
    auto* header = reinterpret_cast<rte_ipv4_hdr*>(ip);
    header->version_ihl = RTE_IPV4_VHL_DEF;
    header->type_of_service = traffic_class;
    header->total_length =
        rte_cpu_to_be_16(static_cast<uint16_t>(kOuterIpv4Length + payload_length));
    header->packet_id = 0;
    // The MTU check passed, so the outer packet never needs fragmenting: DF lets path MTU
    // discovery see a smaller link.
    header->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    header->time_to_live = kOuterHopLimit;
    header->next_proto_id = protocol;
    std::memcpy(&header->src_addr, target.outer_source.bytes.data(), 4);
    std::memcpy(&header->dst_addr, target.backend.bytes.data(), 4);
    if (target.checksum_offload & kChecksumOffloadIpv4Header) {
      header->hdr_checksum = 0;
      return ip + kOuterIpv4Length;
    }
    // The checksum rte_ipv4_cksum() would give, summed from the field values instead of read
    // back from the header just written: that read would wait for the narrow stores above to
    // drain (a failed store-to-load forward, ~30% of this function's time), and DPDK's sum is
    // the same over the same 16-bit words.
    uint32_t sum = __rte_raw_cksum(target.outer_source.bytes.data(), 4, 0);
    sum = __rte_raw_cksum(target.backend.bytes.data(), 4, sum);
    sum += rte_cpu_to_be_16(static_cast<uint16_t>(RTE_IPV4_VHL_DEF << 8 | traffic_class));
    sum += header->total_length;
    sum += rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    sum += rte_cpu_to_be_16(static_cast<uint16_t>(kOuterHopLimit << 8 | protocol));
    header->hdr_checksum = static_cast<uint16_t>(~__rte_raw_cksum_reduce(sum));
    return ip + kOuterIpv4Length;
  }
  storeBigEndian16(ether_type, RTE_ETHER_TYPE_IPV6);
  auto* header = reinterpret_cast<rte_ipv6_hdr*>(ip);
  // Version 6, the traffic class, and a flow label from the flow hash, which routers and NICs
  // hash on to spread the backend's flows.
  header->vtc_flow =
      rte_cpu_to_be_32(6u << 28 | uint32_t{traffic_class} << 20 | (flow_hash & 0xFFFFF));
  header->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(payload_length));
  header->proto = protocol;
  header->hop_limits = kOuterHopLimit;
  std::memcpy(header->src_addr, target.outer_source.bytes.data(), 16);
  std::memcpy(header->dst_addr, target.backend.bytes.data(), 16);
  return ip + kOuterIpv6Length;
}

}  // namespace

ForwardResult encapsulate(Frame& frame, const ParsedPacket& packet, const ForwardingTarget& target,
                          size_t extra, uint8_t protocol, uint32_t flow_hash, uint8_t*& mode_header,
                          size_t& inner_length) {
  OuterLayout layout;
  const ForwardResult result = prepareOuter(frame, packet, extra, target, layout);
  if (result != ForwardResult::kSend) return result;
  mode_header = writeOuterHeaders(layout.start, target, packet, layout.inner, protocol,
                                  extra + layout.inner_length, flow_hash);
  if (target.backend.isV4() && (target.checksum_offload & kChecksumOffloadIpv4Header)) {
    frame.tx_checksums = kChecksumOffloadIpv4Header;
    frame.l2_length = static_cast<uint8_t>(outerEthernetLength(target));
    frame.l3_length = kOuterIpv4Length;
  }
  inner_length = layout.inner_length;
  return ForwardResult::kSend;
}

}  // namespace berth
