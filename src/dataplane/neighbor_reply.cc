#include "berth/dataplane/neighbor_reply.h"

#include <netinet/in.h>
#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include <cstring>

#include "dataplane/neighbor_wire.h"

namespace berth {
namespace {

constexpr uint32_t kSolicitedAndOverride = 0x60000000;  // S and O flags
constexpr uint32_t kOverride = 0x20000000;

const rte_arp_hdr* arpRequest(const Frame& frame, const ParsedPacket& packet) {
  if (frame.length < packet.l3_offset + kArpLength) return nullptr;
  const auto* arp = reinterpret_cast<const rte_arp_hdr*>(frame.data + packet.l3_offset);
  const bool request = arp->arp_hardware == rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) &&
                       arp->arp_protocol == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) &&
                       arp->arp_hlen == RTE_ETHER_ADDR_LEN && arp->arp_plen == 4 &&
                       arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
  return request ? arp : nullptr;
}

// The solicitation's ICMPv6 message, when the frame is a valid one.
const uint8_t* neighborSolicitation(const Frame& frame, const ParsedPacket& packet) {
  if (packet.type != FrameType::kIp || packet.flow.family != IpFamily::kIpv6 ||
      packet.flow.protocol != kProtocolIcmpv6 || packet.l4_offset == 0 ||
      packet.hop_limit != kNeighborDiscoveryHopLimit) {
    return nullptr;
  }
  const size_t end = size_t{packet.l3_offset} + packet.ip_length;
  if (end < packet.l4_offset + kNeighborMessageLength) return nullptr;
  const uint8_t* message = frame.data + packet.l4_offset;
  if (message[0] != kNeighborSolicitation || message[1] != 0) return nullptr;
  if (message[8] == 0xFF) return nullptr;  // a multicast target
  return message;
}

}  // namespace

std::optional<IpAddress> neighborQuery(const Frame& frame, const ParsedPacket& packet) {
  IpAddress target;
  if (packet.type == FrameType::kArp) {
    const rte_arp_hdr* arp = arpRequest(frame, packet);
    if (arp == nullptr) return std::nullopt;
    target.family = IpFamily::kIpv4;
    std::memcpy(target.bytes.data(), &arp->arp_data.arp_tip, 4);
    return target;
  }
  const uint8_t* solicitation = neighborSolicitation(frame, packet);
  if (solicitation == nullptr) return std::nullopt;
  target.family = IpFamily::kIpv6;
  std::memcpy(target.bytes.data(), solicitation + 8, 16);
  return target;
}

bool buildNeighborReply(Frame& frame, const ParsedPacket& packet, const IpAddress& target,
                        const MacAddress& mac) {
  uint8_t* const ethernet = frame.data;
  uint8_t asker_mac[RTE_ETHER_ADDR_LEN];
  std::memcpy(asker_mac, ethernet + 6, RTE_ETHER_ADDR_LEN);

  if (target.isV4()) {
    if (frame.length < packet.l3_offset + kArpLength) return false;
    auto* arp = reinterpret_cast<rte_arp_hdr*>(frame.data + packet.l3_offset);
    arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
    arp->arp_data.arp_tha = arp->arp_data.arp_sha;
    arp->arp_data.arp_tip = arp->arp_data.arp_sip;
    std::memcpy(&arp->arp_data.arp_sha, mac.bytes.data(), RTE_ETHER_ADDR_LEN);
    std::memcpy(&arp->arp_data.arp_sip, target.bytes.data(), 4);
    std::memcpy(ethernet, asker_mac, RTE_ETHER_ADDR_LEN);
    std::memcpy(ethernet + 6, mac.bytes.data(), RTE_ETHER_ADDR_LEN);
    return true;
  }

  const size_t reply_length =
      packet.l3_offset + kIpv6Length + kNeighborMessageLength + kLinkLayerOptionLength;
  if (reply_length > frame.length + frame.tailroom) return false;
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(frame.data + packet.l3_offset);
  // An unspecified source is a duplicate-address probe: answer all nodes, unsolicited.
  static constexpr uint8_t kUnspecified[16] = {};
  const bool to_all_nodes = std::memcmp(ip->src_addr, kUnspecified, 16) == 0;
  if (to_all_nodes) {
    static constexpr uint8_t kAllNodes[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static constexpr uint8_t kAllNodesMac[6] = {0x33, 0x33, 0, 0, 0, 1};
    std::memcpy(ip->dst_addr, kAllNodes, 16);
    std::memcpy(ethernet, kAllNodesMac, 6);
  } else {
    std::memcpy(ip->dst_addr, ip->src_addr, 16);
    std::memcpy(ethernet, asker_mac, RTE_ETHER_ADDR_LEN);
  }
  std::memcpy(ethernet + 6, mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  std::memcpy(ip->src_addr, target.bytes.data(), 16);
  ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
  ip->payload_len = rte_cpu_to_be_16(kNeighborMessageLength + kLinkLayerOptionLength);
  ip->proto = IPPROTO_ICMPV6;
  ip->hop_limits = kNeighborDiscoveryHopLimit;

  uint8_t* message = frame.data + packet.l3_offset + kIpv6Length;
  message[0] = kNeighborAdvertisement;
  message[1] = 0;
  message[2] = message[3] = 0;
  const uint32_t flags = rte_cpu_to_be_32(to_all_nodes ? kOverride : kSolicitedAndOverride);
  std::memcpy(message + 4, &flags, 4);
  std::memcpy(message + 8, target.bytes.data(), 16);
  uint8_t* option = message + kNeighborMessageLength;
  option[0] = kTargetLinkLayerOption;
  option[1] = 1;  // in units of 8 bytes
  std::memcpy(option + 2, mac.bytes.data(), RTE_ETHER_ADDR_LEN);
  const uint16_t checksum = rte_ipv6_udptcp_cksum(ip, message);
  std::memcpy(message + 2, &checksum, 2);
  frame.length = reply_length;
  return true;
}

}  // namespace berth
