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

}  // namespace berth
