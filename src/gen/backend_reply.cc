#include "berth/gen/backend_reply.h"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

namespace berth {
namespace {

constexpr size_t kEthernet = 14;
constexpr size_t kMinimumFrame = 60;

bool isVip(const std::vector<VipTarget>& vips, IpFamily family,
           const std::array<uint8_t, 16>& address) {
  return std::any_of(vips.begin(), vips.end(), [&](const VipTarget& vip) {
    return vip.address.family == family && vip.address.bytes == address;
  });
}

}  // namespace

size_t replyAsBackend(uint8_t* frame, size_t length, size_t capacity,
                      const std::vector<VipTarget>& vips, uint16_t gue_port, FlowKey& reply) {
  if (length < kEthernet) return 0;
  uint16_t ether_type;
  std::memcpy(&ether_type, frame + 12, 2);
  ether_type = rte_be_to_cpu_16(ether_type);
  uint8_t* l3 = frame + kEthernet;
  FlowKey key;
  size_t header;
  size_t l3_length;
  if (ether_type == RTE_ETHER_TYPE_IPV4 && length >= kEthernet + 20) {
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(l3);
    // Options and fragments are never what berthd sends a backend in Full-NAT.
    if (ip->version_ihl != 0x45 || (rte_be_to_cpu_16(ip->fragment_offset) &
                                    (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) != 0) {
      return 0;
    }
    key.family = IpFamily::kIpv4;
    std::memcpy(key.source.data(), &ip->src_addr, 4);
    std::memcpy(key.destination.data(), &ip->dst_addr, 4);
    key.protocol = ip->next_proto_id;
    header = 20;
    l3_length = rte_be_to_cpu_16(ip->total_length);
  } else if (ether_type == RTE_ETHER_TYPE_IPV6 && length >= kEthernet + 40 && (l3[0] >> 4) == 6) {
    const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(l3);
    key.family = IpFamily::kIpv6;
    std::memcpy(key.source.data(), ip->src_addr, 16);
    std::memcpy(key.destination.data(), ip->dst_addr, 16);
    key.protocol = ip->proto;
    header = 40;
    l3_length = 40u + rte_be_to_cpu_16(ip->payload_len);
  } else {
    return 0;
  }
  const bool tcp = key.protocol == kProtocolTcp;
  if (!tcp && key.protocol != kProtocolUdp) return 0;
  const size_t l4_header = tcp ? 20 : 8;
  if (l3_length > length - kEthernet || l3_length < header + l4_header) return 0;
  uint8_t* l4 = l3 + header;
  if (tcp && ((l4[12] >> 4) * 4u < 20 || (l4[12] >> 4) * 4u > l3_length - header)) return 0;
  std::memcpy(&key.source_port, l4, 2);
  std::memcpy(&key.destination_port, l4 + 2, 2);
  if (!tcp && gue_port != 0 && rte_be_to_cpu_16(key.destination_port) == gue_port) return 0;
  if (isVip(vips, key.family, key.source) || isVip(vips, key.family, key.destination)) return 0;
  const size_t reply_l3 = l3_length + kReplyBackendBytes;
  const size_t reply_length = std::max(kMinimumFrame, kEthernet + reply_l3);
  if (reply_length > capacity || reply_l3 > 65535) return 0;

  uint8_t mac[6];
  std::memcpy(mac, frame, 6);
  std::memcpy(frame, frame + 6, 6);
  std::memcpy(frame + 6, mac, 6);
  // The backend's address after the payload, then zeros to the least frame.
  std::memset(l3 + l3_length, 0, reply_length - kEthernet - l3_length);
  std::memcpy(l3 + l3_length, key.destination.data(), key.family == IpFamily::kIpv4 ? 4 : 16);

  reply = key;
  std::swap(reply.source, reply.destination);
  std::swap(reply.source_port, reply.destination_port);
  std::memcpy(l4, &reply.source_port, 2);
  std::memcpy(l4 + 2, &reply.destination_port, 2);
  if (key.family == IpFamily::kIpv4) {
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(l3);
    std::memcpy(&ip->src_addr, reply.source.data(), 4);
    std::memcpy(&ip->dst_addr, reply.destination.data(), 4);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(reply_l3));
    ip->time_to_live = 64;
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
  } else {
    auto* ip = reinterpret_cast<rte_ipv6_hdr*>(l3);
    std::memcpy(ip->src_addr, reply.source.data(), 16);
    std::memcpy(ip->dst_addr, reply.destination.data(), 16);
    ip->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(reply_l3 - 40));
    ip->hop_limits = 64;
  }
  if (tcp) {
    auto* segment = reinterpret_cast<rte_tcp_hdr*>(l4);
    const bool syn = (segment->tcp_flags & RTE_TCP_SYN_FLAG) != 0;
    segment->recv_ack = rte_cpu_to_be_32(rte_be_to_cpu_32(segment->sent_seq) + 1);
    segment->tcp_flags = syn ? RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG : RTE_TCP_ACK_FLAG;
    segment->cksum = 0;
  } else {
    auto* datagram = reinterpret_cast<rte_udp_hdr*>(l4);
    datagram->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(reply_l3 - header));
    datagram->dgram_cksum = 0;
  }
  const uint16_t checksum =
      key.family == IpFamily::kIpv4
          ? rte_ipv4_udptcp_cksum(reinterpret_cast<const rte_ipv4_hdr*>(l3), l4)
          : rte_ipv6_udptcp_cksum(reinterpret_cast<const rte_ipv6_hdr*>(l3), l4);
  std::memcpy(l4 + (tcp ? 16 : 6), &checksum, 2);
  return reply_length;
}

}  // namespace berth
